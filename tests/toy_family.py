"""A toy kernel family: the whole of what adding a family takes is one folder like this
module and its test (tests/test_toy_family.py). As evaluator/kernels/hardtanh/__init__.py
it would name `FAMILIES = (FAMILY,)` and the registry would find it; kept under tests/,
the test registers it and takes it out again.

In: shape (rows, cols); input x[rows, cols]; the kernel parameters min_val and max_val.
Out: y = hardtanh(x) = clamp(x, min_val, max_val) from a real TileLang CPU kernel,
compared against `torch.nn.functional.hardtanh`, which the operator router hands to it.
Also `make`, a tiny model that calls F.hardtanh, for `--model tests/toy_family.py:make`.
"""

# No `from __future__ import annotations`: TileLang reads the prim_func's annotations.
import math

import torch
import torch.nn.functional as F
from torch import nn

from evaluator.kernels import common as C
from evaluator.kernels.base import KernelFamily, Schedule
from evaluator.routing.calls import arg, dtype_mismatch
from evaluator.routing.router import Route


def _cpu_program(shape, dtype, cfg):
    import tilelang.cpu.language as T

    rows, cols = shape
    BR, lo, hi = cfg["block_rows"], cfg["min_val"], cfg["max_val"]

    @T.prim_func
    def hardtanh_cpu(X: T.Tensor((rows, cols), dtype), Y: T.Tensor((rows, cols), dtype)):
        with T.Kernel(T.ceildiv(rows, BR)) as bx:
            for r, j in T.grid(BR, cols):
                if bx * BR + r < rows:
                    Y[bx * BR + r, j] = T.cast(
                        T.max(T.min(T.cast(X[bx * BR + r, j], "float32"), T.float32(hi)), T.float32(lo)), dtype
                    )

    return hardtanh_cpu


class ToyFamily(KernelFamily):
    name = "toy"
    title = "Toy: hardtanh (clamp)"
    aten_ops = frozenset({"aten::hardtanh"})
    shape_names = ("rows", "cols")
    params = {"min_val": -1.0, "max_val": 1.0}  # F.hardtanh's defaults
    functions = (F.hardtanh,)
    cpu_schedule = Schedule({"block_rows": 4}, _cpu_program)  # no GPU schedule: a GPU target is refused

    def problem_shape(self, op, input_shapes, concrete_inputs=None, input_strides=None):
        # min_val and max_val (in concrete_inputs) are kernel parameters, not the shape.
        if op not in self.aten_ops or not input_shapes or not input_shapes[0]:
            return None
        x = [int(d) for d in input_shapes[0]]
        return (math.prod(x[:-1]), x[-1])

    def standard_shapes(self, device):
        return [(64, 32), (256, 96), self.awkward_shape((256, 96))]

    def make_inputs(self, shape, dtype, device, seed):
        rows, cols = self.check(shape)
        # Spread over [-4, 4] so both clamps and the pass-through all happen.
        return (C.randn((rows, cols), C.canonical_dtype(dtype), device, C.generator(seed), scale=2.0),)

    def reference(self, *inputs):
        return F.hardtanh(inputs[0])

    def search_space(self, shape, dtype, hardware):
        return [{"block_rows": 4}, {"block_rows": 16}]

    def flops(self, shape):
        return 2.0 * shape[0] * shape[1]

    def bytes(self, shape, dtype):
        return 2.0 * shape[0] * shape[1] * C.dtype_bytes(C.canonical_dtype(dtype))

    def tolerance(self, dtype, shape=None):
        return (1e-6, 1e-6)  # a clamp is exact

    def input_shapes(self, shape):
        return [tuple(shape)]

    def route(self, func, args, kwargs, dtype):
        x = arg(args, kwargs, 0, "input")
        lo, hi = arg(args, kwargs, 1, "min_val", -1.0), arg(args, kwargs, 2, "max_val", 1.0)
        if arg(args, kwargs, 3, "inplace", False):
            return "in-place hardtanh"
        bad = dtype_mismatch(dtype, x)
        if bad:
            return bad
        if x.dim() == 0 or x.numel() == 0:
            return "empty input"
        cols = int(x.shape[-1])
        rows = x.numel() // cols

        def launch(kernel):
            return kernel(x.reshape(rows, cols).contiguous()).reshape(x.shape)

        return Route((rows, cols), launch, params={"min_val": float(lo), "max_val": float(hi)})


FAMILY = ToyFamily()


class TinyModel(nn.Module):
    """A projection, then the toy family's op."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(32, 48)

    def forward(self, x):
        return F.hardtanh(self.proj(x) * 2.0)


def make(batch_size: int = 4, seq_len: int = 16):
    torch.manual_seed(0)
    return TinyModel(), torch.randn(batch_size, seq_len, 32)
