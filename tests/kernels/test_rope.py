"""Rotary embedding family: the CPU schedule (TileLang's C backend) against the formula
as transformers writes it, on model and awkward shapes, several seeds, fp32 and fp16,
cos shared by the batch or per sequence; the CUDA schedule lowered for sm_90a; the
search space; the route of a call on the views a llama attention passes.

In: shapes, seeds, configs. Out: pass/fail.
"""

from __future__ import annotations

import pytest
import torch

from evaluator import written
from evaluator.errors import KernelError
from evaluator.kernels import _common as C
from evaluator.kernels import get
from evaluator.kernels.rope import rotate_half
from test_rows import CPU, H200, SM90, check

FAM = get("rope")
MODEL_SHAPE = (2, 16, 4, 2, 32, 0)  # tests/fixtures/hf_models.llama: batch 2, seq 16, 4 q heads, 2 kv heads


def _check(shape, dtype, config=None, seeds=(0, 1, 2)):
    kernel = check("rope", shape, dtype, config, seeds)  # against the formula, both outputs
    d = shape[4] // 2
    for seed in seeds:
        inputs = FAM.make_inputs(shape, dtype, "cpu", seed)
        b, s = shape[:2]
        for o, x in zip(kernel(*inputs), inputs[:2]):
            x = x.view(b, s, -1, shape[4]).transpose(1, 2)
            # a rotation: each pair (j, j + d/2) keeps its length
            length = lambda t: t[..., :d].float() ** 2 + t[..., d:].float() ** 2  # noqa: E731
            torch.testing.assert_close(length(o), length(x), atol=5e-2, rtol=5e-2)
    return kernel


@pytest.mark.parametrize("shape", [MODEL_SHAPE, (2, 16, 4, 2, 32, 1), (1, 77, 4, 4, 64, 0), (3, 13, 2, 1, 8, 1)])
def test_cpu_fp32_matches_the_formula(shape):
    _check(shape, "float32")


def test_cpu_fp16_and_an_awkward_sequence():
    shape = FAM.awkward_shape(MODEL_SHAPE)
    assert shape[1] % 16 and shape[2:] == MODEL_SHAPE[2:]  # heads and head_dim are the model's
    _check(shape, "float16")


def test_every_cpu_config_matches():
    for cfg in FAM.search_space(MODEL_SHAPE, "float32", CPU):
        _check(MODEL_SHAPE, "float32", cfg, seeds=(3,))


def test_wrong_result_is_detectable():
    kernel = _check(MODEL_SHAPE, "float32", seeds=(0,))
    q, k, cos, sin = FAM.make_inputs(MODEL_SHAPE, "float32", "cpu", 0)
    # the rotation's other half read with the wrong sign is a different answer
    wrong = FAM.reference(q, k, cos, -sin)
    out = kernel(q, k, cos, sin)
    assert not torch.allclose(out[0], wrong[0], atol=1e-3, rtol=1e-3)


def test_shape_checks_and_metrics():
    with pytest.raises(KernelError, match="head_dim even"):
        FAM.check((2, 16, 4, 2, 31, 0))
    with pytest.raises(KernelError, match="per_batch 0 or 1"):
        FAM.check((2, 16, 4, 2, 32, 2))
    assert FAM.input_shapes((2, 16, 4, 2, 32, 1)) == [(32, 4, 32), (32, 2, 32), (2, 16, 32), (2, 16, 32)]
    assert FAM.input_shapes((2, 16, 4, 2, 32, 0))[2] == (1, 16, 32)
    assert FAM.bytes((1, 4, 2, 1, 8, 0), "float16") == 2 * (2 * 4 * 3 * 8 + 2 * 4 * 8)
    a, b = FAM.make_inputs(MODEL_SHAPE, "float32", "cpu", 5), FAM.make_inputs(MODEL_SHAPE, "float32", "cpu", 5)
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    cos, sin = a[2], a[3]
    torch.testing.assert_close(cos ** 2 + sin ** 2, torch.ones_like(cos))  # real angles


def test_search_space_and_cuda_schedule_lowers_for_sm90():
    for shape in [(4, 512, 32, 4, 64, 0), (4, 509, 32, 4, 64, 0), (1, 4096, 32, 32, 128, 0)]:
        space = FAM.search_space(shape, "float16", H200)
        assert 1 <= len(space) <= 8
        for cfg in space[:2]:
            assert FAM.reject_reason(shape, "float16", cfg, H200) is None
            assert "__global__" in C.lower_source(FAM.program(shape, "float16", cfg, SM90), SM90)
    assert "threads" in FAM.reject_reason((4, 512, 32, 4, 64, 0), "float16", {"threads": 100}, H200)


def test_route_takes_the_views_a_llama_attention_passes_and_gives_its_layout():
    b, s, hq, hk, d = 2, 16, 4, 2, 32
    q = torch.randn(b, s, hq * d).view(b, s, hq, d).transpose(1, 2)  # q_proj(x).view(...).transpose(1, 2)
    k = torch.randn(b, s, hk * d).view(b, s, hk, d).transpose(1, 2)
    angle = torch.randn(1, s, d // 2)
    cos, sin = torch.cat((angle, angle), -1).cos(), torch.cat((angle, angle), -1).sin()
    route = FAM.route(written.rotary, (q, k, cos, sin), {}, "float32")
    assert route.shape == (b, s, hq, hk, d, 0) and route.notes == ()
    kernel = FAM.build(route.shape, "float32", FAM.search_space(route.shape, "float32", CPU)[0], "c")
    yq, yk = route.launch(kernel)
    c, sn = cos.unsqueeze(1), sin.unsqueeze(1)
    torch.testing.assert_close(yq, q * c + rotate_half(q) * sn)
    torch.testing.assert_close(yk, k * c + rotate_half(k) * sn)
    assert yq.stride() == (q * c).stride()  # tokens outer, as the formula's elementwise calls leave it
    # contiguous [b, h, s, d] inputs are copied, and said; other layouts and dtypes stay in PyTorch
    assert FAM.route(written.rotary, (q.contiguous(), k, cos, sin), {}, "float32").notes == ("input copied to contiguous",)
    assert "dtype" in FAM.route(written.rotary, (q, k, cos, sin), {}, "float16")
    assert isinstance(FAM.route(written.rotary, (q.transpose(1, 2), k, cos, sin), {}, "float32"), str)
    assert isinstance(FAM.route(written.rotary, (q, k, cos[..., :8], sin[..., :8]), {}, "float32"), str)
