"""LayerNorm family: the CPU schedules (TileLang's C backend) against F.layer_norm, the
search spaces, metadata, the CUDA schedules lowered for sm_90a, and the nn.LayerNorm swap-in.

In: shapes, seeds and configs. Out: pass/fail. Kernels are compiled once per process
(the family's cache), so the seeds and the swap-in reuse the same builds.
"""

from __future__ import annotations

import torch

from evaluator.kernels import get
from kernels.test_rows import CPU, H200, check

FAM = get("layernorm")
MODEL_SHAPE = (256, 128)  # bert-tiny: batch 2 x seq 128, hidden 128


def test_wrong_result_is_detectable():
    kernel = check("layernorm", MODEL_SHAPE, "float32", seeds=(0,))
    x, w, b = FAM.make_inputs(MODEL_SHAPE, "float32", "cpu", 0)
    # Perturbing the input (not the output) must change the kernel's answer.
    out = kernel(x + 0.01 * torch.arange(MODEL_SHAPE[1]), w, b)
    atol, rtol = FAM.tolerance("float32")
    assert not torch.allclose(out, FAM.reference(x, w, b), atol=atol, rtol=rtol)


def test_problem_shape_and_metrics():
    assert FAM.problem_shape("aten::layer_norm", [[2, 128, 128], [128], [128], [128]]) == (256, 128)
    assert FAM.problem_shape("aten::native_layer_norm", [[7, 33], [33], [33]]) == (7, 33)
    assert FAM.problem_shape("aten::rms_norm", [[7, 33]]) is None
    assert FAM.bytes((4, 8), "float16") == 2 * (2 * 32 + 2 * 8)
    assert FAM.flops((4, 8)) > 0
    assert FAM.tolerance("float32")[0] < FAM.tolerance("float16")[0] < FAM.tolerance("bfloat16")[0]


def test_make_inputs_deterministic():
    a = FAM.make_inputs((4, 8), "float32", "cpu", 5)
    b = FAM.make_inputs((4, 8), "float32", "cpu", 5)
    assert all(torch.equal(p, q) for p, q in zip(a, b))
    assert [tuple(t.shape) for t in a] == [(4, 8), (8,), (8,)]


def test_shapes_and_search_space():
    for device in ("cpu", "cuda"):
        shapes = FAM.standard_shapes(device)
        assert 3 <= len(shapes) <= 5 and any(all(d % 16 for d in s) for s in shapes)
    assert 3 <= len(FAM.search_space(MODEL_SHAPE, "float32", CPU)) <= 4
    for shape in ((4096, 1024), (16384, 4096)):
        assert 6 <= len(FAM.search_space(shape, "bfloat16", H200)) <= 12


def test_swap_in_replaces_matching_layernorm():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(128, 128), torch.nn.LayerNorm(128),
                                torch.nn.LayerNorm(128, eps=1e-3),  # other eps: left alone
                                torch.nn.LayerNorm(128, elementwise_affine=False)).eval()
    with torch.no_grad():
        model[1].weight.uniform_(0.5, 1.5)
        model[1].bias.uniform_(-0.5, 0.5)
    x = torch.randn(2, 128, 128)
    with torch.no_grad():
        expected = model(x)
    asked = []

    def kernel_for(shape):
        asked.append(shape)
        return FAM.build(shape, "float32", FAM.search_space(shape, "float32", CPU)[0], "c")

    assert FAM.swap_in(model, kernel_for) == 1
    assert type(model[2]) is torch.nn.LayerNorm and type(model[3]) is torch.nn.LayerNorm
    with torch.no_grad():
        got = model(x)
    assert asked == [MODEL_SHAPE]
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)
