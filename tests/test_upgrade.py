"""`evaluate upgrade`: another TileLang in another interpreter, beside the current one.

In: this interpreter (as a toolchain of its own), wrapper scripts that start it with a
TileLang that does not import, and, for the slow rehearsal, a second interpreter with
another TileLang release named by EVALUATOR_TEST_TOOLCHAIN (e.g. a virtualenv with
TileLang 0.1.14 beside the installed one). Out: the probe reads the other interpreter's
versions, a worker starts there (or says why not), a bad --toolchain is one line and exit
2, the verdict's rules, the page in both languages, and a whole rehearsal on a small
model whose two baselines record each toolchain's TileLang.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from evaluator import cli
from evaluator.errors import ConfigError
from evaluator.results import Ratio, Toolchain, UpgradeKernel, UpgradeResult, UpgradeSide, UpgradeVerdict
from evaluator.upgrade import toolchain as tc
from evaluator.upgrade.compare import judge
from evaluator.upgrade.verdict import decide, exit_code

ROOT = Path(__file__).resolve().parents[1]
USER_MODEL = ROOT / "tests" / "fixtures" / "user_model.py"


def _tilelang_version(python: str) -> str:
    """The TileLang version `python` reports, read by a plain subprocess of its own."""
    done = subprocess.run(
        [python, "-c", "import tilelang; print(tilelang.__version__)"],
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
        check=True,
    )
    return done.stdout.strip().splitlines()[-1]


def _script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.fixture
def broken_tilelang(tmp_path) -> Path:
    """An interpreter (this one, through a wrapper) whose `import tilelang` fails."""
    fake = tmp_path / "site" / "tilelang"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('libtilelang.so: cannot open shared object file')\n")
    # First on the path, before whatever the caller passes (the worker's package link).
    return _script(tmp_path / "python", f'PYTHONPATH={tmp_path / "site"}:$PYTHONPATH exec {sys.executable} "$@"')


# ---------------------------------------------------------------- the probe and the worker


def test_probe_reads_the_other_interpreters_versions():
    import tilelang
    import torch

    got = tc.probe(sys.executable)
    assert got["tilelang"] == tilelang.__version__ and got["torch"] == torch.__version__
    assert got["python"] == ".".join(map(str, sys.version_info[:3]))
    other = os.environ.get("EVALUATOR_TEST_TOOLCHAIN")
    if other:
        assert tc.probe(other)["tilelang"] == _tilelang_version(other)


def test_probe_says_which_import_fails(broken_tilelang, tmp_path):
    with pytest.raises(ConfigError, match=r"tilelang does not import: ImportError: libtilelang\.so"):
        tc.probe(str(broken_tilelang))
    with pytest.raises(ConfigError, match="is not a Python interpreter that runs"):
        tc.probe(str(_script(tmp_path / "not-python", "echo hello; exit 3")))


def test_a_worker_in_another_interpreter_reports_its_versions(tmp_path):
    """The candidate's worker runs this interpreter as another toolchain: started through
    tuning/isolation.py's start_interpreter, with only the package link on its PYTHONPATH."""
    import tilelang

    w = tc.ToolchainWorker("candidate", sys.executable, tmp_path)
    try:
        assert w.ready(), w.start_error
        info = w.info()
        assert info.tilelang == tilelang.__version__ and info.executable and not info.error
        assert w.env["PYTHONPATH"] == str(tmp_path / "pythonpath")
        assert (tmp_path / "pythonpath" / "evaluator").resolve() == ROOT / "evaluator"
        answer = w.ask({"handler": ("evaluator.upgrade.side", "sample"), "side": 0}, timeout_s=30, what="a sample")
        assert answer == {"status": "runtime_error", "error": "no kernel readied: check it first"}
    finally:
        w.stop()


def test_a_worker_that_dies_answers_crashed_and_is_replaced(tmp_path):
    """Killed between requests (a kernel that takes its process down): the next request is
    answered "crashed" with how it died, and the one after goes to a fresh worker."""
    import signal

    w = tc.ToolchainWorker("candidate", sys.executable, tmp_path)
    request = {"handler": ("evaluator.upgrade.side", "sample"), "side": 0}
    try:
        assert w.ready(), w.start_error
        first = w.worker.proc.pid
        os.kill(first, signal.SIGKILL)
        answer = w.ask(request, timeout_s=30, what="a sample")
        assert answer["status"] == "crashed" and "SIGKILL" in answer["error"], answer
        assert w.restarts == 1
        again = w.ask(request, timeout_s=30, what="a sample")
        assert again["status"] == "runtime_error" and w.worker.proc.pid != first
    finally:
        w.stop()


def test_a_worker_whose_tilelang_does_not_import_says_why(broken_tilelang, tmp_path):
    w = tc.ToolchainWorker("candidate", str(broken_tilelang), tmp_path)
    try:
        assert not w.ready()
        assert "failed to start" in w.start_error and "libtilelang.so" in w.start_error
        answer = w.ask({"handler": ("evaluator.upgrade.side", "sample"), "side": 0}, timeout_s=5, what="a sample")
        assert answer["status"] == "not_started" and "libtilelang.so" in answer["error"]
        assert decide(w.info(), []).decision == "BROKEN"
    finally:
        w.stop()


def test_a_candidate_that_cannot_start_is_broken_with_its_reason_and_records_nothing(broken_tilelang, tmp_path):
    """Past the probe (a library that fails only once the worker loads it, say): the model
    is profiled, nothing is tuned, the verdict is BROKEN with the worker's own reason, the
    page says so, and no baseline is recorded."""
    from evaluator import config as config_mod
    from evaluator.upgrade.rehearsal import rehearse

    cfg = config_mod.build(
        model=f"{USER_MODEL}:make",
        device="cpu",
        families="gemm",
        budget=1,
        e2e=False,
        soak_seconds=0,
        reports=tmp_path / "reports",
        pdf=False,
    )
    out = rehearse(cfg, str(broken_tilelang))
    r = out.result
    assert r.verdict.decision == "BROKEN" and not r.kernels and not r.baselines
    assert "libtilelang.so" in r.candidate.error and "libtilelang.so" in r.verdict.reasons[0]
    assert "not recorded" in r.baseline_error and not (tmp_path / "reports" / "baselines").exists()
    page = out.html.read_text()
    assert "BROKEN" in page and "The candidate toolchain does not start" in page and "libtilelang.so" in page


# ---------------------------------------------------------------- the command line


def _run_main(monkeypatch, capsys, *args) -> tuple[int, list[str]]:
    monkeypatch.setattr(sys, "argv", ["evaluate", *map(str, args)])
    with pytest.raises(SystemExit) as stop:
        cli.main()
    _, err = capsys.readouterr()
    return stop.value.code, [line for line in err.splitlines() if line.strip()]


@pytest.mark.parametrize(
    "which, expected",
    [
        ("missing", "no such file"),
        ("folder", "not an executable file"),
        ("not_python", "is not a Python interpreter that runs"),
        ("broken", "tilelang does not import"),
    ],
)
def test_a_bad_toolchain_is_one_line_and_exit_2(which, expected, broken_tilelang, tmp_path, monkeypatch, capsys):
    python = {
        "missing": tmp_path / "nowhere" / "python",
        "folder": tmp_path,
        "not_python": _script(tmp_path / "sh-python", "exit 0"),
        "broken": broken_tilelang,
    }[which]
    reports = tmp_path / "reports"
    code, lines = _run_main(
        monkeypatch, capsys, "upgrade", "--model", f"{USER_MODEL}:make", "--toolchain", python, "--reports", reports
    )
    assert code == 2 and len(lines) == 1, lines
    assert lines[0].startswith(f"error: --toolchain {python}") and expected in lines[0], lines
    assert not (reports / "runs").exists()  # stopped before any profiling or tuning


# ---------------------------------------------------------------- verdict and page


def _side(status="ok", ms=None):
    from evaluator.results import Timing

    t = Timing(median_ms=ms, p10_ms=ms, p90_ms=ms, mean_ms=ms, cv=0.01, reps=5) if ms else None
    return UpgradeSide(status=status, error="" if status == "ok" else f"{status} here", tilelang=t, torch=t)


def _kernel(status, speed=None, current="ok", candidate="ok"):
    return UpgradeKernel(
        family="gemm",
        shape=(4, 96, 48),
        dtype="float32",
        source="model",
        config={"block_M": 8},
        current=_side(current, 0.02),
        candidate=_side(candidate, 0.03 if candidate == "ok" else None),
        status=status,
        speed=speed,
        tolerance=0.05 if speed else None,
    )


def test_judge_and_decide():
    ok, slow = Ratio(0.7, 0.65, 0.75), Ratio(0.97, 0.9, 1.04)
    assert judge(_side(), _side(), ok, 0.05)[0] == "slower"
    assert judge(_side(), _side(), slow, 0.05)[0] == "same"  # within the noise
    flagged = judge(_side(), _side(), ok, 0.05, unstable=True)  # a flagged deciding number asks for a rerun
    assert flagged[0] == "not_compared" and "unstable after re-measurement" in flagged[1]
    assert judge(_side(), _side(), Ratio(1.3, 1.2, 1.4), 0.05)[0] == "faster"
    assert judge(_side(), _side("compile_error"), None, 0.05)[0] == "broken"
    assert judge(_side(), _side("wrong"), None, 0.05)[0] == "wrong"
    assert judge(_side(), _side("not_run"), None, 0.05)[0] == "not_compared"
    assert judge(_side("compile_error"), _side("compile_error"), None, 0.05)[0] == "current_fails"

    up = Toolchain("candidate", "/x/python", tilelang="0.1.14")
    assert decide(up, [_kernel("same"), _kernel("faster")]).decision == "SAFE"
    assert decide(up, [_kernel("same"), _kernel("slower", ok)]).decision == "REGRESSIONS"
    assert decide(up, [_kernel("slower", ok), _kernel("broken", candidate="compile_error")]).decision == "BROKEN"
    assert decide(up, [_kernel("current_fails", current="compile_error")]).decision == "INCONCLUSIVE"
    assert decide(up, []).decision == "INCONCLUSIVE"
    assert exit_code(UpgradeVerdict("REGRESSIONS"), "regressions") == 1
    assert exit_code(UpgradeVerdict("REGRESSIONS"), "broken") == 0
    assert exit_code(UpgradeVerdict("INCONCLUSIVE"), "broken") == 1


def _result(kernels, verdict) -> UpgradeResult:
    from samples import sample_result

    base = sample_result()
    return UpgradeResult(
        run_id="m-upgrade-20261205-000000",
        created="2026-12-05T00:00:00+00:00",
        model=base.model,
        hardware=base.environment.hardware,
        current=Toolchain("current", "/usr/bin/python3", python_version="3.11.7", tilelang="0.1.15"),
        candidate=Toolchain("candidate", "/venv/bin/python", python_version="3.11.7", tilelang="0.1.14"),
        kernels=tuple(kernels),
        verdict=verdict,
        threshold=0.05,
        baselines={"candidate": "m/cpu/2026Q4-1", "current": "m/cpu/2026Q4-2"},
    )


def test_the_page_shows_the_verdict_each_kernel_and_the_pair(tmp_path):
    from evaluator.report.html import render_upgrade

    slow = _kernel("slower", Ratio(0.7, 0.65, 0.75))
    broken = _kernel("broken", candidate="compile_error")
    r = _result([slow, broken], decide(Toolchain("candidate", "/venv/bin/python"), [slow, broken]))
    page = render_upgrade(r, tmp_path).read_text()
    assert "BROKEN" in page and "0.1.14" in page and "0.1.15" in page
    assert "gemm 4x96x48 does not build under the candidate: compile_error here" in page
    assert "evaluate baseline diff m/cpu/2026Q4-2 m/cpu/2026Q4-1" in page
    assert "row-slower" in page and "0.70×" in page
    assert "slower beyond the 5% that counts" in page
    zh = render_upgrade(r, tmp_path, lang="zh")
    text = zh.read_text()
    assert zh.name == "upgrade.zh.html" and "不可用" in text and "在候选版本下无法构建" in text
    assert "慢于判定阈值 5%" in text and "模型" in text
    for english in ("that counts", "each toolchain in its own", ", model<", "SAFE:"):
        assert english not in text, english


# ---------------------------------------------------------------- the whole rehearsal


@pytest.mark.slow
def test_a_rehearsal_between_two_tilelang_releases(tmp_path, monkeypatch, capsys):
    """`evaluate upgrade` on the command line, as a user runs it, then its result read back."""
    other = os.environ.get("EVALUATOR_TEST_TOOLCHAIN")
    if not other:
        pytest.skip("set EVALUATOR_TEST_TOOLCHAIN to a Python with another TileLang installed (e.g. a 0.1.14 venv)")
    import tilelang

    from evaluator.results import from_dict

    reports = tmp_path / "reports"
    monkeypatch.setattr(
        sys,
        "argv",
        ["evaluate", "upgrade", "--model", f"{USER_MODEL}:make", "--toolchain", other, "--device", "cpu"]
        + ["--families", "gemm,layernorm", "--budget", "1", "--reps", "3", "--reports", str(reports)],
    )
    with pytest.raises(SystemExit) as stop:
        cli.main()
    out, err = capsys.readouterr()
    assert stop.value.code == 0, err
    assert "Upgrade verdict:" in out and "Baselines: candidate " in out
    [run_dir] = (reports / "runs").glob("*-upgrade-*")
    r = from_dict(UpgradeResult, json.loads((run_dir / "upgrade.json").read_text()))
    assert r.current.tilelang == tilelang.__version__
    assert r.candidate.tilelang == _tilelang_version(other) and not r.candidate.error
    assert f"TileLang {r.candidate.tilelang}" in err  # the probe's line
    assert r.kernels and {k.family for k in r.kernels} >= {"gemm", "layernorm"}
    for k in r.kernels:
        assert k.current.verified and k.candidate.verified, (k.family, k.current, k.candidate)
        assert k.speed is not None and k.speed.value > 0 and k.control is not None
        assert k.current.verify.passed and k.candidate.verify.passed
    assert r.verdict.decision in ("SAFE", "REGRESSIONS", "INCONCLUSIVE")  # speed on a shared CPU is noise
    assert r.candidate.tilelang in (run_dir / "upgrade.html").read_text()
    assert set(r.baselines) == {"candidate", "current"} and not r.baseline_error
    for role, tag in r.baselines.items():
        manifest = json.loads((reports / "baselines" / tag / "manifest.json").read_text())
        assert manifest["tilelang"] == getattr(r, role).tilelang, (role, manifest["tilelang"])
        assert manifest["settings"]["toolchain"]["role"] == role
