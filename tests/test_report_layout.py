"""The PDF's layout: nothing runs off the page.

In: the committed example runs (reports/examples/: the CPU run and two H200 runs, one
with torch.compile as a third side, the widest tables the report has) and the synthetic
run with every section filled (tests/report_samples.py), each in English and Chinese.
Out: WeasyPrint lays each report out as it does for report.pdf, and every box on every
page (table rows and cells, text lines, charts) ends inside the page's content area. A
table wider than the page would be cut at the right edge in the PDF, with its last
columns and notes lost.

Skips, naming the package, where WeasyPrint cannot lay out text (no pango) or, for
Chinese, no CJK font is installed (the glyphs' widths would not be the real ones).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from evaluator import report
from report_samples import example_result, rich_result

EXAMPLES = Path(__file__).resolve().parents[1] / "reports" / "examples"
CASES = {
    "cpu-bert-tiny": EXAMPLES / "bert-tiny" / "cpu-x86_64" / "2026-12-01",
    "h200-llama-defaults": EXAMPLES / "llama" / "h200" / "2026-12-01" / "defaults",
    "h200-resnet50": EXAMPLES / "torchvision-resnet50" / "h200" / "2026-12-01",
    "rich": None,
}
SLOW = {"h200-resnet50"}  # 23 conv shapes: a 26-page report, half a minute a language
SLACK_PX = 0.5  # rounding in WeasyPrint's own arithmetic


def _layout_skip(lang: str) -> str:
    """Why this machine cannot lay the report out as the PDF would be, or ""."""
    try:
        report.import_weasyprint()
    except ImportError:
        return "needs the weasyprint Python package (pip install weasyprint) to lay out the PDF"
    except OSError as exc:
        return f"needs libpango-1.0-0 and libpangoft2-1.0-0 (apt-get install them) to lay out the PDF: {exc}"
    if lang == "zh" and not report.has_cjk_font():
        return "needs a CJK font (apt-get install fonts-noto-cjk) to lay out the Chinese PDF with real glyph widths"
    return ""


def _boxes(box):
    yield box
    for child in getattr(box, "children", None) or ():
        yield from _boxes(child)


def overflowing(html: str) -> list[str]:
    """Every box whose right margin edge passes the page's content area, as
    "page N: BoxType 'text' +X px"; [] when all fit."""
    import logging  # noqa: PLC0415

    import weasyprint  # noqa: PLC0415 - only where the skip above let it through
    from evaluator.report.pdf import _QuietSvgStyles  # noqa: PLC0415 - the filter report.pdf is written with

    quiet, logger = _QuietSvgStyles(), logging.getLogger("weasyprint")
    logger.addFilter(quiet)
    try:
        pages = weasyprint.HTML(string=html).render().pages
    finally:
        logger.removeFilter(quiet)
    out = []
    for number, page in enumerate(pages, 1):
        page_box = page._page_box
        right = page_box.content_box_x() + page_box.width
        for box in _boxes(page_box):
            if box is page_box or type(box).__name__.startswith("Margin") or getattr(box, "position_x", None) is None:
                continue
            end = box.position_x + box.margin_width()
            if end > right + SLACK_PX:
                text = (getattr(box, "text", "") or "")[:30]
                out.append(f"page {number}: {type(box).__name__} {text!r} +{end - right:.1f} px")
    return out


@pytest.mark.parametrize("lang", report.LANGS)
@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.slow) if c in SLOW else c for c in CASES])
def test_every_box_fits_the_page_width(case, lang):
    reason = _layout_skip(lang)
    if reason:
        pytest.skip(reason)
    result = rich_result() if CASES[case] is None else example_result(CASES[case])
    bad = overflowing(report.render_html(result, lang))
    pages = sorted({line.split(":")[0] for line in bad}, key=lambda p: int(p.split()[1]))
    cut = [line for line in bad if "TextBox" in line]  # the words a reader loses at the edge
    assert not bad, f"{len(bad)} boxes run past the right edge on {', '.join(pages)}: " + "; ".join((cut or bad)[:8])
