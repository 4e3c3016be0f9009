"""Attention on the layouts models hand SDPA: q, k, v as transposed views of their
projections (row pitches), read in place on the C backend and lowered for sm_90a with
TMA, their pitches read from real tensors and from profiled strides, and the routes of
a Hugging Face-style and a llama-style block (no copies, no notes).

In: shapes with pitches, seeds, small blocks. Out: pass/fail.
"""

import pytest
import torch
import torch.nn.functional as F

from evaluator.errors import KernelError
from evaluator.kernels.attention import programs as P
from evaluator.kernels import common as C
from evaluator.kernels import attention as A
from evaluator.models.zoo import rotate_half
from tests.hardware import CPU

FAM = A.FAMILY
SM90 = "cuda -arch=sm_90a"


def views(B, S, H, D, pitch=None, offset=0):
    """heads [offset, offset + H) of a [B, S, pitch, D] buffer, as [B, H, S, D]."""
    base = torch.randn(B, S, pitch or H, D)
    return base[:, :, offset : offset + H].transpose(1, 2)


def test_row_pitch_of_a_contiguous_tensor_is_zero():
    t = torch.randn(2, 3, 5, 8)
    assert A.row_pitch(t.shape, t.stride()) == 0


def test_row_pitch_reads_the_views_models_make():
    B, S, H, D = 2, 7, 3, 8
    assert A.row_pitch(*_sv(views(B, S, H, D))) == H  # x.view(B, S, H, D).transpose(1, 2)
    packed = torch.randn(B, S, 3, H, D).permute(2, 0, 3, 1, 4)  # timm: qkv.reshape(...).permute(...)
    assert {A.row_pitch(*_sv(t)) for t in packed.unbind(0)} == {3 * H}
    assert A.row_pitch(*_sv(torch.randn(B, H, D, S).transpose(2, 3))) is None  # D not unit-stride
    assert A.row_pitch(*_sv(torch.randn(B, S, H, D).permute(2, 0, 1, 3))) is None  # heads outermost
    # Size-1 dims may carry any stride: a one-head or one-row view is contiguous...
    assert A.row_pitch(*_sv(views(B, S, 1, D))) == 0
    assert A.row_pitch(*_sv(views(1, 1, H, D))) == 0
    # ...but one head of four per row is not.
    assert A.row_pitch(*_sv(views(B, S, 1, D, pitch=4))) == 4


def _sv(t):
    return t.shape, t.stride()


def test_shape_with_pitches_is_checked_and_canonical():
    assert FAM.check((1, 2, 9, 9, 16, 0, 0, 0, 0)) == (1, 2, 9, 9, 16, 0)
    assert FAM.check((1, 2, 9, 9, 16, 0, 2, 6, 0)) == (1, 2, 9, 9, 16, 0, 2, 6, 0)
    for bad in [(1, 2, 9, 9, 16, 0, 1, 2, 2), (1, 2, 9, 9, 16, 0, 2, 2), (1, 2, 9, 9, 16, 0, -2, 2, 2)]:
        with pytest.raises(KernelError, match="pitches 0"):
            FAM.check(bad)


def test_problem_shape_reads_pitches_from_profiled_strides():
    q = [2, 12, 128, 64]
    shapes = [q, q, q, [], [], [], [], []]
    hf = [[128 * 768, 64, 768, 1]] * 3
    assert FAM.problem_shape(A.SDPA, shapes, input_strides=hf) == (2, 12, 128, 128, 64, 0, 12, 12, 12)
    llama = [[12 * 128 * 64, 128 * 64, 64, 1]] * 2 + [[128 * 768, 64, 768, 1]]
    assert FAM.problem_shape(A.SDPA, shapes, input_strides=llama) == (2, 12, 128, 128, 64, 0, 0, 0, 12)
    # A layout the kernel cannot read is copied by the route, so it runs as contiguous.
    odd = [[12 * 128 * 64, 64, 12 * 64 * 2, 1]] * 3
    assert FAM.problem_shape(A.SDPA, shapes, input_strides=odd) == (2, 12, 128, 128, 64, 0)
    assert FAM.problem_shape(A.SDPA, shapes) == (2, 12, 128, 128, 64, 0)


@pytest.mark.parametrize(
    "shape",
    [
        (2, 3, 37, 37, 16, 1, 3, 3, 3),  # Hugging Face: every operand a [B, S, H, D] view
        (1, 2, 45, 45, 32, 0, 6, 6, 6),  # timm: packed qkv, k and v at head offsets 2 and 4
        (1, 2, 45, 77, 32, 1, 0, 0, 2),  # llama: q, k rotated (contiguous), v a view; Sq < Skv
        (2, 2, 77, 45, 16, 0, 5, 0, 3),  # mixed pitches, Sq > Skv, pitch > H without packing
    ],
    ids=["hf", "timm-packed", "llama", "mixed"],
)
def test_cpu_reads_strided_operands_in_place(shape):
    kernel = FAM.build(shape, "float32", FAM.search_space(shape, "float32", CPU)[0], "c")
    assert isinstance(kernel, A.StridedAttention)
    for seed in (0, 1, 2):
        q, k, v = FAM.make_inputs(shape, "float32", "cpu", seed)
        assert [A.row_pitch(*_sv(t)) for t in (q, k, v)] == list(shape[6:])
        got = kernel(q, k, v)
        torch.testing.assert_close(got, FAM.reference(q, k, v), atol=2e-5, rtol=2e-5)
        # A strided q's output lies as [B, Sq, H, D], as PyTorch's flash SDPA returns it.
        assert got.transpose(1, 2).is_contiguous() == bool(shape[6])


def test_packed_inputs_share_one_buffer():
    q, k, v = FAM.make_inputs((1, 2, 45, 45, 32, 0, 6, 6, 6), "float32", "cpu", 0)
    assert q.untyped_storage().data_ptr() == k.untyped_storage().data_ptr() == v.untyped_storage().data_ptr()
    assert (k.data_ptr() - q.data_ptr()) == 2 * 32 * q.element_size()


def test_strided_kernel_refuses_other_strides():
    shape = (1, 2, 16, 16, 16, 0, 2, 2, 2)
    kernel = FAM.build(shape, "float32", {"block_M": 16, "block_N": 16}, "c")
    q, k, v = FAM.make_inputs(shape, "float32", "cpu", 0)
    with pytest.raises(KernelError, match="row pitch 2"):
        kernel(q.contiguous(), k, v)
    # The contiguous kernel takes any layout (it copies), as before.
    plain = FAM.build(shape[:6], "float32", {"block_M": 16, "block_N": 16}, "c")
    torch.testing.assert_close(plain(q, k, v), FAM.reference(q, k, v), atol=2e-5, rtol=2e-5)


@pytest.mark.slow
@pytest.mark.parametrize(
    "shape,cfg",
    [
        (
            (4, 12, 512, 512, 64, 1, 12, 12, 12),
            {"block_M": 64, "block_N": 128, "num_stages": 2, "threads": 128, "overlap": True},
        ),
        ((16, 12, 197, 197, 64, 0, 36, 36, 36), {"block_M": 128, "block_N": 64, "num_stages": 1, "threads": 256}),
        ((1, 32, 512, 512, 64, 1, 0, 0, 32), {"block_M": 128, "block_N": 128, "num_stages": 1, "threads": 256}),
    ],
    ids=["gpt2-overlap", "vit-packed-ws", "llama-ws"],
)
def test_strided_operands_lower_for_sm90_with_tma(shape, cfg):
    """The strides live in the TMA descriptors: the warp-specialized loop keeps its TMA
    loads, and the output of a strided q is stored by TMA into [B, Sq, H, D]."""
    src = C.lower_source(P.gpu_program(shape, "float16", {**A.GPU_DEFAULTS, **cfg}), SM90)
    assert "tma_store(" in src
    if not cfg.get("overlap"):
        assert src.count("tma_load(") >= 3


def test_hf_and_llama_blocks_route_views_without_copies():
    from tests.routing import count, route_model

    class HFStyle(torch.nn.Module):  # BertSelfAttention / GPT2Attention: one projection per operand
        def __init__(self):
            super().__init__()
            self.q, self.k, self.v = (torch.nn.Linear(32, 32) for _ in range(3))

        def forward(self, x):
            B, S, _ = x.shape
            q, k, v = (p(x).view(B, S, 2, 16).transpose(1, 2) for p in (self.q, self.k, self.v))
            return F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, S, 32)

    class LlamaStyle(HFStyle):  # Hugging Face's rotary embedding makes new q and k; v stays a view
        def forward(self, x):
            B, S, _ = x.shape
            q, k, v = (p(x).view(B, S, 2, 16).transpose(1, 2) for p in (self.q, self.k, self.v))
            cos, sin = torch.cos(torch.arange(S * 16.0).view(S, 16)), torch.sin(torch.arange(S * 16.0).view(S, 16))
            q, k = (t * cos + rotate_half(t) * sin for t in (q, k))
            self.layouts = [A.row_pitch(t.shape, t.stride()) for t in (q, k, v)]
            return F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, S, 32)

    torch.manual_seed(0)
    x = torch.randn(2, 21, 32)
    for model in (HFStyle(), LlamaStyle()):
        router, got, expected = route_model(["attention"], model, (x,))
        torch.testing.assert_close(got, expected, atol=2e-4, rtol=1e-4)
        assert count(router, "attention") == (1, 0)
        [row] = router.counts()
        # Whatever layout PyTorch gave the rotated q and k, the call runs on it uncopied.
        pitches = getattr(model, "layouts", [2, 2, 2])
        assert row.shape == "x".join(map(str, (2, 2, 21, 21, 16, 1, *pitches))) and not row.notes
        assert pitches[2] == 2
