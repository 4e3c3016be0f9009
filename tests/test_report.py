"""The report: page one, every section, escaping, no network, the PDF's pages, the
Chinese report, the fallback without WeasyPrint, and a run that measured nothing."""

from __future__ import annotations

import dataclasses
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
    BaselineRef, Change, Comparison, OpBench, RunResult, TrendPoint, UpstreamHealth,
)
from samples import sample_result, timing

SCRIPT = "<script>alert('x')</script>"
TODAY = date(2026, 11, 29)


def rich_result(model_name: str = "bert-tiny") -> RunResult:
    """The sample with every section filled: peaks, standard shapes, a failed kernel
    build, a previous baseline, a trend, upstream details with a hostile commit subject."""
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
        upstream=upstream, comparison=comparison, trend=trend,
        baseline=BaselineRef("reports/baselines", "bert-tiny", "h200", "v3", "bert-tiny/h200/v3", "abcdef123456", "t"))
    return dataclasses.replace(r, verdict=cl.evaluate(cl.load(cl.DEFAULT_CHECKLIST), r, today=TODAY))


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
    assert en.html == en.html.parent / "report.html" and en.pdf == en.html.parent / "report.pdf"
    html = en.html.read_text(encoding="utf-8")
    # softmax on model shapes 0.9x and gemm 1.1x pass; upstream and fork fine: one major regression.
    assert 'class="banner banner-conditional"' in html and "CONDITIONAL GO" in html
    assert "NVIDIA H200" in html and "2026-11-29" in html and "bert-tiny/h200/v3" in html
    assert html.count('class="card ') == 5
    assert "Nothing got slower than the previous baseline beyond the noise" in html
    assert "Review the regressions" in html  # next step derived from the failed item


def test_every_section_present(en):
    html = en.html.read_text(encoding="utf-8")
    for anchor in ("checklist", "hot-ops", "correctness", "ops", "roofline", "e2e", "soak", "upstream",
                   "comparison", "trend", "environment", "method", "appendix"):
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


def test_pdf_pages_header_and_numbers(en):
    pages = pdf_pages(en.pdf)
    assert len(pages) >= 3
    assert "CONDITIONAL GO" in pages[0] and "key numbers" in pages[0].lower()
    assert "Checklist" not in pages[0]  # page one is the manager's page only
    for i, text in enumerate(pages[1:], start=2):
        assert "bert-tiny · NVIDIA H200 · 2026-11-29" in text, i
        assert f"{i} / {len(pages)}" in text, i


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
    assert "evaluate report --baseline bert-tiny/h200/v3" in files.pdf_note
    assert report.render(bare_result(), tmp_path, pdf=False).pdf is None


# ---------------------------------------------------------------- Chinese


def test_zh_report_is_chinese(zh):
    html = zh.html.read_text(encoding="utf-8")
    assert '<html lang="zh-CN">' in html
    assert "有条件通过" in html and "建议的下一步" in html and "关键指标" in html
    assert len(re.findall(r"[\u4e00-\u9fff]", html)) > 500
    pages = pdf_pages(zh.pdf)
    assert "有条件通过" in pages[0]


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
            if isinstance(v, dict):
                yield from keys(v, prefix + (k,))
            else:
                yield prefix + (k,)
    tables = {lang: yaml.safe_load((report.TEMPLATES / "i18n" / f"{lang}.yaml").read_text(encoding="utf-8"))
              for lang in report.LANGS}
    assert set(keys(tables["en"])) == set(keys(tables["zh"]))
    for lang, table in tables.items():
        for metric in cl.METRICS:
            assert set(table["metrics"][metric]) == {"label", "fail", "next", "missing"}, (lang, metric)


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
    assert "no --upstream given" in html


def test_outcomes_from_another_version_still_render(tmp_path):
    verdict = rich_result().verdict
    odd = dataclasses.replace(verdict.outcomes[0], metric="ops.retired_metric", severity="critical", status="fail")
    r = dataclasses.replace(bare_result(), verdict=dataclasses.replace(verdict, outcomes=(odd,)))
    html = report.render(r, tmp_path, pdf=False).html.read_text(encoding="utf-8")
    assert "ops.retired_metric" in html and "critical" in html


def test_unknown_language_is_refused(tmp_path):
    with pytest.raises(ReportError, match="use one of: en, zh"):
        report.render(rich_result(), tmp_path, lang="fr")


def test_pdftoppm_can_rasterise_the_pdf(en, tmp_path):
    """What a reviewer does by hand: turn page one into a PNG (skipped without poppler)."""
    if subprocess.run(["which", "pdftoppm"], capture_output=True).returncode != 0:
        pytest.skip("poppler-utils not installed")
    subprocess.run(["pdftoppm", "-r", "30", "-png", "-f", "1", "-l", "1", str(en.pdf), str(tmp_path / "p")],
                   check=True)
    assert list(tmp_path.glob("p-*.png"))
