"""Softmax family: the CPU schedules (TileLang's C backend) against torch.softmax, the
search spaces, metadata, the CUDA schedules lowered for sm_90a (the flat schedule's
16-byte global accesses on rows that are not 16-byte multiples), and the nn.Softmax swap-in.

In: shapes, seeds and configs. Out: pass/fail. Kernels are compiled once per process
(the family's cache), so the seeds and the swap-in reuse the same builds.
"""

from __future__ import annotations

import dataclasses
import re

import pytest
import torch

from evaluator.errors import KernelError
from evaluator.kernels import common as C
from evaluator.kernels import get
from test_rows import CPU, H200, SM90, check

FAM = get("softmax")
MODEL_SHAPE = (1024, 128)  # bert-tiny attention: batch 2 x 2 heads x 128 queries, 128 keys
# ViT-B/16 attention scores (batch 64 x 3 heads x 197 queries, 197 keys): a row of 197
# halves is 394 B, so the plain schedule's global accesses cannot be 16-byte vectors.
VIT = (37824, 197)


def test_wrong_result_is_detectable():
    kernel = check("softmax", MODEL_SHAPE, "float32", seeds=(0,))
    (x,) = FAM.make_inputs(MODEL_SHAPE, "float32", "cpu", 0)
    out = kernel(x)
    out[3] = out[3].flip(0)
    atol, rtol = FAM.tolerance("float32")
    assert not torch.allclose(out, FAM.reference(x), atol=atol, rtol=rtol)


def test_bad_configs_raise():
    with pytest.raises(KernelError, match="row buffer"):
        FAM.build((4, 100_000), "float32", {"buffered": True}, "c")
    with pytest.raises(KernelError, match="threads"):
        FAM.build((4, 1024), "float16", {"threads": 100}, SM90)


def test_problem_shape_and_metrics():
    assert FAM.problem_shape("aten::softmax", [[2, 2, 128, 128], [], []]) == (512, 128)
    assert FAM.problem_shape("aten::_softmax", [[7, 33]]) == (7, 33)
    assert FAM.problem_shape("aten::softmax", []) is None
    assert FAM.flops((4, 8)) == 5 * 32
    assert FAM.bytes((4, 8), "float32") == 2 * 32 * 4
    assert FAM.tolerance("float32")[1] < FAM.tolerance("float16")[1] < FAM.tolerance("bfloat16")[1]


def test_make_inputs_deterministic():
    assert torch.equal(FAM.make_inputs((4, 8), "float32", "cpu", 1)[0], FAM.make_inputs((4, 8), "float32", "cpu", 1)[0])
    assert not torch.equal(
        FAM.make_inputs((4, 8), "float32", "cpu", 1)[0], FAM.make_inputs((4, 8), "float32", "cpu", 2)[0]
    )


def test_shapes_and_search_space():
    for device in ("cpu", "cuda"):
        shapes = FAM.standard_shapes(device)
        assert 3 <= len(shapes) <= 5 and any(all(d % 16 for d in s) for s in shapes)
    assert 3 <= len(FAM.search_space(MODEL_SHAPE, "float32", CPU)) <= 4
    assert FAM.search_space((4, 100_000), "float32", CPU) == [{"block_rows": 4, "buffered": False}]
    for shape in ((4096, 1024), (16384, 4096), (8192, 8192)):
        space = FAM.search_space(shape, "float16", H200)
        assert 6 <= len(space) <= 12 and space[0]["chunk"] == 0
    long_rows = FAM.search_space((64, 50257), "float16", H200)
    assert long_rows and all(c["chunk"] > 0 for c in long_rows)


def test_softmax_routes_last_dim_calls_and_counts_other_dims():
    from tests.routing import count, route_model

    class M(torch.nn.Module):
        def forward(self, x):
            return torch.softmax(x, dim=-1) + x.softmax(1).sum() + torch.nn.functional.softmax(x, dim=2)

    router, got, expected = route_model(["softmax"], M(), (torch.randn(2, 5, 33),))
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    assert count(router, "softmax") == (2, 1)
    assert any("a later dim of size > 1" in r for c in router.counts() for r in c.fallback)


def test_softmax_over_a_dim_followed_by_ones_runs_as_rows():
    """ConvBERT's dynamic convolution normalises [R, k, 1] over dim 1: its rows lie contiguous
    as the last dim's would, so the call is the kernel's (R, k), routed and profiled as such."""
    from tests.routing import count, route_model

    class M(torch.nn.Module):
        def forward(self, x):
            return torch.softmax(x.reshape(-1, 9, 1), dim=1) + x.reshape(-1, 9, 1, 1).softmax(-3).squeeze(-1)

    router, got, expected = route_model(["softmax"], M(), (torch.randn(4, 6, 9),))
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    assert count(router, "softmax") == (2, 0)
    assert {c.shape for c in router.counts()} == {"24x9"}
    assert FAM.problem_shape("aten::_softmax", [[24, 9, 1], [], []], [None, 1, False]) == (24, 9)
    assert FAM.problem_shape("aten::_softmax", [[24, 9, 1, 1], [], []], [None, -3, False]) == (24, 9)
    assert FAM.problem_shape("aten::_softmax", [[2, 5, 33], [], []], [None, 1, False]) is None  # refused: no shape
    assert FAM.problem_shape("aten::_softmax", [[2, 5, 33], [], []], [None, -1, False]) == (10, 33)


def _flat(shape, dtype):
    return [c for c in FAM.search_space(shape, dtype, H200) if c.get("flat")]


def _vector_access(src: str, buf: str) -> bool:
    """Whether the lowered CUDA reads or writes global buffer `buf` 16 bytes at a time."""
    return re.search(rf"\*\((uint4|float4)\*\)\({buf} \+", src) is not None


@pytest.mark.slow
@pytest.mark.parametrize("shape,dtype", [(VIT, "float16"), ((1001, 197), "float16"), ((1001, 197), "float32")])
def test_flat_configs_lower_with_16_byte_global_accesses(shape, dtype):
    # 1001 rows leave the last block of 8 (fp16) or 4 (fp32) rows partial: whole vectors
    # stop one vector before the tensor's end (rows * cols elements), not at the span's.
    last_vector = shape[0] * shape[1] - 16 // C.dtype_bytes(dtype)
    for cfg in _flat(shape, dtype):
        src = C.lower_source(FAM.program(shape, dtype, cfg, SM90), SM90)
        assert _vector_access(src, "Xf") and _vector_access(src, "Yf"), cfg
        if shape[0] % cfg["block_rows"]:
            assert f"< {last_vector})" in src, cfg


def test_plain_schedule_on_197_columns_has_no_vector_accesses():
    # What the flat schedule is for: the whole-row schedule reads X element by element.
    src = C.lower_source(FAM.program(VIT, "float16", {"block_rows": 4, "threads": 64}, SM90), SM90)
    assert "X[" in src and not re.search(r"\*\(\w+\*\)\((X|Y) \+", src)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_flat_configs_come_first_only_for_rows_not_16_byte_aligned(dtype):
    space = FAM.search_space(VIT, dtype, H200)
    n = len(_flat(VIT, dtype))
    assert 2 <= n <= 4 and all(c.get("flat") for c in space[:n]) and len(space) <= 12
    # Valid on the shape and on verification's awkward shape (block_rows fits any cols).
    for shape in (VIT, FAM.awkward_shape(VIT)):
        assert all(FAM.reject_reason(shape, dtype, c, H200) is None for c in space[:n])
    for shape in ((37824, 128), (4096, 4096)):
        assert not _flat(shape, dtype)
    assert not any("flat" in c for c in FAM.search_space(VIT, dtype, CPU))  # a GPU-only key


def test_flat_config_checks():
    # 4 rows x 197 fp16 = 1576 B: not whole 16-byte vectors (the rule, block_rows a
    # multiple of 16 / element bytes, also keeps a tuned config valid on other cols).
    with pytest.raises(KernelError, match="multiple of 8"):
        FAM.program(VIT, "float16", {"flat": True, "block_rows": 4, "threads": 64}, SM90)
    assert "multiple of 4" in FAM.reject_reason(VIT, "float32", {"flat": True, "block_rows": 2}, H200)
    assert "whole rows" in FAM.reject_reason(VIT, "float16", {"flat": True, "chunk": 4096}, H200)
    small = dataclasses.replace(H200, smem_per_block=2048)
    assert "shared memory" in FAM.reject_reason(VIT, "float16", {"flat": True, "block_rows": 8, "threads": 128}, small)
    assert "unknown config keys" in FAM.reject_reason(VIT, "float16", {"flat": True}, CPU)
    # The shared keys keep their defaults and meaning: no key means the plain schedule.
    assert FAM.resolve(VIT, "float16", {}, SM90).config == {
        "block_rows": 1,
        "threads": 256,
        "chunk": 0,
        "flat": False,
        "fast_math": True,
    }
