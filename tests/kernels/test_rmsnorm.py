"""RMSNorm family: the CPU schedules (TileLang's C backend) against F.rms_norm, the
search spaces, metadata, the CUDA schedules lowered for sm_90a, and the nn.RMSNorm swap-in.

In: shapes, seeds and configs. Out: pass/fail. Kernels are compiled once per process
(the family's cache), so the seeds and the swap-in reuse the same builds.
"""

from __future__ import annotations

import torch

from evaluator.kernels import get
from test_rows import CPU, H200, check

FAM = get("rmsnorm")
MODEL_SHAPE = (256, 128)  # bert-tiny: batch 2 x seq 128, hidden 128


def test_wrong_result_is_detectable():
    kernel = check("rmsnorm", MODEL_SHAPE, "float32", seeds=(0,))
    x, w = FAM.make_inputs(MODEL_SHAPE, "float32", "cpu", 0)
    # Perturbing the input (not the output) must change the kernel's answer.
    out = kernel(x + 0.01 * torch.arange(MODEL_SHAPE[1]), w)
    atol, rtol = FAM.tolerance("float32")
    assert not torch.allclose(out, FAM.reference(x, w), atol=atol, rtol=rtol)


def test_problem_shape_and_metrics():
    assert FAM.problem_shape("aten::rms_norm", [[2, 128, 128], [], [128], []]) == (256, 128)
    assert FAM.problem_shape("aten::rms_norm", [[7, 33]]) == (7, 33)
    assert FAM.problem_shape("aten::layer_norm", [[7, 33]]) is None
    assert FAM.bytes((4, 8), "float16") == 2 * (2 * 32 + 8)
    assert FAM.flops((4, 8)) > 0
    assert FAM.tolerance("float32")[0] < FAM.tolerance("float16")[0] < FAM.tolerance("bfloat16")[0]


def test_make_inputs_deterministic():
    a = FAM.make_inputs((4, 8), "float32", "cpu", 5)
    b = FAM.make_inputs((4, 8), "float32", "cpu", 5)
    assert all(torch.equal(p, q) for p, q in zip(a, b))
    assert [tuple(t.shape) for t in a] == [(4, 8), (8,)]


def test_shapes_and_search_space():
    for device in ("cpu", "cuda"):
        shapes = FAM.standard_shapes(device)
        assert 3 <= len(shapes) <= 5 and any(all(d % 16 for d in s) for s in shapes)
    assert 3 <= len(FAM.search_space(MODEL_SHAPE, "float32", CPU)) <= 4
    for shape in ((4096, 1024), (16384, 4096)):
        assert 6 <= len(FAM.search_space(shape, "bfloat16", H200)) <= 12


def test_torch_rms_norm_called_directly_routes_alone_and_after_a_residual_add():
    """torch.rms_norm is another function than F.rms_norm: alone it is an rmsnorm call,
    after an add whose sum is read again an add_rmsnorm one."""
    from tests.routing import count, route_model

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.rand(40) + 0.5)

        def forward(self, x, r):
            s = torch.rms_norm(x, (40,), self.w, 1e-6) + r
            return torch.rms_norm(s, (40,), self.w, 1e-6) + s

    torch.manual_seed(0)
    inputs = (torch.randn(6, 40), torch.randn(6, 40))
    router, got, expected = route_model(["rmsnorm", "add_rmsnorm"], M(), inputs)
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)
    assert count(router, "rmsnorm") == (1, 0) and count(router, "add_rmsnorm") == (1, 0)


def test_rmsnorm_routes_with_default_and_explicit_eps():
    from tests.routing import count, route_model

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.RMSNorm(40, eps=1e-5)
            self.b = torch.nn.RMSNorm(40)  # eps None: the dtype's machine epsilon

        def forward(self, x):
            return self.b(self.a(x) + 1)

    torch.manual_seed(0)
    router, got, expected = route_model(["rmsnorm"], M(), (torch.randn(6, 40),))
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)
    assert count(router, "rmsnorm") == (2, 0)
