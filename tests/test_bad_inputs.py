"""Bad input through the real entry point: one line on stderr, exit 2, nothing lost.

In: `evaluator.cli:main` (what the `evaluate` script runs) called in-process with argv,
and as a subprocess where the process itself matters; a reports folder holding an
earlier run and a real baseline store. Out: for every bad option, exit code 2, exactly
one stderr line saying what was expected, no traceback, and the earlier run folder and
store byte for byte as they were. Failures that are not bad input (a model that raises,
a bug, Ctrl-C) are one line too, and keep what the run had finished.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from samples import sample_result
from test_cli import evaluate

from evaluator import baseline, checklist, cli, pipeline
from evaluator.errors import ConfigError
from evaluator.resources import SHIPPED_CHECKLISTS
from evaluator.results import to_dict


def run_main(monkeypatch, capsys, *args: str) -> tuple[int, list[str], str]:
    """`evaluate ARGS` in this process: (exit code, non-empty stderr lines, stdout)."""
    monkeypatch.setattr(sys, "argv", ["evaluate", *map(str, args)])
    with pytest.raises(SystemExit) as stop:
        cli.main()
    out, err = capsys.readouterr()
    return stop.value.code, [line for line in err.splitlines() if line.strip()], out


def one_error_line(code: int, lines: list[str], *, exit_code: int = 2, prefix: str = "error: ") -> str:
    assert code == exit_code, lines
    assert len(lines) == 1, lines
    assert lines[0].startswith(prefix), lines
    assert "Traceback" not in lines[0]
    return lines[0]


def snapshot(root: Path) -> dict[str, str]:
    """Every file under `root` (a store's .git included) by content."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def reports(tmp_path):
    """A reports folder as an earlier run left it: its run folder and its baseline store."""
    root = tmp_path / "reports"
    old = root / "runs" / "bert-tiny-20260101-000000"
    old.mkdir(parents=True)
    (old / "results.json").write_text(json.dumps(to_dict(sample_result())))
    baseline.record(root / "baselines", sample_result())
    return root


@contextlib.contextmanager
def read_only(path: Path):
    """`path` made unwritable for this process, root included (chattr +i), then restored."""
    if os.geteuid() == 0:
        if not shutil.which("chattr") or subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode:
            pytest.skip("running as root and cannot make a folder immutable here (chattr +i)")
        undo = ["chattr", "-i", str(path)]
    else:
        mode = path.stat().st_mode
        path.chmod(0o555)
        undo = None
    try:
        if os.access(path, os.W_OK):
            pytest.skip(f"could not make {path} read-only")
        yield
    finally:
        if undo:
            subprocess.run(undo, check=True)
        else:
            path.chmod(mode)


# ---------------------------------------------------------------- checked before any minute is spent


@pytest.mark.parametrize(
    "args, words",
    [
        (["--reps", "0"], "--reps must be a positive integer, got 0"),
        (["--reps", "-3"], "--reps must be a positive integer, got -3"),
        (["--budget", "-1"], "--budget must be a number of seconds, 0 or more, got -1"),
        (["--soak-seconds", "-2"], "--soak-seconds must be a number of seconds, 0 or more, got -2"),
        (["--max-shapes", "0"], "--max-shapes must be a positive integer, got 0"),
        (["--profile-iters", "0"], "--profile-iters must be a positive integer, got 0"),
        (["--store", "{file}"], "is a file; give a folder"),
        (["--store", "{file}/store"], "cannot be created: {file} is a file"),
        (["--reports", "{file}"], "--reports {file} is a file"),
        (
            ["--checklist", "nonesuch"],
            "checklist 'nonesuch' does not exist; give a YAML file or a checklist name: default, production",
        ),
        (["--name", "///"], "--name '///' cannot name a baseline"),
        (["--as-of", "someday"], "--as-of 'someday' is not a date; use YYYY-MM-DD"),
        (["--isolate", "maybe"], "--isolate 'maybe' is not allowed; use auto, on or off"),
        (["--reps", "lots"], "Invalid value for '--reps'"),  # a usage error is one line as well
        (["--no-such-option"], "No such option: --no-such-option"),
        (["--target", "sm80"], "--target 'sm80' is not a target; use cuda:sm_XY (e.g. cuda:sm_80"),
        (["--target", "hip:gfx942"], "--target hip:gfx942 cannot run here"),
    ],
)
def test_bad_option_is_one_line_exit_2_and_loses_nothing(args, words, reports, tmp_path, monkeypatch, capsys):
    a_file = tmp_path / "a-file"
    a_file.write_text("not a folder")
    args = [a.format(file=a_file) for a in args]
    before = snapshot(reports)
    code, lines, _ = run_main(monkeypatch, capsys, "--model", "bert-tiny", "--reports", reports, *args)
    assert words.format(file=a_file) in one_error_line(code, lines)
    assert snapshot(reports) == before  # no new run folder, the old one and the store as they were
    assert a_file.read_text() == "not a folder"


@pytest.mark.parametrize("option", ["--reports", "--store"])
def test_an_empty_folder_option_is_refused_before_anything_runs(option, reports, tmp_path, monkeypatch, capsys):
    # Path("") is ".": without the check the run (here a stand-in that fails loudly) starts
    # and writes its run folder and baseline into whatever folder evaluate was started from.
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.setattr(pipeline, "run", _fake_run(True, AssertionError("the run started")))
    before = snapshot(reports)
    code, lines, _ = run_main(monkeypatch, capsys, "--model", "bert-tiny", "--reports", reports, option, "")
    assert one_error_line(code, lines) == f"error: {option} needs a folder; got an empty string"
    assert snapshot(reports) == before and not any(elsewhere.iterdir())


@pytest.mark.parametrize("command", [["baseline", "list"], ["baseline", "pull"], ["baseline", "record", "{run}"]])
def test_an_empty_store_is_refused_by_the_store_commands(command, reports, tmp_path, monkeypatch, capsys):
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    run = reports / "runs" / "bert-tiny-20260101-000000"
    before = snapshot(reports)
    code, lines, _ = run_main(monkeypatch, capsys, *[a.format(run=run) for a in command], "--store", "")
    assert one_error_line(code, lines) == "error: --store needs a folder; got an empty string"
    assert snapshot(reports) == before and not any(elsewhere.iterdir())


@pytest.mark.parametrize(
    "damage, words",
    [
        ("garbage HEAD", "its .git/HEAD names neither a branch nor a commit"),
        ("missing object", "1 object is missing from its history (missing tree "),
    ],
)
def test_a_damaged_store_is_refused_before_the_run(damage, words, reports, monkeypatch, capsys):
    store = reports / "baselines"
    if damage == "garbage HEAD":
        (store / ".git" / "HEAD").write_text("this is not a ref\n")
    else:
        tree = subprocess.run(
            ["git", "-C", str(store), "rev-parse", "HEAD^{tree}"], capture_output=True, text=True, check=True
        ).stdout.strip()
        (store / ".git" / "objects" / tree[:2] / tree[2:]).unlink()
    monkeypatch.setattr(pipeline, "run", _fake_run(True, AssertionError("the run started")))
    before = snapshot(reports)
    code, lines, _ = run_main(monkeypatch, capsys, "--model", "bert-tiny", "--reports", reports)
    line = one_error_line(code, lines)
    assert line.startswith(f"error: baseline store {store} is damaged: ") and words in line
    assert snapshot(reports) == before  # no run folder, and the store as it was


@pytest.mark.slow
def test_read_only_store_is_refused_up_front_by_the_real_process(reports):
    store = reports / "baselines"
    before = snapshot(reports)
    with read_only(store):
        p = evaluate(
            "--model",
            "bert-tiny",
            "--reports",
            str(reports),
            "--ops",
            "1",
            "--budget",
            "2",
            "--soak-seconds",
            "0",
            "--no-pdf",
        )
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    line = one_error_line(p.returncode, lines)
    assert f"--store {store} is not writable" in line
    assert "Traceback" not in p.stdout + p.stderr
    assert snapshot(reports) == before


def test_store_whose_parent_is_read_only(tmp_path, monkeypatch, capsys):
    parent = tmp_path / "shared"
    parent.mkdir()
    with read_only(parent):
        code, lines, _ = run_main(
            monkeypatch, capsys, "--model", "bert-tiny", "--reports", tmp_path / "r", "--store", parent / "store"
        )
    assert f"--store {parent / 'store'} cannot be created: {parent} is not writable" in one_error_line(code, lines)
    assert not (tmp_path / "r").exists()


def test_read_only_reports_folder(reports, monkeypatch, capsys):
    before = snapshot(reports)
    with read_only(reports):
        code, lines, _ = run_main(
            monkeypatch, capsys, "--model", "bert-tiny", "--reports", reports, "--store", reports.parent / "elsewhere"
        )
    assert f"--reports {reports} is not writable" in one_error_line(code, lines)
    assert snapshot(reports) == before and not (reports.parent / "elsewhere").exists()


BAD_METRICS = """\
name: team
items:
  - {id: fast, title: Fast, metric: ops.speedup_mn, comparator: ">=", threshold: 1, severity: major, rationale: r}
  - {id: soak, title: Soak, metric: soak.drift_pctt, comparator: "<=", threshold: 5, severity: minor, rationale: r}
  - {id: safe, title: Safe, metric: kernels.all_correct, comparator: "==", threshold: 1, severity: huge, rationale: r}
"""


def test_checklist_validate_lists_every_problem_one_per_line(tmp_path, monkeypatch, capsys):
    path = tmp_path / "team.yaml"
    path.write_text(BAD_METRICS)
    code, lines, out = run_main(monkeypatch, capsys, "checklist", "validate", path)
    assert code == 2 and out == "" and len(lines) == 3, lines
    assert all(line.startswith(f"error: {path}:") and "Traceback" not in line for line in lines)
    assert "unknown metric 'ops.speedup_mn'" in lines[0] and "id 'fast'" in lines[0]
    assert "unknown metric 'soak.drift_pctt'" in lines[1] and "id 'soak'" in lines[1]
    assert "severity 'huge' is not allowed" in lines[2] and "id 'safe'" in lines[2]


def test_a_run_with_a_bad_checklist_says_how_to_see_every_problem(tmp_path, monkeypatch, capsys):
    path = tmp_path / "team.yaml"
    path.write_text(BAD_METRICS)
    code, lines, _ = run_main(
        monkeypatch, capsys, "--model", "bert-tiny", "--reports", tmp_path / "r", "--checklist", path
    )
    line = one_error_line(code, lines)
    assert "unknown metric 'ops.speedup_mn'" in line
    assert line.endswith(f"(and 2 more problems; `evaluate checklist validate {path}` lists them all)")
    assert not (tmp_path / "r").exists()


# ---------------------------------------------------------------- failures during the run


@pytest.mark.slow
def test_model_whose_forward_raises_is_one_line_and_keeps_its_run_folder(reports, tmp_path):
    model = tmp_path / "bad_forward.py"
    model.write_text(
        "import torch\n"
        "class Bad(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        raise RuntimeError('forward exploded\\nwith a second line')\n"
        "def make(batch_size: int = 2):\n"
        "    return Bad(), torch.randn(batch_size, 8)\n"
    )
    before = snapshot(reports)
    p = evaluate(
        "--model",
        f"{model}:make",
        "--reports",
        str(reports),
        "--ops",
        "1",
        "--budget",
        "2",
        "--soak-seconds",
        "0",
        "--no-pdf",
    )
    line = one_error_line(p.returncode, [ln for ln in p.stderr.splitlines() if ln.strip()])
    assert "forward exploded" in line  # was exit 1 and a 107-line traceback
    assert "Traceback" not in p.stdout + p.stderr
    after = snapshot(reports)
    assert {k: v for k, v in after.items() if k in before} == before  # nothing earlier changed
    new_runs = [d for d in (reports / "runs").iterdir() if d.name.startswith("bad_forward-make-")]
    assert len(new_runs) == 1  # named after the label: the factory file without its folder
    result = json.loads((new_runs[0] / "results.json").read_text())
    assert "forward exploded" in result["stage_errors"]["profile"]


def _fake_run(make_folder: bool, exc: BaseException):
    def run(cfg, reporter=None):
        if make_folder:  # as pipeline.run makes it: config.json, then results.json
            folder = cfg.output.reports / "runs" / f"{pipeline.slug(cfg.model.label)}-20260821-150000"
            folder.mkdir(parents=True)
            (folder / "config.json").write_text("{}")
            (folder / "results.json").write_text("{}")
        raise exc

    return run


def _bug() -> ValueError:
    try:
        {}["gemm"]
    except KeyError as cause:
        try:
            raise ValueError("shape table broken\nsee above") from cause
        except ValueError as exc:
            return exc


def test_a_bug_is_one_line_and_the_traceback_goes_to_the_run_folder(reports, monkeypatch, capsys):
    monkeypatch.setattr(pipeline, "run", _fake_run(True, _bug()))
    code, lines, _ = run_main(monkeypatch, capsys, "--model", "bert-tiny", "--reports", reports, "--name", "bt")
    run = reports / "runs" / "bt-20260821-150000"
    assert one_error_line(code, lines) == (
        f"error: internal error ValueError: shape table broken see above (full traceback in {run / 'traceback.txt'})"
    )
    text = (run / "traceback.txt").read_text()
    assert "KeyError: 'gemm'" in text and "direct cause" in text and "ValueError: shape table broken" in text
    assert (run / "results.json").read_text() == "{}"  # what the run saved is kept


def test_a_bug_before_the_run_folder_leaves_its_traceback_in_the_reports_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(pipeline, "run", _fake_run(False, ZeroDivisionError("division by zero")))
    code, lines, _ = run_main(monkeypatch, capsys, "--model", "bert-tiny", "--reports", tmp_path / "r")
    line = one_error_line(code, lines)
    assert line.startswith("error: internal error ZeroDivisionError: division by zero (full traceback in ")
    saved = Path(line.rsplit("full traceback in ", 1)[1].rstrip(")"))
    assert saved.parent == tmp_path / "r" and "ZeroDivisionError" in saved.read_text()


def test_a_bug_in_a_sub_command_leaves_its_traceback_in_a_temp_file(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))

    def broken(*args, **kwargs):
        raise AttributeError("'NoneType' object has no attribute 'tag'")

    monkeypatch.setattr(baseline, "list_baselines", broken)
    code, lines, _ = run_main(monkeypatch, capsys, "baseline", "list", "--store", tmp_path / "store")
    line = one_error_line(code, lines)
    assert "internal error AttributeError: 'NoneType' object has no attribute 'tag'" in line
    saved = Path(line.rsplit("full traceback in ", 1)[1].rstrip(")"))
    assert saved.parent == tmp_path and "AttributeError" in saved.read_text()


def test_ctrl_c_says_where_the_finished_stages_are_and_how_to_resume(reports, monkeypatch, capsys):
    monkeypatch.setattr(pipeline, "run", _fake_run(True, KeyboardInterrupt()))
    code, lines, _ = run_main(monkeypatch, capsys, "--model", "bert-tiny", "--reports", reports)
    run = reports / "runs" / "bert-tiny-20260821-150000"
    assert (
        one_error_line(code, lines, exit_code=130, prefix="interrupted")
        == f"interrupted; finished stages are kept in {run}; continue with: evaluate --resume {run}"
    )
    assert (run / "results.json").is_file()


def test_ctrl_c_during_a_resumed_run_names_the_same_folder(reports, monkeypatch, capsys):
    run = reports / "runs" / "bert-tiny-20260101-000000"
    (run / "config.json").write_text("{}")

    def interrupted(run_dir, reporter=None):
        raise KeyboardInterrupt

    monkeypatch.setattr(pipeline, "resume", interrupted)
    code, lines, _ = run_main(monkeypatch, capsys, "--resume", run)
    assert (
        one_error_line(code, lines, exit_code=130, prefix="interrupted")
        == f"interrupted; finished stages are kept in {run}; continue with: evaluate --resume {run}"
    )


@pytest.mark.slow
@pytest.mark.parametrize("left", ["no config.json", "baseline recorded"])
def test_ctrl_c_offers_resume_only_for_a_folder_resume_takes(left, reports, monkeypatch, capsys):
    run = reports / "runs" / "bert-tiny-20260821-150000"

    def interrupted(cfg, reporter=None):
        run.mkdir(parents=True)
        if left == "baseline recorded":
            (run / "config.json").write_text("{}")
        (run / "results.json").write_text(
            json.dumps({"baseline": {"tag": "bert-tiny/cpu/2026Q3-1"}} if left == "baseline recorded" else {})
        )
        raise KeyboardInterrupt

    monkeypatch.setattr(pipeline, "run", interrupted)
    code, lines, _ = run_main(monkeypatch, capsys, "--model", "bert-tiny", "--reports", reports)
    assert (
        one_error_line(code, lines, exit_code=130, prefix="interrupted")
        == f"interrupted; finished stages are kept in {run}"
    )


def test_an_error_the_pipeline_reports_is_one_line(reports, monkeypatch, capsys):
    # e.g. --families naming a family the model does not call: known only after profiling
    err = ConfigError("--families softmax: bert-tiny does not call softmax; its families are gemm, attention")
    monkeypatch.setattr(pipeline, "run", _fake_run(True, err))
    code, lines, _ = run_main(
        monkeypatch, capsys, "--model", "bert-tiny", "--reports", reports, "--families", "softmax"
    )
    assert one_error_line(code, lines) == f"error: {err}"


def test_exit_1_is_only_the_verdict_fail_on_rejects(reports, monkeypatch, capsys):
    result = sample_result(correct=False)  # a wrong kernel: a blocker fails
    result = dataclasses.replace(
        result, verdict=checklist.evaluate(checklist.load(SHIPPED_CHECKLISTS / "default.yaml"), result)
    )
    assert result.verdict.decision == "NO-GO"
    outcome = pipeline.RunOutcome(result=result, run_dir=reports / "runs" / "x", html=None, pdf=None)
    monkeypatch.setattr(pipeline, "run", lambda cfg, reporter=None: outcome)
    code, lines, out = run_main(monkeypatch, capsys, "--model", "bert-tiny", "--reports", reports, "--fail-on", "no-go")
    assert code == 1 and lines == ["exit 1: the verdict is NO-GO (--fail-on no-go)"] and "NO-GO" in out
    code, lines, _ = run_main(monkeypatch, capsys, "--model", "bert-tiny", "--reports", reports)
    assert code == 0 and lines == []


# ---------------------------------------------------------------- evaluate baseline record


def test_baseline_record_refuses_what_is_not_a_finished_run(reports, tmp_path, monkeypatch, capsys):
    before = snapshot(reports)
    empty = tmp_path / "empty"
    empty.mkdir()
    code, lines, _ = run_main(monkeypatch, capsys, "baseline", "record", empty)
    assert f"{empty} has no results.json" in one_error_line(code, lines)
    garbled = tmp_path / "garbled"
    garbled.mkdir()
    (garbled / "results.json").write_text("{not json")
    code, lines, _ = run_main(monkeypatch, capsys, "baseline", "record", garbled)
    assert "is not a readable results.json of a run" in one_error_line(code, lines)
    # the earlier run in `reports` stopped before its verdict
    code, lines, _ = run_main(monkeypatch, capsys, "baseline", "record", reports / "runs" / "bert-tiny-20260101-000000")
    assert "did not finish (no verdict" in one_error_line(code, lines)
    assert snapshot(reports) == before


@pytest.mark.parametrize(
    "target, words",
    [
        ("gfx942", "--target 'gfx942' is not a target; use cuda:sm_XY"),
        ("cuda:sm_100a", "--target cuda:sm_100a cannot run here"),
    ],
)
def test_bench_takes_target_and_refuses_a_bad_one_in_one_line(target, words, monkeypatch, capsys):
    code, lines, _ = run_main(monkeypatch, capsys, "bench", "--family", "gemm", "--target", target)
    assert words in one_error_line(code, lines)
