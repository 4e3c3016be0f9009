"""Softmax family: the CPU schedules (TileLang's C backend) against torch.softmax, the
search spaces, metadata, the CUDA schedules lowered for sm_90a, and the nn.Softmax swap-in.

In: shapes, seeds and configs. Out: pass/fail. Kernels are compiled once per process
(the family's cache), so the seeds and the swap-in reuse the same builds.
"""

from __future__ import annotations

import shutil

import pytest
import torch

from evaluator.errors import KernelError
from evaluator.kernels import _common as C
from evaluator.kernels import get
from evaluator.results import Hardware

FAM = get("softmax")
MODEL_SHAPE = (1024, 128)  # bert-tiny attention: batch 2 x 2 heads x 128 queries, 128 keys
CPU = Hardware(target="c", device="cpu", name="test cpu", platform="cpu-x86_64", cores=2)
H200 = Hardware(target="cuda", device="cuda", name="NVIDIA H200", platform="h200", cores=132,
                smem_per_block=232448, compute_capability="9.0")
SM90 = "cuda -arch=sm_90a"


def check(shape, dtype, config=None, seeds=(0, 1, 2)):
    config = FAM.search_space(shape, dtype, CPU)[0] if config is None else config
    kernel = FAM.build(shape, dtype, config, "c")
    atol, rtol = FAM.tolerance(dtype)
    for seed in seeds:
        (x,) = FAM.make_inputs(shape, dtype, "cpu", seed)
        out = kernel(x)
        ref = FAM.reference(x)
        assert out.shape == ref.shape and out.dtype == ref.dtype
        assert torch.isfinite(out).all() and out.abs().max() > 0
        torch.testing.assert_close(out.float().sum(-1), torch.ones(shape[0]), atol=1e-2, rtol=0)
        torch.testing.assert_close(out, ref, atol=atol, rtol=rtol)
    return kernel


def test_cpu_fp32_model_shape():
    check(MODEL_SHAPE, "float32")


def test_cpu_fp32_awkward_shape():
    shape = FAM.awkward_shape(MODEL_SHAPE)
    assert all(d % 16 for d in shape)
    check(shape, "float32")


def test_cpu_streaming_schedule_awkward_shape():
    # The unbuffered schedule (for rows too long for a stack buffer) on a short shape.
    check(FAM.awkward_shape((64, 256)), "float32", {"block_rows": 4, "buffered": False})


def test_cpu_fp16_awkward_shape():
    check(FAM.awkward_shape((64, 96)), "float16")


def test_cpu_bf16_is_refused_clearly():
    with pytest.raises(KernelError, match="bfloat16"):
        FAM.build(MODEL_SHAPE, "bfloat16", {}, "c")


def test_wrong_result_is_detectable():
    kernel = check(MODEL_SHAPE, "float32", seeds=(0,))
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


@pytest.mark.parametrize("shape,dtype", [((1031, 135), "float32"), ((16391, 4103), "bfloat16"),
                                          ((64, 50257), "float16")])
def test_cuda_schedules_lower_for_sm90(shape, dtype):
    # Every whole-row config must pass TileLang's layout inference (lowering is cheap).
    for cfg in FAM.search_space(shape, dtype, H200)[:3]:
        src = C.lower_source(FAM.program(shape, dtype, cfg, SM90), SM90)
        assert "__global__" in src


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_cuda_schedule_compiles_for_sm90():
    cfg = FAM.search_space((4096, 1024), "float16", H200)[0]
    assert "__global__" in FAM.build((4096, 1024), "float16", cfg, SM90).source


def test_swap_in_replaces_last_dim_softmax():
    model = torch.nn.Sequential(torch.nn.Linear(128, 128), torch.nn.Softmax(dim=-1),
                                torch.nn.Linear(128, 128), torch.nn.Softmax(dim=1)).eval()
    x = torch.randn(2, 2, 256, 128)  # rows = 1024: MODEL_SHAPE
    with torch.no_grad():
        expected = model(x)
    asked = []

    def kernel_for(shape):
        asked.append(shape)
        return FAM.build(shape, "float32", FAM.search_space(shape, "float32", CPU)[0], "c")

    assert FAM.swap_in(model, kernel_for) == 1
    assert type(model[3]) is torch.nn.Softmax
    with torch.no_grad():
        got = model(x)
    assert asked == [MODEL_SHAPE]
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
