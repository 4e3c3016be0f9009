"""Where the shipped checklists and report templates live, and a team's own.

In: a checklist name or path; the folder `evaluate` runs in; the environment variable
EVALUATOR_TEMPLATES. Out: the YAML file to load, and the template folders to search,
most specific first.

In the repository the shipped files sit at the top level (`checklists/`, `templates/`);
a wheel installs them inside the package (`evaluator/checklists`, `evaluator/templates`,
see `[tool.setuptools.package-dir]` in pyproject.toml). `_shipped` finds them in either
layout, and in an editable install whatever its mode. A team's own
`checklists/NAME.yaml` in the working folder wins over a shipped one of the same name,
and a team's `templates/` folder (or the folder EVALUATOR_TEMPLATES names) wins over the
shipped templates file by file, so a team can restyle or reword the report without
forking the package.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path

from .errors import ConfigError

_HERE = Path(__file__).resolve().parent
TEMPLATES_ENV = "EVALUATOR_TEMPLATES"


def _shipped(name: str, marker: str) -> Path:
    """The folder of shipped `name` files that contains `marker`.

    Looked for, in order: inside the package (a wheel, or setuptools' strict editable
    link tree); where the import system maps the data package `evaluator.<name>` (a
    lenient editable install maps it to the checkout); next to the package (a checkout
    used without installing, or an editable install made before the files moved).
    """
    candidates = [_HERE / name]
    try:
        module = importlib.import_module(f"{__package__}.{name}")
        candidates += [Path(p) for p in getattr(module, "__path__", [])]
    except ImportError:
        pass  # not importable as a data package: the other places still apply
    candidates.append(_HERE.parent / name)
    for folder in candidates:
        if (folder / marker).is_file():
            return folder.resolve()
    # Reported when something reads from it; a missing folder is an install problem.
    return candidates[-1]


SHIPPED_CHECKLISTS = _shipped("checklists", "default.yaml")
SHIPPED_TEMPLATES = _shipped("templates", "report.html.j2")
DEFAULT_CHECKLIST = SHIPPED_CHECKLISTS / "default.yaml"


def checklist_names() -> list[str]:
    names = {p.stem for p in SHIPPED_CHECKLISTS.glob("*.yaml")} | {p.stem for p in Path("checklists").glob("*.yaml")}
    return sorted(names)


def find_checklist(name_or_path: str | Path) -> Path | None:
    """The checklist file for a path or a bare name (./checklists first, then shipped), or None."""
    p = Path(name_or_path)
    if p.is_file():
        return p
    if len(p.parts) == 1:
        for folder in (Path("checklists"), SHIPPED_CHECKLISTS):
            for cand in (folder / p.name, folder / f"{p.name}.yaml"):
                if cand.is_file():
                    return cand
    return None


def template_dirs() -> list[Path]:
    """Template folders, most specific first: $EVALUATOR_TEMPLATES, ./templates, shipped.

    Read at every call (not at import) so a report rendered from another folder, or with
    the variable set for one command, picks up that team's files.
    """
    dirs: list[Path] = []
    env = os.environ.get(TEMPLATES_ENV, "").strip()
    if env:
        folder = Path(env).expanduser()
        if not folder.is_dir():
            raise ConfigError(
                f"{TEMPLATES_ENV}={env} is not a folder; point it at a folder holding report.html.j2, "
                "report.css or i18n/<lang>.yaml, or unset it"
            )
        dirs.append(folder.resolve())
    local = Path("templates")
    if local.is_dir():
        dirs.append(local.resolve())
    dirs.append(SHIPPED_TEMPLATES)
    return list(dict.fromkeys(dirs))  # in the repository ./templates is the shipped folder itself


def template_overrides() -> list[Path]:
    """The files a team overrides (for the report to say its look or words are local)."""
    found = []
    for folder in template_dirs():
        if folder == SHIPPED_TEMPLATES:
            continue
        for rel in (
            "report.html.j2",
            "report.css",
            *(f"i18n/{p.name}" for p in sorted((folder / "i18n").glob("*.yaml"))),
        ):
            if (folder / rel).is_file():
                found.append(folder / rel)
    return found
