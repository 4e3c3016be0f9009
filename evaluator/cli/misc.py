"""`evaluate upstream`, `evaluate checklist validate/metrics` and `evaluate fleet`.

In: an upstream repository (and a fork, a date, a branch); a checklist file; a fleet plan
(models x platforms). Out: the upstream health table or JSON; a checklist's validity (or
every problem in it, one per line, exit 2) and the metric catalogue; a fleet's summary
page, with exit 1 when `--fail-on` rejects a cell.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from ..config import DEFAULTS
from .errors import say_error
from .output import RichReporter, console, err_console, metrics_table, progress, upstream_table


def upstream_command(
    repo: str = typer.Option(..., help="Local clone (or URL) of the upstream repository."),
    fork: Optional[str] = typer.Option(None, help="A vendor fork to compare with upstream."),
    as_of: Optional[str] = typer.Option(None, help="Compute as of this date (YYYY-MM-DD)."),
    branch: Optional[str] = typer.Option(None, help="Branch to read."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Print the upstream repository's health table (git history only)."""
    from .. import config as config_mod
    from .. import upstream
    from ..results import to_dict

    from ..config.checks import check_text_given

    for opt, value, example in (
        ("--fork", fork, "a local clone of the fork or its URL"),
        ("--as-of", as_of, "a date such as 2026-08-21"),
        ("--branch", branch, "a branch name such as main"),
    ):
        check_text_given(opt, value, example)
    # repo_option: the messages must name the option typed here, --repo, not the run's --upstream.
    health = upstream.measure(repo, fork=fork, as_of=config_mod.parse_as_of(as_of), branch=branch, repo_option="--repo")
    if json_out:
        print(json.dumps(to_dict(health), indent=1))
        return
    console.print(upstream_table(repo, upstream.summary_rows(health)))


def fleet_command(
    plan: Path = typer.Argument(..., help="Fleet plan (YAML): models x settings x platforms."),
    ray_address: Optional[str] = typer.Option(
        None, "--ray", help="Address of a running Ray cluster (default: start Ray on this machine)."
    ),
    reports: Optional[Path] = typer.Option(None, "--reports", help="Output folder (default: the plan's reports)."),
    store: Optional[Path] = typer.Option(None, "--store", help="Baseline store (default: the plan's store)."),
    fail_on: str = typer.Option(
        DEFAULTS["fail_on"],
        "--fail-on",
        help="never, failed, no-go or conditional: exit 1 "
        "when a cell is that or worse (a failed run is worse than NO-GO).",
    ),
) -> None:
    """Run a plan of models x platforms as Ray tasks (one per GPU, or per CPU) and write one summary."""
    from .. import fleet

    fleet.require_ray()  # the one line saying what to install comes before anything else
    fleet.check_fail_on(fail_on)
    p = fleet.load_plan(plan, reports=reports, store=store)
    if ray_address is not None:
        _check_ray_address(ray_address)
    with progress(err_console) as bars:
        result = fleet.run_plan(p, ray_address=ray_address, reporter=RichReporter(bars))
    html = fleet.summary(result, result.folder)
    code = fleet.exit_code(result, fail_on)
    console.print(f"{len(result.cells) - len(result.failed)} ok, {len(result.failed)} failed", markup=False)
    console.print(f"Summary: {html}", markup=False)
    if code:
        raise typer.Exit(code)


def _check_ray_address(address: str) -> None:
    """--ray HOST:PORT (or ray://HOST:PORT) where nothing listens: one line now. Left to
    ray.init, an unreachable head is retried for minutes, Ray's warnings on the terminal."""
    import re
    import socket

    from ..errors import ConfigError

    m = re.fullmatch(r"(?:ray://)?\[?([^\s/\[\]]+?)\]?:(\d+)", address.strip())
    if m is None:
        if address.strip() in ("auto", "local"):
            return
        raise ConfigError(
            f"--ray {address!r} is not an address; give the Ray head's HOST:PORT (e.g. 10.0.0.5:6379, "
            "what `ray start --head` prints), ray://HOST:10001, or auto"
        )
    host, port = m.group(1), int(m.group(2))
    try:
        socket.create_connection((host, port), timeout=5).close()
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
        raise ConfigError(
            f"--ray {address}: nothing answers at {host}:{port} ({why}); start the head there "
            "(ray start --head) or give its address"
        ) from None


def checklist_validate(file: Path = typer.Argument(..., help="Checklist YAML.")) -> None:
    """Validate a checklist file: every problem, one per line (exit 2), or that it is valid."""
    from .. import checklist

    try:
        cl = checklist.validate(file)
    except checklist.ChecklistProblems as exc:
        for problem in exc.problems:
            say_error(f"error: {problem}")
        raise typer.Exit(2) from None
    console.print(f"{file}: valid ({len(cl.items)} item{'' if len(cl.items) == 1 else 's'})")


def checklist_metrics() -> None:
    """The catalogue of metric names a checklist may use."""
    from .. import checklist

    console.print(metrics_table(checklist.METRICS))


def families_command() -> None:
    """List the kernel families: name, what it computes, and its shape's sizes."""
    from rich.table import Table
    from rich.text import Text

    from .. import kernels
    from .output import console

    t = Table(title="Kernel families (evaluate --families, bench --family, port --family)")
    for col in ("family", "computes", "shape"):
        t.add_column(col)
    for name, fam in kernels.REGISTRY.items():
        t.add_row(Text(name), Text(fam.title), Text("x".join(fam.shape_names)))
    console.print(t)
