"""The go/no-go report: one RunResult in, report.html (and report.pdf) out.

In: a `RunResult` (any field may be None or empty: a run that stopped early, a stage that
was not run, or a baseline written before a field existed), an output folder, and a
language ("en" or "zh"). Out: `ReportFiles` naming `report.html` (self-contained: inline
CSS, inline SVG charts, nothing fetched) and `report.pdf` (WeasyPrint, paged, with header
and page numbers), or no PDF and a one-line `pdf_note` saying what to install. A Chinese
report is `report.zh.html` and `report.zh.pdf`, so both languages fit in one folder.

Page one is for a manager: verdict, model, platform, date, five key numbers that cannot
contradict the verdict (numbers the run flagged as unstable or suspect are greyed, with
their intervals), every failed item in plain words, what would change the verdict, a
caveat when the numbers come from a CPU, one line on which accelerators the rewritten
kernels build for (the portability matrix: lowered, not run), and the next steps. The
rest is for engineers.

Every value that comes from outside (model names, commit subjects, paths, tags) reaches
the page through Jinja's autoescaping or matplotlib's XML escaping; only our own CSS and
the chart SVGs are marked safe. Words come from templates/i18n/<lang>.yaml, including
the evidence behind each checklist item and the notes other stages write in English
(matched by pattern, shown as written when no pattern knows them). A team's own
templates/ folder (or $EVALUATOR_TEMPLATES) overrides the template, adds CSS and
rewords strings (see evaluator/resources.py). The modules, in the order a render runs:

  html.py       `render` and `render_html`: Jinja with a team's templates first, the CSS,
                the SVG guard, report.html written; then pdf.py
  contents.py   `context`: everything the template shows, already formatted, from the sections
  sections/     one builder per section of the page (see sections/__init__.py)
  notes.py      the notes and flags other stages write in English, in the report's language
  strings.py    i18n strings (shipped, a team's merged on top, plurals) and number formats
  pdf.py        what a correct PDF needs from this machine, the note when it lacks it, the PDF
  ../charts.py  the charts, as SVG

This package re-exports the names its callers and tests used when it was one module
(`report.render`, `report.pdf_missing`, `report.Strings`, `report.plausible_cause`, ...);
new code imports from the module that owns a name. Names with a leading underscore are
private to the package; the few re-exported here are the ones tests check directly. No
module is named after a function it defines (html.py holds `render`, contents.py
`context`), so `report.render` and `report.context` are always the functions.
`has_cjk_font` and `import_weasyprint` may be replaced on this package (a test playing a
machine without a CJK font or pango): pdf.py looks them up here at call time.
"""

from __future__ import annotations

from ..baseline import plausible_cause
from .contents import context
from .html import HTML_NAME, ReportFiles, file_names, render, render_html
from .notes import NOTE_PATTERNS, PORT_PATTERNS
from .pdf import (
    PARTLY_COPYABLE,
    PDF_NAME,
    Requirement,
    import_weasyprint,
    has_cjk_font,
    local_only_fetcher,
    missing_note,
    pdf_missing,
    probe,
    reads_back,
    read_text,
)
from .sections.comparison import MAX_ROWS
from .strings import LANGS, TEMPLATES, Fmt, Strings, is_plural, num, metric_strings_key

__all__ = [
    "render",
    "render_html",
    "context",
    "ReportFiles",
    "HTML_NAME",
    "PDF_NAME",
    "file_names",
    "LANGS",
    "TEMPLATES",
    "MAX_ROWS",
    "Strings",
    "Fmt",
    "metric_strings_key",
    "Requirement",
    "pdf_missing",
    "has_cjk_font",
    "missing_note",
    "probe",
    "reads_back",
    "PARTLY_COPYABLE",
    "read_text",
    "local_only_fetcher",
    "plausible_cause",
    # private, re-exported for the tests that check them directly
    "NOTE_PATTERNS",
    "PORT_PATTERNS",
    "import_weasyprint",
    "is_plural",
    "num",
]
