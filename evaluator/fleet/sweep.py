"""Running a plan on Ray: one task per cell, collected in plan order, and the exit code.

In: a checked `Plan`, optionally a Ray cluster's address, a `Reporter` for progress, and
--fail-on. Out: a `FleetResult` (every cell, in plan order, whatever happened to its
task), the sweep folder under the plan's reports, a summary written even when Ctrl-C
stops the sweep, and `exit_code`. A cell whose resources no node of the cluster offers
fails at once instead of waiting forever; a task that dies (a crashed worker, a lost
node) is a failed cell. Ray is imported only here, and only when a plan runs.
"""

from __future__ import annotations

import logging
import os
import re
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError
from .page import summary
from .plan import Plan
from .records import Cell, FleetResult, error_line, one_line
from .task import run_cell

if TYPE_CHECKING:  # the pipeline imports torch; the plan checks and the summary do not need it
    from ..pipeline import Reporter

# --fail-on: exit 1 on that outcome or worse; a run that failed is worse than NO-GO.
FAIL_ON = ("never", "failed", "no-go", "conditional")
RAY_MISSING = "evaluate fleet needs Ray: pip install -e '.[fleet]' (or pip install 'ray[default]')"


def require_ray():
    """The ray module, or the one line that says what to install."""
    try:
        import ray
    except ImportError as exc:
        raise ConfigError(RAY_MISSING) from exc
    return ray


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.")[:60] or "x"


def _ray_options(resources: dict[str, float], accelerator_type: str | None) -> dict[str, Any]:
    opts: dict[str, Any] = {}
    custom = {}
    for key, amount in resources.items():
        if key in ("num_cpus", "num_gpus", "memory"):
            opts[key] = amount
        else:
            custom[key] = amount
    if custom:
        opts["resources"] = custom
    if accelerator_type:
        opts["accelerator_type"] = accelerator_type
    return opts


def _needs(opts: dict[str, Any]) -> dict[str, float]:
    """What a node must offer for these task options, in Ray's resource names."""
    need = {"CPU": opts.get("num_cpus", 1)}  # a Ray task holds one CPU unless told otherwise
    if opts.get("num_gpus"):
        need["GPU"] = opts["num_gpus"]
    if opts.get("memory"):
        need["memory"] = opts["memory"]
    need.update(opts.get("resources", {}))
    if opts.get("accelerator_type"):
        need[f"accelerator_type:{opts['accelerator_type']}"] = 0.001
    return {k: v for k, v in need.items() if v}


def _infeasible(need: dict[str, float], nodes: list[dict]) -> str:
    """Why no live node can ever run a task needing `need`, or "" when one can. Ray would
    otherwise keep such a task pending forever and the sweep would never end."""
    offers = [n.get("Resources", {}) for n in nodes if n.get("Alive", True)]
    if any(all(o.get(k, 0) >= v for k, v in need.items()) for o in offers):
        return ""
    asked = ", ".join(f"{k} {v:g}" for k, v in need.items())
    seen = (
        "; ".join(
            ", ".join(
                f"{k} {v:g}"
                for k, v in sorted(o.items())
                if k in ("CPU", "GPU") or (k not in ("memory", "object_store_memory") and not k.startswith("node:"))
            )
            for o in offers
        )
        or "no live node"
    )
    return f"no node of the Ray cluster offers {asked} (nodes offer: {seen}); fix the platform's resources"


def run_plan(
    plan: Plan, *, ray_address: str | None = None, reporter: "Reporter | None" = None, num_cpus: int | None = None
) -> FleetResult:
    """Run every cell of the plan as a Ray task and collect one Cell each, in plan order.

    Connects to `ray_address` when given, uses a Ray already initialised in this process,
    or starts a local one (shut down again at the end). Cells are written under
    `<plan.reports>/<plan name>-<timestamp>/<model>--<platform>/runs/<run id>/`; each run
    records its baseline in `plan.store`. Ctrl-C cancels what is still running, writes the
    summary of what finished and re-raises with `run_dir` set to the sweep folder.
    """
    from .. import baseline
    from ..pipeline import Reporter

    ray = require_ray()
    rep = reporter or Reporter()
    # Initialised once here rather than raced by the first tasks, and a store that cannot
    # take baselines is one line now instead of a red matrix later.
    baseline.open_store(plan.store)
    created = datetime.now(timezone.utc)
    stem = f"{_slug(plan.name)}-{created.strftime('%Y%m%d-%H%M%S')}"
    folder = plan.reports / stem
    for n in range(2, 100):  # the same plan started twice within a second gets a folder each
        try:
            folder.mkdir(parents=True)
            break
        except FileExistsError:
            folder = plan.reports / f"{stem}-{n}"
        except OSError as exc:
            raise ConfigError(
                f"cannot create the sweep folder {folder} ({exc.strerror}); give the plan a writable reports folder"
            ) from None
    else:
        raise ConfigError(f"{plan.reports} already holds {stem} and 98 more like it; clean the reports folder")

    started = False
    if ray.is_initialized():
        where = "the Ray already running in this process"
    elif ray_address:
        try:
            ray.init(address=ray_address, log_to_driver=False, logging_level=logging.WARNING)
        except Exception as exc:  # ConnectionError, a bad address, a version mismatch
            _drop_empty(folder)
            raise ConfigError(f"--ray {ray_address}: cannot connect to the Ray cluster ({error_line(exc)})") from exc
        started, where = True, ray_address
    else:
        cpus = num_cpus or os.cpu_count() or 1
        try:
            ray.init(
                num_cpus=cpus,
                include_dashboard=False,
                ignore_reinit_error=True,
                log_to_driver=False,
                logging_level=logging.WARNING,
            )
        except Exception as exc:  # no room in /tmp, ports taken, a broken install
            _drop_empty(folder)
            raise ConfigError(
                f"cannot start a local Ray ({error_line(exc)}); or give --ray ADDRESS of a running cluster"
            ) from exc
        started, where = True, f"local ({cpus} CPUs)"

    t0 = time.monotonic()
    cells: dict[tuple[str, str], Cell] = {}
    pending: dict[Any, tuple[str, str]] = {}
    try:
        nodes = ray.nodes()
        has_gpu = any(n.get("Resources", {}).get("GPU", 0) > 0 for n in nodes if n.get("Alive", True))
        # A fresh worker per run (max_calls=1) and no retries: a model that fails fails
        # once, and it takes nothing of another run's state (TileLang, torch, CUDA) with it.
        remote = ray.remote(max_calls=1, max_retries=0)(run_cell)
        dirs: set[str] = set()
        rep.stage(
            f"Fleet {plan.name}: {len(plan.models) * len(plan.platforms)} runs on Ray, {where}",
            total=len(plan.models) * len(plan.platforms),
        )
        for m in plan.models:
            for p in plan.platforms:
                resources = p.resources or ({"num_gpus": 1} if has_gpu and p.device != "cpu" else {"num_cpus": 1})
                opts = _ray_options(resources, p.accelerator_type)
                cell_name = f"{_slug(m.name)}--{_slug(p.name)}"
                while cell_name in dirs:  # two names that slug alike still get a folder each
                    cell_name += "_"
                dirs.add(cell_name)
                task = dict(
                    model=m.name,
                    platform=p.name,
                    spec=m.spec,
                    device=p.device,
                    options=plan.options(m, p),
                    cell_dir=str(folder / cell_name),
                    store=str(plan.store),
                )
                why = _infeasible(_needs(opts), nodes)
                if why:
                    cells[(m.name, p.name)] = Cell(
                        model=m.name,
                        platform=p.name,
                        status="failed",
                        spec=m.spec,
                        device=p.device,
                        error=why,
                        options=task["options"],
                    )
                    rep.advance()
                    rep.info(_cell_line(cells[(m.name, p.name)]))
                    continue
                ref = remote.options(**opts, name=f"evaluate {m.name} on {p.name}").remote(task)
                pending[ref] = (m.name, p.name)
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                key = pending.pop(ref)
                try:
                    cell = ray.get(ref)
                except Exception as exc:  # the task itself died: a crashed or killed worker, lost node
                    m = next(x for x in plan.models if x.name == key[0])
                    p = next(x for x in plan.platforms if x.name == key[1])
                    cell = Cell(
                        model=key[0],
                        platform=key[1],
                        status="failed",
                        spec=m.spec,
                        device=p.device,
                        error=_ray_error(exc),
                        options=plan.options(m, p),
                    )
                cells[key] = cell
                rep.advance()
                rep.info(_cell_line(cell))
        rep.done(f"{sum(c.ok for c in cells.values())} ok, {sum(not c.ok for c in cells.values())} failed")
    except KeyboardInterrupt as exc:
        for ref in pending:
            try:
                ray.cancel(ref, force=True)
            except Exception:  # already finished or gone: nothing left to stop
                pass
        partial = _result(plan, folder, where, created, cells, time.monotonic() - t0, interrupted=True)
        try:
            summary(partial, folder)
        except Exception:  # the interrupt is what the user must hear about
            pass
        exc.run_dir = folder  # the CLI names it: "interrupted; finished stages are kept in ..."
        raise
    finally:
        if started:
            ray.shutdown()
    return _result(plan, folder, where, created, cells, time.monotonic() - t0)


def check_fail_on(fail_on: str) -> str:
    """--fail-on, checked before the sweep rather than after it."""
    if fail_on not in FAIL_ON:
        raise ConfigError(f"--fail-on '{fail_on}' is not allowed; use {', '.join(FAIL_ON)}")
    return fail_on


def exit_code(result: FleetResult, fail_on: str = "never") -> int:
    """The command's exit code: 1 when a cell is at `fail_on` or worse, else 0 (as
    `evaluate --fail-on`: 1 is only ever the outcome the gate rejects)."""
    check_fail_on(fail_on)
    rejected = {
        "never": (),
        "failed": (),
        "no-go": ("NO-GO", "INCONCLUSIVE"),
        "conditional": ("NO-GO", "INCONCLUSIVE", "CONDITIONAL GO"),
    }[fail_on]
    bad = [c for c in result.cells if (fail_on != "never" and not c.ok) or (c.ok and c.verdict in rejected)]
    return 1 if bad else 0


def _drop_empty(folder: Path) -> None:
    """The sweep folder made for a sweep that could not start: gone again, not left empty."""
    try:
        folder.rmdir()  # only an empty folder goes
    except OSError:
        pass


def _ray_error(exc: BaseException) -> str:
    # Ray's messages carry a traceback and advice over many lines; the first says what happened.
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    return one_line(f"{type(exc).__name__}: {lines[0] if lines else 'the task failed'}")


def _cell_line(c: Cell) -> str:
    """One line per finished cell for the reporter (rich markup: the CLI's reporter prints it)."""
    from rich.markup import escape  # an error quoting "[...]" must not be read as markup

    if not c.ok:
        return f"[red]{escape(c.model)} on {escape(c.platform)}: failed: {escape(c.error)}[/]"
    speed = f", {c.speedup:.3g}x end to end" if c.speedup else ""
    return escape(f"{c.model} on {c.platform}: {c.verdict}{speed} ({c.wall_s:.0f} s, {c.baseline or 'no baseline'})")


def _result(
    plan: Plan,
    folder: Path,
    where: str,
    created: datetime,
    cells: dict[tuple[str, str], Cell],
    wall_s: float,
    *,
    interrupted: bool = False,
) -> FleetResult:
    ordered = []
    for m in plan.models:
        for p in plan.platforms:
            ordered.append(
                cells.get((m.name, p.name))
                or Cell(
                    model=m.name,
                    platform=p.name,
                    status="failed",
                    spec=m.spec,
                    device=p.device,
                    error="interrupted before it finished",
                    options=plan.options(m, p),
                )
            )
    return FleetResult(
        name=plan.name,
        plan=plan.path,
        folder=folder,
        store=plan.store,
        ray=where,
        created=created.isoformat(timespec="seconds"),
        models=tuple(m.name for m in plan.models),
        platforms=tuple(p.name for p in plan.platforms),
        cells=tuple(ordered),
        wall_s=wall_s,
        interrupted=interrupted,
    )
