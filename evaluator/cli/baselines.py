"""The commands that read and write the baseline store: `evaluate baseline list/show/diff/
record/push/pull`, `evaluate compare` and `evaluate report`.

In: baseline ids, a store (a folder, or a shared remote's git URL used through a local
clone; default reports/baselines), a finished run's folder for `record`. Out: tables on
the terminal, re-rendered reports, a recorded or pushed baseline. A shared store is
pulled before it is read, so baselines other hosts recorded are compared too.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Optional

import typer

from ..config import DEFAULTS, STORE_FOLDER, OutputSettings
from .errors import say_error
from .options import STORE_OPT
from .output import baseline_table, baselines_table, console, print_comparison


def _read_store(spec: Optional[str]):
    """A store to read from: a shared one is pulled first, so baselines other hosts recorded
    are compared and trended too; offline, its clone is read as it is."""
    from .. import baseline
    from ..config import check_folder_given
    from ..errors import BaselineError

    check_folder_given("--store", spec)
    spec = spec or str(OutputSettings.store)
    if not baseline.is_remote(spec):
        return Path(spec)
    st = baseline.open_store(spec)
    try:
        baseline.pull(st)
    except BaselineError as exc:
        say_error(f"warning: {exc}")
    return st


def report_command(
    baseline_id: str = typer.Option(..., "--baseline", help="Baseline id, e.g. bert-tiny/cpu-x86_64/2026Q4-1."),
    store: Optional[str] = STORE_OPT,
    out: Optional[Path] = typer.Option(
        None, help="Output folder (default: reports/rerendered/<id with / as _>, e.g. bert-tiny_h200_2026Q4-1)."
    ),
    lang: str = typer.Option(DEFAULTS["lang"], help="en or zh."),
) -> None:
    """Re-render the HTML/PDF report from a stored baseline, without rerunning anything."""
    from .. import baseline, report
    from ..config import check_writable_folder

    st = _read_store(store)
    result = baseline.load(st, baseline_id)
    if not result.trend and result.baseline is not None:
        # As the run showed it: every baseline of this model and platform up to this one.
        points = baseline.trend(st, result.model.name, result.environment.hardware.platform)
        versions = list(dict.fromkeys(p.version for p in points))
        if result.baseline.version in versions:
            upto = set(versions[: versions.index(result.baseline.version) + 1])
            result = dataclasses.replace(result, trend=tuple(p for p in points if p.version in upto))
    folder = out or OutputSettings.reports / "rerendered" / baseline_id.replace("/", "_")
    check_writable_folder("--out", folder)
    folder.mkdir(parents=True, exist_ok=True)
    files = report.render(result, folder, lang=lang)
    console.print(f"Report: {files.html}")
    if files.pdf:
        console.print(f"PDF: {files.pdf}" + (f" ({files.pdf_note})" if files.pdf_note else ""))
    else:
        console.print(files.pdf_note)


def compare_command(
    candidate: str = typer.Option(..., help="Baseline id of the candidate platform/version."),
    reference: str = typer.Option(..., help="Baseline id of the reference platform/version."),
    store: Optional[str] = STORE_OPT,
    threshold: float = typer.Option(DEFAULTS["regression_threshold"], help="Smallest relative change that counts."),
    out: Optional[Path] = typer.Option(None, help="Also render the candidate's report with this comparison here."),
    lang: str = typer.Option(DEFAULTS["lang"], help="Report language for --out: en or zh."),
) -> None:
    """Compare two baselines op by op and end to end (e.g. two platforms, or two driver versions)."""
    from .. import baseline, report
    from ..config import check_writable_folder
    from ..report.strings import LANGS

    # Checked before the store is read or the table printed: a bad option is one line, alone.
    if not 0 <= threshold < 10:  # NaN fails this too
        say_error(f"error: --threshold {threshold} is out of range; give a fraction such as 0.05")
        raise typer.Exit(2)
    if lang not in LANGS:
        say_error(f"error: --lang '{lang}' is not available; use {' or '.join(LANGS)}")
        raise typer.Exit(2)
    store = _read_store(store)
    if out is not None:
        check_writable_folder("--out", out)
    cand = baseline.load(store, candidate)
    comp = baseline.compare(
        baseline.load(store, reference), cand, threshold=threshold, reference_id=reference, candidate_id=candidate
    )
    print_comparison(comp)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        files = report.render(dataclasses.replace(cand, comparison=comp), out, lang=lang)
        console.print(f"Report: {files.html}")


def baseline_list(
    model: Optional[str] = typer.Option(None, help="Only this model's baselines (the first part of the id)."),
    platform: Optional[str] = typer.Option(
        None, help="Only this platform's baselines (the id's second part, e.g. h200 or cpu-x86_64)."
    ),
    store: Optional[str] = STORE_OPT,
) -> None:
    """List baselines, oldest first."""
    from .. import baseline

    found = _read_store(store)
    rows = baseline.list_baselines(found, model=model, platform=platform)
    if not rows and (model or platform):  # a filter that matched nothing says so, with what there is
        every = baseline.list_baselines(found)
        models = sorted({r.model for r in every})
        platforms = sorted({r.platform for r in every})
        asked = " and ".join(f"{k} {v!r}" for k, v in (("model", model), ("platform", platform)) if v)
        console.print(
            f"No baseline for {asked}; the store has models {', '.join(models) or 'none'} "
            f"on platforms {', '.join(platforms) or 'none'}",
            markup=False,
        )
        return
    console.print(baselines_table(rows))


def baseline_show(
    baseline_id: str = typer.Argument(..., help="Baseline id."), store: Optional[str] = STORE_OPT
) -> None:
    """Show one baseline's manifest and headline numbers."""
    from .. import baseline

    result = baseline.load(_read_store(store), baseline_id)
    console.print(baseline_table(baseline_id, baseline.show_rows(result)))


def baseline_diff(
    a: str = typer.Argument(..., help="Reference baseline id."),
    b: str = typer.Argument(..., help="Candidate baseline id."),
    store: Optional[str] = STORE_OPT,
) -> None:
    """Compare two baselines of the same model and platform."""
    from .. import baseline

    print_comparison(baseline.diff(_read_store(store), a, b))


def baseline_record(
    run_dir: Path = typer.Argument(..., help="A finished run's folder (reports/runs/<run id>), or its results.json."),
    store: Optional[str] = typer.Option(
        None,
        "--store",
        help="Baseline store (a folder, or a shared remote's git "
        "URL). Default: the store next to the run, <reports>/baselines for "
        "<reports>/runs/<id>.",
    ),
) -> None:
    """Record a finished run's results.json as a baseline (when recording failed at the end of the run)."""
    from .. import baseline
    from ..config import check_folder_given, check_writable_folder
    from ..results import to_dict

    check_folder_given("--store", store)
    results = run_dir / "results.json" if run_dir.is_dir() else run_dir
    folder = results.parent
    result = _finished_run(run_dir, results)
    # The store the run itself would have used when none is given: <reports>/baselines.
    if store is None:
        store = folder.parent.parent / STORE_FOLDER if folder.parent.name == "runs" else OutputSettings.store
    if not baseline.is_remote(store):
        check_writable_folder("--store", Path(store))
    ref = baseline.record(store, result)
    note = ""
    try:  # as the pipeline does: the run folder says where its baseline is, so it is not recorded twice
        (folder / "baseline.json").write_text(json.dumps(to_dict(ref), indent=1))
        tmp = folder / "results.json.tmp"
        tmp.write_text(json.dumps(to_dict(dataclasses.replace(result, baseline=ref)), indent=1))
        tmp.replace(folder / "results.json")
    except OSError as exc:
        note = f" (could not note it in {folder}: {exc.strerror})"
    console.print(f"Recorded {ref.tag} in {ref.store}{note}", markup=False)


def _finished_run(run_dir: Path, results: Path):
    """The RunResult in `results`, if it is a finished run not yet recorded; else one line saying why not."""
    from ..errors import ConfigError
    from ..results import BaselineRef, RunResult, from_dict

    if not results.is_file():
        raise ConfigError(f"{run_dir} has no results.json; give the folder of a run (reports/runs/<run id>)")
    try:
        result = from_dict(RunResult, json.loads(results.read_text()))
    except (OSError, ValueError) as exc:  # unreadable, not JSON, or not a RunResult (pydantic's error is a ValueError)
        raise ConfigError(
            f"{results} is not a readable results.json of a run ({type(exc).__name__}); "
            "give the folder of a run that evaluate wrote"
        ) from exc
    if result.verdict is None:
        missing = ", ".join(result.stage_errors) or "the stages after " + ("profiling" if result.hot_ops else "loading")
        raise ConfigError(
            f"run {result.run_id} did not finish (no verdict; failed: {missing}); "
            "only a finished run can be recorded, rerun it"
        )
    ref = result.baseline
    if ref is None:
        # The run writes baseline.json as soon as the store took its baseline; a failure after
        # that (reading the trend) leaves results.json without it, and must not make a second one.
        try:
            ref = from_dict(BaselineRef, json.loads((results.parent / "baseline.json").read_text()))
        except (OSError, ValueError):
            ref = None
    if ref is not None:
        raise ConfigError(
            f"run {result.run_id} is already recorded as {ref.tag} in {ref.store}; "
            f"`evaluate baseline show {ref.tag}` shows it"
        )
    return result


def baseline_push(store: Optional[str] = STORE_OPT) -> None:
    """Push the store's new baselines (and tuned configs) to its shared remote: fetch, rebase, push, retry; never
    forced."""
    from .. import baseline
    from ..config import check_folder_given

    check_folder_given("--store", store)
    spec = store or str(OutputSettings.store)
    if not baseline.is_remote(spec):
        baseline.open_store(spec, create=False)  # a missing folder is refused, not made a store with nothing to push
    s = baseline.push(spec)
    for old, new in s.renumbered:
        console.print(f"Renumbered {old} -> {new} (the remote already had {old})", markup=False)
    console.print(
        f"Pushed {len(s.pushed)} baseline(s) to {s.remote}: {', '.join(s.pushed) or 'nothing new'}"
        + (f"; pulled {len(s.pulled)} from other hosts" if s.pulled else "")
        + (f" ({s.attempts} attempts: another host pushed meanwhile)" if s.attempts > 1 else ""),
        markup=False,
    )


def baseline_pull(store: Optional[str] = STORE_OPT) -> None:
    """Bring the store's local clone up to its shared remote (baselines other hosts recorded)."""
    from .. import baseline
    from ..config import check_folder_given

    check_folder_given("--store", store)
    s = baseline.pull(store or str(OutputSettings.store))
    console.print(
        f"Pulled {len(s.pulled)} baseline(s) from {s.remote}"
        + (": " + ", ".join(s.pulled) if s.pulled else " (up to date)"),
        markup=False,
    )
