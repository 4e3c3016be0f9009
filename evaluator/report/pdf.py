"""PDF: what this machine needs for one whose text is right, and the PDF itself.

In: the report's HTML, its folder, the RunResult (for the command that re-renders it
elsewhere) and the language. Out: `write_pdf` gives report.pdf (WeasyPrint: paged, with
header and page numbers; only data: URLs and files inside the report's folder may be
read, never the network), or no PDF and a one-line note saying what to install.

A PDF is written only where its text will be right, decided by behaviour: WeasyPrint
must import (pango and its companions), a small probe PDF written on this machine must
give its text back when read (`probe`: without HarfBuzz's subsetting library the embedded
fonts can lose their text mapping and copied text comes out as "A\\x00 \\x00H..."; where
only fonts embedded whole keep it, the report is written that way), and for Chinese a CJK
font must be installed (without one every character is a box, which text read back does
not show). `pdf_missing` says what is lacking. WeasyPrint is imported lazily because
locked-down GPU machines often lack pango.
"""

from __future__ import annotations

import ctypes.util
import glob
import logging
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable
from urllib.parse import unquote, urlsplit

from ..errors import ReportError
from ..results import RunResult

PDF_NAME = "report.pdf"


def local_only_fetcher(root: Path) -> Callable[..., Any]:
    """A WeasyPrint URL fetcher that serves data: URLs and files inside `root`, and
    refuses everything else (network, and files elsewhere on the machine)."""
    import weasyprint.urls as wu

    root = Path(root).resolve()

    def check(url: str) -> None:
        scheme = urlsplit(url).scheme.lower()
        if scheme == "data":
            return
        if scheme == "file":
            path = Path(unquote(urlsplit(url).path)).resolve()
            if path == root or root in path.parents:
                return
            raise ReportError(f"refused to read {path}: the report may only use files inside {root}")
        raise ReportError(f"refused to fetch {url}: the report must not use the network")

    if hasattr(wu, "URLFetcher"):  # WeasyPrint >= 66: fetchers are URLFetcher subclasses

        class LocalFetcher(wu.URLFetcher):
            def fetch(self, url, headers=None):  # noqa: D401
                check(url)
                return super().fetch(url, headers)

        return LocalFetcher(allowed_protocols={"data", "file"}, allow_redirects=False)

    def fetch(url: str, *args: Any, **kwargs: Any) -> Any:
        check(url)
        return wu.default_url_fetcher(url, *args, **kwargs)

    return fetch


class _QuietSvgStyles(logging.Filter):
    """WeasyPrint parses the style attributes of inline SVG as HTML CSS and warns once per
    SVG property (fill, stroke, ...) although its SVG renderer uses them; hundreds of such
    lines would bury a real warning about report.css."""

    _SVG = re.compile(r"^Ignored `(fill|stroke|text-anchor|clip-path|opacity)[\w-]*:")

    def filter(self, record: logging.LogRecord) -> bool:
        return not self._SVG.match(record.getMessage())


@dataclass(frozen=True)
class Requirement:
    """Something WeasyPrint needs for a PDF whose text is right, and how to get it."""

    what: str  # "pango"
    packages: tuple[str, ...]  # Debian/Ubuntu packages that provide it
    why: str  # finishes "install X so ..."
    pip: bool = False  # a Python package, not a system one


# WeasyPrint dlopens these by name (weasyprint/text/ffi.py); the Debian/Ubuntu package of each.
_LIBS = (
    ("gobject-2.0", "libglib2.0-0"),
    ("pango-1.0", "libpango-1.0-0"),
    ("harfbuzz", "libharfbuzz0b"),
    ("fontconfig", "libfontconfig1"),
    ("pangoft2-1.0", "libpangoft2-1.0-0"),
)
# Chinese fonts on disk, for machines without fc-list (fontconfig's tools are a separate package).
_CJK_FILES = re.compile(
    r"(?i)(cjk|wqy|wenquanyi|droidsansfallback|sourcehan|notosanssc|notoserifsc|simhei|simsun|"
    r"msyh|pingfang|hiragino|uming|ukai)"
)


def import_weasyprint() -> Any:
    import weasyprint  # noqa: PLC0415 - lazy: GPU machines often lack pango

    return weasyprint


def _package() -> Any:
    """The package, evaluator.report. Tests play a machine without pango or without a
    Chinese font by replacing `import_weasyprint` or `has_cjk_font` there
    (tests/test_pdf_env.py), as they did when the report was one module; so this module
    calls those functions, and `pdf_missing`, through the package at call time, and a
    replacement made there is the one used."""
    return sys.modules[__package__]


def has_cjk_font() -> bool:
    """Is a font with Chinese glyphs installed where fontconfig (and so pango) finds it?"""
    try:
        out = subprocess.run(["fc-list", ":lang=zh", "family"], capture_output=True, text=True, timeout=20)
        if out.returncode == 0:
            return bool(out.stdout.strip())
    except (OSError, subprocess.SubprocessError):
        pass  # no fc-list: look at the font folders fontconfig reads by default
    roots = [
        "/usr/share/fonts",
        "/usr/local/share/fonts",
        os.path.expanduser("~/.fonts"),
        os.path.expanduser("~/.local/share/fonts"),
        "/Library/Fonts",
        "/System/Library/Fonts",
    ]
    return any(
        _CJK_FILES.search(os.path.basename(p))
        for root in roots
        for p in glob.glob(os.path.join(root, "**", "*.tt[fc]"), recursive=True)
        + glob.glob(os.path.join(root, "**", "*.otf"), recursive=True)
    )


# The probe's text: letters, digits, punctuation and an accented letter, as page one has them.
PROBE_TEXT = "GO / NO-GO probe 0123 évaluation"
# The ways to write a PDF, tried in order: fonts subset (small files), then embedded whole.
PDF_OPTIONS: tuple[dict[str, Any], ...] = ({}, {"full_fonts": True})
_PROBED: dict[str, dict[str, Any] | None] = {}
# Said beside a PDF whose first page's text copies but some later page's does not.
PARTLY_COPYABLE = (
    "some pages' text in the PDF does not copy on this machine (page one does): "
    "apt-get install libharfbuzz-subset0 so all of it can be copied"
)


def read_text(pdf: bytes) -> str:
    """The first page's text as a PDF reader extracts it (what a reader copies)."""
    import io

    from pypdf import PdfReader  # noqa: PLC0415 - only where a PDF is written

    return PdfReader(io.BytesIO(pdf)).pages[0].extract_text() or ""


def reads_back(pdf: bytes) -> bool:
    """Whether every page's text comes back as text: without HarfBuzz's subsetter some
    fonts' text extracts as NUL-interleaved bytes ("\x00H\x002...") even where the probe's
    first-page font is fine."""
    import io

    from pypdf import PdfReader  # noqa: PLC0415 - only where a PDF is written

    return all("\x00" not in (page.extract_text() or "") for page in PdfReader(io.BytesIO(pdf)).pages)


def probe(weasyprint: Any) -> dict[str, Any] | None:
    """The first of `PDF_OPTIONS` with which a small PDF written here gives its text back,
    or None where none does. Tried once per process (a second or so)."""
    if "probe" in _PROBED:
        return _PROBED["probe"]
    found = None
    for options in PDF_OPTIONS:
        try:
            pdf = weasyprint.HTML(string=f"<p>{PROBE_TEXT}</p>").write_pdf(**options)
            if " ".join(_package().read_text(pdf).split()) == PROBE_TEXT:
                found = options
                break
        except Exception:  # noqa: BLE001 - an option this WeasyPrint lacks, or a failed render: the next
            continue
    _PROBED["probe"] = found
    return found


def pdf_missing(lang: str = "en") -> list[Requirement]:
    """What this machine lacks for a PDF whose text can be read and copied; [] when nothing.

    Decided by behaviour: WeasyPrint imports (pango and its companions load), a probe PDF
    gives its text back (`probe`; else HarfBuzz's subsetter is what to install), and for
    Chinese fontconfig knows a font with Chinese glyphs.
    """
    missing: list[Requirement] = []
    try:
        weasyprint = _package().import_weasyprint()
    except ImportError:
        return [Requirement("WeasyPrint", ("weasyprint",), "the report can be laid out as a PDF", pip=True)]
    except OSError as exc:  # a shared library WeasyPrint dlopens is not installed
        packages = tuple(pkg for lib, pkg in _LIBS if ctypes.util.find_library(lib) is None) or (
            "libpango-1.0-0",
            "libpangoft2-1.0-0",
        )
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return [Requirement(f"pango ({first})", packages, "WeasyPrint can lay out text")]
    if _package().probe(weasyprint) is None:
        missing.append(Requirement("HarfBuzz subsetting", ("libharfbuzz-subset0",), "its text can be copied"))
    if lang == "zh" and not _package().has_cjk_font():
        missing.append(Requirement("a CJK font", ("fonts-noto-cjk",), "Chinese text shows instead of boxes"))
    return missing


def missing_note(missing: list[Requirement], html: Path | None = None, result: RunResult | None = None) -> str:
    """One line: what to install, why, and where the HTML is."""
    sep = "; "
    pip = [r for r in missing if r.pip]
    apt = [r for r in missing if not r.pip]
    parts = []
    if apt:
        pkgs = " ".join(dict.fromkeys(p for r in apt for p in r.packages))
        parts.append(" and ".join(f"{' '.join(r.packages)} so {r.why}" for r in apt) + f" (apt-get install {pkgs})")
    if pip:
        parts.append(
            " and ".join(f"{' '.join(r.packages)} so {r.why}" for r in pip)
            + f" (pip install {' '.join(p for r in pip for p in r.packages)})"
        )
    text = "PDF not written: install " + " and ".join(parts)
    if html is not None:
        text += f"{sep}the HTML is at {html}"
    b = result.baseline if result is not None else None
    if b is not None:
        text += (
            f"{sep}or render the PDF on a machine that has them: "
            f"`evaluate report --baseline {b.model}/{b.platform}/{b.version}`"
        )
    return text


def write_pdf(html: str, out_dir: Path, html_path: Path, result: RunResult, lang: str) -> tuple[Path | None, str]:
    """(report.pdf, "") where this machine can write a PDF whose text is right;
    otherwise (None, the one-line note from `missing_note`)."""
    missing = _package().pdf_missing(lang)
    if missing:
        return None, missing_note(missing, html_path, result)
    weasyprint = _package().import_weasyprint()
    pdf_path = out_dir / PDF_NAME
    quiet = _QuietSvgStyles()
    logger = logging.getLogger("weasyprint")
    logger.addFilter(quiet)
    first = _package().probe(weasyprint) or {}
    # The probe's option first, then the ones after it: the report's own fonts decide, since
    # a page the probe's font never covers may still come back as NUL-interleaved bytes.
    options = [first] + [o for o in PDF_OPTIONS[PDF_OPTIONS.index(first) + 1 :]] if first in PDF_OPTIONS else [first]
    try:
        document = weasyprint.HTML(
            string=html, base_url=str(out_dir.resolve()) + "/", url_fetcher=local_only_fetcher(out_dir)
        ).render()
        kept = None
        for opts in options:
            pdf = document.write_pdf(**opts)
            if _package().reads_back(pdf):
                pdf_path.write_bytes(pdf)
                return pdf_path, ""
            kept = kept or pdf
        # Page one reads back (the probe said so) but a later page does not: the PDF is
        # still the report to read; the note says what makes all of its text copy.
        pdf_path.write_bytes(kept)
    except Exception as exc:  # noqa: BLE001 - any rendering failure leaves the HTML usable
        raise ReportError(
            f"PDF rendering failed ({type(exc).__name__}: {exc}); the HTML report is at {html_path}"
        ) from exc
    finally:
        logger.removeFilter(quiet)
    return pdf_path, PARTLY_COPYABLE
