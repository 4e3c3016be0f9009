"""The unroll factor of the register-tile programs' accumulation loop, a tunable.

The GEMM and batched-GEMM families' fp32 (SIMT) programs take `unroll` (0: the K loop
fully unrolled; N: `#pragma unroll N`, which only CUDA's code generator emits), searched
on CUDA; their CPU programs split the K loop by hand (`unroll` divides block_K), every
CPU tile at 8 where it divides. Checked
here: the CUDA source carries the factor, the CPU kernels match PyTorch at every factor on
awkward shapes and several seeds, the search spaces offer the factors where they change
the code and only there, the fine rounds can move the factor, and bad factors are refused
in a sentence. Speed: benchmarks/unroll.py prints the measured ratios.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import torch

from evaluator import kernels
from evaluator.device import hardware
from evaluator.device import targets as TG
from evaluator.kernels import common as C
from evaluator.kernels.common import lower_source
from evaluator.tuning.search import neighbours

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from lowering_table import spec_for  # noqa: E402  (the benchmark's target lookup, one place)

FAMILIES = ("gemm", "bmm")
SHAPES = {"gemm": (37, 45, 70), "bmm": (3, 37, 45, 70)}


def _pragmas(src: str) -> list[str]:
    return re.findall(r"#pragma unroll[^\n]*", src)


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
def test_the_cuda_source_carries_the_factor_and_full_unroll_carries_none(family):
    fam = kernels.REGISTRY[family]
    hw = spec_for("cuda:sm_90a").hardware()
    shape = SHAPES[family]
    first = fam.search_space(shape, "float32", hw)[0]
    full = _pragmas(lower_source(fam.program(shape, "float32", {**first, "unroll": 0}, hw.target), hw.target))
    four = _pragmas(lower_source(fam.program(shape, "float32", {**first, "unroll": 4}, hw.target), hw.target))
    assert "#pragma unroll 4" in four
    assert not any(p.strip() == "#pragma unroll 4" for p in full)


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("unroll", [1, 4, 8])
@pytest.mark.parametrize("seed", [0, 1])
def test_the_cpu_program_matches_pytorch_at_every_factor(family, unroll, seed):
    fam = kernels.REGISTRY[family]
    shape = SHAPES[family]
    cfg = {"block_M": 16, "block_N": 32, "block_K": 32, "unroll": unroll}
    kernel = fam.build(shape, "float32", cfg, "c")
    inputs = fam.make_inputs(shape, "float32", "cpu", seed)
    atol, rtol = fam.tolerance("float32", shape)
    torch.testing.assert_close(kernel(*inputs), fam.reference(*inputs), atol=atol, rtol=rtol)


@pytest.mark.parametrize("family", FAMILIES)
def test_the_spaces_offer_the_factors_where_they_change_the_code_and_only_there(family):
    fam = kernels.REGISTRY[family]
    shape = SHAPES[family]
    cuda = fam.search_space(shape, "float32", spec_for("cuda:sm_90a").hardware())
    first = cuda[0]
    assert first.get("unroll", 0) == 0
    got = [c for c in cuda if c.get("unroll", 0)]
    assert [c["unroll"] for c in got] == [u for u in C.UNROLL_FACTORS if u < first["block_K"]]
    assert all({**c, "unroll": 0} == {**first, "unroll": 0} for c in got)  # the first config, re-unrolled
    hip = fam.search_space(shape, "float32", TG.TARGETS["mi300x"].hardware())
    assert not any(c.get("unroll", 0) for c in hip)
    cpu = fam.search_space(shape, "float32", hardware.detect("cpu"))
    assert cpu and all(c["unroll"] == C.cpu_unroll(c["block_K"]) for c in cpu)
    assert any(c["unroll"] == C.CPU_UNROLL for c in cpu)
    # fp16 runs tensor-core tiles, which have no scalar accumulation loop
    assert not any("unroll" in c for c in fam.search_space(shape, "float16", spec_for("cuda:sm_90a").hardware()))


def test_the_fine_rounds_double_and_halve_the_factor():
    near = {c["unroll"] for c in neighbours({"block_K": 16, "unroll": 4})}
    assert {2, 8} <= near


@pytest.mark.parametrize("family", FAMILIES)
def test_a_factor_that_cannot_build_is_refused_in_a_sentence(family):
    fam = kernels.REGISTRY[family]
    shape = SHAPES[family]
    msg = fam.config_error(shape, "float32", {"block_M": 16, "block_N": 32, "block_K": 32, "unroll": 3}, "c")
    assert msg and "divisor of block_K" in msg
    cuda = spec_for("cuda:sm_90a").hardware()
    first = fam.search_space(shape, "float32", cuda)[0]
    assert "unroll must be 0" in fam.config_error(shape, "float32", {**first, "unroll": -1}, cuda.target)
    assert fam.config_error(shape, "float32", {**first, "unroll": 4}, cuda.target) is None
