"""What every row-wise family (softmax, layernorm, layernorm_residual, add_layernorm, rmsnorm,
add_rmsnorm) must do: its CPU schedules
(TileLang's C backend) match PyTorch on the model shape, an awkward shape, the streaming
schedule and fp16 over several seeds; bf16 on the C backend is refused clearly; its CUDA
schedules lower (and, with nvcc, compile) for sm_90a. Family-specific checks stay in
each family's own test file.

In: family names, shapes, seeds. Out: pass/fail. Compiled kernels are cached per process.
"""

from __future__ import annotations

import shutil

import pytest
import torch

from evaluator.errors import KernelError
from evaluator.kernels import common as C
from evaluator.kernels import get
from tests.hardware import CPU, H200

SM90 = "cuda -arch=sm_90a"
ROWS = ("softmax", "layernorm", "layernorm_residual", "add_layernorm", "rmsnorm", "add_rmsnorm")
# bert-tiny's shapes: softmax rows are batch 2 x 2 heads x 128 queries of 128 keys;
# the norms see batch 2 x seq 128 rows of hidden 128.
MODEL_SHAPE = {
    "softmax": (1024, 128),
    "layernorm": (256, 128),
    "layernorm_residual": (256, 128),
    "add_layernorm": (256, 128),
    "rmsnorm": (256, 128),
    "add_rmsnorm": (256, 128),
}


def _plausible(name: str, out: torch.Tensor, shape) -> None:
    if name == "softmax":
        # each row is a probability distribution
        torch.testing.assert_close(out.float().sum(-1), torch.ones(shape[0]), atol=1e-2, rtol=0)
    else:
        assert out.abs().max() > 0.5  # normalised rows have unit scale


def check(name, shape, dtype, config=None, seeds=(0, 1, 2)):
    fam = get(name)
    config = fam.search_space(shape, dtype, CPU)[0] if config is None else config
    kernel = fam.build(shape, dtype, config, "c")
    atol, rtol = fam.tolerance(dtype)
    for seed in seeds:
        inputs = fam.make_inputs(shape, dtype, "cpu", seed)
        out, ref = kernel(*inputs), fam.reference(*inputs)
        # add_layernorm returns the norm and the sum, as PyTorch's add then layer_norm
        outs, refs = (out, ref) if isinstance(ref, tuple) else ((out,), (ref,))
        assert len(outs) == len(refs)
        for o, r in zip(outs, refs):
            assert o.shape == r.shape and o.dtype == r.dtype
            assert torch.isfinite(o).all() and o.abs().max() > 0
            torch.testing.assert_close(o, r, atol=atol, rtol=rtol)
        _plausible(name, outs[0], shape)
    return kernel


@pytest.mark.parametrize("name", ROWS)
def test_cpu_fp32_model_shape(name):
    check(name, MODEL_SHAPE[name], "float32")


@pytest.mark.parametrize("name", ROWS)
def test_cpu_fp32_awkward_shape(name):
    shape = get(name).awkward_shape(MODEL_SHAPE[name])
    assert all(d % 16 for d in shape)
    check(name, shape, "float32")


@pytest.mark.parametrize("name", ROWS)
def test_cpu_streaming_schedule_awkward_shape(name):
    # The unbuffered schedule (for rows too long for a stack buffer) on a short shape.
    check(name, get(name).awkward_shape((64, 256)), "float32", {"block_rows": 4, "buffered": False})


@pytest.mark.parametrize("name", ROWS)
def test_cpu_fp16_awkward_shape(name):
    check(name, get(name).awkward_shape((64, 96)), "float16")


@pytest.mark.parametrize("name", ROWS)
def test_cpu_bf16_is_refused_clearly(name):
    with pytest.raises(KernelError, match="bfloat16"):
        get(name).build(MODEL_SHAPE[name], "bfloat16", {}, "c")


@pytest.mark.slow
@pytest.mark.parametrize("name", ROWS)
@pytest.mark.parametrize(
    "shape,dtype",
    [((1031, 135), "float32"), ((1031, 519), "float32"), ((16391, 4103), "bfloat16"), ((64, 50257), "float16")],
)
def test_cuda_schedules_lower_for_sm90(name, shape, dtype):
    # Every config tried must pass TileLang's layout inference (lowering is cheap).
    fam = get(name)
    for cfg in fam.search_space(shape, dtype, H200)[:3]:
        assert "__global__" in C.lower_source(fam.program(shape, dtype, cfg, SM90), SM90)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
@pytest.mark.parametrize("name,dtype", [("softmax", "float16"), ("layernorm", "bfloat16"), ("rmsnorm", "bfloat16")])
def test_cuda_schedule_compiles_for_sm90(name, dtype):
    fam = get(name)
    cfg = fam.search_space((4096, 1024), dtype, H200)[0]
    assert "__global__" in fam.build((4096, 1024), dtype, cfg, SM90).source


@pytest.mark.parametrize("name", ROWS)
def test_reject_reason_screens_neighbour_configs(name):
    fam = get(name)
    shape = (4096, 4096)
    assert fam.reject_reason(shape, "float16", fam.search_space(shape, "float16", H200)[0], H200) is None
    assert "threads" in fam.reject_reason(shape, "float16", {"threads": 2048, "chunk": 8192}, H200)
    assert "spill" in fam.reject_reason((4096, 8192), "float16", {"threads": 32, "chunk": 0}, H200)
    assert "unknown config keys" in fam.reject_reason(shape, "float16", {"bogus": 1}, H200)
    assert "row buffer" in fam.reject_reason((8, 65536), "float32", {"buffered": True}, CPU)
