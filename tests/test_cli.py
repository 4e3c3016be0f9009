"""The CLI as a user runs it: bad input gives one line and exit 2; the demo run works end to end."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def evaluate(*args, cwd=ROOT, timeout=900):
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "evaluator.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "args, words",
    [
        (["--model", "nonesuch"], "unknown model 'nonesuch'; use one of bert-tiny"),
        (["--model", "tests/fixtures/user_model.py:broken"], "weights not found"),
        (["--model", "no_such_pkg.models:make"], "could not import module 'no_such_pkg.models'"),
        (["--model", "bert-tiny", "--families", "gemm,warp"], "unknown kernel family 'warp'"),
        (["--model", "bert-tiny", "--checklist", "missing.yaml"], "checklist 'missing.yaml' does not exist"),
        (["--model", "bert-tiny", "--upstream", "/tmp"], "is not a git repository"),
        (["bench", "--family", "conv9d"], "unknown kernel family 'conv9d'"),
        (["bench", "--family", "attention", "--shape", "64x64x64"], "it takes 6 sizes, BxHxSqxSkvxDxcausal"),
        (
            ["bench", "--family", "gemm", "--shape", "4x-4x4"],
            "--shape 4x-4x4: the sizes must be positive integers (flags 0 or 1), MxNxK",
        ),
        (["bench", "--family", "gemm", "--shape", "4xbx4"], "--shape 4xbx4 is not a shape"),
        # a 0 only where the family's shape has a flag there (bmm's transposes may be 0, gemm's N not)
        (["bench", "--family", "gemm", "--shape", "4x0x4"], "gemm: shape must be 3 positive ints"),
        # rope's per_batch may be 0, its head_dim must be even
        (["bench", "--family", "rope", "--shape", "2x64x4x2x31x0"], "head_dim even, per_batch 0 or 1"),
        (
            ["upstream", "--repo", "/tmp"],
            "/tmp is not a git repository; pass --repo",
        ),  # the option typed, not --upstream
        (["upstream", "--repo", "/tmp", "--as-of", "soon"], "--as-of 'soon' is not a date"),
        (["upstream", "--repo", ".", "--branch", ""], "--branch was given an empty value"),
        (["upstream", "--repo", ".", "--as-of", ""], "--as-of was given an empty value"),
        (
            ["--model", "bert-tiny", "--reps", "0"],
            "--reps must be a positive integer",
        ),  # was a StatisticsError traceback
        (["--model", "bert-tiny", "--reps", "many"], "Invalid value for '--reps'"),  # click's usage errors too
        (["--model", "bert-tiny", "--compile-mode", "fast"], "--compile-mode 'fast' is not allowed; use max-autotune"),
        (["bench", "--family", "gemm", "--compile-mode", "fast"], "--compile-mode 'fast' is not allowed"),
        (["--model", "resnet-tiny", "--layout", "nhwc"], "--layout 'nhwc' is not allowed; use auto"),
        (["baseline", "show", "no/such/id"], "no/such/id"),
        (["checklist", "validate", "missing.yaml"], "missing.yaml"),
    ],
)
def test_bad_input_one_line_exit_2(args, words, tmp_path):
    if args[0] == "baseline":
        args = [*args, "--store", str(tmp_path / "store")]
    p = evaluate(*args, "--reports", str(tmp_path)) if args[0] == "--model" else evaluate(*args)
    assert p.returncode == 2, p.stdout + p.stderr
    assert "Traceback" not in p.stderr + p.stdout
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), p.stderr
    assert words in lines[0]


@pytest.mark.slow
def test_factory_that_raises_keeps_nothing_half_written(tmp_path):
    p = evaluate("--model", "tests/fixtures/user_model.py:broken", "--reports", str(tmp_path))
    assert p.returncode == 2
    assert not (tmp_path / "baselines").exists() or not any((tmp_path / "baselines").iterdir())


def test_help_reads_the_defaults_without_importing_torch():
    # The options' defaults come from evaluator.config; importing torch there would cost
    # every `evaluate --help` a second or more.
    code = "import sys, evaluator.cli; print(sorted(m for m in ('torch', 'tilelang') if m in sys.modules))"
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert p.returncode == 0 and p.stdout.strip() == "[]", p.stdout + p.stderr
    assert evaluate("--help").returncode == 0


@pytest.mark.slow
def test_demo_end_to_end_on_bert_tiny(tmp_path):
    p = evaluate("--model", "bert-tiny", "--reports", str(tmp_path), "--soak-seconds", "2", "--budget", "30")
    out = p.stdout + p.stderr
    assert p.returncode == 0, out[-4000:]
    runs = list((tmp_path / "runs").iterdir())
    assert len(runs) == 1
    run = runs[0]
    result = json.loads((run / "results.json").read_text())
    fams = result["hot_ops"]["selected"]
    # the two hottest families, and the fused variants whose pattern bert-tiny has
    fused = {fu["family"] for fu in result["hot_ops"]["fusions"] if fu["shapes"]}
    assert "gemm" in fams and "gemm_gelu" in fused and len(set(fams) - fused) == 2 and fused <= set(fams)
    assert {c["family"] for c in result["e2e"]["calls"] if c["tilelang"]} >= fused  # each ran in the model
    # every rewritten family was verified on several seeds and an awkward shape, and timed
    assert {v["family"] for v in result["verify"]} == set(fams)
    assert all(c["passed"] for v in result["verify"] for c in v["cases"])
    assert all(b["tilelang"] and b["speedup"] > 0 for b in result["op_bench"])
    # TileLang really ran end to end: modules swapped, or (routing) calls sent to its kernels
    e2e = result["e2e"]
    assert e2e["outputs_match"] and (e2e["replaced_modules"] > 0 or e2e.get("tilelang_calls", 0) > 0)
    # torch.compile (CPU: mode default) beside both, per op and end to end: a time or a reason
    assert result["settings"]["compile_mode"] == "default"
    for c in [b["compiled"] for b in result["op_bench"]] + [e2e["compiled"]]:
        assert c["mode"] == "default" and (c["timing"] and c["ratio"] and c["compile_s"] > 0 or c["error"]), c
    assert {o["family"] for o in result["overhead"]} == set(fams)
    assert all(o["tilelang_us"] > 0 and o["torch_us"] > 0 for o in result["overhead"])
    decision = result["verdict"]["decision"]
    assert decision in ("GO", "CONDITIONAL GO", "NO-GO")
    # the terminal shows hot operators, the rewritten families, speedups and the verdict
    assert "Hot operators" in out and f"Verdict: {decision}" in out
    for f in fams:
        assert f in out
    # report: HTML names the verdict and both families; the PDF is a real multi-page PDF
    html = (run / "report.html").read_text()
    assert decision in html and all(f in html for f in fams)
    assert "torch.compile (ms)" in html and "Against torch.compile" in html
    assert "torch.compile end to end" in out or "torch.compile (default):" in out  # the terminal's e2e line
    from tests.test_pdf_env import skip_reason

    if not skip_reason("en"):  # without pango/harfbuzz-subset the run says what to install instead
        from pypdf import PdfReader

        pdf = PdfReader(str(run / "report.pdf"))
        assert len(pdf.pages) >= 3
        assert decision in pdf.pages[0].extract_text()
    # baseline: one commit and tag in the git store, manifest and CSV tables
    ref = json.loads((run / "baseline.json").read_text())
    folder = Path(ref["store"]) / ref["path"]
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["tilelang"] and manifest["torch"] and manifest["python"]
    for table in ("hot_ops.csv", "op_bench.csv", "tuning.csv", "verify.csv", "checklist.csv"):
        assert (folder / table).is_file(), table
    tags = subprocess.run(["git", "-C", ref["store"], "tag"], capture_output=True, text=True).stdout.split()
    assert ref["tag"] in tags

    # a second run reuses the tuned configs and compares itself with the first baseline.
    # The same families explicitly: on CPU, attention and layernorm take 7-9% each and
    # the profile may rank them either way from one run to the next.
    # --compile-mode none: no torch.compile side anywhere, and the settings say so.
    p2 = evaluate(
        "--model",
        "bert-tiny",
        "--reports",
        str(tmp_path),
        "--soak-seconds",
        "0",
        "--no-e2e",
        "--no-pdf",
        "--families",
        ",".join(fams),
        "--compile-mode",
        "none",
    )
    assert p2.returncode == 0, (p2.stdout + p2.stderr)[-3000:]
    run2 = max((tmp_path / "runs").iterdir(), key=lambda d: d.stat().st_mtime)
    r2 = json.loads((run2 / "results.json").read_text())
    assert r2["tuned"] and all(t["cached"] for t in r2["tuned"])
    assert r2["comparison"] and r2["comparison"]["reference"] == ref["tag"]
    assert r2["settings"]["compile_mode"] == "none" and all(b["compiled"] is None for b in r2["op_bench"])
    assert r2["comparison"]["comparable"]  # a run without the third side compares with one that had it

    # and the report can be re-rendered from the store alone
    p3 = evaluate("report", "--baseline", ref["tag"], "--store", ref["store"], "--out", str(tmp_path / "again"))
    assert p3.returncode == 0, p3.stderr
    assert decision in (tmp_path / "again" / "report.html").read_text()


@pytest.mark.slow
def test_bench_json_has_the_torch_compile_side():
    # The CPU's default mode, on the shape tests/test_compiled.py compiles (Inductor's cache
    # makes it a load when that ran first); --compile-mode none is the demo's second run.
    p = evaluate(
        "bench",
        "--family",
        "layernorm",
        "--shape",
        "16x32",
        "--device",
        "cpu",
        "--budget",
        "0",
        "--reps",
        "3",
        "--json",
    )
    assert p.returncode == 0, p.stderr[-3000:]
    [row] = json.loads(p.stdout)
    c = row["bench"]["compiled"]
    assert c["mode"] == "default" and c["timing"]["median_ms"] > 0 and c["ratio"]["value"] > 0 and c["compile_s"] > 0
