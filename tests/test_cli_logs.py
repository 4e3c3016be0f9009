"""Other tools' output during a run goes to a file in the run folder, not the terminal
(evaluator/cli/logs.py): a library's own stream handler (TileLang installs one), Python
warnings, writes to sys.stderr (Inductor's AUTOTUNE tables) and to file descriptor 2 (C++
code); `-v` leaves everything where it was."""

from __future__ import annotations

import logging
import os
import sys
import warnings

from evaluator.cli.logs import settle, third_party_output


def _talk(name: str) -> logging.Logger:
    logger = logging.getLogger(name)
    logger.handlers[:] = [logging.StreamHandler(sys.stderr)]
    logger.setLevel(logging.INFO)
    logger.propagate = False
    return logger


def _everything(logger: logging.Logger) -> None:
    logger.info("TileLang begins to compile kernel `linear_cpu`")
    warnings.warn("a library warning", UserWarning)
    sys.stderr.write("AUTOTUNE addmm(3152x768, 768x3072)\n")
    sys.stderr.flush()
    os.write(2, b"Warning: T.vectorized loop lowered as a serial loop\n")


def test_other_tools_output_goes_to_the_file_and_their_handlers_come_back(tmp_path, capfd):
    logger = _talk("tilelang.jit.kernel")
    handlers = list(logger.handlers)
    log = tmp_path / "runs" / "x.log"
    with third_party_output(log) as path:
        _everything(logger)
    out, err = capfd.readouterr()
    assert path == log and out == "" and err == ""
    text = log.read_text()
    for line in ("begins to compile kernel", "a library warning", "AUTOTUNE addmm", "serial loop"):
        assert line in text, line
    assert logger.handlers == handlers and not logger.propagate  # put back as it was
    sys.stderr.write("after\n")
    assert capfd.readouterr().err == "after\n"


def test_verbose_moves_nothing(tmp_path, capfd):
    logger = _talk("tilelang.jit.kernel")
    with third_party_output(tmp_path / "x.log", verbose=True) as path:
        _everything(logger)
    err = capfd.readouterr().err
    assert path is None and not (tmp_path / "x.log").exists()
    assert "begins to compile kernel" in err and "AUTOTUNE addmm" in err and "serial loop" in err


def test_the_log_moves_into_the_run_folder_and_an_empty_one_goes(tmp_path):
    log, run = tmp_path / "a.log", tmp_path / "run"
    run.mkdir()
    log.write_text("one line\n")
    assert settle(log, run) == run / "third_party.log" and not log.exists()
    empty = tmp_path / "b.log"
    empty.write_text("")
    assert settle(empty, run) is None and not empty.exists()
    kept = tmp_path / "c.log"
    kept.write_text("x\n")
    assert settle(kept, None) == kept  # no run folder (the run stopped before making it): left where it is
