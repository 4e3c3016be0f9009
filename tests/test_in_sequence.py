"""benchmarks/in_sequence.py: a kernel's own durations picked out of captured replays by
name (the capture itself needs CUDA; tests/gpu/test_in_sequence_gpu.py runs it).

In: synthetic replays of kernel events. Out: the durations of the named kernels only.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("in_sequence", ROOT / "benchmarks" / "in_sequence.py")
seq = importlib.util.module_from_spec(spec)
spec.loader.exec_module(seq)


def test_durations_are_the_named_kernels_of_every_replay(monkeypatch):
    replays = [
        [
            {"name": "nvjet_gemm", "ts": 0.0, "dur": 25.0},
            {"name": "gelu", "ts": 26.0, "dur": 12.0},
            {"name": "linear_tc_kernel", "ts": 39.0, "dur": 48.7},
        ]
    ] * 3
    monkeypatch.setattr(seq, "graph_kernel_events", lambda fn, n: replays[:n])
    assert seq.durations(lambda: None, {"linear_tc_kernel"}, 3) == [48.7, 48.7, 48.7]
    assert seq.durations(lambda: None, {"absent"}, 2) == []
