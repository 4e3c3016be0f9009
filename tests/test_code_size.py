"""benchmarks/code_size.py: a kernel's SASS size read from the cubin's `.text.<kernel>`
section. Needs nvcc (skipped without it); no GPU.

In: the gemm family's ping-pong program at ViT-B's 3152x3072x768, plain and with GELU. Out:
one kernel section each, whole 16-byte instructions, the fused one larger by its epilogue.
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest

from evaluator import kernels
from evaluator.kernels import common as C

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("code_size", ROOT / "benchmarks" / "code_size.py")
cs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cs)

PING = {
    "block_M": 128,
    "block_N": 128,
    "block_K": 64,
    "num_stages": 4,
    "threads": 128,
    "policy": "square",
    "persistent": 132,
    "pingpong": 1,
    "swizzle": True,
    "panel": 10,
    "split_k": 1,
    "splitk_fused": False,
    "cluster": 0,
    "stream_k": 0,
}


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_sass_size_of_each_kernel_from_the_cubin(tmp_path):
    sizes = {}
    for name in ("gemm", "gemm_gelu"):
        source = C.lower_source(kernels.get(name).program((3152, 3072, 768), "float16", PING, cs.TARGET), cs.TARGET)
        (tmp_path / name).mkdir()
        cubin, report = cs.compile_cubin(source, tmp_path / name)
        ((kernel, size),) = cs.text_sections(cubin).items()
        assert kernel == "linear_tc_pingpong_kernel" and size % 16 == 0 and "registers" in report
        sizes[name] = size
    # 128 values a thread through A&S's erfc, unrolled in each of two consumers.
    assert sizes["gemm_gelu"] > 1.5 * sizes["gemm"], sizes
