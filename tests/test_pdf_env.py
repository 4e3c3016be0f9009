"""What a PDF needs from the machine, and what happens without it.

In: this machine as it is, and the same machine with one library or font taken away
(simulated by a PDF whose text reads back lost, or by hiding the font lookup; WeasyPrint
itself is never mocked otherwise). Out: a PDF whose text extracts cleanly when everything is there;
otherwise no PDF, the HTML kept, and a one-line note naming the package to install.

`needs_pdf(lang)` is the marker other tests use: it skips with a reason naming the
missing package (libharfbuzz-subset0, fonts-noto-cjk, libpango-1.0-0...), so README's
test command passes on a fresh machine without them and tests them where they exist.
"""

from __future__ import annotations

import sys

import pytest

from evaluator import report
from samples import sample_result


def skip_reason(lang: str = "en") -> str:
    """ "" when this machine can write a correct PDF in `lang`, else why not (naming packages)."""
    missing = report.pdf_missing(lang)
    if not missing:
        return ""
    return (
        "needs "
        + ", ".join(" ".join(r.packages) for r in missing)
        + f" for a {lang} PDF: "
        + report.missing_note(missing)
    )


def needs_pdf(lang: str = "en"):
    """Skip unless WeasyPrint can write a PDF in `lang` whose text is right here."""
    reason = skip_reason(lang)
    return pytest.mark.skipif(bool(reason), reason=reason)


def needs_weasyprint():
    """Skip unless WeasyPrint imports (pango and friends are installed)."""
    try:
        report.import_weasyprint()
        reason = ""
    except ImportError:
        reason = "needs the weasyprint Python package (pip install weasyprint)"
    except OSError as exc:
        reason = f"needs libpango-1.0-0 and libpangoft2-1.0-0 (apt-get install them): {exc}"
    return pytest.mark.skipif(bool(reason), reason=reason)


def text_lost(monkeypatch, *, unless_bigger_than: int | None = None) -> None:
    """The machine whose PDFs lose their text (fonts embedded without their text mapping,
    as WeasyPrint's subsets do without libharfbuzz-subset0 on some systems): every PDF
    written reads back as "A\\x00 \\x00H..." — except, with `unless_bigger_than`, those
    that embed their fonts whole (hundreds of KB against a few)."""
    from evaluator.report import pdf as pdf_mod

    real = report.read_text

    def read(pdf: bytes) -> str:
        if unless_bigger_than is not None and len(pdf) > unless_bigger_than:
            return real(pdf)
        return "A\x00 \x00H\x00"

    monkeypatch.setattr(pdf_mod, "_PROBED", {})
    monkeypatch.setattr(report, "read_text", read)


# ---------------------------------------------------------------- the check itself


@needs_weasyprint()
def test_the_check_is_what_a_probe_pdf_gives_back():
    # Whatever this machine has: the check names libharfbuzz-subset0 exactly when no way of
    # writing a PDF here gives a probe's text back.
    weasyprint = report.import_weasyprint()
    names = {p for r in report.pdf_missing("en") for p in r.packages}
    assert ("libharfbuzz-subset0" in names) == (report.probe(weasyprint) is None)


def test_the_skip_reason_names_the_package(monkeypatch):
    monkeypatch.setattr(report, "has_cjk_font", lambda: False)
    reason = skip_reason("zh")
    assert "fonts-noto-cjk" in reason
    assert skip_reason("en") == "" or "needs " in skip_reason("en")


# ---------------------------------------------------------------- missing pieces


@pytest.mark.slow
@needs_weasyprint()
def test_where_a_pdf_loses_its_text_no_pdf_and_one_line_saying_what_to_install(tmp_path, monkeypatch):
    text_lost(monkeypatch)
    files = report.render(sample_result(), tmp_path)
    assert files.pdf is None and not (tmp_path / "report.pdf").exists()
    assert files.html.is_file()
    note = files.pdf_note
    assert "\n" not in note
    assert note.startswith("PDF not written: install libharfbuzz-subset0")
    assert "apt-get install libharfbuzz-subset0" in note and "so its text can be copied" in note
    assert str(files.html) in note


@pytest.mark.slow
@needs_weasyprint()
def test_where_only_whole_fonts_keep_the_text_the_report_embeds_them_whole(tmp_path, monkeypatch):
    pypdf = pytest.importorskip("pypdf")
    text_lost(monkeypatch, unless_bigger_than=100_000)
    files = report.render(sample_result(), tmp_path)
    assert files.pdf is not None and files.pdf_note == ""
    assert files.pdf.stat().st_size > 100_000  # fonts embedded whole
    assert "NO VERDICT" in pypdf.PdfReader(str(files.pdf)).pages[0].extract_text()


@pytest.mark.slow
def test_zh_without_a_cjk_font_is_not_tofu_but_a_note(tmp_path, monkeypatch):
    monkeypatch.setattr(report, "has_cjk_font", lambda: False)
    files = report.render(sample_result(), tmp_path, lang="zh")
    assert files.pdf is None and files.html.is_file()
    assert "fonts-noto-cjk" in files.pdf_note and "Chinese text shows" in files.pdf_note
    assert "\n" not in files.pdf_note


@pytest.mark.slow
def test_without_pango_the_note_names_the_pango_packages(tmp_path, monkeypatch):
    def no_pango():
        raise OSError("cannot load library 'libpango-1.0-0': libpango-1.0-0: cannot open shared object file")

    monkeypatch.setattr(report, "import_weasyprint", no_pango)
    files = report.render(sample_result(), tmp_path)
    assert files.pdf is None and files.html.is_file()
    assert "libpango-1.0-0" in files.pdf_note and "libpangoft2-1.0-0" in files.pdf_note
    assert "apt-get install" in files.pdf_note and "\n" not in files.pdf_note


@pytest.mark.slow
def test_without_the_weasyprint_module_the_note_says_pip(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "weasyprint", None)  # import now raises ImportError
    files = report.render(sample_result(), tmp_path)
    assert files.pdf is None and "pip install weasyprint" in files.pdf_note


# ---------------------------------------------------------------- the real thing


@pytest.mark.slow
@needs_pdf("en")
def test_a_pdf_whose_later_pages_do_not_copy_is_kept_with_a_note(tmp_path, monkeypatch):
    # page one reads back (the probe), a later page does not with any option: the PDF is
    # still the report, and the run says what makes all of its text copy
    tried = []
    monkeypatch.setattr(report, "reads_back", lambda pdf: tried.append(len(pdf)) and False)
    files = report.render(sample_result(), tmp_path)
    assert files.pdf is not None and files.pdf.is_file() and files.pdf_note == report.PARTLY_COPYABLE
    assert len(tried) >= 1 and "libharfbuzz-subset0" in files.pdf_note and "\n" not in files.pdf_note


@pytest.mark.slow
@needs_pdf("en")
def test_pdf_text_extracts_cleanly(tmp_path):
    pypdf = pytest.importorskip("pypdf")
    files = report.render(sample_result(), tmp_path)
    assert files.pdf is not None and files.pdf_note == ""
    text = "\n".join(p.extract_text() for p in pypdf.PdfReader(str(files.pdf)).pages)
    assert "\x00" not in text  # the symptom of fonts embedded without subsetting
    assert "NO VERDICT" in text and "key numbers" in text.lower()


@pytest.mark.slow
@needs_pdf("zh")
def test_zh_pdf_text_extracts_as_chinese(tmp_path):
    pypdf = pytest.importorskip("pypdf")
    files = report.render(sample_result(), tmp_path, lang="zh")
    text = pypdf.PdfReader(str(files.pdf)).pages[0].extract_text()
    assert "\x00" not in text and "关键指标" in text and "无结论" in text
