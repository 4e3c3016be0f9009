"""Portability matrix: kernels lowered for accelerators that are not on the machine.

In: kernel families, shapes, configs and target keys. Out: pass/fail. Everything runs on
a CPU: TileLang lowers for sm_90a, sm_80, sm_75, sm_100a, gfx942 and gfx90a without a GPU
(no nvcc, no hipcc). Lowerings are cached per process, so tests that share a (family,
shape, dtype, config, target) pay for it once.
"""

from __future__ import annotations

import json

import pytest

from evaluator import portability as P
from evaluator.device import targets as T
from evaluator.errors import ConfigError
from evaluator.kernels.gemm import pingpong as PP
from evaluator.kernels import get
from evaluator.results import from_dict, to_dict

tilelang = pytest.importorskip("tilelang")

GEMM_SHAPE = (1024, 1024, 1024)
# What the tuner picked for gemm 4096^3 fp16 on the H200: fits
# Hopper's 227 KB per block by the family's sizing (208 KB), not MI300X's 64 KB of LDS.
H200_GEMM = {
    "block_M": 128,
    "block_N": 256,
    "block_K": 64,
    "num_stages": 3,
    "threads": 256,
    "swizzle": True,
    "panel": 10,
    "policy": "square",
    "split_k": 1,
}


def one(p: P.Portability, target: str, kind: str = "default") -> P.PortCell:
    [cell] = [c for c in p.cells if c.target == target and c.config_kind == kind]
    return cell


# ---------------------------------------------------------------- the target table


def test_default_targets_and_their_sources():
    specs = T.resolve(None)
    keys = [s.key for s in specs]
    assert keys[:4] == ["a100", "h100", "mi300x", "c500"]
    for s in T.TARGETS.values():
        assert s.source, s.key
        assert s.tilelang_target["kind"] == s.kind
    mi = T.TARGETS["mi300x"]
    assert (mi.smem_per_block, mi.warp_size, mi.sm_count) == (64 * 1024, 64, 304)
    assert "LDS" in mi.source and "64 KB" in mi.source
    hw = T.TARGETS["h100"].hardware()
    assert (hw.target, hw.smem_per_block, hw.cores, hw.compute_capability) == ("cuda -arch=sm_90a", 232448, 132, "9.0")
    assert T.TARGETS["b200"].arch == "sm_100a" and not T.TARGETS["b200"].wgmma


def test_unknown_target_is_a_one_line_config_error():
    with pytest.raises(ConfigError) as err:
        T.resolve(["h100", "h300"])
    msg = str(err.value)
    assert "\n" not in msg and "'h300'" in msg and "mi300x" in msg
    before = P.cache_size()
    with pytest.raises(ConfigError):  # refused before anything is lowered
        P.port("gemm", GEMM_SHAPE, "fp16", "a100,nope")
    assert P.cache_size() == before


def test_unknown_family_is_a_config_error():
    with pytest.raises(ConfigError):
        P.port("matmul", GEMM_SHAPE, "fp16", ["h100"])


# ---------------------------------------------------------------- lowering per target


@pytest.mark.slow
@pytest.mark.parametrize("target, instruction", [("h100", "wgmma"), ("a100", "mma.sync"), ("mi300x", "mfma")])
def test_gemm_lowers_for_sm90a_sm80_gfx942(target, instruction):
    p = P.port("gemm", GEMM_SHAPE, "fp16", [target])
    cell = one(p, target)
    assert cell.status == "lowers", cell.reason
    assert cell.instruction == instruction  # tensor/matrix cores, not a scalar loop
    assert cell.config == get("gemm").search_space(GEMM_SHAPE, "float16", T.TARGETS[target].hardware())[0]
    assert cell.smem_bytes and cell.smem_bytes <= T.TARGETS[target].smem_per_block
    # sm_90a adds a producer warpgroup for TMA (warp specialization): 128 -> 256 threads;
    # the ping-pong schedule that leads H100's space runs one and two consumer warpgroups.
    threads = PP.threads_of(cell.config) if cell.config.get("pingpong") else cell.config["threads"]
    assert cell.threads in (threads, threads + 128)
    assert p.summary[1].startswith(f"1 of 1 rewritten kernels build for {T.TARGETS[target].name}")


@pytest.mark.slow
@pytest.mark.parametrize("family", ["gemm_gelu", "gemm_silu", "gemm_gelu_tanh"])
def test_fused_gemm_lowers_for_gfx942_without_cuda_intrinsics(family):
    # The epilogue's __expf and rcp.approx are CUDA's: with them, TileLang's HIP backend
    # failed on tl.fast_rcp (the H200 runs of 2026-12-02, mi300x column). AMD targets get exp
    # and a division.
    cell = one(P.port(family, GEMM_SHAPE, "fp16", ["mi300x"]), "mi300x")
    assert cell.status == "lowers", cell.reason
    assert cell.instruction == "mfma"


@pytest.mark.slow
def test_row_families_lower_for_one_target_each():
    p = P.check([("softmax", (4096, 1024), "fp16", None), ("layernorm", (2048, 768), "bf16", None)], ["mi300x", "a100"])
    assert {(c.family, c.target): c.status for c in p.cells} == {
        ("softmax", "mi300x"): "lowers",
        ("softmax", "a100"): "lowers",
        ("layernorm", "mi300x"): "lowers",
        ("layernorm", "a100"): "lowers",
    }
    assert P.metrics(p)["portability.targets_ok"] == 1.0


@pytest.mark.slow
def test_b200_lowers_but_says_which_instruction_it_got():
    cell = one(P.port("gemm", GEMM_SHAPE, "fp16", ["b200"]), "b200")
    assert cell.status == "lowers"
    if cell.instruction != "tcgen05":  # TileLang 0.1.15 picks mma.sync for a register accumulator
        assert "not B200's tcgen05" in cell.note


# ---------------------------------------------------------------- failures and their classes


@pytest.mark.slow
def test_tuned_config_over_mi300x_lds_needs_retuning_and_a_fitting_config_is_named():
    p = P.port("gemm", (4096, 4096, 4096), "fp16", ["h100", "mi300x"], config=H200_GEMM)
    assert one(p, "h100", "tuned").status == "lowers"  # fits the device it was tuned for
    cell = one(p, "mi300x", "tuned")
    assert cell.status == "needs_retuning" and cell.failure_class == "resources"
    assert "uses 208 KB of shared memory" in cell.reason
    assert "MI300X allows 64 KB of LDS per workgroup" in cell.reason
    fit = cell.fitting_config
    assert fit is not None
    hw = T.TARGETS["mi300x"].hardware()
    assert get("gemm").reject_reason((4096, 4096, 4096), "float16", fit, hw) is None
    assert one(P.port("gemm", (4096, 4096, 4096), "fp16", ["mi300x"], config=fit), "mi300x", "tuned").status == "lowers"
    line = next(s for s in p.summary if "MI300X" in s)
    assert line.startswith("1 of 1 rewritten kernels build for AMD Instinct MI300X; 1 needs re-tuning there")
    m = P.metrics(p)
    assert m["portability.needs_retuning"] == 1 and m["portability.as_is"] == 0.5
    assert m["portability.kernels_ok"] == 1.0


# What the tuner picked for ViT-B's 3152x3072x768 on the H200 (2026-12-02): the ping-pong
# schedule, which only sm_90 runs.
H200_PINGPONG = {
    "block_M": 128,
    "block_N": 128,
    "block_K": 64,
    "num_stages": 5,
    "threads": 128,
    "swizzle": True,
    "panel": 10,
    "policy": "square",
    "split_k": 1,
    "splitk_fused": False,
    "persistent": 132,
    "cluster": 0,
    "pingpong": 1,
}


@pytest.mark.slow
def test_a_pingpong_config_is_refused_on_sm80_in_a_sentence_and_lowers_on_sm90():
    p = P.port("gemm", (3152, 3072, 768), "fp16", ["a100", "h100"], config=H200_PINGPONG)
    assert one(p, "h100", "tuned").status == "lowers"
    cell = one(p, "a100", "tuned")
    # The family's own check answers before TileLang's lowering would raise its internal
    # "TMA is not available" error: the reason names the arch the config needs.
    assert cell.status == "needs_retuning" and cell.failure_class == "feature"
    assert "needs CUDA sm_90" in cell.reason and "sm_80" in cell.reason
    assert "InternalError" not in cell.reason
    assert cell.fitting_config is not None and not cell.fitting_config.get("pingpong")


@pytest.mark.slow
def test_huge_tiles_break_the_lowered_kernel_limit_too():
    huge = {**H200_GEMM, "block_M": 256, "block_N": 256}
    cell = one(P.port("gemm", (4096, 4096, 4096), "fp16", ["mi300x"], config=huge), "mi300x", "tuned")
    assert cell.status == "needs_retuning"
    assert cell.smem_bytes > 64 * 1024  # what TileLang itself asks for at launch, not only our sizing
    assert cell.fitting_config is not None


@pytest.mark.slow
def test_bf16_on_a_target_without_bf16_tensor_cores_is_a_feature_gap():
    p = P.check([("gemm", GEMM_SHAPE, "bf16", None), ("gemm", GEMM_SHAPE, "fp16", None)], ["t4"])
    bf16 = next(c for c in p.cells if c.dtype == "bfloat16")
    fp16 = next(c for c in p.cells if c.dtype == "float16")
    assert fp16.status == "lowers" and fp16.instruction == "mma.sync"
    assert bf16.status == "fails" and bf16.failure_class == "feature"
    assert "take no bfloat16" in bf16.reason and "scalar FMA" in bf16.reason
    assert bf16.fitting_config is None  # no config can give T4 bf16 tensor cores
    assert P.metrics(p)["portability.fails.feature"] == 1


@pytest.mark.slow
@pytest.mark.skipif(
    getattr(tilelang, "__version__", "") != "0.1.15", reason="documents a TileLang 0.1.15 code-generation gap"
)
def test_pipelined_causal_attention_is_a_codegen_gap_on_sm80():
    shape = (1, 8, 512, 512, 64, 1)
    tuned = {"block_M": 128, "block_N": 128, "num_stages": 2, "threads": 256}
    cell = one(P.port("attention", shape, "fp16", ["a100"], config=tuned), "a100", "tuned")
    assert cell.status == "fails" and cell.failure_class == "codegen"
    assert "\n" not in cell.reason and cell.reason.startswith("TypeError: Downcast")
    assert cell.fitting_config and cell.fitting_config["num_stages"] == 1  # unpipelined K/V loop lowers


def test_missing_backend_is_a_feature_gap_without_lowering():
    before = P.cache_size()
    p = P.port("gemm", GEMM_SHAPE, "fp16", ["c500"], config=H200_GEMM)
    assert P.cache_size() == before
    for cell in p.cells:
        assert cell.status == "fails" and cell.failure_class == "feature"
        assert cell.reason.startswith("no TileLang backend installed for MACA")
    assert P.metrics(p)["portability.c500.kernels_ok"] == 0.0


@pytest.mark.slow
def test_numerical_hook_runs_for_the_local_device_only():
    local = T.with_limits(T.TARGETS["h100"], key="local", name="NVIDIA H100 (this machine)")
    seen = []

    def numerics(family, shape, dtype, config):
        seen.append(family)
        return "max abs error 0.5 > atol 0.002"

    p = P.check([("gemm", GEMM_SHAPE, "fp16", None)], [local, "h100"], numerics=numerics)
    assert one(p, "local").status == "fails" and one(p, "local").failure_class == "numerical"
    assert one(p, "h100").status == "lowers"
    assert seen and set(seen) == {"gemm"}


@pytest.mark.slow
def test_an_mma_tile_measured_on_this_device_carries_no_instruction_note_here():
    # A 16-row decode tile runs mma.sync on Hopper by design. Measured on the local
    # device, its speed is that device's; on another Hopper the note says the speed was
    # measured with another instruction than the target's best.
    local = T.with_limits(T.TARGETS["h100"], key="local", name="NVIDIA H100 (this machine)")
    skinny = {"block_M": 16, "block_N": 32, "block_K": 256, "num_stages": 4, "threads": 128, "policy": "fullcol"}
    p = P.check([("gemm", (16, 4096, 4096), "fp16", skinny)], [local, "h100"])
    assert one(p, "local", "tuned").status == "lowers" and one(p, "local", "tuned").note == ""
    assert "mma.sync" in one(p, "h100", "tuned").note


# ---------------------------------------------------------------- cache, inputs, outputs


def test_second_check_is_served_from_the_cache():
    P.port("gemm", GEMM_SHAPE, "fp16", ["h100"])
    again = P.port("gemm", GEMM_SHAPE, "fp16", ["h100"])
    assert again.lowerings == 0


def test_cpu_tuned_configs_are_not_judged_on_gpus():
    from evaluator.results import TunedKernel

    tk = TunedKernel(
        family="gemm",
        shape=GEMM_SHAPE,
        dtype="float16",
        target="c",
        config={"block_M": 64, "block_N": 64, "block_K": 32},
        candidates=(),
    )
    p = P.check([tk], ["h100"])
    assert [c.config_kind for c in p.cells] == ["default"]
    other = TunedKernel(family="gemm", shape=(64, 64, 64), dtype="float16", target="c", config=None, candidates=())
    soft = TunedKernel(family="softmax", shape=(64, 64), dtype="float16", target="c", config=None, candidates=())
    assert P.from_tuned([tk, other, soft]) == [tk, soft]  # the hottest shape of each family


def _synthetic() -> P.Portability:
    def cell(target, kind, status, cls="", reason="", fit=None):
        return P.PortCell(
            family="gemm",
            shape=(64, 64, 64),
            dtype="float16",
            config_kind=kind,
            target=target,
            status=status,
            failure_class=cls,
            reason=reason,
            config={"block_M": 128},
            fitting_config=fit,
            instruction="wgmma" if status == "lowers" else "",
        )

    cells = (
        cell("h100", "tuned", "lowers"),
        cell("h100", "default", "lowers"),
        cell("mi300x", "tuned", "needs_retuning", "resources", "uses 160 KB of shared memory", {"block_M": 64}),
        cell("mi300x", "default", "lowers"),
        cell("c500", "tuned", "fails", "feature", "no backend"),
        cell("c500", "default", "fails", "feature", "no backend"),
    )
    return P.with_summary(
        P.Portability(
            targets=("h100", "mi300x", "c500"),
            kernels=("gemm 64x64x64 float16",),
            cells=cells,
            summary=(),
            target_names={"h100": "H100", "mi300x": "MI300X", "c500": "C500"},
        )
    )


def test_metrics_rows_and_round_trip():
    p = _synthetic()
    m = P.metrics(p)
    assert m["portability.targets_ok"] == pytest.approx(2 / 3)
    assert m["portability.kernels_ok"] == 0.0
    assert m["portability.as_is"] == pytest.approx(1 / 3)
    assert m["portability.needs_retuning"] == 1 and m["portability.fails"] == 1
    assert m["portability.fails.feature"] == 1 and m["portability.mi300x.kernels_ok"] == 1.0
    assert set(P.METRIC_INFO) <= set(m)
    table = P.rows(p)
    assert [r["config"] for r in table] == ["tuned", "default"]
    assert table[0]["h100"] == "lowers (wgmma)" and table[0]["mi300x"].startswith("re-tune: uses 160 KB")
    assert table[0]["c500"] == "fails (feature): no backend"
    assert "1 needs re-tuning there" in p.summary[2] and "(block_M=64 fits and lowers)" in p.summary[2]
    assert P.explain(p, "portability.mi300x.kernels_ok") == p.summary[2]
    text = P.format_matrix(p)
    assert text.splitlines()[0].split()[:5] == ["kernel", "config", "h100", "mi300x", "c500"]
    data = json.loads(json.dumps(to_dict(p)))
    assert from_dict(P.Portability, data) == p


def test_first_line_skips_tracebacks_and_classify_sorts_reasons():
    exc = RuntimeError('\nTraceback (most recent call last):\n  File "x.py", line 1\nLayout infer conflict:\n  more')
    assert P.first_line(exc) == "RuntimeError: Layout infer conflict"
    assert P.classify("needs 300000 B of shared memory") == "resources"
    assert P.classify("attention: float32 has no GPU schedule") == "feature"
    assert P.classify("Downcast from tirx.Sub to ir.IntImm failed.") == "codegen"


# ---------------------------------------------------------------- wiring: records, facts


def test_the_records_live_in_results_and_old_results_still_load():
    import dataclasses

    from evaluator import results
    from evaluator.results import RunResult
    from samples import sample_result

    assert P.PortCell is results.PortCell and P.Portability is results.Portability  # re-exported
    r = sample_result()
    data = json.loads(json.dumps(to_dict(r)))
    assert data["portability"] is None
    del data["portability"]  # a results.json written before the stage existed
    assert from_dict(RunResult, data).portability is None
    checked = dataclasses.replace(r, portability=_synthetic())
    assert from_dict(RunResult, json.loads(json.dumps(to_dict(checked)))) == checked


def test_target_facts_read_the_matrix_per_target():
    p = _synthetic()
    facts = {f.target: f for f in P.target_facts(p)}
    label = "gemm 64x64x64 float16"
    assert facts["h100"].builds == facts["h100"].as_is == (label,) and not facts["h100"].retune
    mi = facts["mi300x"]
    assert (
        mi.builds == (label,) and mi.as_is == () and [(r.label, r.fix) for r in mi.retune] == [(label, {"block_M": 64})]
    )
    assert mi.retune[0].cell.reason == "uses 160 KB of shared memory"
    assert facts["c500"].failures == (P.Failure("feature", "no backend", (label,)),) and not facts["c500"].builds
    assert [f.name for f in facts.values()] == ["H100", "MI300X", "C500"]
