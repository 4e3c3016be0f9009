"""The command line: parse -> Config -> pipeline -> exit code. Nothing else lives here.

In: argv. Out: tables and progress on the terminal, files under reports/, and an exit
code: 0 done (or a verdict that `--fail-on` tolerates), 1 the verdict `--fail-on`
rejects, 2 anything else that went wrong: bad input, an unusable environment, or a bug
(one line on stderr, never a traceback; a bug's traceback goes to a file the line
names), 130 interrupted (the run folder keeps the stages that finished, and the line says
how to resume it). Every command
goes through one error handler, `reported_errors`, so they all fail the same way.

This module is the table of commands; each lives in the module of its kind: run.py (the
main command, --resume), bench.py (bench, port), baselines.py (baseline ..., compare,
report), misc.py (upstream, checklist ..., fleet), upgrade.py (upgrade). errors.py holds the error handler,
output.py the tables and the progress reporter, options.py the option texts shared by
several commands (their defaults come from config.py, where every default is written).
"""

from __future__ import annotations

import sys

import typer

from ..errors import EvaluatorError
from . import baselines, bench, misc, run, upgrade
from .errors import UsageError, one_line_errors, reported_errors, say_error
from .options import FAMILIES_HELP, TARGETS_HELP

__all__ = ["app", "main", "reported_errors", "one_line_errors", "FAMILIES_HELP", "TARGETS_HELP"]

app = typer.Typer(
    add_completion=False,
    no_args_is_help=False,
    rich_markup_mode=None,
    help="Evaluate whether a PyTorch model should move onto TileLang: profile, rewrite the hot "
    "operators, tune, verify, benchmark, soak, check upstream health, record a baseline and "
    "render a go/no-go report.",
)
baseline_app = typer.Typer(help="List, show, diff and record the versioned baselines in a store.")
checklist_app = typer.Typer(help="Validate checklists and list the metrics they may use.")
app.add_typer(baseline_app, name="baseline")
app.add_typer(checklist_app, name="checklist")

# In the order --help lists them. The main command has run folders to name and handles its
# own errors; every sub-command goes through the same handler.
app.callback(invoke_without_command=True)(run.main_command)
for group, name, command in [
    (app, "bench", bench.bench_command),
    (app, "port", bench.port_command),
    (app, "upstream", misc.upstream_command),
    (app, "report", baselines.report_command),
    (app, "compare", baselines.compare_command),
    (app, "upgrade", upgrade.upgrade_command),
    (app, "fleet", misc.fleet_command),
    (app, "families", misc.families_command),
    (baseline_app, "list", baselines.baseline_list),
    (baseline_app, "show", baselines.baseline_show),
    (baseline_app, "diff", baselines.baseline_diff),
    (baseline_app, "record", baselines.baseline_record),
    (baseline_app, "push", baselines.baseline_push),
    (baseline_app, "pull", baselines.baseline_pull),
    (checklist_app, "validate", misc.checklist_validate),
    (checklist_app, "metrics", misc.checklist_metrics),
]:
    group.command(name)(one_line_errors(command))


def main() -> None:
    # Not click's standalone mode: its usage errors are three lines (usage, hint, error);
    # here they are one, like every other error.
    try:
        code = app(standalone_mode=False)
    except UsageError as exc:
        where = exc.ctx.command_path if getattr(exc, "ctx", None) else "evaluate"
        say_error(f"error: {exc.format_message()} (see {where} --help)")
        sys.exit(2)
    except (typer.Abort, KeyboardInterrupt):
        say_error("interrupted")
        sys.exit(130)
    except EvaluatorError as exc:  # pragma: no cover - reported_errors handles these; the last net
        say_error(f"error: {exc}")
        sys.exit(2)
    sys.exit(code if isinstance(code, int) else 0)
