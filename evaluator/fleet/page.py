"""The sweep's summary: fleet.html, the verdict matrix, and fleet.json, the whole result.

In: a `FleetResult` and the folder to write into (the sweep folder by default). Out:
fleet.html (model x platform, each cell coloured by its verdict and linking its run's
report, results.json and traceback by relative links, so the folder can be copied or
served whole) from templates/fleet.html.j2 (a team's own template replaces it), and
fleet.json, which `load_summary` reads back into a `FleetResult`.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

from .records import Cell, FleetResult


def _jsonable(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, float) and value != value:  # NaN is not JSON
        return None
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def load_summary(path: str | os.PathLike) -> FleetResult:
    """A FleetResult back from its fleet.json (to re-render or compare sweeps)."""
    return TypeAdapter(FleetResult).validate_python(json.loads(Path(path).read_text()))


_VERDICT_CLASS = {"GO": "go", "CONDITIONAL GO": "cond", "NO-GO": "nogo", "INCONCLUSIVE": "inconclusive"}


def _href(target: Path | None, out_dir: Path) -> str | None:
    # Relative, so the sweep folder can be copied or served as a whole and its links still work.
    if target is None or not Path(target).exists():
        return None
    return Path(os.path.relpath(Path(target).resolve(), out_dir.resolve())).as_posix()


def summary(result: FleetResult, out_dir: str | os.PathLike) -> Path:
    """Write fleet.html (the verdict matrix, model x platform) and fleet.json into `out_dir`;
    returns fleet.html. A team's templates/fleet.html.j2 (see resources.template_dirs)
    replaces the shipped one."""
    import jinja2

    from .. import resources

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "fleet.json.tmp").write_text(json.dumps(_jsonable(dataclasses.asdict(result)), indent=1))
    (out / "fleet.json.tmp").replace(out / "fleet.json")

    def view(c: Cell) -> dict[str, Any]:
        return {
            "cell": c,
            "cls": "failed" if not c.ok else _VERDICT_CLASS.get(c.verdict or "", "none"),
            "report": _href(c.report, out),
            "traceback": _href(c.traceback, out),
            "results": _href(c.run_dir / "results.json" if c.run_dir else None, out),
            "speedup": f"{c.speedup:.3g}x" if c.speedup else "",
            "wall": f"{c.wall_s:.0f} s",
        }

    rows = [{"model": m, "cells": [view(result.cell(m, p)) for p in result.platforms]} for m in result.models]
    counts: dict[str, int] = {}
    for c in result.cells:
        k = "failed" if not c.ok else (c.verdict or "no verdict")
        counts[k] = counts.get(k, 0) + 1
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader([str(d) for d in resources.template_dirs()]),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    html = env.get_template("fleet.html.j2").render(
        r=result,
        rows=rows,
        counts=counts,
        cells=[view(c) for c in result.cells],
        options=lambda c: ", ".join(f"{k}={v}" for k, v in sorted(c.options.items())),
    )
    (out / "fleet.html").write_text(html)
    return out / "fleet.html"
