"""Synthetic but complete RunResult values for tests of the stages that only read results
(checklist, baseline, report). Real measurements come from the pipeline tests."""

from __future__ import annotations

import dataclasses

from evaluator.results import (
    CallCount,
    Candidate,
    E2EBench,
    Environment,
    Hardware,
    HotOp,
    HotOps,
    ModelSpec,
    OpBench,
    RunResult,
    Soak,
    Timing,
    TunedKernel,
    UpstreamHealth,
    VerifyCase,
    VerifyResult,
)
from upstream_samples import sample_upstream


def timing(ms: float, cv: float = 0.02) -> Timing:
    return Timing(median_ms=ms, p10_ms=ms * 0.97, p90_ms=ms * 1.04, mean_ms=ms, cv=cv, reps=20)


def sample_result(
    *,
    run_id: str = "bert-tiny-20261129-120000",
    gemm_speedup: float = 1.1,
    softmax_speedup: float = 0.9,
    correct: bool = True,
    upstream: bool = True,
    created: str = "2026-11-29T12:00:00+00:00",
    scale: float = 1.0,
    platform: str = "cpu-x86_64",
) -> RunResult:
    hw = Hardware(target="c", device="cpu", name="Test CPU", platform=platform, cores=2, memory_gb=24.0)
    env = Environment(
        evaluator="0.1.0", python="3.11.7", os="Linux", cpu="Test CPU", torch="2.13.0", tilelang="0.1.15", hardware=hw
    )
    model = ModelSpec(
        name="bert-tiny",
        source="zoo",
        batch_size=2,
        seq_len=128,
        dtype="float32",
        parameters=1_000_000,
        spec_hash="abc123",
    )
    hot = HotOps(
        device="cpu",
        total_ms=10.0,
        wall_ms=12.0,
        selected=("gemm", "softmax"),
        ops=(
            HotOp("gemm", 6.0, 0.6, 12, ("256x128x128", "256x512x128"), ("aten::linear",), True),
            HotOp("softmax", 2.0, 0.2, 2, ("1024x128",), ("aten::softmax",), True),
            HotOp("elementwise", 2.0, 0.2, 20, (), ("aten::gelu",), False),
        ),
    )
    tuned = (
        TunedKernel(
            "gemm",
            (256, 128, 128),
            "float32",
            "c",
            {"block_M": 32, "block_N": 32, "block_K": 32},
            (
                Candidate({"block_M": 32, "block_N": 32, "block_K": 32}, "ok", 0.5, 1.2),
                Candidate({"block_M": 512, "block_N": 512, "block_K": 32}, "rejected", error="too big"),
            ),
        ),
        TunedKernel(
            "softmax", (1024, 128), "float32", "c", {"block_rows": 4}, (Candidate({"block_rows": 4}, "ok", 0.2, 1.0),)
        ),
    )
    verify = tuple(
        VerifyResult(
            fam,
            tuple(
                VerifyCase(fam, shape, "float32", seed, 1e-6, 1e-6, 1e-4, 1e-4, correct, "" if correct else "mismatch")
                for seed in (0, 1, 2)
            ),
        )
        for fam, shape in (("gemm", (256, 128, 128)), ("softmax", (1024, 128)))
    )
    bench = (
        OpBench(
            "gemm",
            (256, 128, 128),
            "float32",
            "model",
            timing(0.5 * scale / gemm_speedup),
            timing(0.5 * scale),
            gemm_speedup,
            2 * 256 * 128 * 128,
            4 * (256 * 128 * 2 + 128 * 128),
            config={"block_M": 32},
        ),
        OpBench(
            "softmax",
            (1024, 128),
            "float32",
            "model",
            timing(0.2 * scale / softmax_speedup),
            timing(0.2 * scale),
            softmax_speedup,
            5 * 1024 * 128,
            8 * 1024 * 128,
            config={"block_rows": 4},
        ),
    )
    e2e = E2EBench(
        families=("gemm", "softmax"),
        reference=timing(12.0 * scale),
        swapped=timing(11.0 * scale),
        speedup=12.0 / 11.0,
        samples_per_s_reference=166.0,
        samples_per_s_swapped=181.0,
        max_abs_err=1e-5,
        outputs_match=True,
        replaced_modules=0,
        coverage=0.8,
        amdahl_speedup=1.05,
        method="perf_counter",
        tilelang_calls=14,
        fallback_calls=0,
        rel_l2_err=2e-7,
        rel_max_err=5e-7,
        calls=(
            CallCount("gemm", "256x128x128", 12, profiled_ms=6.0),
            CallCount("softmax", "1024x128", 2, profiled_ms=2.0),
        ),
    )
    soak = Soak(seconds=10.0, window_ms=(11.0, 11.1, 11.05), drift=0.005, cv=0.01, memory_growth_mb=0.0, iterations=900)
    up = sample_upstream() if upstream else UpstreamHealth(measured=False, note="no --upstream given")
    return RunResult(
        run_id=run_id,
        created=created,
        model=model,
        environment=env,
        settings={"device": "cpu", "ops": 2, "timing": {"timer": "perf_counter", "warmup": 3, "reps": 20}},
        hot_ops=hot,
        tuned=tuned,
        verify=verify,
        op_bench=bench,
        e2e=e2e,
        soak=soak,
        upstream=up,
    )


def replace(result: RunResult, **changes) -> RunResult:
    return dataclasses.replace(result, **changes)
