"""benchmarks/in_sequence.py on a real GPU: a TileLang GEMM's own duration back to back
and right after PyTorch's reference, both read from CUPTI inside captured graphs."""

import importlib.util
from pathlib import Path

from evaluator.device import hardware
from evaluator import kernels

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("in_sequence", ROOT / "benchmarks" / "in_sequence.py")
seq = importlib.util.module_from_spec(spec)
spec.loader.exec_module(seq)


def test_in_sequence_reads_the_kernels_own_durations_on_gpu():
    fam, shape = kernels.get("gemm_gelu"), (1024, 3072, 768)
    hw = hardware.detect("cuda")
    cfg = fam.search_space(shape, "float16", hw)[0]
    row = seq.measure(fam, shape, "float16", cfg, hw.target, calls=4, replays=3)
    assert row["kernels"] and all(not k.startswith(("nvjet", "void at::")) for k in row["kernels"]), row
    assert 2.0 < row["alone_us"] < 200.0 and 2.0 < row["after_us"] < 200.0, row
    assert 0.5 < row["after_over_alone"] < 3.0, row
    assert 2.0 < row["flushed_us"] < 200.0 and 0.5 < row["flushed_over_alone"] < 3.0, row
