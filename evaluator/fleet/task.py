"""The body of one Ray task: one model on one platform, built, run and reported.

In: a task dict (model and platform names, the spec, the device, the cell's options, its
folder and the shared store), in a fresh Ray worker process or in this one. Out: a
`Cell`, never an exception: whatever goes wrong (a bad option, a model that raises, a
factory calling sys.exit()) is a failed cell with a one-line error, a traceback file for
anything that is not an EvaluatorError, and whatever the run finished (verdict, report)
still linked.
"""

from __future__ import annotations

import json
import socket
import time
import traceback
from pathlib import Path
from typing import Any

from ..errors import EvaluatorError
from .records import ERROR_CHARS, Cell, error_line, one_line


def _newest_run(cell_dir: Path) -> Path | None:
    runs = cell_dir / "runs"
    try:
        found = [p for p in runs.iterdir() if p.is_dir()]
    except OSError:
        return None
    return max(found, key=lambda p: p.stat().st_mtime, default=None)


def run_cell(task: dict[str, Any]) -> Cell:
    """The body of one Ray task (also callable in-process): never raises, a failure is a Cell."""
    start = time.monotonic()
    base = dict(
        model=task["model"],
        platform=task["platform"],
        spec=task["spec"],
        device=task["device"],
        options=task["options"],
        host=socket.gethostname(),
    )
    cell_dir = Path(task["cell_dir"])
    try:
        from .. import config as config
        from .. import pipeline

        cfg = config.build(
            model=task["spec"],
            label=task["model"],
            device=task["device"],
            reports=cell_dir,
            store=Path(task["store"]),
            **task["options"],
        )
        outcome = pipeline.run(cfg)
        r = outcome.result
        return Cell(
            **base,
            status="ok",
            verdict=r.verdict.decision if r.verdict else None,
            speedup=r.e2e.speedup if r.e2e else None,
            baseline=r.baseline.tag if r.baseline else None,
            run_dir=outcome.run_dir,
            report=outcome.html,
            hardware=r.environment.hardware.name,
            wall_s=time.monotonic() - start,
        )
    except (Exception, SystemExit) as exc:  # a factory calling sys.exit() is a failed model too
        # What the run finished is still linked: a baseline that failed to record at the
        # very end leaves its report and verdict behind.
        run_dir = _newest_run(cell_dir)
        verdict = speedup = None
        hardware = ""
        try:
            data = json.loads((run_dir / "results.json").read_text()) if run_dir else {}
            verdict = (data.get("verdict") or {}).get("decision")
            speedup = (data.get("e2e") or {}).get("speedup")
            hardware = ((data.get("environment") or {}).get("hardware") or {}).get("name", "")
        except (OSError, ValueError, AttributeError):
            pass
        report = run_dir / "report.html" if run_dir and (run_dir / "report.html").is_file() else None
        error, tb = error_line(exc), None
        if not isinstance(exc, EvaluatorError):  # a bug or a model that raised: keep the whole story
            tb = (run_dir or cell_dir) / "traceback.txt"
            try:
                tb.parent.mkdir(parents=True, exist_ok=True)
                tb.write_text("".join(traceback.format_exception(exc)))
                error = one_line(error, ERROR_CHARS - 40) + f" (full traceback in {tb.name})"
            except OSError:
                tb = None
        return Cell(
            **base,
            status="failed",
            verdict=verdict,
            speedup=speedup,
            run_dir=run_dir,
            report=report,
            error=error,
            traceback=tb,
            hardware=hardware,
            wall_s=time.monotonic() - start,
        )
