"""Rotary embedding family: the CPU schedule (TileLang's C backend) against the formula
as transformers writes it, on model and awkward shapes, several seeds, fp32 and fp16,
cos shared by the batch or per sequence, in every form the models use: llama's halves,
GPT-NeoX's and Phi-3's partial rotation of strided views of a packed projection, Phi-2's
sliced q, Cohere's interleaved pairs and GPT-J's one tensor a call with a sin|cos table;
the CUDA schedule lowered (and built by nvcc) for sm_90a; the search space; the route of
a call on the views each model's attention passes.

In: shapes, seeds, configs. Out: pass/fail.
"""

from __future__ import annotations

import shutil

import pytest
import torch

from evaluator.routing import written
from evaluator.errors import KernelError
from evaluator.kernels import common as C
from evaluator.kernels import get
from evaluator.kernels.rope import FORM_ATTR, plan
from evaluator.routing.written import rotate_half
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
    torch.testing.assert_close(cos**2 + sin**2, torch.ones_like(cos))  # real angles


@pytest.mark.slow
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
    assert FAM.route(written.rotary, (q.contiguous(), k, cos, sin), {}, "float32").notes == (
        "input copied to contiguous",
    )
    assert "dtype" in FAM.route(written.rotary, (q, k, cos, sin), {}, "float16")
    assert isinstance(FAM.route(written.rotary, (q.transpose(1, 2), k, cos, sin), {}, "float32"), str)
    assert isinstance(FAM.route(written.rotary, (q, k, cos[..., :8], sin[..., :8]), {}, "float32"), str)


# ---------------------------------------------------------------- partial rotary, pairs, strided views

# The forms real models call, at their tiny test widths (head_dim 16, 4 heads, seq 5):
NEOX = (2, 5, 4, 4, 16, 0, 4, 0, 192, 48, 192, 48)  # rotary_pct 0.25 of q, k in the packed qkv [b, s, h, 3d]
PHI3 = (2, 5, 4, 2, 16, 0, 8, 0, 128, 16, 128, 16)  # partial 0.5; q, k in qkv_proj's rows of (4 + 2 * 2) * 16
PHI2 = (2, 5, 4, 4, 8, 0, 8, 0, 64, 16, 64, 16)  # q[..., :8] sliced by the model: a full rotation of a view
GPTJ = (2, 5, 4, 0, 8, 0, 8, 2, 64, 16, 0, 0)  # one tensor a call, q[..., :8] of [b, s, h, 16], sin|cos table
COHERE = (2, 5, 4, 2, 16, 0, 16, 1)  # pairs (2i, 2i+1), cos and sin per dim
VARIANTS = [
    NEOX,
    PHI3,
    PHI2,
    GPTJ,
    COHERE,
    (3, 7, 2, 1, 24, 1, 8, 1),  # pairs, a third rotated, cos per sequence
    (3, 7, 2, 0, 12, 1, 8, 2),
]  # GPT-J's form rotating part of a head, cos per sequence


def _heads(out, shape):
    """The kernel's (or reference's) outputs as [b, s, h, d] each."""
    outs = out if isinstance(out, tuple) else (out,)
    return [o.transpose(1, 2) if shape[3] else o for o in outs]


@pytest.mark.parametrize("shape", VARIANTS, ids=["neox", "phi3", "phi2", "gptj", "cohere", "pairs-part", "gptj-part"])
def test_variants_match_the_models_formula_in_fp32(shape):
    kernel = check("rope", shape, "float32", seeds=(0, 1, 2))
    rot = shape[6]
    for seed in (0, 1):
        inputs = FAM.make_inputs(shape, "float32", "cpu", seed)
        b, s, _, hk, d = shape[:5]
        rows = [inputs[0]] + ([inputs[1]] if hk else [])
        for o, x in zip(_heads(kernel(*inputs), shape), rows):
            x = x.view(b, s, -1, d)
            assert torch.equal(o[..., rot:], x[..., rot:])  # the rest passes through, bit for bit
            # a rotation: each pair keeps its length
            if shape[7]:
                first, second = o[..., 0:rot:2], o[..., 1:rot:2]
                x_first, x_second = x[..., 0:rot:2], x[..., 1:rot:2]
            else:
                first, second = o[..., : rot // 2], o[..., rot // 2 : rot]
                x_first, x_second = x[..., : rot // 2], x[..., rot // 2 : rot]
            torch.testing.assert_close(first**2 + second**2, x_first**2 + x_second**2, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("shape", [NEOX, GPTJ, COHERE], ids=["neox", "gptj", "cohere"])
def test_variants_in_fp16_on_an_awkward_sequence(shape):
    awk = FAM.awkward_shape(shape)
    assert awk[1] % 16 and awk[:1] + awk[2:] == shape[:1] + shape[2:]  # only seq moves; strides stay
    check("rope", awk, "float16", seeds=(0, 1))


def test_every_cpu_config_matches_on_the_variants():
    for shape in (NEOX, GPTJ):
        for cfg in FAM.search_space(shape, "float32", CPU):
            check("rope", shape, "float32", cfg, seeds=(3,))


def test_a_wrong_form_is_a_different_answer():
    # on the same inputs: pairs read as halves, GPT-J's table with sin and cos swapped, and
    # a partial rotation that rotated nothing, each differ from the kernel's result
    inputs = FAM.make_inputs(COHERE, "float32", "cpu", 0)
    out = FAM.build(COHERE, "float32", {"block_tokens": 4}, "c")(*inputs)
    setattr(inputs[0], FORM_ATTR, (16, 0, 2))
    assert not torch.allclose(out[0], FAM.reference(*inputs)[0], atol=1e-3, rtol=1e-3)
    q, table = FAM.make_inputs(GPTJ, "float32", "cpu", 0)
    out = FAM.build(GPTJ, "float32", {"block_tokens": 4}, "c")(q, table)
    swapped = torch.cat((table[..., 4:], table[..., :4]), -1)
    assert not torch.allclose(out, FAM.reference(q, swapped), atol=1e-3, rtol=1e-3)
    q, k, cos, sin = FAM.make_inputs(NEOX, "float32", "cpu", 0)
    yq, _ = FAM.build(NEOX, "float32", {"block_tokens": 4}, "c")(q, k, cos, sin)
    x = q.view(2, 5, 4, 16).transpose(1, 2)
    assert not torch.allclose(yq[..., :4], x[..., :4], atol=1e-3, rtol=1e-3)


def test_variant_shapes_are_canonical_and_checked():
    # the defaults dropped: one call, one key
    assert FAM.check((2, 16, 4, 2, 32, 0, 32, 0)) == (2, 16, 4, 2, 32, 0)
    assert FAM.check((2, 16, 4, 2, 32, 0, 8, 0, 0, 0, 0, 0)) == (2, 16, 4, 2, 32, 0, 8, 0)
    assert FAM.check((2, 16, 4, 2, 32, 0, 32, 0, 128, 32, 64, 32)) == (2, 16, 4, 2, 32, 0)  # dense strides
    assert FAM.check((1, 1, 4, 2, 32, 0, 32, 0, 999, 32, 0, 0)) == (1, 1, 4, 2, 32, 0)  # one token: no row stride
    assert FAM.check(NEOX) == NEOX and FAM.check(GPTJ) == GPTJ
    for bad in [
        (2, 16, 4, 2, 32, 0, 34, 0),
        (2, 16, 4, 2, 32, 0, 7, 0),
        (2, 16, 4, 2, 32, 0, 32, 3),
        (2, 16, 4, 2, 33, 0, 8, 0),  # an odd head_dim, even where a part is rotated
        (2, 16, 4, 2, 32, 0, 32, 0, 100, 30, 0, 0),  # heads overlap
        (2, 16, 4, 2, 32, 0, 32, 0, 100, 32, 0, 0),  # rows overlap
        (2, 16, 4, 0, 32, 0, 32, 0, 0, 0, 64, 32),  # k strides with no k
        (2, 16, 4, 2, 32, 0, 32),
        (2, 16, 4, 2, 32, 0, 32, 0, 128),
    ]:
        with pytest.raises(KernelError, match="rotary_dim"):
            FAM.check(bad)
    assert FAM.input_shapes(NEOX) == [(10, 4, 16), (10, 4, 16), (1, 5, 4), (1, 5, 4)]
    assert FAM.input_shapes(GPTJ) == [(10, 4, 8), (1, 5, 8)]  # one tensor, one sin|cos table
    assert FAM.layout_free(NEOX) == NEOX[:8] and FAM.layout_free(PHI2) == PHI2[:6]
    assert FAM.flops(NEOX) == 3.0 * 10 * 8 * 4  # the rotated part only
    assert FAM.bytes(NEOX, "float16") == 2 * (2 * 10 * 8 * 16 + 2 * 5 * 4)
    assert FAM.bytes(GPTJ, "float16") == 2 * (2 * 10 * 4 * 8 + 5 * 8)
    q, k, _, _ = FAM.make_inputs(NEOX, "float32", "cpu", 0)
    assert q.stride() == (192, 48, 1) and k.stride() == (192, 48, 1)  # views of wider rows, as the model's


@pytest.mark.slow
def test_cuda_schedules_of_the_variants_lower_for_sm90():
    # GPT-NeoX-1.4B's 32 of 128 in the packed qkv, GPT-J-6B's 64 of 256 as pairs, Phi-3-mini's 48 of 96
    neox, gptj = (4, 512, 16, 16, 128, 0, 32, 0, 6144, 384, 6144, 384), (4, 512, 16, 0, 64, 0, 64, 2, 4096, 256, 0, 0)
    for shape in (neox, gptj, (4, 509, 32, 32, 96, 0, 48, 0, 9216, 96, 9216, 96), (4, 509, 32, 8, 128, 1, 128, 1)):
        space = FAM.search_space(shape, "float16", H200)
        assert 1 <= len(space) <= 8
        for cfg in space[:2]:
            assert FAM.reject_reason(shape, "float16", cfg, H200) is None
            src = C.lower_source(FAM.program(shape, "float16", cfg, SM90), SM90)
            assert "__global__" in src
            if shape[3]:
                assert "const half_t* __restrict__ K" in src
    # the partial shape's first config copies the passed part in 16-byte vectors
    src = C.lower_source(FAM.program(neox, "float16", FAM.search_space(neox, "float16", H200)[0], SM90), SM90)
    assert "uint4" in src


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_cuda_schedules_of_the_variants_compile_for_sm90(dtype):
    for shape in (
        (4, 512, 16, 16, 128, 0, 32, 0, 6144, 384, 6144, 384),
        (4, 512, 16, 0, 64, 0, 64, 2, 4096, 256, 0, 0),
    ):
        kernel = FAM.build(shape, dtype, FAM.search_space(shape, dtype, H200)[0], SM90)
        assert "__global__" in kernel.source


def _llama_angles(s, rot):
    """cos and sin of llama's kind (cat((freqs, freqs))), rot wide."""
    angle = torch.randn(1, s, rot // 2)
    return torch.cat((angle, angle), -1).cos(), torch.cat((angle, angle), -1).sin()


def test_route_reads_gpt_neox_packed_qkv_in_place_and_rotates_a_quarter():
    b, s, h, d, rot = 2, 16, 4, 16, 4
    qkv = torch.randn(b, s, h * 3 * d).view(b, s, h, 3 * d).transpose(1, 2)  # GPTNeoXAttention's view
    q, k, _ = qkv.chunk(3, dim=-1)
    cos, sin = _llama_angles(s, rot)
    partial = written.RopeForm(partial=True)
    route = FAM.route(written.rotary, (q, k, cos, sin), {"form": partial}, "float32")
    assert route.shape == (b, s, h, h, d, 0, rot, 0, h * 3 * d, 3 * d, h * 3 * d, 3 * d)
    assert route.notes == ("output copied to contiguous, as torch.cat returns it",)  # the inputs are read in place
    found = plan(q, k, cos, sin, partial)
    assert found.inputs[0].data_ptr() == q.data_ptr() and found.inputs[1].data_ptr() == k.data_ptr()  # in place
    kernel = FAM.build(route.shape, "float32", FAM.search_space(route.shape, "float32", CPU)[0], "c")
    yq, yk = route.launch(kernel)
    c, sn = cos.unsqueeze(1), sin.unsqueeze(1)
    for y, x in ((yq, q), (yk, k)):
        want = torch.cat((x[..., :rot] * c + rotate_half(x[..., :rot]) * sn, x[..., rot:]), -1)
        torch.testing.assert_close(y, want)
    # cos and sin that are not dense are copied, and said
    wide_cos, wide_sin = torch.cat((cos, cos), -1), torch.cat((sin, sin), -1)
    other = FAM.route(written.rotary, (q, k, wide_cos[..., :rot], wide_sin[..., :rot]), {"form": partial}, "float32")
    assert other.shape == route.shape and other.notes == (
        "cos, sin copied to contiguous",
        "output copied to contiguous, as torch.cat returns it",
    )
    torch.testing.assert_close(other.launch(kernel)[0], yq)
    # llama's form does not rotate a part: the same call is not its kernel's
    assert "narrower" in FAM.route(written.rotary, (q, k, cos, sin), {}, "float32")
    assert "wider" in FAM.route(written.rotary, (q[..., :2], k[..., :2], cos, sin), {"form": partial}, "float32")


def test_route_reads_a_sliced_q_in_place_and_copies_heads_outer_layouts():
    b, s, h, d, rot = 2, 16, 4, 16, 8
    q = torch.randn(b, s, h * d).view(b, s, h, d).transpose(1, 2)
    k = torch.randn(b, s, h * d).view(b, s, h, d).transpose(1, 2)
    cos, sin = _llama_angles(s, rot)
    route = FAM.route(written.rotary, (q[..., :rot], k[..., :rot], cos, sin), {}, "float32")  # Phi-2's call
    assert route.shape == (b, s, h, h, rot, 0, rot, 0, h * d, d, h * d, d) and route.notes == ()
    kernel = FAM.build(route.shape, "float32", {"block_tokens": 4}, "c")
    yq, _ = route.launch(kernel)
    torch.testing.assert_close(yq, q[..., :rot] * cos.unsqueeze(1) + rotate_half(q[..., :rot]) * sin.unsqueeze(1))
    # heads outer ([b, h, s, d] contiguous, a q_layernorm's output): copied, and said
    copied = FAM.route(written.rotary, (q.contiguous()[..., :rot], k[..., :rot], cos, sin), {}, "float32")
    assert copied.shape == (b, s, h, h, rot, 0, rot, 0, 0, 0, h * d, d) and copied.notes == (
        "input copied to contiguous",
    )
    torch.testing.assert_close(copied.launch(FAM.build(copied.shape, "float32", {"block_tokens": 4}, "c"))[0], yq)


def test_route_takes_gpt_j_one_tensor_and_its_sin_cos_table_in_place():
    b, s, h, d, rot = 2, 16, 4, 16, 8
    x = torch.randn(b, s, h * d).view(b, s, h, d)  # GPTJAttention's key before its transpose
    table = torch.randn(1, s, rot)  # embed_positions[position_ids]
    sin, cos = torch.split(table, rot // 2, dim=-1)
    form = written.RopeForm(single=True, interleaved=2)
    route = FAM.route(written.rotary, (x[..., :rot], None, cos, sin), {"form": form}, "float32")
    assert route.shape == (b, s, h, 0, rot, 0, rot, 2, h * d, d, 0, 0) and route.notes == ()
    found = plan(x[..., :rot], None, cos, sin, form)
    assert found.inputs[0].data_ptr() == x.data_ptr() and found.inputs[1].data_ptr() == table.data_ptr()  # in place
    kernel = FAM.build(route.shape, "float32", {"block_tokens": 4}, "c")
    y = route.launch(kernel)
    c = torch.repeat_interleave(cos[:, :, None, :], 2, 3)
    sn = torch.repeat_interleave(sin[:, :, None, :], 2, 3)
    xr = x[..., :rot]
    torch.testing.assert_close(y, xr * c + torch.stack((-xr[..., 1::2], xr[..., ::2]), -1).flatten(-2) * sn)
    # sin and cos that are not halves of one table are copied into one, and said
    other = FAM.route(written.rotary, (x[..., :rot], None, cos.clone(), sin.clone()), {"form": form}, "float32")
    assert other.shape == route.shape and other.notes == ("sin and cos copied into one table",)
    torch.testing.assert_close(other.launch(kernel), y)
