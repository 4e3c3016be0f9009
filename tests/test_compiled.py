"""torch.compile as the third side (evaluator/compiled.py, bench.py): per operator and end
to end, timed with the others; where it cannot run, a recorded reason and the run goes on.

Real compiles, not mocks, but only two in this file (Inductor on a CPU builds C++: about
a second each with its on-disk cache warm, ~15 s for the first one on a fresh machine),
made once in a module-scoped fixture: LayerNorm 16x32 alone, and a Linear + LayerNorm
model end to end (one that branches on torch.compiler.is_compiling(), as transformers\nmodels do). The failures
cost nothing to compile: Dynamo stops before Inductor.
Report, baseline and settings tests read tests/compile_samples.py.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from evaluator.measuring import bench, compiled
from evaluator import config as config
from evaluator import kernels, report
from evaluator.routing import router as swap
from evaluator.baseline import tables
from evaluator.errors import ConfigError
from evaluator.results import OpBench, RunResult, from_dict, to_dict

from compile_samples import INDUCTOR_ERROR, compiled_result, failed_e2e
from report_samples import evidence_result, html_of, page_one, section, words
from routing import route_model
from test_pdf_env import needs_pdf

SHAPE = (16, 32)
QUICK = dict(reps=3, max_seconds=0.2, warmup=1)


class GraphBreaking:
    """LayerNorm whose reference Dynamo cannot trace whole: under fullgraph=True a compile error."""

    def __init__(self):
        self.fam = kernels.get("layernorm")
        self.name = "layernorm"

    def make_inputs(self, *args):
        return self.fam.make_inputs(*args)

    def reference(self, *inputs):
        torch._dynamo.graph_break()
        return self.fam.reference(*inputs)

    def flops(self, shape):
        return self.fam.flops(shape)

    def bytes(self, shape, dtype):
        return self.fam.bytes(shape, dtype)


def _kernel():
    fam = kernels.get("layernorm")
    conf = fam.search_space(SHAPE, "float32", route_model.__globals__["CPU_HW"])[0]
    return fam, conf, fam.build(SHAPE, "float32", conf, "c")


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.lin, self.norm = torch.nn.Linear(32, 32), torch.nn.LayerNorm(32)

    def forward(self, x):
        return self.norm(self.lin(x))


class Guarded(Model):
    """The model with a branch for tracing, as transformers writes them: the same result from
    another program, which the compiled side's note has to name."""

    def forward(self, x):
        h = self.lin(x)
        if torch.compiler.is_compiling():
            h = h.contiguous()
        return self.norm(h)


def _e2e(model, mode="default"):
    x = torch.randn(16, 32)
    router, _, _ = route_model(["layernorm"], model, (x,))
    return bench.end_to_end(
        model.eval(),
        (x,),
        "cpu",
        16,
        router,
        dtype="float32",
        profiled_ms={},
        total_profiled_ms=1.0,
        op_ratios={},
        shares={},
        policy=bench.TimingPolicy(**QUICK, compile_mode=mode),
    )


@pytest.fixture(scope="module")
def measured():
    """The failures first, then the two real compiles: a failure must leave nothing behind
    that stops the next compile (compiled.py resets Dynamo)."""
    fam, conf, kernel = _kernel()
    policy = bench.TimingPolicy(**QUICK, compile_mode="default")
    broken = bench.bench_op(
        GraphBreaking(), SHAPE, "float32", kernel, "cpu", source="model", config=conf, policy=policy
    )
    import torch._inductor.config as inductor_config

    # A machine without a C++ compiler: Inductor cannot build. Its own patch context puts
    # the setting back; a monkeypatch of the config module's attribute does not on every
    # torch (2.13 left cpp.cxx deleted, and every later compile in this module failed).
    with inductor_config.patch({"cpp.cxx": (None, "no-such-c++-compiler")}):
        refused = _e2e(Model())
    assert inductor_config.cpp.cxx != (None, "no-such-c++-compiler")
    op = bench.bench_op(fam, SHAPE, "float32", kernel, "cpu", source="model", config=conf, policy=policy)
    e2e = _e2e(Guarded())
    return {"broken": broken, "refused": refused, "op": op, "e2e": e2e}


# ---------------------------------------------------------------- measured for real


@pytest.mark.slow
def test_an_operator_gets_a_third_side_timed_with_the_others(measured):
    op = measured["op"]
    c = op.compiled
    assert c.mode == "default" and c.inductor_mode == "default" and not c.error, c
    assert c.timing is not None and c.timing.timer == "perf_counter" and c.timing.median_ms > 0
    assert c.timing.reps == op.tilelang.reps == op.torch.reps  # the same interleaved rounds
    assert c.ratio is not None and c.ratio.value > 0 and c.ratio.rounds == op.tilelang.reps
    assert c.compile_s is not None and c.compile_s > 0
    assert op.tilelang is not None and op.speedup and "unstable" not in c.error
    # bench JSON (evaluate bench --json prints to_dict of each OpBench) carries it, and it loads back
    data = json.loads(json.dumps(to_dict(op)))
    assert data["compiled"]["mode"] == "default" and data["compiled"]["timing"]["median_ms"] > 0
    assert from_dict(OpBench, data) == op


def test_the_model_end_to_end_gets_a_third_side_with_its_compile_time(measured):
    e = measured["e2e"]
    c = e.compiled
    assert e.outputs_match and e.speedup and c is not None and not c.error, c
    assert c.timing.median_ms > 0 and c.compile_s > 0 and c.ratio.value > 0
    assert "outputs differ" not in c.note  # the compiled model's outputs were compared with eager's
    assert c.ratio.rounds == e.ratio.rounds  # the same rounds as the verdict's view
    # the model branches on torch.compiler.is_compiling(): the note says the program differs
    assert (
        c.note.startswith("the model runs another program under torch.compile")
        and "calls Tensor.contiguous(float32) x1" in c.note
    ), c.note


def test_an_operator_dynamo_cannot_trace_is_a_reason_and_its_numbers_stand(measured):
    b = measured["broken"]
    assert b.compiled.timing is None and b.compiled.ratio is None and b.compiled.compile_s is None
    assert b.compiled.error.startswith("Unsupported:") and "graph_break" in b.compiled.error
    assert "\n" not in b.compiled.error and len(b.compiled.error) <= 300
    # optional: TileLang and PyTorch were timed as ever, nothing flagged for it
    assert b.tilelang is not None and b.torch is not None and b.speedup and not b.error
    assert not b.flags or b.flags == ("unstable",)


def test_a_model_inductor_cannot_build_keeps_its_end_to_end_result(measured):
    e = measured["refused"]
    assert e.outputs_match and e.speedup and e.swapped is not None and e.views
    assert e.compiled.timing is None and e.compiled.compile_s is None
    assert e.compiled.error.startswith("InductorError: InvalidCxxCompiler: No working C++ compiler"), e.compiled
    assert not any("compile" in f for f in e.flags)


def test_a_compile_served_from_inductors_cache_says_so():
    # The same graph compiled twice: the second comes from Inductor's on-disk cache, and
    # its compile time is labelled a warm one (a rerun's "1.5 s" is not a cold compile).
    def fn(x):
        return x * 3 + 2

    x = torch.randn(8)
    compiled.prepare(fn, [(x,)], "cpu", "default", fullgraph=True)
    again = compiled.prepare(fn, [(x,)], "cpu", "default", fullgraph=True)
    compiled.release()
    assert not again.error and again.compile_s > 0
    assert any("on-disk cache" in n and "warm compile" in n for n in again.notes), again.notes


def test_compile_mode_none_skips_the_side_without_compiling():
    fam, conf, kernel = _kernel()
    ob = bench.bench_op(
        fam,
        SHAPE,
        "float32",
        kernel,
        "cpu",
        source="model",
        config=conf,
        policy=bench.TimingPolicy(**QUICK, compile_mode="none"),
    )
    assert ob.compiled is None and ob.tilelang is not None
    # a library call that asks for nothing gets nothing: the timer's own default is none
    assert bench.TimingPolicy().compile_mode == "none"
    # no verified kernel: nothing to compare with, said so rather than compiled for nothing
    unverified = bench.bench_op(
        fam,
        SHAPE,
        "float32",
        kernel,
        "cpu",
        source="model",
        config=conf,
        policy=bench.TimingPolicy(**QUICK, compile_mode="default"),
        verified=False,
    )
    assert unverified.compiled.timing is None and "no verified TileLang kernel" in unverified.compiled.error


def test_a_crashed_swap_in_says_why_the_compiled_side_was_not_measured():
    model = Model()
    x = torch.randn(16, 32)
    router = swap.Router([kernels.get("layernorm")], swap.KernelTable("float32", "c"))
    fam, conf, _ = _kernel()

    def crash(*args):
        raise RuntimeError("kernel crashed")

    router.table.add("layernorm", SHAPE, conf, crash)
    e = bench.end_to_end(
        model.eval(),
        (x,),
        "cpu",
        16,
        router,
        dtype="float32",
        profiled_ms={},
        total_profiled_ms=1.0,
        op_ratios={},
        shares={},
        policy=bench.TimingPolicy(**QUICK, compile_mode="default"),
    )
    assert e.swapped is None and "kernel crashed" in e.error
    assert e.compiled.timing is None and "did not run" in e.compiled.error


def test_one_line_keeps_what_dynamo_and_inductor_said_first():
    err = RuntimeError("backend='inductor' raised:\nInvalidCxxCompiler: No working C++ compiler\n\nSet TORCH_LOGS")
    assert (
        compiled.one_line(err) == "RuntimeError: backend='inductor' raised: InvalidCxxCompiler: No working C++ compiler"
    )
    long = ValueError("Failed to trace builtin operator\n  Explanation: Dynamo does not know print\n  Hint: x")
    assert compiled.one_line(long) == (
        "ValueError: Failed to trace builtin operator Explanation: Dynamo does not know print"
    )
    assert compiled.one_line(KeyError()) == "KeyError"


# ---------------------------------------------------------------- settings and the command line


def test_the_mode_is_an_option_with_the_devices_default_and_is_recorded():
    assert config.build(model="bert-tiny").bench.timing.compile_mode == "default"  # this machine is a CPU
    cfg = config.build(model="bert-tiny", compile_mode="none")
    assert cfg.settings_dict()["compile_mode"] == "none"
    assert "compile_mode" not in cfg.settings_dict()["timing"]  # runs with and without it stay comparable
    assert compiled.INDUCTOR_MODES["max-autotune"] == "max-autotune-no-cudagraphs"
    with pytest.raises(ConfigError, match="--compile-mode 'fast' is not allowed; use max-autotune, default or none"):
        config.build(model="bert-tiny", compile_mode="fast")


# ---------------------------------------------------------------- results, report, baseline tables


@pytest.mark.slow
def test_an_old_results_json_without_the_side_loads_and_renders(tmp_path):
    from pathlib import Path

    old = Path(__file__).resolve().parents[1] / "reports/examples/bert-tiny/cpu-x86_64/2026-12-01/baseline/result.json"
    r = from_dict(RunResult, json.loads(old.read_text()))
    assert r.op_bench and all(b.compiled is None for b in r.op_bench) and r.e2e.compiled is None
    html = html_of(r, tmp_path)
    assert "torch.compile" not in html  # nothing asked, nothing shown: no empty column
    assert tables.tables(r)["op_bench.csv"]["compile_mode"].eq("").all()


def test_new_fields_round_trip_through_results_json():
    r = compiled_result()
    assert from_dict(RunResult, json.loads(json.dumps(to_dict(r)))) == r


@pytest.mark.slow
def test_the_report_shows_the_column_the_e2e_ratio_and_one_line_on_page_one(tmp_path):
    html = html_of(compiled_result(), tmp_path)
    one = words(page_one(html))
    assert "Against torch.compile TileLang is 0.93× torch.compile end to end (compile 29 s, mode default)." in one
    ops = section(html, "ops")
    assert "torch.compile (ms)" in ops and "TileLang vs torch.compile" in ops
    assert '0.600<br><span class="dim">compiled in 3.4 s</span>' in ops and "1.32×" in ops and "1.28–1.36×" in ops
    assert f"not measured: {INDUCTOR_ERROR}" in words(ops)  # a reason where the number would be
    e2e = words(section(html, "e2e"))
    assert "TileLang is 0.93× torch.compile end to end (compile 29 s, mode default)." in e2e
    assert "TileLang vs torch.compile (default) 0.93× (0.90–0.96×)" in e2e


@pytest.mark.slow
def test_page_one_says_when_the_compiled_model_is_another_program(tmp_path):
    # The note compile_path_note writes for transformers GPT-2 (H200, 2026-12-02).
    note = (
        "the model runs another program under torch.compile than eagerly (it asks torch.compiler.is_compiling()): "
        "it calls scaled_dot_product_attention(float16,float16,float16,bool) with a bool mask [4, 1, 512, 512] x12, "
        "instead of scaled_dot_product_attention(float16,float16,float16) with no mask, causal x12; "
        "torch.compile's time is of that program"
    )
    r = compiled_result()
    r = dataclasses.replace(r, e2e=dataclasses.replace(r.e2e, compiled=dataclasses.replace(r.e2e.compiled, note=note)))
    html = html_of(r, tmp_path)
    assert "this compares two programs, not TileLang's kernels with Inductor's" in words(page_one(html))
    assert "with a bool mask [4, 1, 512, 512] x12" in words(section(html, "e2e"))
    zh = html_of(r, tmp_path / "zh", "zh")
    assert "这里比较的是两个程序" in page_one(zh) and "two programs" not in zh
    # without the note, page one says nothing of it
    assert "two programs" not in html_of(compiled_result(), tmp_path / "plain")


@pytest.mark.slow
def test_the_e2e_views_table_gets_the_side_in_the_verdicts_view(tmp_path):
    r = evidence_result()
    r = dataclasses.replace(r, e2e=dataclasses.replace(r.e2e, compiled=compiled_result().e2e.compiled))
    e2e = section(html_of(r, tmp_path), "e2e")
    used = e2e[e2e.index('<tr class="used">') :]
    used = used[: used.index("</tr>")]
    assert "10.230" in used and "0.93×" in used
    assert e2e.count('<td class="num">—</td><td class="num">—</td>') == len(r.e2e.views) - 1


@pytest.mark.slow
def test_a_failed_compile_is_a_line_in_words_never_a_blank(tmp_path):
    html = html_of(failed_e2e(), tmp_path)
    assert (
        "torch.compile (default) could not run end to end: Unsupported: Failed to trace builtin operator "
        "Explanation: Dynamo does not know how to trace `print`."
    ) in words(page_one(html))
    assert "not measured: Unsupported" in words(section(html, "e2e"))


@pytest.mark.slow
def test_chinese_report_says_it_in_chinese(tmp_path):
    one = words(page_one(html_of(compiled_result(), tmp_path, lang="zh")))
    assert (
        "与 torch.compile 对比 端到端来看，TileLang 的速度是 torch.compile 的 0.93×（编译耗时 29 s，模式 default）。"
        in one
    )


@pytest.mark.slow
def test_without_e2e_page_one_gives_the_per_operator_geomean(tmp_path):
    r = dataclasses.replace(compiled_result(), e2e=None)
    one = words(page_one(html_of(r, tmp_path)))
    assert "Per operator, TileLang is 1.32× torch.compile (1 shape, mode default; end to end not measured)." in one


def test_baseline_tables_get_the_columns():
    frames = tables.tables(compiled_result())
    ops = frames["op_bench.csv"]
    assert list(ops.columns[:6]) == ["family", "shape", "dtype", "source", "compile_mode", "compiled_median_ms"]
    assert list(ops.columns[-2:]) == ["config", "error"]  # the earlier columns keep their order after them
    gemm, softmax = ops.to_dict("records")
    assert gemm["compile_mode"] == "default" and gemm["compiled_ratio"] == "1.32" and gemm["compile_s"] == "3.4"
    assert softmax["compiled_median_ms"] == "" and softmax["compile_error"] == INDUCTOR_ERROR
    e2e = frames["e2e.csv"].to_dict("records")[0]
    assert e2e["compiled_ratio"] == "0.93" and e2e["compile_s"] == "29.3" and e2e["compile_error"] == ""


@pytest.mark.slow
def test_report_renders_from_a_results_json_with_the_side(tmp_path):
    path = tmp_path / "results.json"
    path.write_text(json.dumps(to_dict(compiled_result())))
    r = from_dict(RunResult, json.loads(path.read_text()))
    files = report.render(r, tmp_path / "out", pdf=False)
    assert "TileLang is 0.93× torch.compile end to end" in files.html.read_text()


@pytest.mark.slow
@needs_pdf("en")
def test_the_compile_line_never_pushes_the_failed_items_off_page_one(tmp_path):
    # The page one of tests/test_report.py's brim-full run (CPU caveat, two-line title, cards
    # with intervals, failed and unmeasured items, the portability line), plus the line.
    from evaluator.results import Ratio
    from port_samples import sample_portability
    from report_samples import evaluate, pdf_pages
    from samples import timing

    r = compiled_result()
    r = dataclasses.replace(
        r,
        op_bench=tuple(
            dataclasses.replace(b, speedup=s, ratio=Ratio(s, s * 0.96, s * 1.03, 20))
            for b, s in zip(r.op_bench, (0.2, 0.17))
        ),
    )
    e2e = dataclasses.replace(r.e2e, speedup=0.24, swapped=timing(50.0), ratio=Ratio(0.24, 0.239, 0.245, 20))
    r = dataclasses.replace(
        r,
        soak=None,
        e2e=e2e,
        portability=sample_portability(),
        upstream=None,
        model=dataclasses.replace(r.model, name="bert-tiny-finetuned-on-the-long-corpus"),
    )
    first = " ".join(pdf_pages(report.render(evaluate(r), tmp_path).pdf)[0].lower().split())
    assert "what failed" in first and "no operator is more than" in first
    assert "against torch.compile tilelang is 0.93× torch.compile end to end" in first
