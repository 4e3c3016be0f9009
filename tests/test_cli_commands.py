"""The sub-commands as a user runs them, on real git repositories and a real baseline store."""

import dataclasses
import json
from datetime import datetime, timedelta, timezone

import pytest

from samples import sample_result
from test_cli import evaluate
from upstream_repos import AS_OF, Builder, build_fork, build_upstream

from evaluator import baseline, checklist
from evaluator.resources import SHIPPED_CHECKLISTS
from evaluator.results import RunResult, from_dict, to_dict


@pytest.fixture(scope="module")
def repos(tmp_path_factory):
    root = tmp_path_factory.mktemp("repos")
    ids = build_upstream(root / "upstream")
    build_fork(root / "upstream", root / "fork", ids)
    return root


@pytest.mark.slow
def test_upstream_table_and_json(repos):
    day = AS_OF.date().isoformat()
    p = evaluate("upstream", "--repo", str(repos / "upstream"), "--as-of", day)
    assert p.returncode == 0, p.stderr
    assert "maintenance" in p.stdout.lower()
    j = evaluate("upstream", "--repo", str(repos / "upstream"), "--fork", str(repos / "fork"), "--as-of", day, "--json")
    assert j.returncode == 0, j.stderr
    data = json.loads(j.stdout)
    assert data["measured"] and data["commits_90d"] >= 1 and data["fork_behind"] >= 1


@pytest.mark.slow
def test_upstream_as_of_a_day_includes_that_days_commits(tmp_path):
    b = Builder(tmp_path / "repo")
    day = datetime(2026, 8, 21, tzinfo=timezone.utc)

    def days_before_as_of(when: datetime) -> float:
        return (AS_OF - when).total_seconds() / 86400

    early = b.commit("Monday work", days=days_before_as_of(day - timedelta(days=3)), files={"a": "1"})
    late = b.commit("Afternoon fix (#7)", days=days_before_as_of(day + timedelta(hours=15)), files={"a": "2"})
    p = evaluate("upstream", "--repo", str(b.path), "--as-of", "2026-08-21", "--json")
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout)
    assert data["head"] == late and data["as_of"] == "2026-08-21"  # 15:00 that day was left out before
    p = evaluate("upstream", "--repo", str(b.path), "--as-of", "2026-08-21T14:59:59+00:00", "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["head"] == early  # a timestamp stays exact


@pytest.fixture
def store(tmp_path):
    path = tmp_path / "store"
    a = baseline.record(path, sample_result(created="2026-10-02T10:00:00+00:00", run_id="a"))
    b = baseline.record(path, sample_result(created="2026-10-09T10:00:00+00:00", run_id="b", scale=1.3))
    c = baseline.record(path, sample_result(created="2026-10-10T10:00:00+00:00", run_id="c", platform="h200"))
    return path, a, b, c


@pytest.mark.slow
def test_baseline_list_show_diff(store):
    path, a, b, _ = store
    p = evaluate("baseline", "list", "--store", str(path), "--platform", "cpu-x86_64")
    assert p.returncode == 0 and a.tag in p.stdout and b.tag in p.stdout and "h200" not in p.stdout
    p = evaluate("baseline", "show", a.tag, "--store", str(path))
    assert p.returncode == 0 and "bert-tiny" in p.stdout
    p = evaluate("baseline", "diff", a.tag, b.tag, "--store", str(path))
    assert p.returncode == 0 and "regression" in p.stdout
    p = evaluate("baseline", "list", "--store", str(path), "--model", "bert-tinny")
    assert p.returncode == 0 and " ".join(p.stdout.split()) == (
        "No baseline for model 'bert-tinny'; the store has models bert-tiny on platforms cpu-x86_64, h200"
    )


@pytest.mark.slow
def test_compare_two_platforms(store):
    path, a, _, c = store
    p = evaluate(
        "compare", "--candidate", c.tag, "--reference", a.tag, "--store", str(path), "--out", str(path.parent / "cmp")
    )
    assert p.returncode == 0, p.stderr
    assert c.tag in p.stdout and a.tag in p.stdout
    html = (path.parent / "cmp" / "report.html").read_text()
    assert a.tag in html  # the comparison section names the reference platform's baseline


@pytest.mark.slow
def test_report_from_store_alone(store, tmp_path):
    path, a, _, _ = store
    p = evaluate("report", "--baseline", a.tag, "--store", str(path), "--out", str(tmp_path / "r"), "--lang", "zh")
    assert p.returncode == 0, p.stderr
    html = (tmp_path / "r" / "report.zh.html").read_text()
    assert "bert-tiny" in html
    from tests.test_pdf_env import skip_reason

    if not skip_reason("zh"):  # the PDF needs pango, harfbuzz-subset and a CJK font: checked, never assumed
        assert (tmp_path / "r" / "report.zh.pdf").stat().st_size > 10_000
    p = evaluate("report", "--baseline", a.tag, "--store", str(path), "--out", str(tmp_path / "r"))
    assert p.returncode == 0, p.stderr  # English beside it: the Chinese files stay
    assert (tmp_path / "r" / "report.html").is_file() and (tmp_path / "r" / "report.zh.html").read_text() == html


@pytest.mark.slow
def test_checklist_commands():
    p = evaluate("checklist", "validate", "checklists/production.yaml")
    assert p.returncode == 0 and "valid" in p.stdout
    p = evaluate("checklist", "metrics")
    assert p.returncode == 0 and "ops.speedup_geomean" in p.stdout


def _finished_run(reports, run_id="bert-tiny-20261129-120000"):
    """A run folder as the pipeline leaves it when only recording the baseline failed."""
    result = sample_result(run_id=run_id)
    result = dataclasses.replace(
        result, verdict=checklist.evaluate(checklist.load(SHIPPED_CHECKLISTS / "default.yaml"), result)
    )
    folder = reports / "runs" / run_id
    folder.mkdir(parents=True)
    (folder / "results.json").write_text(json.dumps(to_dict(result), indent=1))
    return folder


@pytest.mark.slow
def test_baseline_record_a_finished_run(tmp_path):
    folder = _finished_run(tmp_path / "reports")
    store = tmp_path / "store"
    p = evaluate("baseline", "record", str(folder), "--store", str(store))
    assert p.returncode == 0, p.stderr
    lines = p.stdout.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Recorded bert-tiny/cpu-x86_64/2026Q4-1 in ")
    tag = "bert-tiny/cpu-x86_64/2026Q4-1"
    assert baseline.load(store, tag).run_id == "bert-tiny-20261129-120000"
    # the run folder now says where its baseline is, so it cannot be recorded twice
    assert json.loads((folder / "baseline.json").read_text())["tag"] == tag
    assert from_dict(RunResult, json.loads((folder / "results.json").read_text())).baseline.tag == tag
    again = evaluate("baseline", "record", str(folder), "--store", str(store))
    assert again.returncode == 2 and again.stderr.strip() == (
        f"error: run bert-tiny-20261129-120000 is already recorded as {tag} in {store}; "
        f"`evaluate baseline show {tag}` shows it"
    )
    assert [r.tag for r in baseline.list_baselines(store)] == [tag]


@pytest.mark.slow
def test_baseline_record_defaults_to_the_store_next_to_the_run(tmp_path):
    folder = _finished_run(tmp_path / "reports")
    p = evaluate("baseline", "record", str(folder / "results.json"))  # the file works as well as its folder
    assert p.returncode == 0, p.stderr
    assert [r.tag for r in baseline.list_baselines(tmp_path / "reports" / "baselines")] == [
        "bert-tiny/cpu-x86_64/2026Q4-1"
    ]


# ---------------------------------------------------------------- portability: evaluate port, --targets

H200_GEMM = {
    "block_M": 128,
    "block_N": 256,
    "block_K": 64,
    "num_stages": 3,
    "threads": 256,
    "swizzle": True,
    "panel": 10,
    "policy": "square",
    "split_k": 1,
}


@pytest.mark.slow
def test_port_prints_the_matrix_and_the_summary_lines():
    pytest.importorskip("tilelang")
    args = (
        "port",
        "--family",
        "gemm",
        "--shape",
        "4096x4096x4096",
        "--targets",
        "h100,mi300x,c500",
        "--config",
        json.dumps(H200_GEMM),
    )
    p = evaluate(*args)
    assert p.returncode == 0, p.stderr
    assert "Portability (lowered for each target, not run there)" in p.stdout
    assert "lowers (wgmma)" in p.stdout and "re-tune: uses 208 KB of shared memory" in p.stdout
    lines = p.stdout.splitlines()
    assert "1 of 1 rewritten kernels build for NVIDIA H100." in lines  # summary lines, one line each
    assert any(
        x.startswith("1 of 1 rewritten kernels build for AMD Instinct MI300X; 1 needs re-tuning there") for x in lines
    )
    assert any(x.startswith("0 of 1 rewritten kernels build for MetaX C500") for x in lines)
    assert "ROCm" not in p.stderr  # TVM's warning for a HIP target without ROCm is kept off the terminal
    j = evaluate(*args, "--json")
    assert j.returncode == 0, j.stderr
    data = json.loads(j.stdout)
    assert data["targets"] == ["h100", "mi300x", "c500"] and data["metrics"]["portability.mi300x.kernels_ok"] == 1.0
    tuned = next(c for c in data["cells"] if c["target"] == "mi300x" and c["config_kind"] == "tuned")
    assert tuned["status"] == "needs_retuning" and tuned["fitting_config"]


@pytest.mark.slow
@pytest.mark.parametrize(
    "args, words",
    [
        (["--family", "gemm", "--shape", "4x4"], "error: --shape 4x4 does not fit gemm: it takes 3 sizes, MxNxK"),
        (
            ["--family", "gemm", "--shape", "64x64x64", "--targets", "h300"],
            "error: --targets h300: unknown target 'h300'; known targets: a100, h100, h200, b200, v100, t4, mi250x, "
            "mi300x, c500",
        ),
        (["--family", "gemm", "--shape", "64x64x64", "--targets", "none"], "error: --targets none leaves nothing"),
        (["--family", "gemm", "--shape", "64x64x64", "--config", "[1]"], "error: --config must be a JSON object"),
        (["--family", "gemm", "--shape", "64x64x64", "--config", "{"], "error: --config is not JSON"),
        # a typo'd key or a word for a number is the user's, not a "fails" cell of the matrix
        (
            ["--family", "gemm", "--shape", "64x64x64", "--targets", "a100", "--config", '{"blok_M": 64}'],
            "error: --config: gemm has no config key 'blok_M'; its keys: block_K, block_M",
        ),
        (
            ["--family", "gemm", "--shape", "64x64x64", "--targets", "a100", "--config", '{"block_M": "x"}'],
            "error: --config: 'block_M' must be a number",
        ),
        (["--family", "matmul", "--shape", "64x64x64"], "error: unknown kernel family 'matmul'; known families:"),
        (["--family", "gemm", "--shape", "64x64x64", "--dtype", "int4"], "error: unknown dtype 'int4'"),
        (["--family", "gemm"], "Missing option '--shape'"),
    ],
)
def test_port_bad_input_is_one_line_exit_2(args, words):
    p = evaluate("port", *args)
    assert p.returncode == 2, p.stdout
    assert len(p.stderr.strip().splitlines()) == 1 and words in p.stderr, p.stderr
    assert "Traceback" not in p.stderr


@pytest.mark.slow
def test_main_command_refuses_unknown_targets_before_any_work(tmp_path):
    p = evaluate("--model", "bert-tiny", "--targets", "a100,h300", "--reports", str(tmp_path / "r"))
    assert p.returncode == 2
    assert p.stderr.strip() == (
        "error: --targets a100,h300: unknown target 'h300'; known targets: a100, h100, h200, "
        "b200, v100, t4, mi250x, mi300x, c500, local (this machine's GPU), all, or none to "
        "skip the check"
    )
    assert not (tmp_path / "r").exists()  # refused before a run folder was made


@pytest.mark.slow
def test_help_names_every_family_and_target():
    from evaluator import cli, kernels
    from evaluator.device import targets

    assert "evaluate families" in cli.FAMILIES_HELP
    assert all(key in cli.TARGETS_HELP for key in targets.TARGETS)
    assert f"Default: {', '.join(targets.DEFAULT_TARGETS)}" in cli.TARGETS_HELP
    p = evaluate("families")
    listed = {line.split("│")[1].strip() for line in p.stdout.splitlines() if line.startswith("│")} - {""}
    assert p.returncode == 0 and listed == set(kernels.REGISTRY)  # straight from the registry


@pytest.mark.slow
def test_checklist_metrics_lists_the_portability_metrics():
    from evaluator.device import targets

    p = evaluate("checklist", "metrics")
    assert p.returncode == 0
    for name in ["portability.targets_ok", "portability.kernels_ok"] + [
        f"portability.{k}.kernels_ok" for k in targets.TARGETS
    ]:
        assert name in p.stdout, name


@pytest.mark.slow
@pytest.mark.parametrize(
    "args, words",
    [
        (["--budget", "5", "--lang", "zh"], "leave out --budget, --lang"),
        (["--no-fuse", "-v", "--fail-on", "no-go"], "leave out --no-fuse "),
        (["--model", "bert-tiny"], "leave out --model "),
        (["--fail-on", "maybe"], "--fail-on 'maybe' is not allowed; use never, no-go or conditional"),
    ],
)
def test_resume_refuses_options_it_would_ignore(args, words, tmp_path):
    # The run continues with its saved config: another option is refused before any work,
    # not dropped, and a bad --fail-on is refused before the run, not after it.
    p = evaluate("--resume", str(tmp_path), *args)
    assert p.returncode == 2, p.stdout + p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and words in p.stderr, p.stderr
    assert "Traceback" not in p.stderr + p.stdout


@pytest.mark.slow
@pytest.mark.parametrize(
    "args, words",
    [
        (["--threshold", "nan"], "error: --threshold nan is out of range"),
        (["--threshold", "-1"], "error: --threshold -1.0 is out of range"),
        (["--lang", "fr"], "error: --lang 'fr' is not available; use en or zh"),
        (["--lang", "fr", "--out", "OUT"], "error: --lang 'fr' is not available; use en or zh"),
    ],
)
def test_compare_refuses_bad_options_before_reading_the_store(args, words, tmp_path):
    # One line before any table: a bad --lang is not found only after the comparison is printed.
    args = [str(tmp_path / "out") if a == "OUT" else a for a in args]
    ids = ["--candidate", "m/cpu/2026Q4-2", "--reference", "m/cpu/2026Q4-1"]
    p = evaluate("compare", *ids, *args, "--store", str(tmp_path / "store"))
    assert p.returncode == 2 and not p.stdout.strip(), p.stdout + p.stderr
    assert p.stderr.strip().splitlines() == [p.stderr.strip()] and words in p.stderr, p.stderr
    assert not (tmp_path / "out").exists()


def test_baseline_push_to_a_missing_folder_creates_no_store(tmp_path):
    p = evaluate("baseline", "push", "--store", str(tmp_path / "nowhere"))
    assert p.returncode == 2 and p.stderr.startswith("error: there is no baseline store at "), p.stderr
    assert len(p.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "nowhere").exists()


@pytest.mark.parametrize("shape", ["64x64", "64x0x64"])
def test_bench_shape_error_is_the_only_line_on_stderr(shape):
    p = evaluate("bench", "--family", "gemm", "--shape", shape)
    assert p.returncode == 2
    assert p.stderr.startswith("error: --shape ") and p.stderr.count("\n") == 1, repr(p.stderr)


def test_baseline_record_refuses_a_run_whose_baseline_json_names_its_baseline(tmp_path):
    # The run wrote baseline.json when the store took its baseline, then failed (reading the
    # trend) before results.json said so: recording it again would make a second baseline.
    folder = _finished_run(tmp_path / "reports")
    store = tmp_path / "store"
    first = baseline.record(store, from_dict(RunResult, json.loads((folder / "results.json").read_text())))
    (folder / "baseline.json").write_text(json.dumps(to_dict(first), indent=1))
    p = evaluate("baseline", "record", str(folder), "--store", str(store))
    assert p.returncode == 2 and p.stderr.strip() == (
        f"error: run bert-tiny-20261129-120000 is already recorded as {first.tag} in {first.store}; "
        f"`evaluate baseline show {first.tag}` shows it"
    )
    assert [r.tag for r in baseline.list_baselines(store)] == [first.tag]


def test_interrupt_after_recording_names_the_report_command(tmp_path, capsys):
    # Stopped while rendering: --resume refuses a recorded run, so the line names what renders it.
    import typer

    from evaluator.cli.errors import reported_errors

    folder = _finished_run(tmp_path / "reports")
    (folder / "config.json").write_text("{}")
    data = json.loads((folder / "results.json").read_text())
    data["baseline"] = {"tag": "bert-tiny/cpu-x86_64/2026Q4-1", "store": str(tmp_path / "store")}
    (folder / "results.json").write_text(json.dumps(data))
    with pytest.raises(typer.Exit) as exit_info:
        with reported_errors(run_dir=lambda: folder):
            raise KeyboardInterrupt
    assert exit_info.value.exit_code == 130
    assert capsys.readouterr().err.strip() == (
        f"interrupted; finished stages are kept in {folder}; its baseline bert-tiny/cpu-x86_64/2026Q4-1 is "
        f"recorded; render its report with: evaluate report --baseline bert-tiny/cpu-x86_64/2026Q4-1 "
        f"--store {tmp_path / 'store'} --out {folder}"
    )


@pytest.mark.parametrize("address", ["REFUSED", "not an address"])
def test_fleet_refuses_a_ray_address_nothing_answers_at_in_one_line(address, tmp_path):
    # Left to ray.init, an unreachable head is retried for minutes with Ray's warnings on stderr.
    import socket

    pytest.importorskip("ray")
    if address == "REFUSED":
        with socket.socket() as s:  # a port just freed: nothing listens there
            s.bind(("127.0.0.1", 0))
            address = f"127.0.0.1:{s.getsockname()[1]}"
    plan = tmp_path / "plan.yaml"
    plan.write_text(
        f"name: n\nreports: {tmp_path / 'r'}\nstore: {tmp_path / 's'}\nmodels: [bert-tiny]\n"
        "platforms:\n  - {name: cpu, device: cpu}\n"
    )
    p = evaluate("fleet", str(plan), "--ray", address, timeout=60)
    assert p.returncode == 2, p.stderr
    assert p.stderr.count("\n") == 1 and p.stderr.startswith("error: --ray ") and address in p.stderr, p.stderr
    assert not (tmp_path / "r").exists()  # refused before the sweep folder is made


def test_an_error_in_the_first_stage_leaves_stdout_empty(tmp_path):
    # The stopped stage is not left spinning above the error, and no blank line is left either.
    p = evaluate("--model", "tests/fixtures/user_model.py:broken", "--reports", str(tmp_path))
    assert p.returncode == 2 and p.stderr.startswith("error: ") and p.stderr.count("\n") == 1, p.stderr
    assert p.stdout == "", repr(p.stdout)
