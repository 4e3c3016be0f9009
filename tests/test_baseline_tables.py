"""The files of one baseline folder (evaluator/baseline/tables.py), written without git.

In: synthetic RunResults from tests/samples.py, some with awkward values (commas, quotes
and newlines in text, NaN and infinity, nested configs). Out: assertions on the exact
bytes of the CSV tables (the store's format: pandas must write what the csv module wrote,
so stores stay readable and diffs stay line by line), on which tables a run gets, and on
the order the files are written (the manifest last).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from evaluator.baseline import tables
from evaluator.results import E2EView, Outcome, Ratio, Verdict
from samples import replace, sample_result

BID = "bert-tiny/cpu-x86_64/2026Q4-1"

# Bytes written by the hand-written csv.writer code this module replaced, for the sample.
HOT_OPS = """\
family,time_ms,share,calls,shapes,aten_ops,has_kernel,selected
gemm,6.0,0.6,12,256x128x128;256x512x128,aten::linear,true,true
softmax,2.0,0.2,2,1024x128,aten::softmax,true,true
elementwise,2.0,0.2,20,,aten::gelu,false,false
"""
TUNING = """\
family,shape,dtype,target,chosen,cached,config,status,latency_ms,compile_s,error,phase
gemm,256x128x128,float32,c,true,false,"{""block_K"":32,""block_M"":32,""block_N"":32}",ok,0.5,1.2,,coarse
gemm,256x128x128,float32,c,false,false,"{""block_K"":32,""block_M"":512,""block_N"":512}",rejected,,,too big,coarse
softmax,1024x128,float32,c,true,false,"{""block_rows"":4}",ok,0.2,1.0,,coarse
"""
CALLS = """\
family,shape,tilelang_calls,fallback_calls,fallback_reasons,profiled_ms,notes
gemm,256x128x128,12,0,,6.0,
softmax,1024x128,2,0,,2.0,
"""


def awkward():
    r = sample_result()
    bench = dataclasses.replace(
        r.op_bench[0],
        error='bad, "quoted"\nnewline',
        config={"b": [1, 2], "a": "x,y"},
        speedup=float("nan"),
        flags=("amdahl", "roof"),
        timer_note="",
    )
    soak = dataclasses.replace(r.soak, window_ms=(float("inf"), 1e-300, 12345678901234.5, 0.1 + 0.2))
    views = (
        E2EView("eager", r.e2e.reference, r.e2e.swapped, Ratio(1.09, 1.01, 1.2, 7), 'note, "x"'),
        E2EView("kernel_sum", r.e2e.reference, None, None, ""),
    )
    verdict = Verdict(
        "NO-GO",
        "default",
        (
            Outcome("a", "T, t", "blocker", "m.x", ">=", 1, None, "not_evaluated", "r", "e\nf", ""),
            Outcome("b", "", "minor", "m.y", "<", 0.5, 0.25, "pass"),
        ),
    )
    return replace(
        r,
        op_bench=(bench,),
        soak=soak,
        e2e=dataclasses.replace(r.e2e, views=views),
        verdict=verdict,
        tuned=(),
        verify=(),
        hot_ops=None,
        upstream=None,
    )


def written(tmp_path: Path, r) -> dict[str, str]:
    tables.write_folder(tmp_path, r, BID)
    return {p.name: p.read_text(encoding="utf-8") for p in tmp_path.iterdir()}


def test_the_sample_tables_are_byte_for_byte_what_the_store_always_wrote(tmp_path):
    files = written(tmp_path, sample_result())
    assert (files["hot_ops.csv"], files["tuning.csv"], files["calls.csv"]) == (HOT_OPS, TUNING, CALLS)
    assert files["soak.csv"] == "window,median_ms\n0,11.0\n1,11.1\n2,11.05\n"
    assert files["upstream.csv"].startswith("metric,value\nmeasured,true\nrepo,/tmp/tilelang\n")
    assert "weekly_commits" not in files["upstream.csv"]  # chart series stay in result.json
    assert all("\r" not in text for text in files.values())


def test_awkward_values_are_quoted_and_non_finite_numbers_left_empty(tmp_path):
    files = written(tmp_path, awkward())
    header, row = files["op_bench.csv"].split("\n", 1)
    assert header.endswith(",speedup,flops,bytes,tilelang_tflops,tilelang_gbps,torch_tflops,torch_gbps,config,error")
    assert row.endswith(',perf_counter,,8388608,327680,,,,,"{""a"":""x,y"",""b"":[1,2]}","bad, ""quoted""\nnewline"\n')
    assert files["op_ratios.csv"].splitlines()[1] == "gemm,256x128x128,float32,true,,,,,,,amdahl;roof,"
    assert files["soak.csv"] == "window,median_ms\n0,\n1,1e-300\n2,12345678901234.5\n3,0.30000000000000004\n"
    assert files["e2e_views.csv"].splitlines()[1:] == [
        "eager,12.0,11.64,12.48,12.0,0.02,20,perf_counter,11.0,10.67,11.440000000000001,11.0,0.02,20,"
        'perf_counter,1.09,1.01,1.2,"note, ""x"""',
        "kernel_sum,12.0,11.64,12.48,12.0,0.02,20,perf_counter,,,,,,,,,,,",
    ]
    assert files["checklist.csv"] == (
        "id,title,severity,metric,comparator,threshold,value,unit,status,rationale,"
        'evidence\na,"T, t",blocker,m.x,>=,1,,,not_evaluated,r,"e\nf"\n'
        "b,,minor,m.y,<,0.5,0.25,,pass,,\n"
    )


def test_only_stages_with_data_get_a_table_and_the_manifest_lists_them_in_order(tmp_path):
    assert tables.TABLES == (
        "hot_ops.csv",
        "op_bench.csv",
        "op_ratios.csv",
        "tuning.csv",
        "verify.csv",
        "e2e.csv",
        "e2e_views.csv",
        "calls.csv",
        "soak.csv",
        "upstream.csv",
        "checklist.csv",
    )
    empty = replace(sample_result(), hot_ops=None, op_bench=(), tuned=(), verify=(), e2e=None, soak=None, upstream=None)
    assert tables.tables(empty) == {}
    files = written(tmp_path, awkward())
    manifest = json.loads(files["manifest.json"])
    assert manifest["tables"] == [
        "op_bench.csv",
        "op_ratios.csv",
        "e2e.csv",
        "e2e_views.csv",
        "calls.csv",
        "soak.csv",
        "checklist.csv",
    ]
    assert set(files) == {*manifest["tables"], "result.json", "manifest.json"}
    assert manifest["verdict"] == "NO-GO" and manifest["summary"]["op_speedups"] == {}  # NaN speedup left out
    assert (
        manifest["id"] == BID
        and manifest["written_by"]
        and manifest["tables"] == [name for name in tables.TABLES if name in files]
    )


def test_the_manifest_is_written_last(tmp_path, monkeypatch):
    order = []
    real_csv, real_json = tables.write_csv, tables.write_json
    monkeypatch.setattr(tables, "write_csv", lambda path, frame: (order.append(path.name), real_csv(path, frame)))
    monkeypatch.setattr(tables, "write_json", lambda path, data: (order.append(path.name), real_json(path, data)))
    tables.write_folder(tmp_path, sample_result(), BID)
    assert order[-2:] == ["result.json", "manifest.json"] and set(order[:-2]) == {
        "hot_ops.csv",
        "op_bench.csv",
        "op_ratios.csv",
        "tuning.csv",
        "verify.csv",
        "e2e.csv",
        "calls.csv",
        "soak.csv",
        "upstream.csv",
    }
    assert json.loads((tmp_path / "result.json").read_text())["baseline"] is None  # filled in by `load`


def test_upstream_csv_keeps_one_scalar_per_row():
    """Typed upstream records (activity, authors...) stay in result.json, not as reprs in the CSV."""
    from evaluator.baseline import tables
    from tests.samples import sample_result

    metrics = [row["metric"] for row in tables._upstream(sample_result())]
    assert "commits_90d" in metrics and not {"details", "activity", "authors", "fork"} & set(metrics)
