"""Softmax family: the CPU schedules (TileLang's C backend) against torch.softmax, the
search spaces, metadata, the CUDA schedules lowered for sm_90a, and the nn.Softmax swap-in.

In: shapes, seeds and configs. Out: pass/fail. Kernels are compiled once per process
(the family's cache), so the seeds and the swap-in reuse the same builds.
"""

from __future__ import annotations

import pytest
import torch

from evaluator.errors import KernelError
from evaluator.kernels import get
from kernels.test_rows import CPU, H200, SM90, check

FAM = get("softmax")
MODEL_SHAPE = (1024, 128)  # bert-tiny attention: batch 2 x 2 heads x 128 queries, 128 keys


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
    assert not torch.equal(FAM.make_inputs((4, 8), "float32", "cpu", 1)[0],
                           FAM.make_inputs((4, 8), "float32", "cpu", 2)[0])


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
    assert any("other than the last" in r for c in router.counts() for r in c.fallback)
