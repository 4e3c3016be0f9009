"""Where the shipped checklists and report templates live, and the user's own.

In: a checklist name or path. Out: the path of the YAML file to load. A team's own
`checklists/NAME.yaml` in the folder `evaluate` runs in wins over a shipped one of the
same name, so a team can keep and version its checklists next to its runs.
"""

from __future__ import annotations

from pathlib import Path

SHIPPED_CHECKLISTS = Path(__file__).resolve().parent / "checklists"
SHIPPED_TEMPLATES = Path(__file__).resolve().parent / "templates"


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
