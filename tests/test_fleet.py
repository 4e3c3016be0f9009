"""The fleet sweep (evaluator/fleet.py): plan validation, the summary, a task's failure as
a cell, and whole sweeps through Ray in local mode.

In: plan files written here or tests/fixtures/fleet_plan.yaml, tiny CPU models (bert-tiny
with one family, tests/fixtures/user_model.py) at the smallest budgets. Out: assertions
on the one-line errors, the cells, fleet.html and fleet.json. The Ray tests skip, with
the reason, where ray is not installed (pip install -e '.[fleet]'); the rest need no Ray.
"""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from evaluator import fleet
from evaluator.errors import ConfigError

FIXTURES = Path(__file__).parent / "fixtures"
USER_MODEL = FIXTURES / "user_model.py"
# The smallest evaluation that still goes through every stage (no soak, no PDF).
TINY = (
    "defaults: {budget: 2, fine_rounds: 0, soak_seconds: 0, pdf: false, max_shapes: 1, ops: 1, reps: 3, "
    "compile_mode: none}\n"
)


def _plan(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "plan.yaml"
    path.write_text(text)
    return path


def _error(path: Path) -> str:
    with pytest.raises(ConfigError) as info:
        fleet.load_plan(path)
    message = str(info.value)
    assert "\n" not in message, message
    return message


# ---------------------------------------------------------------- plan validation (no Ray)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("name: x\n", "models: Field required"),
        ("name: x\nmodels: []\n", "models: List should have at least 1 item"),
        ("name: x\nmodels: [{name: a}]\n", "models[0].model: Field required"),
        ("name: x\nmodels: [bert-tiny]\nplatform: []\n", "platform: unknown field; did you mean 'platforms'?"),
        (
            "name: x\nmodels: [bert-tiny]\ndefaults: {budgt: 2}\n",
            "defaults.budgt: unknown evaluate option; did you mean 'budget'?",
        ),
        ("name: x\nmodels: [bert-tiny]\ndefaults: {budget: fast}\n", "defaults.budget: Input should be a valid number"),
        (
            "name: x\nmodels: [bert-tiny]\ndefaults: {store: elsewhere}\n",
            "defaults.store: not an option here; the plan's `store` sets it",
        ),
        ("name: x\nmodels: [bert-tiny]\ndefaults: {name: a}\n", "defaults.name: a model's name goes in its own entry"),
        (
            "name: x\nmodels: [{model: bert-tiny, batchsize: 8}]\n",
            "models[0].batchsize: unknown evaluate option; did you mean 'batch_size'?",
        ),
        ("name: x\nmodels: [bert-tiny, bert-tiny]\n", "models[1].name: 'bert-tiny' is also models[0]"),
        (
            "name: x\nmodels: [bert-tiny]\nplatforms: [{name: p, device: tpu}]\n",
            "platforms[0].device: Input should be 'auto', 'cpu' or 'cuda'",
        ),
        (
            "name: x\nmodels: [bert-tiny]\nplatforms: [{name: p, resource: {}}]\n",
            "platforms[0].resource: unknown field; did you mean 'resources'?",
        ),
        (
            "name: x\nmodels: [bert-tiny]\nplatforms: [{name: g, device: cuda}]\n",
            "platforms[0].resources: a cuda platform needs num_gpus",
        ),
        (
            "name: x\nmodels: [bert-tiny]\nplatforms: [{name: p, resources: {num_cpus: -1}}]\n",
            "platforms[0].resources: Value error, num_cpus must be 0 or more",
        ),
        (
            "name: x\nmodels: [bert-tiny]\nplatforms: [{name: p}, {name: p}]\n",
            "platforms[1].name: 'p' is also platforms[0]",
        ),
        (
            "name: x\nmodels: [bert-tiny]\nstore: https://example.com/store.git\n",
            "store: 'https://example.com/store.git' is a git URL",
        ),
        ("- a\n- b\n", "a plan is a mapping with name, models"),
        ("name: [x\n", "not valid YAML at line"),
        ("name: x\nmodels: [bert-tiny]\ndefaults: {as-of: 2026-13-45}\n", "reads as a date but is none"),
        # The checks `evaluate` makes before a run, on every cell, the cell named:
        (
            "name: x\nmodels: [bert-tiny]\ndefaults: {reps: 0}\n",
            "models[0] 'bert-tiny' on platform 'this machine': --reps must be a positive integer, got 0",
        ),
        ("name: x\nmodels: [bert-tny]\n", "models[0] 'bert-tny' on platform 'this machine': unknown model 'bert-tny'"),
    ],
)
def test_plan_errors_are_one_line_naming_the_file_and_field(tmp_path, text, expected):
    path = _plan(tmp_path, text)
    message = _error(path)
    assert message.startswith(f"{path}: "), message
    assert expected in message, message


def test_missing_plan_file(tmp_path):
    assert _error(tmp_path / "nope.yaml") == f"{tmp_path / 'nope.yaml'}: no such plan file"


def test_plan_reads_specs_overrides_paths_and_platforms(tmp_path):
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "mine.py").write_text(USER_MODEL.read_text())
    path = _plan(
        tmp_path,
        TINY
        + """name: nightly
reports: out
store: shared/store
models:
  - bert-tiny
  - {model: models/mine.py:make, name: mine, batch-size: 2, families: [gemm, layernorm]}
platforms:
  - {name: cpu, device: cpu, resources: {num_cpus: 1}, options: {reps: 5, no-pdf: true}}
  - {name: h200, device: cuda, resources: {num_gpus: 1}, accelerator_type: H200}
""",
    )
    plan = fleet.load_plan(path)
    assert plan.name == "nightly" and plan.path == path.resolve()
    # Relative paths are relative to the plan file's folder, wherever it runs from.
    assert plan.reports == (tmp_path / "out").resolve()
    assert plan.store == (tmp_path / "shared" / "store").resolve()
    bert, mine = plan.models
    assert (bert.name, bert.spec, bert.options) == ("bert-tiny", "bert-tiny", {})
    assert mine.name == "mine" and mine.spec == f"{(tmp_path / 'models' / 'mine.py').resolve()}:make"
    assert mine.options == {"batch_size": 2, "families": "gemm,layernorm"}
    cpu, h200 = plan.platforms
    assert (cpu.device, cpu.resources, h200.resources, h200.accelerator_type) == (
        "cpu",
        {"num_cpus": 1},
        {"num_gpus": 1},
        "H200",
    )
    # defaults, then the platform's options, then the model's overrides
    assert plan.options(mine, cpu) == {
        "budget": 2.0,
        "fine_rounds": 0,
        "soak_seconds": 0.0,
        "pdf": False,
        "max_shapes": 1,
        "ops": 1,
        "reps": 5,
        "batch_size": 2,
        "families": "gemm,layernorm",
        "compile_mode": "none",
    }
    assert plan.options(bert, h200)["reps"] == 3
    # The command line's --reports and --store win, relative to the working folder; the
    # plan's own shared store stays unless --store replaces it.
    moved = fleet.load_plan(path, reports=tmp_path / "elsewhere", check=False)
    assert moved.reports == (tmp_path / "elsewhere").resolve() and moved.store == plan.store
    assert fleet.load_plan(path, store=tmp_path / "s2", check=False).store == tmp_path / "s2"


def test_default_platform_is_this_machine(tmp_path):
    plan = fleet.load_plan(_plan(tmp_path, "name: x\nmodels: [bert-tiny]\n"), check=False)
    assert [(p.name, p.device, p.resources) for p in plan.platforms] == [("this machine", "auto", {})]
    assert plan.reports == tmp_path.resolve() / "reports" and plan.store == plan.reports / "baselines"


def test_fixture_plan_is_valid(tmp_path):
    plan = fleet.load_plan(FIXTURES / "fleet_plan.yaml", reports=tmp_path)
    assert [m.name for m in plan.models] == ["bert-tiny", "user-model"]
    assert plan.models[1].spec == f"{USER_MODEL.resolve()}:make"


# ---------------------------------------------------------------- a task's failure is a cell (no Ray)


def _task(tmp_path: Path, spec: str = "bert-tiny") -> dict:
    return dict(
        model="m",
        platform="cpu",
        spec=spec,
        device="cpu",
        cell_dir=str(tmp_path / "cell"),
        store=str(tmp_path / "store"),
        options={"budget": 2, "pdf": False},
    )


def test_an_unexpected_error_in_a_task_is_a_failed_cell_with_its_traceback(tmp_path, monkeypatch):
    from evaluator import pipeline

    def boom(cfg, reporter=None):
        raise ValueError("shape mismatch\nsecond line")

    monkeypatch.setattr(pipeline, "run", boom)
    cell = fleet.run_cell(_task(tmp_path))
    assert cell.status == "failed" and not cell.ok
    assert cell.error == "ValueError: shape mismatch second line (full traceback in traceback.txt)"
    assert cell.traceback == tmp_path / "cell" / "traceback.txt"
    assert "raise ValueError" in cell.traceback.read_text()
    assert cell.report is None and cell.run_dir is None and cell.wall_s >= 0


def test_an_evaluator_error_in_a_task_is_its_own_line(tmp_path):
    # config.build rejects it inside the task (load_plan would have caught it earlier).
    cell = fleet.run_cell({**_task(tmp_path), "options": {"reps": 0}})
    assert (cell.status, cell.error, cell.traceback) == ("failed", "--reps must be a positive integer, got 0", None)


# ---------------------------------------------------------------- the summary (no Ray)


def _result(tmp_path: Path) -> fleet.FleetResult:
    run = tmp_path / "sweep" / "a--cpu" / "runs" / "a-1"
    run.mkdir(parents=True)
    (run / "report.html").write_text("<html>a</html>")
    (run / "results.json").write_text("{}")
    cells = (
        fleet.Cell(
            model="a",
            platform="cpu",
            status="ok",
            spec="bert-tiny",
            device="cpu",
            verdict="GO",
            speedup=1.234,
            baseline="a/cpu-x86_64/2026Q4-1",
            run_dir=run,
            report=run / "report.html",
            wall_s=12.0,
            host="h",
            hardware="Xeon",
            options={"budget": 2.0, "checklist": Path("/c.yaml")},
        ),
        fleet.Cell(model="a", platform="gpu", status="failed", device="cuda", error="no node offers GPU 1"),
        fleet.Cell(model="b<x>", platform="cpu", status="failed", error="factory raised <script>alert(1)</script>"),
        fleet.Cell(model="b<x>", platform="gpu", status="ok", verdict="NO-GO"),
    )
    return fleet.FleetResult(
        name="nightly",
        plan=tmp_path / "plan.yaml",
        folder=tmp_path / "sweep",
        store=tmp_path / "store",
        ray="local (2 CPUs)",
        created="2026-12-01T00:00:00+00:00",
        models=("a", "b<x>"),
        platforms=("cpu", "gpu"),
        cells=cells,
        wall_s=30.0,
    )


def test_summary_is_a_matrix_linking_each_report_with_red_failed_cells(tmp_path):
    result = _result(tmp_path)
    html_path = fleet.summary(result, tmp_path / "sweep")
    html = html_path.read_text()
    assert html_path == tmp_path / "sweep" / "fleet.html"
    assert '<a href="a--cpu/runs/a-1/report.html">GO</a>' in html  # relative: the folder moves as a whole
    assert "1.23x end to end" in html
    assert html.count('<td class="failed">') == 2 and '<td class="go">' in html and '<td class="nogo">' in html
    assert "no node offers GPU 1" in html
    assert "<script>" not in html and "&lt;script&gt;" in html and "b&lt;x&gt;" in html  # escaped
    assert "http" not in html.replace("http-equiv", "")  # self-contained: nothing fetched
    header = re.findall(r"<th>([^<]*)</th>", html)
    assert header[:3] == ["model", "cpu", "gpu"]


def test_summary_json_round_trips(tmp_path):
    result = _result(tmp_path)
    fleet.summary(result, tmp_path / "out")
    data = json.loads((tmp_path / "out" / "fleet.json").read_text())
    assert [c["status"] for c in data["cells"]] == ["ok", "failed", "failed", "ok"]
    assert data["cells"][0]["report"] == str(tmp_path / "sweep" / "a--cpu" / "runs" / "a-1" / "report.html")
    back = fleet.load_summary(tmp_path / "out" / "fleet.json")
    assert back.cells[0].report == result.cells[0].report and back.cells[2].error == result.cells[2].error
    assert back.failed == result.failed and back.models == result.models
    # Written elsewhere, the links still reach the reports.
    assert '<a href="../sweep/a--cpu/runs/a-1/report.html">' in (tmp_path / "out" / "fleet.html").read_text()


@pytest.mark.parametrize("fail_on, code", [("never", 0), ("failed", 1), ("no-go", 1), ("conditional", 1)])
def test_exit_code_gates_on_failed_cells_and_verdicts(tmp_path, fail_on, code):
    result = _result(tmp_path)  # GO, a failed cell, NO-GO
    assert fleet.exit_code(result, fail_on) == code
    clean = fleet.FleetResult(**{**result.__dict__, "cells": tuple(c for c in result.cells if c.verdict == "GO")})
    assert fleet.exit_code(clean, fail_on) == 0
    cond = dataclasses.replace(result.cells[0], verdict="CONDITIONAL GO")
    assert fleet.exit_code(dataclasses.replace(clean, cells=(cond,)), fail_on) == (fail_on == "conditional")
    with pytest.raises(ConfigError, match="--fail-on 'sometimes' is not allowed; use never, failed, no-go, cond"):
        fleet.exit_code(result, "sometimes")


# ---------------------------------------------------------------- without Ray


def test_missing_ray_is_one_line_saying_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    with pytest.raises(ConfigError) as info:
        fleet.require_ray()
    assert str(info.value) == "evaluate fleet needs Ray: pip install -e '.[fleet]' (or pip install 'ray[default]')"
    plan = fleet.load_plan(_plan(tmp_path, "name: x\nmodels: [bert-tiny]\n"))
    with pytest.raises(ConfigError, match=re.escape(fleet.RAY_MISSING)):
        fleet.run_plan(plan)
    assert not (tmp_path / "reports").exists()  # nothing written before the error


class _FakeRay:
    """Stands in for the ray module where the driver's own logic is under test: every
    task is submitted, and Ctrl-C arrives while waiting for the first to finish."""

    def __init__(self):
        self.up, self.calls = False, []

    def is_initialized(self):
        return self.up

    def init(self, **kwargs):
        self.up = True
        self.calls.append(("init", kwargs))

    def shutdown(self):
        self.up = False
        self.calls.append(("shutdown",))

    def nodes(self):
        return [{"Alive": True, "Resources": {"CPU": 2.0, "memory": 1e9, "node:10.0.0.1": 1.0}}]

    def remote(self, **kwargs):
        calls = self.calls

        class Remote:
            def options(self, **opts):
                calls.append(("options", opts))
                return self

            def remote(self, task):
                return object()

        return lambda fn: Remote()

    def wait(self, refs, num_returns=1):
        raise KeyboardInterrupt

    def cancel(self, ref, force=False):
        self.calls.append(("cancel", force))


def test_ctrl_c_cancels_the_tasks_keeps_a_summary_and_names_the_folder(tmp_path, monkeypatch):
    fake = _FakeRay()
    monkeypatch.setitem(sys.modules, "ray", fake)
    plan = fleet.load_plan(
        _plan(
            tmp_path,
            TINY + "name: x\nmodels: [bert-tiny, {model: bert-tiny, name: b2}]\n"
            "platforms: [{name: cpu, device: cpu}, "
            "{name: gpu, device: cuda, resources: {num_gpus: 1}}]\n",
        )
    )
    with pytest.raises(KeyboardInterrupt) as info:
        fleet.run_plan(plan, num_cpus=2)
    folder = info.value.run_dir  # what the CLI names in "interrupted; ... kept in <folder>"
    assert folder.parent == plan.reports and folder.name.startswith("x-")
    kinds = [c[0] for c in fake.calls]
    assert kinds == ["init", "options", "options", "cancel", "cancel", "shutdown"]
    assert fake.calls[0][1] == {
        "num_cpus": 2,
        "include_dashboard": False,
        "ignore_reinit_error": True,
        "log_to_driver": False,
        "logging_level": 30,
    }
    assert fake.calls[1][1] == {"num_cpus": 1, "name": "evaluate bert-tiny on cpu"}
    done = fleet.load_summary(folder / "fleet.json")
    assert (
        done.interrupted
        and [c.error for c in done.cells if c.platform == "cpu"] == ["interrupted before it finished"] * 2
    )
    # The GPU column could never run here: failed at once, never submitted.
    assert all(
        "no node of the Ray cluster offers CPU 1, GPU 1 (nodes offer: CPU 2)" in c.error
        for c in done.cells
        if c.platform == "gpu"
    )
    assert "The sweep was interrupted" in (folder / "fleet.html").read_text()


# ---------------------------------------------------------------- through Ray, local mode


@pytest.fixture
def ray():
    ray = pytest.importorskip("ray", reason="the fleet runs on Ray: pip install -e '.[fleet]'")
    yield ray
    if ray.is_initialized():  # a failed test must not leave its Ray to the next one
        ray.shutdown()


def _tags(store: Path) -> list[str]:
    return subprocess.run(["git", "-C", str(store), "tag"], capture_output=True, text=True, check=True).stdout.split()


def _links(html_path: Path) -> list[Path]:
    return [html_path.parent / h for h in re.findall(r'href="([^"]+)"', html_path.read_text())]


@pytest.mark.slow
def test_two_tiny_cpu_models_run_through_ray_and_write_the_summary(tmp_path, ray):
    plan = fleet.load_plan(FIXTURES / "fleet_plan.yaml", reports=tmp_path / "reports")
    result = fleet.run_plan(plan, num_cpus=2)
    assert not ray.is_initialized()  # the local Ray it started is shut down again
    assert [(c.model, c.platform, c.status) for c in result.cells] == [
        ("bert-tiny", "cpu", "ok"),
        ("user-model", "cpu", "ok"),
    ], [c.error for c in result.cells]
    for c in result.cells:
        assert c.verdict in ("GO", "CONDITIONAL GO", "NO-GO", "INCONCLUSIVE")  # a busy machine may not decide
        assert c.speedup and c.wall_s > 0 and not c.error
        assert c.report.is_file() and c.report.parent == c.run_dir and c.run_dir.is_relative_to(result.folder)
        assert c.options["reps"] == 3 and c.hardware and c.host
    # Each task recorded its baseline in the one shared store.
    assert sorted(_tags(plan.store)) == sorted(c.baseline for c in result.cells)

    html = fleet.summary(result, result.folder)
    links = _links(html)
    assert {p.resolve() for p in links} >= {c.report.resolve() for c in result.cells}
    assert all(p.is_file() for p in links)
    data = json.loads((result.folder / "fleet.json").read_text())
    assert [(c["model"], c["status"]) for c in data["cells"]] == [("bert-tiny", "ok"), ("user-model", "ok")]


@pytest.mark.slow
def test_a_failing_model_is_a_failed_cell_and_the_others_complete(tmp_path, ray):
    (tmp_path / "crash.py").write_text("import os\n\n\ndef make():\n    os._exit(3)  # kills the Ray worker\n")
    path = _plan(
        tmp_path,
        TINY
        + f"""name: with-failures
models:
  - {{model: {USER_MODEL}:make, name: fine}}
  - {{model: {USER_MODEL}:broken, name: broken}}
  - {{model: crash.py:make, name: crash}}
platforms:
  - {{name: cpu, device: cpu, resources: {{num_cpus: 1}}}}
  - {{name: gpu, device: cuda, resources: {{num_gpus: 1}}}}
""",
    )
    result = fleet.run_plan(fleet.load_plan(path), num_cpus=2)
    cell = result.cell
    assert cell("fine", "cpu").ok and cell("fine", "cpu").report.is_file()
    # The factory raised: its own error, one line.
    broken = cell("broken", "cpu")
    assert broken.status == "failed"
    assert broken.error == f"model factory '{USER_MODEL}:broken' raised RuntimeError: weights not found"
    # The worker process died under the task: still a cell, not a lost sweep.
    crash = cell("crash", "cpu")
    assert crash.status == "failed" and re.search(r"Worker\w*Error: .*died", crash.error), crash.error
    # A platform no node can host fails its cells at once rather than waiting forever.
    for m in ("fine", "broken", "crash"):
        gpu = cell(m, "gpu")
        assert gpu.status == "failed" and "no node of the Ray cluster offers" in gpu.error and "GPU 1" in gpu.error
    assert len(result.failed) == 5

    html = fleet.summary(result, result.folder).read_text()
    assert html.count('<td class="failed">') == 5
    assert "weights not found" in html and "died" in html
    assert all(p.is_file() for p in _links(result.folder / "fleet.html"))


def test_a_sweep_that_cannot_reach_ray_leaves_no_folder(tmp_path, ray, monkeypatch):
    def refused(*args, **kwargs):
        raise ConnectionError("could not connect to 10.0.0.5:6379")

    monkeypatch.setattr(ray, "init", refused)
    plan = fleet.load_plan(FIXTURES / "fleet_plan.yaml", reports=tmp_path / "reports", store=tmp_path / "store")
    with pytest.raises(ConfigError, match="cannot connect to the Ray cluster"):
        fleet.run_plan(plan, ray_address="10.0.0.5:6379")
    with pytest.raises(ConfigError, match="cannot start a local Ray"):
        fleet.run_plan(plan)
    assert not (tmp_path / "reports").exists() or not any((tmp_path / "reports").iterdir())
