"""benchmarks/graph_gaps.py: how one CUDA-graph replay's kernel events are split into kernel
time and time between kernels (the profiling itself needs CUDA and ran on the H200; its
files are reports/examples/benchmarks/h200-<date>/graph_gaps_*.json).

In: synthetic kernel events (name, start, duration in µs). Out: the sums and counts the
script prints, checked by hand.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("graph_gaps", ROOT / "benchmarks" / "graph_gaps.py")
gg = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gg)


def ev(name, ts, dur):
    return {"name": name, "ts": ts, "dur": dur}


# gemm 0-10, gap 2, ours 12-20, gap 1, add 21-23, starts 0.5 before the end: 22.5-30
REPLAY = [
    ev("void nvjet_sm90<1>(int)", 0.0, 10.0),
    ev("linear_tc_kernel", 12.0, 8.0),
    ev("void at::native::add<float>(x)", 21.0, 2.0),
    ev("void at::native::add<float>(x)", 22.5, 7.5),
]


def test_split_counts_kernel_time_gaps_and_early_starts():
    r = gg.split(REPLAY, ours={"linear_tc_kernel"})
    assert r["kernels"] == 4
    assert r["span_us"] == pytest.approx(30.0)
    assert r["kernel_us"] == pytest.approx(27.5)
    assert r["between_us"] == pytest.approx(3.0)  # the overlap counts as no gap, not a negative one
    assert r["overlapped_starts"] == 1
    assert (r["tilelang_kernels"], r["tilelang_kernel_us"], r["gap_before_tilelang_us"]) == (1, 8.0, 2.0)
    assert r["largest_gaps"][0] == (2.0, "linear_tc_kernel")


def test_by_name_groups_template_instances_and_keeps_the_gap_before_each():
    rows = gg.by_name(REPLAY)
    assert set(rows) == {"nvjet_sm90", "linear_tc_kernel", "at::native::add"}
    add = rows["at::native::add"]
    assert (add["calls"], add["kernel_us"], add["gap_before_us"], add["overlapped"]) == (2, 9.5, 1.0, 1)
    assert rows["nvjet_sm90"]["gap_before_us"] == 0.0  # the first kernel has no predecessor


def test_median_split_keeps_whole_forwards_only():
    shifted = [dict(e, ts=e["ts"] + 100) for e in REPLAY]
    slow = [dict(e, dur=e["dur"] * 2, ts=e["ts"] * 2) for e in REPLAY]
    cut = REPLAY[:3]  # a replay the profiler recorded only in part
    out = gg.median_split([REPLAY, shifted, slow, cut], ours={"linear_tc_kernel"})
    assert out["kernels"] == 4 and out["replays"] == 3
    assert out["kernel_us"] == pytest.approx(27.5)  # median of 27.5, 27.5, 55
    json.dumps(out)  # what --json writes


def test_short_names_drop_templates_and_arguments():
    assert (
        gg.short("void at::native::vectorized_elementwise_kernel<8, F>(int, F)")
        == "at::native::vectorized_elementwise_kernel"
    )
    assert gg.short("linear_tc_kernel") == "linear_tc_kernel"
