"""The report, rendered for real (HTML, and PDF where the machine can write a correct one).

In: synthetic RunResults from samples.py, extended here: every section filled
(`rich_result`), the new evidence fields filled (`evidence_result`: e2e views, call
counts, intervals, flags, soak timer), a run that measured nothing, and old baselines
without the new fields. Out: assertions on what a manager and an engineer read: page
one never contradicts the verdict, what would change it, the CPU caveat, every failed
item named; the evidence tables; numbers and words (no scientific notation, plurals);
regression causes; the Chinese report free of English evidence; PDF pages without
orphaned headings. PDF tests skip, naming the package, where the machine lacks it
(see test_pdf_env.needs_pdf).
"""

from __future__ import annotations

import dataclasses
import html as htmllib
import re
import subprocess
import sys
from datetime import date
from pathlib import Path

import pytest
import yaml

from evaluator import checklist as cl
from evaluator import report
from evaluator.errors import ReportError
from evaluator.results import (
    BaselineRef, CallCount, Change, Comparison, E2EView, LaunchOverhead, OpBench, Ratio, RunResult, TrendPoint,
    TunedKernel, Candidate, UpstreamHealth, from_dict, to_dict,
)
from port_samples import sample_portability
from samples import sample_result, timing
from test_pdf_env import needs_pdf, needs_weasyprint

SCRIPT = "<script>alert('x')</script>"
TODAY = date(2026, 11, 29)


def rich_result(model_name: str = "bert-tiny") -> RunResult:
    """The sample with every section filled: peaks, standard shapes, a failed kernel
    build, a previous baseline, a trend, upstream details with a hostile commit subject,
    a portability matrix (tests/port_samples.py)."""
    r = sample_result()
    hw = dataclasses.replace(r.environment.hardware, name="NVIDIA H200", platform="h200", target="cuda",
                             device="cuda", peak_tflops=989.0, peak_gbps=4800.0, driver="560.35", cuda="12.6")
    extra = (
        OpBench("gemm", (4096, 4096, 4096), "float32", "standard", timing(1.2), timing(1.0), 1.0 / 1.2,
                2 * 4096 ** 3, 3 * 4 * 4096 ** 2),
        OpBench("softmax", (8192, 8192), "float32", "standard", None, timing(0.8), None, 5 * 8192 ** 2,
                8 * 8192 ** 2, error="compile error: shared memory exceeds 228 KB"),
    )
    changes = (Change("op", "gemm 256x128x128 float32", 0.40, 0.455, 1.14, 0.05, "regression"),
               Change("op", "softmax 1024x128 float32", 0.25, 0.222, 0.89, 0.05, "improvement"),
               Change("e2e", "bert-tiny e2e", 11.0, 11.0, 1.0, 0.05, "unchanged"))
    comparison = Comparison("bert-tiny/h200/v2", "this run", True, "noise threshold from the previous run's CV",
                            changes, environment_changes=(("tilelang", "0.1.14", "0.1.15"),))
    trend = tuple(TrendPoint(v, f"2026-{m:02d}-01T00:00:00", key, ms)
                  for v, m, k in (("v1", 6, 1.0), ("v2", 9, 0.95), ("v3", 11, 1.05))
                  for key, ms in (("gemm 256x128x128 float32", 0.45 * k), ("softmax 1024x128 float32", 0.22 * k)))
    details = {
        "weekly_commits": [3, 5, 8, 2, 6, 9, 4, 7, 5, 6, 11, 8, 4],
        "releases": [{"tag": "v0.1.13", "date": "2026-05-02"}, {"tag": "v0.1.14", "date": "2026-08-14"},
                     {"tag": "v0.1.15", "date": "2026-11-09"}],
        "recent_commits": [{"sha": "0123456789abcdef", "date": "2026-11-28T10:00:00+00:00", "author": "Wei Zhang",
                            "subject": f"Fix {SCRIPT} in the docs"},
                           {"sha": "fedcba9876543210", "date": "2026-11-27", "author": "李雷",
                            "subject": "Add MACA target"}],
        "weekly_commits_start": "2026-08-30T00:00:00+00:00",
        "top_authors_365d": [{"name": "Wei Zhang", "commits": 40}, {"name": "李雷", "commits": 12}],
        "bus_factor": 2, "merged_prs_90d": 48, "median_release_interval_days": 98.5,
        "fork": {"measured": True, "repo": "vendor/tilelang-maca", "branch": "main", "last_sync_date":
                 "2026-10-20T00:00:00+00:00", "missing_releases": [{"tag": "v0.1.15"}]},
    }
    upstream = dataclasses.replace(r.upstream, details=details, fork_behind=42, fork_ahead=7, fork_days_behind=35.0,
                                   repo="tile-ai/tilelang")
    r = dataclasses.replace(
        r, model=dataclasses.replace(r.model, name=model_name),
        environment=dataclasses.replace(r.environment, hardware=hw), op_bench=r.op_bench + extra,
        upstream=upstream, comparison=comparison, trend=trend, portability=sample_portability(),
        baseline=BaselineRef("reports/baselines", "bert-tiny", "h200", "v3", "bert-tiny/h200/v3", "abcdef123456", "t"))
    return dataclasses.replace(r, verdict=cl.evaluate(cl.load(cl.DEFAULT_CHECKLIST), r, today=TODAY))


def evaluate(r: RunResult) -> RunResult:
    return dataclasses.replace(r, verdict=cl.evaluate(cl.load(cl.DEFAULT_CHECKLIST), r, today=TODAY))


def evidence_result(*, e2e_speedup: float = 1.09, amdahl: float = 1.05, e2e_flags: tuple[str, ...] = (),
                    softmax: float = 0.9, softmax_flags: tuple[str, ...] = ()) -> RunResult:
    """A GPU run with the evidence fields the bench stage now writes: interleaved ratios
    with intervals and kernel-time cross-checks, e2e views and call counts, output-check
    errors, flags (a flagged, unverified standard-shape op, which the verdict does not
    use), the soak timer and host jitter, and a kernel reused from the tuning cache."""
    r = rich_result()
    gemm, soft, big = r.op_bench[0], r.op_bench[1], r.op_bench[2]
    gemm = dataclasses.replace(gemm, ratio=Ratio(1.1, 1.05, 1.15, 30), tilelang_kernel_ms=0.44, torch_kernel_ms=0.49,
                               timer_note="graph replay and CUPTI agree within 3%")
    soft = dataclasses.replace(soft, speedup=softmax, tilelang=timing(0.2 / softmax), flags=softmax_flags,
                               ratio=Ratio(softmax, softmax * 0.9, softmax * 1.1, 30))
    big = dataclasses.replace(big, flags=("faster than the roofline allows",), verified=False)
    views = (E2EView("cuda_graph", timing(12.0), timing(12.0 / e2e_speedup), Ratio(e2e_speedup, e2e_speedup * 0.97,
                     e2e_speedup * 1.03, 40)),
             E2EView("eager", timing(14.0), timing(13.6), Ratio(1.03, 0.99, 1.06, 40), note="launch-bound"),
             E2EView("kernel_sum", timing(10.0), timing(9.1), Ratio(1.1, 1.08, 1.12, 40)))
    calls = (CallCount("gemm", "256x128x128", 24, {}, 3.1),
             CallCount("gemm", "256x512x128", 0, {"no tuned config": 12}, 2.9),
             CallCount("softmax", "", 2, {"non-contiguous input": 2}, 2.0))
    e2e = dataclasses.replace(r.e2e, speedup=e2e_speedup, swapped=timing(12.0 / e2e_speedup), amdahl_speedup=amdahl,
                              views=views, method="cuda_graph", ratio=views[0].ratio, calls=calls, tilelang_calls=26,
                              fallback_calls=14, rel_l2_err=2.5e-4, rel_max_err=1.9e-3,
                              tolerance={"rel_l2": 1e-3, "rel_max": 1e-2}, flags=e2e_flags)
    soak = dataclasses.replace(r.soak, timer="cuda_graph", host_cv=0.042)
    cached = TunedKernel("gemm", (256, 512, 128), "float32", "cuda", {"block_M": 64},
                         (Candidate({"block_M": 64}, "ok", error="reused from the tuning cache"),), cached=True)
    r = dataclasses.replace(r, op_bench=(gemm, soft, big) + r.op_bench[3:], e2e=e2e, soak=soak,
                            tuned=r.tuned + (cached,))
    return evaluate(r)


def html_of(r: RunResult, tmp_path: Path, lang: str = "en") -> str:
    return report.render(r, tmp_path, lang=lang, pdf=False).html.read_text(encoding="utf-8")


def section(html: str, anchor: str) -> str:
    start = re.search(rf'<section[^>]*\bid="{anchor}"', html).start()
    return html[start:html.index("</section>", start)]


def page_one(html: str) -> str:
    return section(html, "summary")


def bare_result() -> RunResult:
    r = sample_result()
    return RunResult(run_id="stopped-early", created=r.created, model=r.model, environment=r.environment,
                     settings={})


@pytest.fixture(scope="module")
def en(tmp_path_factory):
    """One English HTML+PDF render shared by the tests that read it (PDFs take seconds)."""
    return report.render(rich_result(), tmp_path_factory.mktemp("en"))


@pytest.fixture(scope="module")
def zh(tmp_path_factory):
    return report.render(rich_result(), tmp_path_factory.mktemp("zh"), lang="zh")


def pdf_pages(path: Path) -> list[str]:
    pypdf = pytest.importorskip("pypdf")
    return [p.extract_text() for p in pypdf.PdfReader(str(path)).pages]


# ---------------------------------------------------------------- HTML


def test_files_and_page_one(en):
    assert en.html == en.html.parent / "report.html"
    html = en.html.read_text(encoding="utf-8")
    # softmax on model shapes 0.9x and gemm 1.1x pass; upstream and fork fine: one major regression.
    assert 'class="banner banner-conditional"' in html and "CONDITIONAL GO" in html
    assert en.pdf is None or en.pdf == en.html.parent / "report.pdf"
    assert "NVIDIA H200" in html and "2026-11-29" in html and "bert-tiny/h200/v3" in html
    assert html.count('class="card ') == 5
    assert "Nothing got slower than the previous baseline beyond the noise" in html
    assert "Review the regressions" in html  # next step derived from the failed item


def test_every_section_present(en):
    html = en.html.read_text(encoding="utf-8")
    for anchor in ("checklist", "hot-ops", "correctness", "ops", "roofline", "portability", "e2e", "soak",
                   "upstream", "comparison", "trend", "environment", "method", "appendix"):
        assert f'<section id="{anchor}"' in html, anchor
    assert html.count("<svg ") == 7  # hot ops, speedup, roofline, soak, weekly, releases, trend
    assert "compile error: shared memory exceeds 228 KB" in html
    assert "0.1.14" in html and "regression" in html and "perf_counter" in html
    assert "vendor/tilelang-maca" in html and "2026-10-20" in html and "Bus factor" in html


def test_outside_text_is_escaped(en, tmp_path):
    html = en.html.read_text(encoding="utf-8")
    assert "<script" not in html.lower()
    assert "Fix &lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; in the docs" in html
    files = report.render(rich_result(model_name=f"bert{SCRIPT}"), tmp_path, pdf=False)
    html = files.html.read_text(encoding="utf-8")
    assert "<script" not in html.lower() and "bert&lt;script&gt;" in html


def test_html_is_self_contained(en):
    html = en.html.read_text(encoding="utf-8")
    links = re.findall(r"""(?:src|href|action|poster)\s*=\s*["']?([^"'\s>]+)""", html, re.I)
    assert all(u.startswith("#") for u in links), links
    assert not re.search(r"url\(\s*['\"]?(?!#)", html)  # CSS url() fetches
    assert "@import" not in html and "<link" not in html.lower() and "<iframe" not in html.lower()


# ---------------------------------------------------------------- PDF


@needs_pdf("en")
def test_pdf_pages_header_and_numbers(en):
    pages = pdf_pages(en.pdf)
    assert len(pages) >= 3
    assert "CONDITIONAL GO" in pages[0] and "key numbers" in pages[0].lower()
    assert "Checklist" not in pages[0]  # page one is the manager's page only
    for i, text in enumerate(pages[1:], start=2):
        assert "bert-tiny · NVIDIA H200 · 2026-11-29" in text, i
        assert f"{i} / {len(pages)}" in text, i
        assert "\x00" not in text, i  # text that copies as text, not "A\x00 \x00H..."


def test_fetcher_refuses_network_and_outside_files(tmp_path):
    pytest.importorskip("weasyprint")
    inside = tmp_path / "logo.svg"
    inside.write_text("<svg xmlns='http://www.w3.org/2000/svg'/>")
    fetch = report.local_only_fetcher(tmp_path)
    for url in ("http://example.com/a.png", "https://example.com/a.css", "ftp://example.com/x",
                "file:///etc/passwd", (tmp_path.parent / "x.png").as_uri()):
        with pytest.raises(ReportError):
            fetch(url)
    fetch(inside.as_uri()).close()
    fetch("data:text/plain,hi").close()


def test_without_weasyprint_html_is_written_and_note_says_how(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "weasyprint", None)  # import now raises ImportError
    files = report.render(rich_result(), tmp_path)
    assert files.html.exists() and files.pdf is None
    assert "evaluate report --baseline bert-tiny/h200/v3" in files.pdf_note and "\n" not in files.pdf_note
    assert report.render(bare_result(), tmp_path, pdf=False).pdf is None


# ---------------------------------------------------------------- Chinese


def test_zh_report_is_chinese(zh):
    html = zh.html.read_text(encoding="utf-8")
    assert '<html lang="zh-CN">' in html
    assert "有条件通过" in html and "建议的下一步" in html and "关键指标" in html
    assert len(re.findall(r"[\u4e00-\u9fff]", html)) > 500


@needs_pdf("zh")
def test_zh_pdf_page_one_is_chinese(zh):
    assert "有条件通过" in pdf_pages(zh.pdf)[0]


@needs_pdf("zh")
def test_zh_pdf_embeds_a_cjk_font(zh):
    pypdf = pytest.importorskip("pypdf")
    fonts = set()
    for page in pypdf.PdfReader(str(zh.pdf)).pages:
        for font in (page["/Resources"].get("/Font") or {}).values():
            fonts.add(str(font.get_object().get("/BaseFont")))
    assert any("CJK" in f or "SC" in f or "Hei" in f for f in fonts), (
        f"no CJK font in the PDF ({sorted(fonts)}): install one, e.g. `apt-get install fonts-noto-cjk`")


def test_strings_have_the_same_keys_in_every_language():
    def keys(d, prefix=()):
        for k, v in d.items():
            if isinstance(v, dict) and not report._is_plural(v):  # plural forms are one string
                yield from keys(v, prefix + (k,))
            else:
                yield prefix + (k,)
    tables = {lang: yaml.safe_load((report.TEMPLATES / "i18n" / f"{lang}.yaml").read_text(encoding="utf-8"))
              for lang in report.LANGS}
    assert set(keys(tables["en"])) == set(keys(tables["zh"]))
    for lang, table in tables.items():
        for metric in cl.METRICS:
            # one shared set of words for the per-target portability metrics, {target} filled in
            words = table["metrics"][report.metric_strings_key(metric)]
            assert set(words) == {"label", "fail", "next", "missing"}, (lang, metric)


# ---------------------------------------------------------------- partial runs


def test_a_run_that_measured_nothing_still_renders(tmp_path):
    files = report.render(bare_result(), tmp_path, pdf=False)
    html = files.html.read_text(encoding="utf-8")
    assert "banner-none" in html and "NO VERDICT" in html
    assert html.count("not measured") >= 10
    assert "<svg" not in html


def test_partial_run_with_verdict_lists_unmeasured_items(tmp_path):
    r = bare_result()
    r = dataclasses.replace(r, hot_ops=sample_result().hot_ops, stage_errors={"tune": "tilelang not importable"},
                            upstream=UpstreamHealth(measured=False, note="no --upstream given"))
    r = dataclasses.replace(r, verdict=cl.evaluate(cl.load(cl.DEFAULT_CHECKLIST), r, today=TODAY))
    files = report.render(r, tmp_path, lang="zh", pdf=False)
    html = files.html.read_text(encoding="utf-8")
    assert "未评估（本次运行未测量）" in html and "tilelang not importable" in html
    assert "未指定 --upstream 仓库" in html and "no --upstream given" not in html  # the note, translated


def test_outcomes_from_another_version_still_render(tmp_path):
    verdict = rich_result().verdict
    odd = dataclasses.replace(verdict.outcomes[0], metric="ops.retired_metric", severity="critical", status="fail")
    r = dataclasses.replace(bare_result(), verdict=dataclasses.replace(verdict, outcomes=(odd,)))
    html = report.render(r, tmp_path, pdf=False).html.read_text(encoding="utf-8")
    assert "ops.retired_metric" in html and "critical" in html


def test_unknown_language_is_refused(tmp_path):
    with pytest.raises(ReportError, match="use one of: en, zh"):
        report.render(rich_result(), tmp_path, lang="fr")


@needs_pdf("en")
def test_pdftoppm_can_rasterise_the_pdf(en, tmp_path):
    """What a reviewer does by hand: turn page one into a PNG (skipped without poppler)."""
    if subprocess.run(["which", "pdftoppm"], capture_output=True).returncode != 0:
        pytest.skip("needs poppler-utils (apt-get install poppler-utils) for pdftoppm")
    subprocess.run(["pdftoppm", "-r", "30", "-png", "-f", "1", "-l", "1", str(en.pdf), str(tmp_path / "p")],
                   check=True)
    assert list(tmp_path.glob("p-*.png"))


# ---------------------------------------------------------------- page one: never contradicts the verdict


def test_a_suspect_e2e_number_is_grey_next_to_a_no_go(tmp_path):
    """The reported case: "End-to-end 2.63x" in green beside a NO-GO while Amdahl said
    0.81x. An old baseline carries no flag, so the report's own check catches it."""
    r = evidence_result(e2e_speedup=2.63, amdahl=0.81, softmax=0.3)
    assert r.verdict.decision == "NO-GO"
    one = page_one(html_of(r, tmp_path))
    cards = re.findall(r'<div class="card (card-\w+)[^"]*">\s*<div class="card-label">([^<]+)<', one)
    e2e_card = next(c for c, label in cards if label == "End-to-end speed")
    assert e2e_card == "card-flagged"  # grey, not the green of a passed item
    assert "2.63×" in one and "Amdahl estimate 0.81×" in one and "contradicts the Amdahl estimate" in one
    assert "card-dim" in one


def test_flags_from_the_run_grey_the_card_and_show_the_interval(tmp_path):
    r = evidence_result(e2e_flags=("unstable",), softmax_flags=("unstable",))
    # A flagged number cannot pass its item (checklist), and its card says why, greyed.
    one = page_one(html_of(r, tmp_path))
    assert "95% interval 1.06–1.12×" in one
    cards = dict((label, cls) for cls, label in
                 re.findall(r'<div class="card (card-\w+ card-dim)">\s*<div class="card-label">([^<]+)<', one))
    assert cards["End-to-end speed"] == cards["Slowest operator"] == "card-fail card-dim"
    assert one.count("unstable (spread too wide after re-measuring)") >= 2
    assert "card-pass card-dim" not in one  # never green and doubted at once


def test_wrong_kernels_make_every_speed_card_not_evidence(tmp_path):
    r = evaluate(sample_result(correct=False))
    one = page_one(html_of(r, tmp_path))
    assert one.count("not evidence: a kernel gives wrong results") == 3  # geomean, slowest op, e2e
    assert "card-pass card-dim" not in one


def test_what_would_change_the_verdict(tmp_path):
    nogo = page_one(html_of(evidence_result(softmax=0.3), tmp_path / "a"))  # one blocker: ops-no-cliff
    assert "What would change the verdict: this blocker must pass: Slowest op speedup ≥ 0.50× (now 0.30×)." in nogo
    cond = page_one(html_of(rich_result(), tmp_path / "b"))
    flip = re.search(r'<p class="flip">(.*?)</p>', cond).group(1)
    assert flip.startswith("What would make it GO: ") and "Regressions vs previous baseline ≤ 0 (now 1)" in flip
    go = sample_result(softmax_speedup=0.95)
    go = evaluate(dataclasses.replace(go, e2e=dataclasses.replace(
        go.e2e, calls=(CallCount("gemm", "256x128x128", 12, {}, 6.0), CallCount("softmax", "1024x128", 2, {}, 2.0)),
        tilelang_calls=14, fallback_calls=0)))
    assert go.verdict.decision == "GO", [(o.id, o.status) for o in go.verdict.outcomes if o.status != "pass"]
    line = page_one(html_of(go, tmp_path / "c"))
    # geomean 1.02x against 0.90x (14%) is closer than e2e 1.09x against 0.95x (15%) or the soak's 1% against 3%.
    assert "Closest to changing the verdict: Geomean speedup vs vendor ≥ 0.90× (now 1.02×), 14% from its threshold." \
        in line


def test_cpu_runs_say_their_speeds_are_not_gpu_evidence(tmp_path):
    caveat = "they are not evidence about speed on a GPU"
    assert caveat in page_one(html_of(evaluate(sample_result()), tmp_path / "cpu"))
    assert caveat not in page_one(html_of(rich_result(), tmp_path / "gpu"))
    assert "不能作为 GPU 上性能的依据" in page_one(html_of(evaluate(sample_result()), tmp_path / "zh", "zh"))


def test_every_failed_item_is_named_in_full(tmp_path):
    r = sample_result(correct=False, gemm_speedup=0.3, softmax_speedup=0.2)
    r = evaluate(dataclasses.replace(r, comparison=rich_result().comparison,
                                     upstream=dataclasses.replace(r.upstream, authors_90d=1, commits_90d=2)))
    failed = [o for o in r.verdict.outcomes if o.status == "fail"]
    assert len(failed) >= 5
    one = htmllib.unescape(page_one(html_of(r, tmp_path)))
    for o in failed:
        assert o.title in one, o.id
    assert "more; see the checklist" not in one and "…and" not in one
    # The regression itself, named: which measurement, how much slower, against what noise.
    assert "gemm 256x128x128 float32 now takes 1.14× the time (noise limit 5%)" in one


# ---------------------------------------------------------------- evidence sections


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


def test_per_op_table_shows_interval_verification_and_kernel_cross_check(tmp_path):
    ops = section(html_of(evidence_result(), tmp_path), "ops")
    assert "1.05–1.15×" in ops and "30 rounds" in ops
    assert "0.440 / 0.490" in ops  # CUPTI kernel time per call, TileLang / PyTorch
    assert "timers: graph replay and CUPTI agree within 3%" in ops
    flagged = re.search(r'<tbody class="keep flagged">(.*?)</tbody>', ops, re.S).group(1)
    assert "4096x4096x4096" in flagged and "faster than the roofline allows" in flagged and "not verified" in flagged
    assert ">no</td>" in flagged  # the Verified column


def test_soak_reports_timer_and_host_jitter_apart_from_drift(tmp_path):
    soak = section(html_of(evidence_result(), tmp_path), "soak")
    assert "CUDA graph replay (device time)" in soak
    assert "Host jitter (CV of per-iteration wall time)</th><td>4.2%" in soak
    assert "Drift (first to last window)</th><td>0.5%" in soak


def test_old_baselines_without_the_new_fields_still_render(tmp_path):
    """A results.json written before views, calls, ratios, flags and the soak timer existed."""
    data = to_dict(evidence_result())
    for key in ("views", "method", "ratio", "calls", "tilelang_calls", "fallback_calls", "rel_l2_err", "rel_max_err",
                "tolerance", "flags"):
        data["e2e"].pop(key)
    for b in data["op_bench"]:
        for key in ("verified", "ratio", "tilelang_kernel_ms", "torch_kernel_ms", "timer_note", "flags"):
            b.pop(key)
    for key in ("timer", "host_cv"):
        data["soak"].pop(key)
    old = from_dict(RunResult, data)
    for lang in report.LANGS:
        html = html_of(old, tmp_path / lang, lang)
        assert "None" not in re.sub(r"<[^>]+>", " ", html)
        assert "<table class=\"data views\">" not in html  # no empty views table


def test_roofline_numbers_every_point_and_names_them_in_a_table(tmp_path):
    roof = section(html_of(evidence_result(), tmp_path), "roofline")
    svg = roof[roof.index("<svg"):roof.index("</svg>")]
    labels = re.findall(r'id="roofline\d+-pt-(tilelang|vendor)-(\d+)"', svg)
    # Both sides labelled: ops 1-3 have a TileLang and a PyTorch point, op 4 (no TileLang time) one.
    assert sorted(labels) == sorted([("tilelang", "1"), ("vendor", "1"), ("tilelang", "2"), ("vendor", "2"),
                                     ("tilelang", "3"), ("vendor", "3"), ("vendor", "4")])
    table = roof[roof.index('<table class="data legend">'):]
    for n, op in ((1, "gemm 256x128x128"), (2, "softmax 1024x128"), (3, "gemm 4096x4096x4096 *")):
        assert re.search(rf"<strong>{n}</strong></td><td>{re.escape(op)}", table), n


# ---------------------------------------------------------------- numbers and words


def test_no_scientific_notation_for_days_times_or_counts(tmp_path):
    r = rich_result()
    r = dataclasses.replace(r, upstream=dataclasses.replace(r.upstream, days_since_last_commit=123.4,
                                                            days_since_release=1234.0),
                            overhead=(LaunchOverhead("gemm", (1, 8, 8), 7460.2, 12.5),))
    html = html_of(r, tmp_path)
    text = re.sub(r"<[^>]+>", " ", html)
    assert "Days since last commit </th><td>123" in re.sub(r"<[^>]+>", " ", section(html, "upstream")).replace(
        "  ", " ") or "Days since last commit</th><td>123<" in section(html, "upstream")
    assert "7,460 µs / 12.5 µs" in text and "1,234" in text
    assert not re.search(r"\d\.?\d*e[+-]\d", re.sub(r"\b\d\.\de-0\d\b", "", text)), \
        re.findall(r"\S*\de[+-]\d\S*", text)
    assert report._num(100.0) == "100" and report._num(7460.2) == "7,460" and report._num(0.5) == "0.5"
    assert report._num(12.34) == "12.3" and report._num(1.0e-6, 2) == "1.0e-06"


def test_plurals_and_zero_cases_read_as_prose(tmp_path):
    r = rich_result()
    r = dataclasses.replace(r, upstream=dataclasses.replace(r.upstream, authors_90d=0, commits_90d=0,
                                                            maintenance_score=0.0))
    r = evaluate(r)
    html = html_of(r, tmp_path / "en")
    assert "Only 0" not in html and "(s)" not in page_one(html)
    optional = page_one(html_of(evaluate(sample_result()), tmp_path / "opt"))
    assert "2 optional items did not apply" in optional and "item(s)" not in optional
    assert "Nobody has committed to upstream TileLang in the last 90 days" in html
    assert "Nobody committed to upstream TileLang in the last 90 days" in html
    assert re.search(r"\d checks failed", html)
    one = evaluate(sample_result(softmax_speedup=0.2))  # exactly one blocker
    assert "1 blocker failed:" in page_one(html_of(one, tmp_path / "one"))
    zh = html_of(r, tmp_path / "zh", "zh")
    assert "每周只有 每周" not in zh and not re.search(r"(每周)\s*\S{0,4}\s*\1", zh)
    assert "上游 TileLang 近 90 天没有任何提交" in zh


def test_cached_kernels_say_cached_instead_of_an_empty_table(tmp_path):
    appendix = section(html_of(evidence_result(), tmp_path), "appendix")
    assert "Reused from the tuning cache: tuned in an earlier run" in appendix
    assert "(showing 0 of" not in appendix


def test_every_stage_finished_only_when_nothing_failed(tmp_path):
    clean = dataclasses.replace(sample_result(), op_bench=sample_result().op_bench)
    assert "Every stage that ran finished" in section(html_of(clean, tmp_path / "a"), "environment")
    broken = dataclasses.replace(clean, e2e=dataclasses.replace(clean.e2e, swapped=None,
                                                                error="RuntimeError: CUDA graph capture failed"))
    env = section(html_of(broken, tmp_path / "b"), "environment")
    assert "Every stage that ran finished" not in env and "CUDA graph capture failed" in env
    failed_op = section(html_of(rich_result(), tmp_path / "c"), "environment")  # softmax 8192x8192 did not compile
    assert "Every stage that ran finished" not in failed_op and "shared memory exceeds 228 KB" in failed_op


def test_regression_causes_name_only_changes_that_matter(tmp_path):
    r = rich_result()
    noise = (("settings.upstream", "/src/tilelang", "https://github.com/tile-ai/tilelang"),
             ("settings.checklist", "default.yaml", "production.yaml"), ("settings.regression_threshold", "0.05", "0.1"))
    note = ("1 regression, 1 improvement, 1 unchanged; a change counts beyond max(5%, 3 x combined spread); "
            "likely causes: settings.upstream /src/tilelang -> https://github.com/tile-ai/tilelang")
    only_noise = dataclasses.replace(r.comparison, environment_changes=noise, note=note)
    cmp = section(html_of(dataclasses.replace(r, comparison=only_noise), tmp_path / "a"), "comparison")
    assert "Unexplained: nothing that affects speed" in cmp
    assert "likely causes" not in cmp
    real = dataclasses.replace(only_noise, environment_changes=noise + (("torch", "2.12.0", "2.13.0"),))
    cmp = section(html_of(dataclasses.replace(r, comparison=real), tmp_path / "b"), "comparison")
    causes = re.search(r'<p class="causes">(.*?)</p>', cmp).group(1)
    assert "torch 2.12.0 → 2.13.0" in causes and "upstream" not in causes and "checklist" not in causes
    assert report.plausible_cause("settings.dtype") and not report.plausible_cause("settings.upstream")


def test_zh_evidence_notes_and_comparison_are_chinese(tmp_path):
    r = evidence_result()
    r = dataclasses.replace(
        r, soak=dataclasses.replace(r.soak, notes=("latency drifted +6.2% from the first to the last window",
                                                  "memory grew by 80 MB")),
        upstream=dataclasses.replace(r.upstream, note="shallow clone: history before 2026-01-01 is missing, limited "
                                     "metrics are listed in details.limited (run `git fetch --unshallow` for full "
                                     "history)"),
        comparison=dataclasses.replace(r.comparison, note="1 regression, 1 improvement, 1 unchanged; a change "
                                       "counts beyond max(5%, 3 x combined spread)"))
    html = html_of(evaluate(r), tmp_path, "zh")
    evidence = " ".join(re.findall(r'<td class="evidence">(.*?)</td>', section(html, "checklist"), re.S))
    for english in ("kernels correct", "ops on", "iterations", "windows", "as of", "against", "measurements",
                    "regressed", "stage not run", "commits behind", "calls in TileLang"):
        assert english not in evidence, english
    assert "个内核中" in evidence and "次迭代" in evidence
    assert "faster than" not in section(html, "ops") and "快于 Roofline 上限" in section(html, "ops")
    soak = section(html, "soak")
    assert "延迟从第一个窗口到最后一个窗口漂移了 +6.2%" in soak and "内存增长了 80 MB" in soak
    assert "latency drifted" not in soak
    assert "浅克隆：history before 2026-01-01 is missing" in section(html, "upstream")
    cmp = section(html, "comparison")
    assert "1 项退化、1 项改进、1 项无变化" in cmp and "只有超过 5% 与两次运行合并波动的 3 倍" in cmp
    assert "a change counts" not in cmp and "regression," not in cmp


def test_note_patterns_match_their_own_english_strings():
    """The English note strings reproduce the stages' notes, so each pattern matches the
    note it translates (a stage that rewords its note breaks this test, not the report)."""
    t = report.Strings("en")
    sample = {"pct": "+6.2", "mb": "80", "reasons": "HW slowdown", "a": "1980", "b": "1500", "cut": "x", "branch": "main",
              "n": "3", "days": "40", "fetched": "12", "url": "https://x/y.git", "why": "timeout", "date": "2026-01-02",
              "cand": "h200", "cand_name": "NVIDIA H200", "ref": "cpu-x86_64", "ref_name": "Test CPU",
              "floor": "5%", "k": "3", "side": "TileLang", "roof": "compute", "est": "0.81", "lo": "2.55",
              "hi": "2.71", "ms": "0.12"}
    for kind, rx in report._NOTE_PATTERNS:
        text = t(f"notes.{kind}", **sample)
        if kind in ("up_fork_not", "up_fork_reason"):
            text = text.replace("timeout", "upstream is a shallow clone")
        if kind == "rule":
            text = "a change counts beyond max(5%, 3 x combined spread)"
        assert rx.fullmatch(text), kind
    port = {"kb": "208 KB", "req": "210 KB", "target": "MI300X", "what": "LDS", "unit": "workgroup", "n": "1024",
            "cores": "2nd-gen tensor cores (fp16, int8, int4)", "dtype": "bfloat16", "arch": "sm_80", "kind": "MACA",
            "version": "0.1.15", "target_kind": "maca", "got": "mma.sync", "want": "tcgen05"}
    for kind, rx in report._PORT_PATTERNS:
        assert rx.fullmatch(t(f"notes.{kind}", **port)), kind


def headings_left_at_page_bottoms(html: str) -> list[tuple[int, str]]:
    """Pages whose last heading has nothing after it on that page, from WeasyPrint's own
    layout (its page boxes), so what is checked is where the PDF breaks."""
    weasyprint = report._import_weasyprint()
    found = []
    for n, page in enumerate(weasyprint.HTML(string=html).render().pages, start=1):
        tags = [b.element_tag for b in page._page_box.descendants()
                if getattr(b, "element_tag", None) and not type(b).__name__.endswith(("MarginBox", "PageBox"))]
        last = max((i for i, tag in enumerate(tags) if tag in ("h2", "h3")), default=None)
        if last is not None and not [tag for tag in tags[last + 1:] if tag not in ("h2", "h3", "span", "br")]:
            found.append((n, tags[last]))
    return found


@needs_weasyprint()  # layout only: no font subsetting or CJK font needed
def test_no_page_ends_with_a_heading():
    # The check itself: a heading before an unbreakable block is left behind without the
    # report's break rules, and moves on with them.
    block = "<div style='height:220mm'></div><h2>T</h2><figure style='break-inside:avoid;height:60mm'>x</figure>"
    assert headings_left_at_page_bottoms(f"<style>h2 {{ break-after: auto }}</style>{block}") == [(1, "h2")]
    css = (report.TEMPLATES / "report.css").read_text(encoding="utf-8")
    assert headings_left_at_page_bottoms(f"<style>{css}</style>{block}") == []
    for lang in report.LANGS:
        for r in (rich_result(), evidence_result(softmax=0.3, e2e_speedup=2.6, amdahl=0.8)):
            assert headings_left_at_page_bottoms(report.render_html(r, lang)) == [], (lang, r.verdict.decision)


def test_zh_charts_draw_without_matplotlib_warnings(tmp_path, caplog):
    import warnings
    with warnings.catch_warnings(record=True) as caught, caplog.at_level("WARNING", logger="matplotlib"):
        warnings.simplefilter("always")
        html_of(evidence_result(), tmp_path, "zh")
    mpl = [w for w in caught if "matplotlib" in str(w.filename) or "Glyph" in str(w.message)]
    assert not mpl, [str(w.message) for w in mpl]
    assert not [r for r in caplog.records if r.name.startswith("matplotlib")], caplog.text


def test_flags_the_bench_writes_read_in_chinese(tmp_path):
    r = evidence_result(e2e_flags=("contradicts the Amdahl estimate (0.81x from the op speedups, measured 2.55-2.71x)",
                                   "graph capture failed (RuntimeError: capture); the device number includes launch gaps"),
                        softmax_flags=("TileLang faster than the memory roof allows",))
    html = html_of(r, tmp_path, "zh")
    assert "与阿姆达尔估计矛盾（按算子加速比估计为 0.81x，实测 2.55-2.71x）" in page_one(html)
    assert "CUDA Graph 捕获失败（RuntimeError: capture）；设备时间包含启动间隙" in section(html, "e2e")
    assert "TileLang 快于带宽上限所允许的速度" in section(html, "ops")
    assert "contradicts" not in html and "roof allows" not in html


# ---------------------------------------------------------------- portability (lowered, not run)


def words(html: str) -> str:
    """The text a reader sees: tags dropped, entities decoded, whitespace collapsed."""
    return " ".join(htmllib.unescape(re.sub(r"<[^>]+>", " ", html)).split())


def test_portability_matrix_notes_summary_and_sources(en):
    from evaluator import targets
    import port_samples as S

    sec = section(en.html.read_text(encoding="utf-8"), "portability")
    text = words(sec)
    assert "6. Portability (lowered, not run)" in text
    assert re.findall(r"<th>([^<]+)</th>", sec)[:5] == ["Kernel (config)", "A100", "H100", "MI300X", "C500"]
    # 2 kernels x (tuned, default) x 4 targets: one needs re-tuning, C500 fails all four, A100 one codegen gap
    assert sec.count('class="port-retune"') == 1 and sec.count('class="port-fails"') == 5
    assert sec.count('class="port-lowers"') == 10 and "wgmma" in text and "mfma" in text
    assert "gemm 4096x4096x4096 float16 tuned config: block_M=128, block_N=256, block_K=64" in text
    # each reason once, numbered, with the config that fits where there is one
    assert ("uses 208 KB of shared memory; MI300X allows 64 KB of LDS per workgroup (the lowered kernel itself "
            "requests 208 KB) → fits and lowers: block_M=128, block_N=128, block_K=32, num_stages=2, threads=256") in text
    assert ("fails to lower (code-generation gap: TypeError: Downcast from tirx.Sub to ir.IntImm failed.) → fits and "
            "lowers: block_M=128, block_N=64, num_stages=1, threads=128") in text
    assert text.count(S.NO_MACA) == 1  # four cells, one note
    assert "2 of 2 rewritten kernels build for AMD Instinct MI300X; 1 needs re-tuning there: gemm 4096x4096x4096 " \
           "float16, tuned config: note 1." in text
    assert "0 of 2 rewritten kernels build for MetaX C500; all of them fail (missing feature, dtype or backend: " \
           "note 2)." in text
    assert "2 of 2 rewritten kernels build for NVIDIA H100." in text
    for key in ("a100", "h100", "mi300x", "c500"):  # a footnote per target: its limits and their public source
        spec = targets.TARGETS[key]
        assert f"{key} — {spec.describe()}" in text and f"Source: {spec.source}" in text
    assert "Checked at float16, the dtype the model runs at on a GPU (this run measured float32" in text


def test_page_one_names_where_the_kernels_build(en):
    one = words(page_one(en.html.read_text(encoding="utf-8")))
    assert ("Portability (lowered, not run) All 2 rewritten kernels build unchanged for H100; 2 of 2 build for "
            "A100 (1 only after re-tuning: attention 1x32x512x512x128x1 float16); 2 of 2 build for MI300X (1 only "
            "after re-tuning: gemm 4096x4096x4096 float16); 0 of 2 build for C500 (missing feature, dtype or "
            "backend).") in one


@pytest.mark.parametrize("change, says", [
    ({}, "Not checked: this run did not lower its kernels for other targets"),
    ({"settings": {"targets": []}}, "Not checked: this run was given --targets none."),
    ({"stage_errors": {"portability": "KernelError: TileLang exploded"}},
     "Not checked: the portability stage failed: KernelError: TileLang exploded"),
    ({"tuned": (), "verify": (), "op_bench": ()}, "Not checked: no kernel was rewritten in this run."),
])
def test_portability_not_checked_says_why(tmp_path, change, says):
    html = html_of(evaluate(dataclasses.replace(sample_result(), portability=None, **change)), tmp_path)
    assert says in words(section(html, "portability"))
    assert "port-line" not in page_one(html)  # page one says nothing when nothing was checked


def test_portability_in_chinese(zh):
    html = zh.html.read_text(encoding="utf-8")
    text = words(section(html, "portability"))
    assert "6. 可移植性（仅编译，未运行）" in text
    assert "使用 208 KB 共享内存；MI300X 每个工作组最多 64 KB LDS（编译出的内核本身申请 208 KB）" in text
    assert "未安装 MACA 的 TileLang 后端" in text and "需重新调优" in text
    assert "2 个重写内核中有 2 个能为 AMD Instinct MI300X 编译；其中 1 个需要在该目标上重新调优" in text
    assert "每个工作组最多 64 KB LDS，每个 CU 64 KB，每个线程块最多 1024 个线程，wavefront 宽度 64，304 个 CU" in text
    assert "来源：" in text
    # (the sources stay as published: document titles are not translated)
    for english in ("uses 208 KB", "allows", "rewritten kernels", "needs re-tuning", "fails to lower",
                    "threads per block", "no TileLang backend", "Source:"):
        assert english not in text, english
    assert "可移植性（仅编译，未运行） 全部 2 个重写内核无需改动即可为 H100 编译；" in words(page_one(html))


def test_production_item_evidence_in_both_languages(tmp_path):
    r = dataclasses.replace(rich_result(), verdict=None)
    r = dataclasses.replace(r, verdict=cl.evaluate(cl.load(cl.DEFAULT_CHECKLIST.parent / "production.yaml"), r,
                                                   today=TODAY))
    [item] = [o for o in r.verdict.outcomes if o.metric == "portability.h100.kernels_ok"]
    assert item.status == "pass"
    en_row = words(section(html_of(r, tmp_path / "en"), "checklist"))
    assert "kernels-build-h100 · portability.h100.kernels_ok" in en_row
    assert "2 of 2 rewritten kernels build for NVIDIA H100." in en_row
    zh_row = words(section(html_of(r, tmp_path / "zh", "zh"), "checklist"))
    assert "能为 NVIDIA H100 编译的内核占比 ≥ 100%" in zh_row and "2 个重写内核中有 2 个能为 NVIDIA H100 编译。" in zh_row


def test_a_count_that_picks_the_plural_is_also_quoted():
    t = report.Strings("en")
    assert t("flip.nogo", count=3, items="x") == "What would change the verdict: all 3 blockers must pass: x."


@needs_pdf("en")
def test_pdf_has_the_portability_matrix(en):
    page = next(p for p in pdf_pages(en.pdf) if "Portability (lowered, not run)" in p and "Kernel (config)" in p)
    assert "needs re-tuning" in page and "MI300X" in page


@needs_pdf("en")
def test_the_portability_line_never_pushes_the_failed_items_off_page_one(tmp_path):
    # A page one filled to the brim: a CPU run (caveat), a two-line title, cards with
    # intervals, failed and unmeasured items; the "Generated" footnote goes to page two.
    # The line sits in the shorter column and must not tie the columns to that footnote
    # (as a <p> after a heading it did: h2 + p is break-after: avoid, and the whole
    # "What failed" block moved to page two).
    r = sample_result(gemm_speedup=0.2, softmax_speedup=0.17, upstream=False)
    e2e = dataclasses.replace(r.e2e, speedup=0.24, swapped=timing(50.0), ratio=Ratio(0.24, 0.239, 0.245, 20))
    ops = tuple(dataclasses.replace(b, ratio=Ratio(b.speedup, b.speedup * 0.96, b.speedup * 1.03, 20))
                for b in r.op_bench)
    r = dataclasses.replace(r, soak=None, e2e=e2e, op_bench=ops, portability=sample_portability(),
                            model=dataclasses.replace(r.model, name="bert-tiny-finetuned-on-the-long-corpus"))
    first = " ".join(pdf_pages(report.render(evaluate(r), tmp_path).pdf)[0].lower().split())
    assert "what failed" in first and "no operator is more than" in first
    assert "portability (lowered, not run)" in first and "rewritten kernels build unchanged for h100" in first
