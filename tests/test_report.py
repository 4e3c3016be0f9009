"""The report, rendered for real (HTML, and PDF where the machine can write a correct one).

In: synthetic RunResults (tests/report_samples.py): every section filled, a run that
measured nothing, a partial run, a verdict from another version, an old baseline without
the newer fields. Out: assertions on the files render() writes (report/render.py,
report/pdf.py): every section present, outside text escaped, the HTML self-contained, the
PDF's header, page numbers and text, the fetcher that refuses the network, the note when
the PDF cannot be written, the Chinese report, and PDF pages without orphaned headings.
PDF tests skip, naming the package, where the machine lacks it (see
test_pdf_env.needs_pdf). The sections have their own files: test_report_page_one.py,
test_report_sections.py, test_report_portability.py; strings and notes
test_report_strings.py.
"""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys

import pytest

from evaluator import checklist as cl
from evaluator import report
from evaluator.errors import ReportError
from evaluator.results import Ratio, RunResult, UpstreamHealth, from_dict, to_dict
from port_samples import sample_portability
from report_samples import SCRIPT, TODAY, bare_result, evaluate, evidence_result, html_of, pdf_pages, rich_result
from samples import sample_result, timing
from test_pdf_env import needs_pdf, needs_weasyprint


@pytest.fixture(scope="module")
def en(tmp_path_factory):
    """One English HTML+PDF render shared by the tests that read it (PDFs take seconds)."""
    return report.render(rich_result(), tmp_path_factory.mktemp("en"))


@pytest.fixture(scope="module")
def zh(tmp_path_factory):
    return report.render(rich_result(), tmp_path_factory.mktemp("zh"), lang="zh")


# ---------------------------------------------------------------- HTML


@pytest.mark.slow
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
    for anchor in (
        "checklist",
        "hot-ops",
        "correctness",
        "ops",
        "roofline",
        "portability",
        "e2e",
        "soak",
        "upstream",
        "comparison",
        "trend",
        "environment",
        "method",
        "appendix",
    ):
        assert f'<section id="{anchor}"' in html, anchor
    assert html.count("<svg ") == 7  # hot ops, speedup, roofline, soak, weekly, releases, trend
    assert "compile error: shared memory exceeds 228 KB" in html
    assert "0.1.14" in html and "regression" in html and "perf_counter" in html
    assert "vendor/tilelang-maca" in html and "2026-10-20" in html and "Bus factor" in html


@pytest.mark.slow
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


@pytest.mark.slow
@needs_pdf("en")
def every_page_copies(files) -> None:
    """Skip where the PDF was written but a later page's text does not copy (a machine
    without libharfbuzz-subset0: page one reads back, the run says so beside the PDF)."""
    if files.pdf is not None and files.pdf_note == report.PARTLY_COPYABLE:
        pytest.skip("needs libharfbuzz-subset0 (apt-get install it) for every page's text to copy")


def test_pdf_pages_header_and_numbers(en):
    every_page_copies(en)
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
    for url in (
        "http://example.com/a.png",
        "https://example.com/a.css",
        "ftp://example.com/x",
        "file:///etc/passwd",
        (tmp_path.parent / "x.png").as_uri(),
    ):
        with pytest.raises(ReportError):
            fetch(url)
    fetch(inside.as_uri()).close()
    fetch("data:text/plain,hi").close()


@pytest.mark.slow
def test_without_weasyprint_html_is_written_and_note_says_how(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "weasyprint", None)  # import now raises ImportError
    files = report.render(rich_result(), tmp_path)
    assert files.html.exists() and files.pdf is None
    assert "evaluate report --baseline bert-tiny/h200/v3" in files.pdf_note and "\n" not in files.pdf_note
    assert report.render(bare_result(), tmp_path, pdf=False).pdf is None


# ---------------------------------------------------------------- Chinese


@pytest.mark.slow
def test_zh_report_is_chinese(zh):
    assert zh.html.name == "report.zh.html" and (zh.pdf is None or zh.pdf.name == "report.zh.pdf")
    html = zh.html.read_text(encoding="utf-8")
    assert '<html lang="zh-CN">' in html
    assert "有条件通过" in html and "建议的下一步" in html and "关键指标" in html
    assert len(re.findall(r"[\u4e00-\u9fff]", html)) > 500


@pytest.mark.slow
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
        f"no CJK font in the PDF ({sorted(fonts)}): install one, e.g. `apt-get install fonts-noto-cjk`"
    )


# ---------------------------------------------------------------- partial runs


@pytest.mark.slow
@pytest.mark.parametrize("lang,words", [("en", "channels_last on every path"), ("zh", "channels_last 内存布局")])
def test_a_channels_last_run_says_so_beside_the_model(tmp_path, lang, words):
    r = bare_result()
    assert words not in html_of(r, tmp_path / "given", lang)
    r = dataclasses.replace(r, model=dataclasses.replace(r.model, layout="channels-last"))
    html = html_of(r, tmp_path / "cl", lang)
    assert words in html.split("</dl>")[0]  # the header's model line, not only the environment table


def test_a_run_that_measured_nothing_still_renders(tmp_path):
    files = report.render(bare_result(), tmp_path, pdf=False)
    html = files.html.read_text(encoding="utf-8")
    assert "banner-none" in html and "NO VERDICT" in html
    assert html.count("not measured") >= 10
    assert "<svg" not in html


def test_partial_run_with_verdict_lists_unmeasured_items(tmp_path):
    r = bare_result()
    r = dataclasses.replace(
        r,
        hot_ops=sample_result().hot_ops,
        stage_errors={"tune": "tilelang not importable"},
        upstream=UpstreamHealth(measured=False, note="no --upstream given"),
    )
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
    subprocess.run(["pdftoppm", "-r", "30", "-png", "-f", "1", "-l", "1", str(en.pdf), str(tmp_path / "p")], check=True)
    assert list(tmp_path.glob("p-*.png"))


@pytest.mark.slow
def test_old_baselines_without_the_new_fields_still_render(tmp_path):
    """A results.json written before views, calls, ratios, flags and the soak timer existed."""
    data = to_dict(evidence_result())
    for key in (
        "views",
        "method",
        "ratio",
        "calls",
        "tilelang_calls",
        "fallback_calls",
        "rel_l2_err",
        "rel_max_err",
        "tolerance",
        "flags",
    ):
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
        assert '<table class="data views' not in html  # no empty views table


def headings_left_at_page_bottoms(html: str) -> list[tuple[int, str]]:
    """Pages whose last heading has nothing after it on that page, from WeasyPrint's own
    layout (its page boxes), so what is checked is where the PDF breaks."""
    weasyprint = report.import_weasyprint()
    found = []
    for n, page in enumerate(weasyprint.HTML(string=html).render().pages, start=1):
        tags = [
            b.element_tag
            for b in page._page_box.descendants()
            if getattr(b, "element_tag", None) and not type(b).__name__.endswith(("MarginBox", "PageBox"))
        ]
        last = max((i for i, tag in enumerate(tags) if tag in ("h2", "h3")), default=None)
        if last is not None and not [tag for tag in tags[last + 1 :] if tag not in ("h2", "h3", "span", "br")]:
            found.append((n, tags[last]))
    return found


@pytest.mark.slow
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


@pytest.mark.slow
def test_zh_charts_draw_without_matplotlib_warnings(tmp_path, caplog):
    import warnings

    with warnings.catch_warnings(record=True) as caught, caplog.at_level("WARNING", logger="matplotlib"):
        warnings.simplefilter("always")
        html_of(evidence_result(), tmp_path, "zh")
    mpl = [w for w in caught if "matplotlib" in str(w.filename) or "Glyph" in str(w.message)]
    assert not mpl, [str(w.message) for w in mpl]
    assert not [r for r in caplog.records if r.name.startswith("matplotlib")], caplog.text


def test_the_package_keeps_the_names_callers_and_tests_use():
    # What other modules and tests reach through `evaluator.report` is the object the
    # owning module defines.
    from evaluator.baseline import plausible_cause
    from evaluator.report import contents, html, notes, pdf, sections, strings

    owners = {
        html: ("render", "render_html", "ReportFiles", "HTML_NAME", "file_names"),
        contents: ("context",),
        pdf: (
            "pdf_missing",
            "missing_note",
            "has_cjk_font",
            "import_weasyprint",
            "local_only_fetcher",
            "Requirement",
            "PDF_NAME",
        ),
        strings: ("Strings", "Fmt", "LANGS", "TEMPLATES", "metric_strings_key", "num", "is_plural"),
        notes: ("NOTE_PATTERNS", "PORT_PATTERNS"),
        sections.comparison: ("MAX_ROWS",),
    }
    for module, names in owners.items():
        for name in names:
            assert getattr(report, name) is getattr(module, name), name
    assert report.plausible_cause is plausible_cause


@pytest.mark.slow
@needs_pdf("en")
def test_pdf_has_the_portability_matrix(en):
    every_page_copies(en)
    page = next(p for p in pdf_pages(en.pdf) if "Portability (lowered, not run)" in p and "Kernel (config)" in p)
    assert "needs re-tuning" in page and "MI300X" in page


@pytest.mark.slow
@needs_pdf("en")
def test_the_portability_line_never_pushes_the_failed_items_off_page_one(tmp_path):
    # A page one filled to the brim: a CPU run (caveat), a two-line title, cards with
    # intervals, failed and unmeasured items; the "Generated" footnote goes to page two.
    # The line sits in the shorter column and must not tie the columns to that footnote
    # (as a <p> after a heading it did: h2 + p is break-after: avoid, and the whole
    # "What failed" block moved to page two).
    r = sample_result(gemm_speedup=0.2, softmax_speedup=0.17, upstream=False)
    e2e = dataclasses.replace(r.e2e, speedup=0.24, swapped=timing(50.0), ratio=Ratio(0.24, 0.239, 0.245, 20))
    ops = tuple(
        dataclasses.replace(b, ratio=Ratio(b.speedup, b.speedup * 0.96, b.speedup * 1.03, 20)) for b in r.op_bench
    )
    r = dataclasses.replace(
        r,
        soak=None,
        e2e=e2e,
        op_bench=ops,
        portability=sample_portability(),
        model=dataclasses.replace(r.model, name="bert-tiny-finetuned-on-the-long-corpus"),
    )
    first = " ".join(pdf_pages(report.render(evaluate(r), tmp_path).pdf)[0].lower().split())
    assert "what failed" in first and "no operator is more than" in first
    assert "portability (lowered, not run)" in first and "rewritten kernels build unchanged for h100" in first


# ---------------------------------------------------------------- the trend, on both paths


@pytest.mark.slow
def test_no_trend_table_with_fewer_than_two_baselines(tmp_path):
    r = rich_result()
    only = tuple(dataclasses.replace(p, version="2026Q4-1") for p in r.trend)  # a first run: itself only
    for trend in (only, ()):
        html = html_of(dataclasses.replace(r, trend=trend), tmp_path / str(len(trend)))
        trend_html = html[html.index('<section id="trend"') : html.index('<section id="environment"')]
        assert "Fewer than two baselines: no trend yet." in trend_html and "<table" not in trend_html
    assert "<table" in html_of(r, tmp_path / "three").split('<section id="trend"')[1].split("</section>")[0]


@pytest.mark.slow
def test_a_rerendered_baseline_shows_the_trend_its_run_showed(tmp_path):
    from evaluator import baseline
    from evaluator.cli.baselines import report_command

    store = tmp_path / "store"
    first = baseline.record(store, sample_result(created="2026-10-02T10:00:00+00:00", run_id="a"))
    second = baseline.record(store, sample_result(created="2026-10-09T10:00:00+00:00", run_id="b", scale=1.3))
    baseline.record(store, sample_result(created="2026-10-16T10:00:00+00:00", run_id="c", scale=1.1))

    def trend_of(ref) -> str:
        out = tmp_path / ref.version
        report_command(baseline_id=ref.tag, store=str(store), out=out, lang="en")
        html = (out / "report.html").read_text(encoding="utf-8")
        return html[html.index('<section id="trend"') : html.index('<section id="environment"')]

    assert "Fewer than two baselines" in trend_of(first) and "<table" not in trend_of(first)
    later = trend_of(second)  # two baselines up to it; the third came after and is not its trend
    assert "<table" in later and f"({first.version})" in later and f"({second.version})" in later
    assert "2026Q4-3" not in later


@pytest.mark.slow
def test_both_languages_fit_in_one_folder(tmp_path):
    en = report.render(rich_result(), tmp_path)
    zh = report.render(rich_result(), tmp_path, lang="zh")
    assert (en.html.name, zh.html.name) == ("report.html", "report.zh.html")
    assert "CONDITIONAL GO" in en.html.read_text(encoding="utf-8") and "有条件通过" in zh.html.read_text(
        encoding="utf-8"
    )
    if en.pdf is not None and zh.pdf is not None:  # where this machine writes both PDFs
        assert (en.pdf.name, zh.pdf.name) == ("report.pdf", "report.zh.pdf")
        assert "CONDITIONAL GO" in pdf_pages(en.pdf)[0] and "有条件通过" in pdf_pages(zh.pdf)[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        p.name for p in (en.html, zh.html, en.pdf, zh.pdf) if p is not None
    )  # nothing left behind
