"""The engineer's sections (report/sections/kernels.py, e2e.py, comparison.py,
environment.py).

In: results with the evidence fields the bench stage writes, a kernel reused from the
tuning cache, stage failures, and comparisons whose environment changes are noise or a
real cause (tests/report_samples.py). Out: the e2e views, coverage and output check; the
per-op table's intervals, verification and timer cross-check; the soak's timer and host
jitter; roofline points numbered and named; cached kernels said to be cached; "every
stage finished" only when none failed; regression causes that can matter, only.
"""

from __future__ import annotations

import pytest
import dataclasses
import re

from evaluator import report
from report_samples import evidence_result, html_of, rich_result, section
from samples import sample_result


@pytest.mark.slow
def test_e2e_views_coverage_and_output_check(tmp_path):
    e2e = section(html_of(evidence_result(), tmp_path), "e2e")
    assert "The verdict uses CUDA graph replay: device time with launch cost removed" in e2e
    for name in ("CUDA graph replay", "eager", "profiler kernel sum"):
        assert f"<strong>{name}</strong>" in e2e
    assert e2e.count("✓") == 1 and '<tr class="used">' in e2e
    assert "1.06–1.12×" in e2e and "launch-bound" in e2e
    # Coverage and fallbacks, per family and shape, with the reasons.
    assert "TileLang covered 80.0% of the profiled time: 26 calls ran in TileLang, 14 fell back to PyTorch." in e2e
    assert "no tuned config: 12" in e2e and "non-contiguous input: 2" in e2e and "256x512x128" in e2e
    assert '<tr class="row-fail"><td>gemm</td><td><code>256x512x128</code>' in e2e  # nothing of it ran in TileLang
    # Output check against the dtype's tolerances.
    assert "Relative L2 error" in e2e and "2.5e-04" in e2e and "0.0019" in e2e
    assert "rel_l2 0.001, rel_max 0.01" in e2e


@pytest.mark.slow
def test_per_op_table_shows_interval_verification_and_kernel_cross_check(tmp_path):
    ops = section(html_of(evidence_result(), tmp_path), "ops")
    assert "1.05–1.15×" in ops and "30 rounds" in ops
    assert "0.440 / 0.490" in ops  # CUPTI kernel time per call, TileLang / PyTorch
    assert "timers: graph replay and CUPTI agree within 3%" in ops
    flagged = re.search(r'<tbody class="keep flagged">(.*?)</tbody>', ops, re.S).group(1)
    assert "4096x4096x4096" in flagged and "faster than the roofline allows" in flagged and "not verified" in flagged
    assert ">no</td>" in flagged  # the Verified column
    # The chart greys a flagged number as the table does, under the caption that says so.
    ops = section(html_of(evidence_result(softmax_flags=("unstable",)), tmp_path / "flagged"), "ops")
    assert "Grey rows are flagged" in ops
    assert len(re.findall(r'id="speedup\d+-bar-\d+-flagged"', ops)) == 1


@pytest.mark.slow
def test_soak_reports_timer_and_host_jitter_apart_from_drift(tmp_path):
    soak = section(html_of(evidence_result(), tmp_path), "soak")
    assert "CUDA graph replay (device time)" in soak
    assert "Host jitter (CV of per-iteration wall time)</th><td>4.2%" in soak
    assert "Drift (first to last window)</th><td>0.5%" in soak


@pytest.mark.slow
def test_roofline_numbers_every_point_and_names_them_in_a_table(tmp_path):
    roof = section(html_of(evidence_result(), tmp_path), "roofline")
    svg = roof[roof.index("<svg") : roof.index("</svg>")]
    labels = re.findall(r'id="roofline\d+-pt-(tilelang|vendor)-(\d+)"', svg)
    # Both sides labelled: ops 1-3 have a TileLang and a PyTorch point, op 4 (no TileLang time) one.
    assert sorted(labels) == sorted(
        [
            ("tilelang", "1"),
            ("vendor", "1"),
            ("tilelang", "2"),
            ("vendor", "2"),
            ("tilelang", "3"),
            ("vendor", "3"),
            ("vendor", "4"),
        ]
    )
    table = roof[roof.index('<table class="data legend">') :]
    for n, op in ((1, "gemm 256x128x128"), (2, "softmax 1024x128"), (3, "gemm 4096x4096x4096 *")):
        assert re.search(rf"<strong>{n}</strong></td><td>{re.escape(op)}", table), n


@pytest.mark.slow
def test_cached_kernels_say_cached_instead_of_an_empty_table(tmp_path):
    appendix = section(html_of(evidence_result(), tmp_path), "appendix")
    assert "Reused from the tuning cache: tuned in an earlier run" in appendix
    assert "(showing 0 of" not in appendix


@pytest.mark.slow
def test_every_stage_finished_only_when_nothing_failed(tmp_path):
    clean = dataclasses.replace(sample_result(), op_bench=sample_result().op_bench)
    assert "Every stage that ran finished" in section(html_of(clean, tmp_path / "a"), "environment")
    broken = dataclasses.replace(
        clean, e2e=dataclasses.replace(clean.e2e, swapped=None, error="RuntimeError: CUDA graph capture failed")
    )
    env = section(html_of(broken, tmp_path / "b"), "environment")
    assert "Every stage that ran finished" not in env and "CUDA graph capture failed" in env
    failed_op = section(html_of(rich_result(), tmp_path / "c"), "environment")  # softmax 8192x8192 did not compile
    assert "Every stage that ran finished" not in failed_op and "shared memory exceeds 228 KB" in failed_op


@pytest.mark.slow
def test_regression_causes_name_only_changes_that_matter(tmp_path):
    r = rich_result()
    noise = (
        ("settings.upstream", "/src/tilelang", "https://github.com/tile-ai/tilelang"),
        ("settings.checklist", "default.yaml", "production.yaml"),
        ("settings.regression_threshold", "0.05", "0.1"),
    )
    note = (
        "1 regression, 1 improvement, 1 unchanged; a change counts beyond max(5%, 3 x combined spread); "
        "likely causes: settings.upstream /src/tilelang -> https://github.com/tile-ai/tilelang"
    )
    only_noise = dataclasses.replace(r.comparison, environment_changes=noise, note=note)
    cmp = section(html_of(dataclasses.replace(r, comparison=only_noise), tmp_path / "a"), "comparison")
    assert "Unexplained: nothing that affects speed" in cmp
    assert "likely causes" not in cmp
    real = dataclasses.replace(only_noise, environment_changes=noise + (("torch", "2.12.0", "2.13.0"),))
    cmp = section(html_of(dataclasses.replace(r, comparison=real), tmp_path / "b"), "comparison")
    causes = re.search(r'<p class="causes">(.*?)</p>', cmp).group(1)
    assert "torch 2.12.0 → 2.13.0" in causes and "upstream" not in causes and "checklist" not in causes
    assert report.plausible_cause("settings.dtype") and not report.plausible_cause("settings.upstream")


@pytest.mark.slow
def test_per_op_table_says_how_shapes_are_written(tmp_path):
    """A layout-carrying shape (attention on q/k/v views, 9 sizes) is explained under
    the table: the legend per family, and what the pitches mean."""
    base = evidence_result()
    b = base.op_bench[0]
    views = dataclasses.replace(b, family="attention", shape=(1, 32, 512, 512, 64, 1, 32, 32, 32))
    ops = section(html_of(dataclasses.replace(base, op_bench=base.op_bench + (views,)), tmp_path), "ops")
    assert (
        "Shapes are written attention B×H×Sq×Skv×D×causal[×q_pitch×k_pitch×v_pitch×kv_heads×mask×mask_dims]; "
        "gemm M×N×K;" in ops
    )
    assert "row pitches of q, k and v" in ops and "1x32x512x512x64x1x32x32x32" in ops
    assert "key/value heads" not in ops
    plain = section(html_of(base, tmp_path / "plain"), "ops")
    assert "gemm M×N×K" in plain and "row pitches" not in plain
    # grouped-query heads: a tenth size, said under the table
    gqa = dataclasses.replace(b, family="attention", shape=(4, 32, 512, 512, 64, 1, 32, 4, 4, 4))
    ops = section(html_of(dataclasses.replace(base, op_bench=base.op_bench + (gqa,)), tmp_path / "gqa"), "ops")
    assert "key/value heads" in ops and "4x32x512x512x64x1x32x4x4x4" in ops


@pytest.mark.slow
def test_in_model_table_sets_each_family_beside_its_op_benchmarks(tmp_path):
    from evaluator.results import FamilyTime

    r = evidence_result()  # gemm's model-shape op benchmarks: 1.1x
    gemm_op = [b.speedup for b in r.op_bench if b.family == "gemm" and b.source == "model"]
    in_model = (FamilyTime("gemm", 2.0, 2.5, 2.4), FamilyTime("softmax", 0.3, 0.2, 0.2))
    r = dataclasses.replace(r, e2e=dataclasses.replace(r.e2e, in_model=in_model))
    e2e = section(html_of(r, tmp_path), "e2e")
    assert "Inside the model, per family" in e2e and "inputs are where the model leaves them" in e2e
    table = e2e.split('class="data in-model', 1)[1].split("</table>", 1)[0]
    row = re.search(r'<tr class="([^"]*)"><td>gemm</td>(.*?)</tr>', table, re.S)
    assert row and "0.80×" in row.group(2) and "2.40" in row.group(2)
    # Worse in the model than on its own (0.80x against the op benchmarks' ratio): marked.
    assert gemm_op and min(gemm_op) > 0.88 and row.group(1) == "row-fail"
    soft = re.search(r'<tr class="([^"]*)"><td>softmax</td>', table)
    assert soft and soft.group(1) == ""
    zh = section(html_of(r, tmp_path, lang="zh"), "e2e")
    assert "模型内部各算子族的时间" in zh
    # A run from before this table renders without it.
    assert "Inside the model" not in section(html_of(evidence_result(), tmp_path), "e2e")
    # A run from before the "alone" column renders without it.
    assert "this family alone" not in e2e


@pytest.mark.slow
def test_in_model_table_marks_a_faster_family_that_makes_the_model_slower(tmp_path):
    from evaluator.results import FamilyTime, KeptFamilies, Ratio, RunResult, from_dict, to_dict

    r = evidence_result()
    # bert-base on the H200 with attention routed (2026-12-02): its kernels ran faster by
    # the profiler, the model with attention alone routed did not.
    in_model = (
        FamilyTime("gemm", 2.0, 1.9, 1.9, alone=Ratio(1.03, 1.02, 1.04, 20)),
        FamilyTime("softmax", 0.3, 0.28, 0.28, alone=Ratio(0.92, 0.91, 0.93, 20)),
    )
    flag = (
        "routing softmax alone makes the model 0.92x end to end [0.91-0.93] although its operators run at "
        "1.07x PyTorch's speed inside the model (profiled): the time it adds between operators outweighs what "
        "its kernels save; leaving softmax to PyTorch would be faster"
    )
    kept = KeptFamilies(families=("gemm",), left=("softmax",), ratio=Ratio(1.05, 1.04, 1.06, 20))
    r = dataclasses.replace(r, e2e=dataclasses.replace(r.e2e, in_model=in_model, flags=(flag,), kept=kept))
    back = from_dict(RunResult, to_dict(r)).e2e
    assert back.in_model == in_model and back.kept == kept  # stored and read back with its interval
    e2e = section(html_of(r, tmp_path), "e2e")
    assert "Model, this family alone" in e2e and "can still make the model slower" in e2e
    table = e2e.split('class="data in-model', 1)[1].split("</table>", 1)[0]
    soft = re.search(r'<tr class="([^"]*)"><td>softmax</td>(.*?)</tr>', table, re.S)
    assert soft and soft.group(1) == "row-fail" and "0.92×" in soft.group(2) and "0.91" in soft.group(2)
    gemm = re.search(r'<tr class="([^"]*)"><td>gemm</td>(.*?)</tr>', table, re.S)
    assert gemm and "1.03×" in gemm.group(2)
    assert "leaving softmax to PyTorch would be faster" in e2e
    assert (
        "With softmax left to PyTorch and gemm in TileLang, the model is 1.05× (1.04–1.06×) end to end" in e2e
        and "The verdict uses every routed family" in e2e
    )
    assert "1.05× with softmax left to PyTorch" in html_of(r, tmp_path / "p1")  # page one's end-to-end card
    zh = section(html_of(r, tmp_path / "zh", lang="zh"), "e2e")
    assert "仅路由该算子族时的整模型" in zh and "把 softmax 留给 PyTorch 会更快" in zh and "leaving" not in zh
    assert "把 softmax 留给 PyTorch、gemm 使用 TileLang 时" in zh


@pytest.mark.slow
def test_the_profile_section_says_which_patterns_run_fused_and_which_were_left_unfused(tmp_path):
    from evaluator.results import Fusion

    r = rich_result()
    hot = dataclasses.replace(
        r.hot_ops,
        selected=r.hot_ops.selected + ("gemm_gelu",),
        fusions=(Fusion("gemm_gelu", ("1024x3072x768",), 12), Fusion("layernorm_residual", (), 0, ("3152x768",))),
    )
    html = html_of(dataclasses.replace(r, hot_ops=hot), tmp_path)
    assert (
        "gemm_gelu runs as one fused kernel where the model has its pattern: 12 a forward pass, at 1024x3072x768."
    ) in html
    assert "layernorm_residual is left unfused at 3152x768" in html
    zh = html_of(dataclasses.replace(r, hot_ops=hot), tmp_path / "zh", lang="zh")
    assert "gemm_gelu 在模型出现其模式处作为一个融合内核运行" in zh


@pytest.mark.slow
def test_tolerances_read_in_two_digits(tmp_path):
    r = rich_result()
    v = r.verify[0]
    case = dataclasses.replace(v.cases[0], atol=1.41421e-05, rtol=0.00566651)
    r = dataclasses.replace(r, verify=(dataclasses.replace(v, cases=(case,) + v.cases[1:]),) + r.verify[1:])
    correctness = section(html_of(r, tmp_path), "correctness")
    assert "atol 1.4e-05, rtol 0.0057" in correctness and "1.41421e-05" not in correctness
    assert "atol 0.0001, rtol 0.0001" in correctness


@pytest.mark.slow
def test_settings_read_without_json(tmp_path):
    r = dataclasses.replace(
        rich_result(),
        settings={
            "batch_size": None,
            "families": [],
            "seeds": [0, 1, 2],
            "targets": ["a100", "h100"],
            "isolate": True,
            "upstream": None,
            "timing": {"timer": "cuda_graph", "reps": 20},
            "extra": {},
        },
    )
    env = section(html_of(r, tmp_path), "environment")
    rows = dict(re.findall(r'<tr><th scope="row">([^<]*)</th><td>([^<]*)</td></tr>', env))
    assert rows["batch_size"] == rows["families"] == rows["upstream"] == rows["extra"] == "—"
    assert rows["seeds"] == "0, 1, 2" and rows["targets"] == "a100, h100" and rows["isolate"] == "yes"
    assert rows["timing.timer"] == "cuda_graph" and rows["timing.reps"] == "20"
    words = re.sub(r"<[^>]+>", " ", env)
    assert "null" not in words and "[]" not in words and '["' not in words


@pytest.mark.slow
def test_the_comparison_names_this_run_once(tmp_path):
    r = rich_result()  # compared as the pipeline compares: candidate "this run"
    for lang, want in (("en", "Compared with bert-tiny/h200/v2."), ("zh", "对比基线 bert-tiny/h200/v2。")):
        cmp = section(html_of(r, tmp_path / lang, lang), "comparison")
        assert want in cmp and "this run" not in cmp, lang
    named = dataclasses.replace(r, comparison=dataclasses.replace(r.comparison, candidate="bert-tiny/h200/v3"))
    cmp = section(html_of(named, tmp_path), "comparison")
    assert "Compared with bert-tiny/h200/v2 (this run: bert-tiny/h200/v3)." in cmp


def test_the_environment_names_the_target_its_arch_and_where_the_peaks_come_from(tmp_path):
    r = sample_result()
    hw = dataclasses.replace(
        r.environment.hardware,
        target="hip -mcpu=gfx942",
        arch="gfx942",
        device="cuda",
        name="AMD Instinct MI300X",
        peak_tflops=1307.0,
        peak_source="AMD Instinct MI300X datasheet",
    )
    r = dataclasses.replace(r, environment=dataclasses.replace(r.environment, hardware=hw))
    env = section(html_of(r, tmp_path), "environment")
    rows = dict(re.findall(r'<tr><th scope="row">([^<]*)</th><td>([^<]*)</td></tr>', env))
    assert rows["target"] == "hip -mcpu=gfx942" and rows["arch"] == "gfx942"
    assert rows["peak_source"] == "AMD Instinct MI300X datasheet"


def test_a_part_with_no_published_peak_says_the_roof_is_the_measured_one(tmp_path):
    r = sample_result()
    hw = dataclasses.replace(
        r.environment.hardware, peak_tflops=None, peak_gbps=None, peak_source="", measured_tflops=12.5
    )
    r = dataclasses.replace(r, environment=dataclasses.replace(r.environment, hardware=hw))
    for lang, want in (("en", "roof measured here"), ("zh", "实测")):
        env = section(html_of(r, tmp_path / lang, lang), "environment")
        assert want in env, lang
