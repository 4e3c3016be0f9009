"""Packaging: the shipped checklists and templates reach every install, and a team's own win.

In: a copy of the project's sources (pyproject.toml, README.md, evaluator/, checklists/,
templates/) built into a real wheel and installed with `pip install --target`, or into a
throw-away venv as an editable install; and a working folder holding a team's own
checklists/ and templates/. Out: from a fresh interpreter that sees only the install
(plus site-packages for the dependencies), the shipped files are found and a report
renders; a team's checklist of the same name, report.css, i18n strings and template
take precedence over the shipped ones.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import zipfile
from pathlib import Path

import pytest

from evaluator import report, resources
from evaluator.errors import ConfigError
from samples import sample_result

ROOT = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent
SITE = sysconfig.get_paths()["purelib"]


def project_copy(dest: Path) -> Path:
    """The files a wheel is built from, without build leftovers, caches or symlinks (a
    build from the live tree would race with whoever else builds or edits there)."""

    def ignore(folder: str, names: list[str]) -> list[str]:
        return [
            n
            for n in names
            if n in ("__pycache__", "build", "dist")
            or n.endswith(".egg-info")
            or os.path.islink(os.path.join(folder, n))
        ]

    dest.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, dest / name)
    for name in ("evaluator", "checklists", "templates"):
        shutil.copytree(ROOT / name, dest / name, ignore=ignore)
    return dest


def _build_tools_missing() -> str:
    """Building without network (--no-build-isolation) uses the setuptools installed here;
    pyproject's build-system asks for >= 64 (PEP 660 editable installs), and setuptools
    before 70.1 also needs the `wheel` package to build wheels."""
    try:
        import setuptools
    except ImportError:
        return "needs setuptools>=64 (pip install 'setuptools>=64') to build the package offline"
    version = tuple(int(x) for x in setuptools.__version__.split(".")[:2] if x.isdigit())
    if version < (64,):
        return f"needs setuptools>=64, found {setuptools.__version__} (pip install -U setuptools)"
    if version < (70, 1) and importlib.util.find_spec("wheel") is None:
        return f"needs the wheel package with setuptools {setuptools.__version__} (pip install wheel)"
    return ""


needs_build_tools = pytest.mark.skipif(bool(_build_tools_missing()), reason=_build_tools_missing() or "-")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    src = project_copy(tmp_path_factory.mktemp("src") / "project")
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(src)],
        check=True,
        capture_output=True,
        text=True,
    )
    (whl,) = out.glob("evaluator-*.whl")
    return whl


# A fresh interpreter that sees the install first, then site-packages for the
# dependencies; -S keeps site-packages' .pth files (this checkout's own editable
# install among them) out, so nothing can be found in the checkout by accident.
PROBE = textwrap.dedent("""
    import sys
    sys.path[:0] = {paths!r}
    import evaluator, evaluator.resources as res, evaluator.report as report
    from samples import sample_result
    assert evaluator.__file__.startswith({prefix!r}), evaluator.__file__
    assert str(res.SHIPPED_CHECKLISTS).startswith({prefix!r}), res.SHIPPED_CHECKLISTS
    print("checklists", sorted(p.name for p in res.SHIPPED_CHECKLISTS.glob("*.yaml")))
    print("templates", sorted(str(p.relative_to(res.SHIPPED_TEMPLATES)) for p in res.SHIPPED_TEMPLATES.rglob("*.*")))
    print("found", res.find_checklist("production"))
    html = report.render_html(sample_result(), "zh")
    print("rendered", "<html lang=\\"zh-CN\\">" in html and "无结论" in html)
""")


def probe(paths: list[str], prefix: str, cwd: Path, prelude: str = "") -> str:
    code = prelude + PROBE.format(paths=[*paths, str(TESTS), SITE], prefix=prefix)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "EVALUATOR_TEMPLATES")}
    p = subprocess.run([sys.executable, "-S", "-c", code], cwd=cwd, env=env, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return p.stdout


@pytest.mark.slow
@needs_build_tools
def test_the_wheel_carries_checklists_and_templates_as_package_data(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for name in (
        "evaluator/checklists/default.yaml",
        "evaluator/checklists/production.yaml",
        "evaluator/templates/report.html.j2",
        "evaluator/templates/report.css",
        "evaluator/templates/i18n/en.yaml",
        "evaluator/templates/i18n/zh.yaml",
    ):
        assert name in names, name
    assert not any(n.startswith(("checklists/", "templates/")) for n in names)  # no top-level strays


@needs_build_tools
def test_every_subpackage_is_in_the_wheel(wheel):
    # pyproject lists packages by hand (a folder renamed into the package needs that):
    # a new evaluator/ subpackage missing from the list would silently not ship.
    names = set(zipfile.ZipFile(wheel).namelist())
    for init in (ROOT / "evaluator").rglob("__init__.py"):
        rel = init.relative_to(ROOT).as_posix()
        if "__pycache__" not in rel:
            assert rel in names, f"{rel} is not in the wheel: add its package to [tool.setuptools] packages"


@pytest.mark.slow
@needs_build_tools
def test_an_installed_wheel_finds_them_and_renders(wheel, tmp_path):
    target = tmp_path / "target"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
        check=True,
        capture_output=True,
        text=True,
    )
    empty = tmp_path / "elsewhere"
    empty.mkdir()
    out = probe([str(target)], str(target), empty)
    assert "checklists ['default.yaml', 'production.yaml']" in out
    assert "'report.html.j2'" in out and "'report.css'" in out and "'i18n/zh.yaml'" in out
    assert f"found {target}" in out and "rendered True" in out


@pytest.mark.slow
@needs_build_tools
def test_an_editable_install_finds_them_in_the_checkout(tmp_path):
    src = project_copy(tmp_path / "project")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    venv_site = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    # The build borrows this environment's setuptools (no network): its site-packages on the
    # venv's path. `--system-site-packages` would lend the base interpreter's instead, which
    # in a virtualenv is not this one (Python 3.11's bundled setuptools 65.5 has no wheel).
    (Path(venv_site) / "outer.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    # This interpreter's pip does the install into the venv.
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(py),
            "install",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-e",
            str(src),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    empty = tmp_path / "elsewhere"
    empty.mkdir()
    # site.addsitedir runs the editable install's .pth (its import hook), as the venv would.
    out = probe([], str(src), empty, prelude=f"import site; site.addsitedir({venv_site!r})\n")
    assert "checklists ['default.yaml', 'production.yaml']" in out and "rendered True" in out
    assert f"found {src}" in out


# ---------------------------------------------------------------- a team's own files


def test_a_teams_checklist_wins_over_the_shipped_one(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "checklists").mkdir()
    own = tmp_path / "checklists" / "default.yaml"
    own.write_text((resources.SHIPPED_CHECKLISTS / "default.yaml").read_text().replace("name: default", "name: ours"))
    (tmp_path / "checklists" / "nightly.yaml").write_text("name: nightly\n")
    assert resources.find_checklist("default").resolve() == own
    assert resources.find_checklist("production") == resources.SHIPPED_CHECKLISTS / "production.yaml"
    assert resources.checklist_names() == ["default", "nightly", "production"]
    assert resources.find_checklist("nonesuch") is None


@pytest.mark.slow
def test_a_teams_templates_folder_overrides_css_strings_and_template(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(resources.TEMPLATES_ENV, raising=False)
    own = tmp_path / "templates"
    (own / "i18n").mkdir(parents=True)
    (own / "report.css").write_text(".banner { border-width: 7px; }\n")
    (own / "i18n" / "en.yaml").write_text('subtitle: "ACME platform review"\n')
    html = report.render_html(sample_result())
    assert "ACME platform review" in html and "Key numbers" in html  # one key reworded, the rest shipped
    shipped_at = html.index(".banner { display: flex")
    assert html.index(".banner { border-width: 7px; }") > shipped_at  # after the shipped CSS, so it wins
    assert str(own / "report.css") in html  # the report says its look is local
    (own / "report.html.j2").write_text('{% extends "shipped/report.html.j2" %}')
    assert "ACME platform review" in report.render_html(sample_result())  # extending the shipped one works
    (own / "report.html.j2").write_text("<p>{{ t('subtitle') }} for {{ model }}</p>")
    assert report.render_html(sample_result()).strip() == "<p>ACME platform review for bert-tiny</p>"


@pytest.mark.slow
def test_evaluator_templates_wins_over_the_working_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "templates" / "i18n").mkdir(parents=True)
    (tmp_path / "templates" / "i18n" / "en.yaml").write_text('subtitle: "from ./templates"\n')
    env = tmp_path / "corporate"
    (env / "i18n").mkdir(parents=True)
    (env / "i18n" / "en.yaml").write_text('subtitle: "from EVALUATOR_TEMPLATES"\n')
    monkeypatch.setenv(resources.TEMPLATES_ENV, str(env))
    assert resources.template_dirs() == [env.resolve(), (tmp_path / "templates").resolve(), resources.SHIPPED_TEMPLATES]
    assert "from EVALUATOR_TEMPLATES" in report.render_html(sample_result())
    monkeypatch.setenv(resources.TEMPLATES_ENV, str(tmp_path / "missing"))
    with pytest.raises(ConfigError, match="EVALUATOR_TEMPLATES=.*is not a folder"):
        report.render_html(sample_result())


def test_the_checkout_itself_uses_the_shipped_templates(monkeypatch):
    monkeypatch.chdir(ROOT)  # here ./templates is the shipped folder: nothing counts as an override
    monkeypatch.delenv(resources.TEMPLATES_ENV, raising=False)
    assert resources.template_dirs() == [resources.SHIPPED_TEMPLATES]
    assert resources.template_overrides() == []
    assert resources.SHIPPED_TEMPLATES == (ROOT / "templates").resolve()
    assert (
        resources.SHIPPED_CHECKLISTS == (ROOT / "checklists").resolve()
        or (resources.SHIPPED_CHECKLISTS / "default.yaml").read_bytes()
        == (ROOT / "checklists" / "default.yaml").read_bytes()
    )
