"""RunResults and HTML helpers for the report's tests (tests/test_report*.py).

In: the synthetic RunResults of samples.py, extended: every section filled
(`rich_result`), the evidence fields the bench stage writes filled (`evidence_result`:
e2e views, call counts, intervals, flags, soak timer), a run that measured nothing
(`bare_result`). Out: those results with a verdict from the default checklist as of
TODAY, and helpers that render one to HTML and cut out a section, page one, the words a
reader sees, or a PDF's pages as text.
"""

from __future__ import annotations

import dataclasses
import html as htmllib
import json
import re
from datetime import date
from pathlib import Path

import pytest

from evaluator import checklist as cl
from evaluator import report
from evaluator.results import (
    AuthorCommits,
    BaselineRef,
    CallCount,
    Change,
    Comparison,
    E2EView,
    ForkDrift,
    OpBench,
    Ratio,
    RecentCommit,
    Release,
    RunResult,
    TrendPoint,
    TunedKernel,
    UpstreamHealth,
    Candidate,
)
from port_samples import sample_portability
from samples import sample_result, timing


SCRIPT = "<script>alert('x')</script>"
TODAY = date(2026, 11, 29)


def rich_result(model_name: str = "bert-tiny") -> RunResult:
    """The sample with every section filled: peaks, standard shapes, a failed kernel
    build, a previous baseline, a trend, upstream parts with a hostile commit subject and
    a fork, a portability matrix (tests/port_samples.py)."""
    r = sample_result()
    hw = dataclasses.replace(
        r.environment.hardware,
        name="NVIDIA H200",
        platform="h200",
        target="cuda",
        device="cuda",
        peak_tflops=989.0,
        peak_gbps=4800.0,
        driver="560.35",
        cuda="12.6",
    )
    extra = (
        OpBench(
            "gemm",
            (4096, 4096, 4096),
            "float32",
            "standard",
            timing(1.2),
            timing(1.0),
            1.0 / 1.2,
            2 * 4096**3,
            3 * 4 * 4096**2,
        ),
        OpBench(
            "softmax",
            (8192, 8192),
            "float32",
            "standard",
            None,
            timing(0.8),
            None,
            5 * 8192**2,
            8 * 8192**2,
            error="compile error: shared memory exceeds 228 KB",
        ),
    )
    changes = (
        Change("op", "gemm 256x128x128 float32", 0.40, 0.455, 1.14, 0.05, "regression"),
        Change("op", "softmax 1024x128 float32", 0.25, 0.222, 0.89, 0.05, "improvement"),
        Change("e2e", "bert-tiny e2e", 11.0, 11.0, 1.0, 0.05, "unchanged"),
    )
    comparison = Comparison(
        "bert-tiny/h200/v2",
        "this run",
        True,
        "noise threshold from the previous run's CV",
        changes,
        environment_changes=(("tilelang", "0.1.14", "0.1.15"),),
    )
    trend = tuple(
        TrendPoint(v, f"2026-{m:02d}-01T00:00:00", key, ms)
        for v, m, k in (("v1", 6, 1.0), ("v2", 9, 0.95), ("v3", 11, 1.05))
        for key, ms in (("gemm 256x128x128 float32", 0.45 * k), ("softmax 1024x128 float32", 0.22 * k))
    )
    upstream = _rich_upstream(r.upstream)
    r = dataclasses.replace(
        r,
        model=dataclasses.replace(r.model, name=model_name),
        environment=dataclasses.replace(r.environment, hardware=hw),
        op_bench=r.op_bench + extra,
        upstream=upstream,
        comparison=comparison,
        trend=trend,
        portability=sample_portability(),
        baseline=BaselineRef("reports/baselines", "bert-tiny", "h200", "v3", "bert-tiny/h200/v3", "abcdef123456", "t"),
    )
    return dataclasses.replace(r, verdict=cl.evaluate(cl.load(cl.DEFAULT_CHECKLIST), r, today=TODAY))


def _rich_upstream(u: UpstreamHealth) -> UpstreamHealth:
    """`u` with 13 weeks of commits, three releases, a hostile commit subject, authors with
    Chinese names and a fork 42 commits behind that lacks the newest release."""
    activity = dataclasses.replace(
        u.activity,
        weekly_commits=(3, 5, 8, 2, 6, 9, 4, 7, 5, 6, 11, 8, 4),
        weekly_commits_start="2026-08-30T00:00:00+00:00",
        merged_prs_90d=48,
        recent_commits=(
            RecentCommit("0123456789abcdef", "2026-11-28T10:00:00+00:00", "Wei Zhang", f"Fix {SCRIPT} in the docs"),
            RecentCommit("fedcba9876543210", "2026-11-27", "李雷", "Add MACA target"),
        ),
    )
    authors = dataclasses.replace(
        u.authors, bus_factor=2, top_365d=(AuthorCommits("Wei Zhang", 40), AuthorCommits("李雷", 12))
    )
    releases = dataclasses.replace(
        u.releases,
        median_interval_days=98.5,
        tags=tuple(
            Release(tag, day, f"{i:040x}", True)
            for i, (tag, day) in enumerate(
                (("v0.1.13", "2026-05-02"), ("v0.1.14", "2026-08-14"), ("v0.1.15", "2026-11-09"))
            )
        ),
    )
    fork = ForkDrift(
        repo="vendor/tilelang-maca",
        branch="main",
        head="5ca1ab1e" * 5,
        measured=True,
        behind=42,
        ahead=7,
        days_behind=35.0,
        last_sync_date="2026-10-20T00:00:00+00:00",
        missing_releases=("v0.1.15",),
        missing_release_count=1,
    )
    return dataclasses.replace(
        u,
        activity=activity,
        authors=authors,
        releases=releases,
        fork=fork,
        fork_behind=42,
        fork_ahead=7,
        fork_days_behind=35.0,
        repo="tile-ai/tilelang",
    )


def evaluate(r: RunResult) -> RunResult:
    return dataclasses.replace(r, verdict=cl.evaluate(cl.load(cl.DEFAULT_CHECKLIST), r, today=TODAY))


def evidence_result(
    *,
    e2e_speedup: float = 1.09,
    amdahl: float = 1.05,
    e2e_flags: tuple[str, ...] = (),
    softmax: float = 0.9,
    softmax_flags: tuple[str, ...] = (),
) -> RunResult:
    """A GPU run with the evidence fields the bench stage now writes: interleaved ratios
    with intervals and kernel-time cross-checks, e2e views and call counts, output-check
    errors, flags (a flagged, unverified standard-shape op, which the verdict does not
    use), the soak timer and host jitter, and a kernel reused from the tuning cache."""
    r = rich_result()
    gemm, soft, big = r.op_bench[0], r.op_bench[1], r.op_bench[2]
    gemm = dataclasses.replace(
        gemm,
        ratio=Ratio(1.1, 1.05, 1.15, 30),
        tilelang_kernel_ms=0.44,
        torch_kernel_ms=0.49,
        timer_note="graph replay and CUPTI agree within 3%",
    )
    soft = dataclasses.replace(
        soft,
        speedup=softmax,
        tilelang=timing(0.2 / softmax),
        flags=softmax_flags,
        ratio=Ratio(softmax, softmax * 0.9, softmax * 1.1, 30),
    )
    big = dataclasses.replace(big, flags=("faster than the roofline allows",), verified=False)
    views = (
        E2EView(
            "cuda_graph",
            timing(12.0),
            timing(12.0 / e2e_speedup),
            Ratio(e2e_speedup, e2e_speedup * 0.97, e2e_speedup * 1.03, 40),
        ),
        E2EView("eager", timing(14.0), timing(13.6), Ratio(1.03, 0.99, 1.06, 40), note="launch-bound"),
        E2EView("kernel_sum", timing(10.0), timing(9.1), Ratio(1.1, 1.08, 1.12, 40)),
    )
    calls = (
        CallCount("gemm", "256x128x128", 24, {}, 3.1),
        CallCount("gemm", "256x512x128", 0, {"no tuned config": 12}, 2.9),
        CallCount("softmax", "", 2, {"non-contiguous input": 2}, 2.0),
    )
    e2e = dataclasses.replace(
        r.e2e,
        speedup=e2e_speedup,
        swapped=timing(12.0 / e2e_speedup),
        amdahl_speedup=amdahl,
        views=views,
        method="cuda_graph",
        ratio=views[0].ratio,
        calls=calls,
        tilelang_calls=26,
        fallback_calls=14,
        rel_l2_err=2.5e-4,
        rel_max_err=1.9e-3,
        tolerance={"rel_l2": 1e-3, "rel_max": 1e-2},
        flags=e2e_flags,
    )
    soak = dataclasses.replace(r.soak, timer="cuda_graph", host_cv=0.042)
    cached = TunedKernel(
        "gemm",
        (256, 512, 128),
        "float32",
        "cuda",
        {"block_M": 64},
        (Candidate({"block_M": 64}, "ok", error="reused from the tuning cache"),),
        cached=True,
    )
    r = dataclasses.replace(
        r, op_bench=(gemm, soft, big) + r.op_bench[3:], e2e=e2e, soak=soak, tuned=r.tuned + (cached,)
    )
    return evaluate(r)


def html_of(r: RunResult, tmp_path: Path, lang: str = "en") -> str:
    return report.render(r, tmp_path, lang=lang, pdf=False).html.read_text(encoding="utf-8")


def section(html: str, anchor: str) -> str:
    start = re.search(rf'<section[^>]*\bid="{anchor}"', html).start()
    return html[start : html.index("</section>", start)]


def page_one(html: str) -> str:
    return section(html, "summary")


def bare_result() -> RunResult:
    r = sample_result()
    return RunResult(run_id="stopped-early", created=r.created, model=r.model, environment=r.environment, settings={})


def pdf_pages(path: Path) -> list[str]:
    pypdf = pytest.importorskip("pypdf")
    return [p.extract_text() for p in pypdf.PdfReader(str(path)).pages]


def words(html: str) -> str:
    """The text a reader sees: tags dropped, entities decoded, whitespace collapsed."""
    return " ".join(htmllib.unescape(re.sub(r"<[^>]+>", " ", html)).split())


def example_result(folder: Path) -> RunResult:
    """A committed example run (reports/examples/.../<run>/baseline/) as `evaluate report
    --baseline` reads it from a store: migrated to this schema, with its baseline id."""
    from evaluator.baseline import schema  # noqa: PLC0415 - only the example tests need it

    base = Path(folder) / "baseline"
    manifest = json.loads((base / "manifest.json").read_text(encoding="utf-8"))
    bid = manifest["id"]
    version, writer = schema.check_manifest(manifest, bid)
    result = schema.result_from(json.loads((base / "result.json").read_text(encoding="utf-8")), version, writer, bid)
    model, platform, ver = bid.split("/")
    return dataclasses.replace(result, baseline=BaselineRef(str(folder), model, platform, ver, bid, "", bid))
