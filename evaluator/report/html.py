"""HTML: the context through Jinja into report.html, and the entry point `render`.

In: a RunResult, a language, an output folder. Out: `render_html`, the self-contained
page (inline CSS: the shipped report.css then each team's; inline SVG charts, checked by
`_safe_svg` to hold nothing that could run or fetch), and `render`, which writes
report.html and asks pdf.py for report.pdf, returning `ReportFiles`. `render_upgrade`
writes an upgrade rehearsal's page (upgrade.html, from an `UpgradeResult`) with the same
stylesheet and strings: a page of its own, since its verdict answers another question
than the go/no-go and spans two baselines (one per toolchain). A report in another
language has its own names (report.zh.html, report.zh.pdf), so rendering one run in two
languages into one folder keeps both. Templates come from
a team's folders first (resources.template_dirs()), then the shipped one, which a team's
template can still name as "shipped/report.html.j2" to extend it. Everything is
autoescaped: names, subjects and paths in a result are not ours.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import jinja2

from .. import resources
from ..errors import ReportError
from ..results import RunResult, UpgradeResult
from .contents import context
from .sections.upgrade import upgrade_section
from .pdf import PDF_NAME, write_pdf
from .strings import TEMPLATES, Fmt, Strings

HTML_NAME = "report.html"
UPGRADE_NAME = "upgrade.html"


def file_names(lang: str) -> tuple[str, str]:
    """(HTML name, PDF name) of a report in `lang`: report.html and report.pdf in English,
    report.<lang>.html and report.<lang>.pdf otherwise."""
    if lang == "en":
        return HTML_NAME, PDF_NAME
    return f"report.{lang}.html", f"report.{lang}.pdf"


@dataclass(frozen=True)
class ReportFiles:
    html: Path
    pdf: Path | None
    pdf_note: str = ""


def _loader() -> jinja2.BaseLoader:
    """A team's folders first, then the shipped one; "shipped/report.html.j2" always names
    the shipped template, so a team's template can extend or include it."""
    return jinja2.ChoiceLoader(
        [
            *(jinja2.FileSystemLoader(str(d)) for d in resources.template_dirs()),
            jinja2.PrefixLoader({"shipped": jinja2.FileSystemLoader(str(TEMPLATES))}),
        ]
    )


def _environment_jinja() -> jinja2.Environment:
    # Autoescape everything: names, subjects and paths in the result are not ours.
    return jinja2.Environment(
        loader=_loader(), autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True
    )


def _css() -> str:
    """The shipped stylesheet, then each team's report.css after it: later rules win, so a
    team restyles with a few rules instead of a copy of the whole file."""
    shipped = TEMPLATES / "report.css"
    parts = [shipped.read_text(encoding="utf-8")]
    for folder in reversed(resources.template_dirs()):
        path = folder / "report.css"
        if folder != TEMPLATES and path.is_file():
            parts.append(f"/* {path.name} from {folder} */\n" + path.read_text(encoding="utf-8"))
    return "\n".join(parts)


_SVG_OK = re.compile(r"^<svg\b")


def _safe_svg(svg: str | None) -> str | None:
    """Charts are our own matplotlib output; refuse anything that could run or fetch."""
    if svg is None:
        return None
    if not _SVG_OK.match(svg) or re.search(r"<script|<foreignObject|\bon\w+\s*=|href=\"(?!#)", svg, re.I):
        raise ReportError("a chart contained script or an external reference; this is a bug in evaluator/charts.py")
    return svg


def render_html(result: RunResult, lang: str = "en") -> str:
    ctx = context(result, lang)
    try:
        css = _css()
        template = _environment_jinja().get_template("report.html.j2")
    except (OSError, jinja2.TemplateNotFound) as exc:
        raise ReportError(f"report template missing ({exc}); reinstall the package or restore templates/") from exc
    return template.render(**ctx, css=css, svg=_safe_svg)


def render(result: RunResult, out_dir: Path, *, lang: str = "en", pdf: bool = True) -> ReportFiles:
    """Write report.html (always) and report.pdf (when asked and this machine can write
    one whose text is right; otherwise `pdf_note` says in one line what to install)."""
    out_dir = Path(out_dir)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ReportError(f"cannot create report folder {out_dir}: {exc}; pick a writable --out") from exc
    html = render_html(result, lang)
    html_name, pdf_name = file_names(lang)
    html_path = out_dir / html_name
    html_path.write_text(html, encoding="utf-8")
    if not pdf:
        return ReportFiles(html=html_path, pdf=None, pdf_note="PDF not requested")
    if pdf_name == PDF_NAME:
        pdf_path, note = write_pdf(html, out_dir, html_path, result, lang)
        return ReportFiles(html=html_path, pdf=pdf_path, pdf_note=note)
    # pdf.py writes report.pdf; in a private folder inside out_dir that name cannot
    # overwrite the English PDF beside it, and the rename gives the language's own name.
    staging = Path(tempfile.mkdtemp(prefix=".pdf-", dir=out_dir))
    try:
        written, note = write_pdf(html, staging, html_path, result, lang)
        pdf_path = None
        if written is not None:
            pdf_path = out_dir / pdf_name
            os.replace(written, pdf_path)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return ReportFiles(html=html_path, pdf=pdf_path, pdf_note=note)


def render_upgrade_html(result: UpgradeResult, lang: str = "en") -> str:
    t = Strings(lang)
    try:
        css = _css()
        template = _environment_jinja().get_template("upgrade.html.j2")
    except (OSError, jinja2.TemplateNotFound) as exc:
        raise ReportError(f"upgrade template missing ({exc}); reinstall the package or restore templates/") from exc
    return template.render(u=upgrade_section(result, t, Fmt(t)), t=t, lang=lang, html_lang=t("lang_tag"), css=css)


def render_upgrade(result: UpgradeResult, out_dir: Path, *, lang: str = "en") -> Path:
    """Write upgrade.html (upgrade.<lang>.html in another language) into `out_dir`."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / (UPGRADE_NAME if lang == "en" else f"upgrade.{lang}.html")
    path.write_text(render_upgrade_html(result, lang), encoding="utf-8")
    return path
