"""LayerNorm family: the CPU schedules (TileLang's C backend) against F.layer_norm, the
search spaces, metadata, the CUDA schedules lowered for sm_90a, and the nn.LayerNorm swap-in.

In: shapes, seeds and configs. Out: pass/fail. Kernels are compiled once per process
(the family's cache), so the seeds and the swap-in reuse the same builds.
"""

from __future__ import annotations

import torch

from evaluator.kernels import get
from test_rows import CPU, H200, check

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


def test_layernorm_routes_any_eps_and_no_affine():
    """HF BERT uses eps 1e-12, timm 1e-6: eps is a kernel parameter, not a reason to skip."""
    from tests.routing import count, route_model

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.LayerNorm(48, eps=1e-12)
            self.b = torch.nn.LayerNorm(48, elementwise_affine=False)

        def forward(self, x):
            return self.b(self.a(x) * 2 + 1)

    torch.manual_seed(0)
    router, got, expected = route_model(["layernorm"], M(), (torch.randn(3, 4, 48),))
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)
    assert count(router, "layernorm") == (2, 0)


def test_torch_layer_norm_called_directly_routes_alone_and_after_a_residual_add():
    """torch.layer_norm is another function than F.layer_norm (the mode sees the one the
    model calls): alone it is a layernorm call, after an add a fused one."""
    from tests.routing import count, route_model

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w, self.b = torch.nn.Parameter(torch.rand(48) + 0.5), torch.nn.Parameter(torch.randn(48))

        def forward(self, x, r):
            y = torch.layer_norm(x, (48,), self.w, self.b, 1e-6)
            return torch.layer_norm(y + r, (48,), self.w, self.b, 1e-6)

    torch.manual_seed(0)
    inputs = (torch.randn(3, 4, 48), torch.randn(3, 4, 48))
    router, got, expected = route_model(["layernorm", "layernorm_residual"], M(), inputs)
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)
    assert count(router, "layernorm") == (1, 0) and count(router, "layernorm_residual") == (1, 0)


def test_hidden_4096_leads_with_one_row_over_128_threads():
    # Three H200 sweeps at 16384x4096: 1 x 128 threads 1.53x PyTorch, the shared rule's
    # 1 x 256 1.44x. Only layernorm was measured, so only layernorm's space changes.
    first = {"block_rows": 1, "threads": 128, "chunk": 0}
    assert FAM.search_space((16384, 4096), "float16", H200)[0] == first
    assert FAM.search_space((3152, 768), "float16", H200)[0] != first
    assert get("layernorm_residual").search_space((16384, 4096), "float16", H200)[0] != first
