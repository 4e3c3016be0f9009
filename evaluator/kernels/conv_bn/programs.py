"""The TileLang programs of the conv_bn families: conv2d's implicit GEMMs with a
per-output-channel epilogue.

In: a conv2d `Geometry` (groups = 1), a dtype, a full config (conv2d's keys) and whether
the epilogue adds a residual and ends in a ReLU. Out: a TileLang PrimFunc taking X, the
weight, Scale[K] and Shift[K] (both fp32), with `residual` a tensor Rs of the output's
shape and layout, and writing Y = Scale[k] * conv(X, W) + Shift[k] (+ Rs) (then
max(., 0)), computed on the fp32 accumulator before the one rounding to the output dtype.
The programs are conv2d's (`evaluator.kernels.conv2d.programs`: the CPU loop nest for
both layouts, the channels_last and the NCHW tensor-core GEMMs) built with this
family's `Epilogue`, so a batch norm folded into Scale and Shift costs no pass of its
own. Checking configs and compiling are the family's (conv_bn/__init__.py).
"""

# No `from __future__ import annotations`: TileLang resolves the prim_func's tensor
# annotations from the closure.

from typing import Any

from ...results import Shape
from ..conv2d import programs as CP
from ..conv2d.programs import ACCUM, Epilogue, Geometry, geometry
from ..gemm.prim import renamed


def epilogue(dtype: str, relu: bool, residual: bool) -> Epilogue:
    """The folded norm (then the residual, then the ReLU) on the fp32 sum, and the kernel
    (X, Wt, Scale, Shift[, Rs]) -> Y, named conv_bn_<schedule> or conv_bn_add_<schedule>."""

    def value(T: Any, acc: Any, channel: list, output: list) -> Any:
        scale, shift = channel
        v = acc * scale + shift
        if residual:
            v = v + T.cast(output[0], ACCUM)
        if relu:
            v = T.max(v, T.float32(0))
        return v

    def kernel(T: Any, body: Any, x_shape: tuple, w_shape: tuple, y_shape: tuple, schedule: str) -> Any:
        K = w_shape[0]
        if residual:

            @T.prim_func
            def conv_bn_add(
                X: T.Tensor(x_shape, dtype),
                Wt: T.Tensor(w_shape, dtype),
                Scale: T.Tensor((K,), ACCUM),
                Shift: T.Tensor((K,), ACCUM),
                Rs: T.Tensor(y_shape, dtype),
                Y: T.Tensor(y_shape, dtype),
            ):
                body(X, Wt, (Scale, Shift), (Rs,), Y)

            return renamed(conv_bn_add, "conv_bn_add_" + schedule)

        @T.prim_func
        def conv_bn(
            X: T.Tensor(x_shape, dtype),
            Wt: T.Tensor(w_shape, dtype),
            Scale: T.Tensor((K,), ACCUM),
            Shift: T.Tensor((K,), ACCUM),
            Y: T.Tensor(y_shape, dtype),
        ):
            body(X, Wt, (Scale, Shift), (), Y)

        return renamed(conv_bn, "conv_bn_" + schedule)

    return Epilogue(value, kernel)


def cpu_program(shape: Shape | Geometry, dtype: str, cfg: dict[str, Any], relu: bool, residual: bool = False):
    return CP.cpu_program(geometry(shape), dtype, cfg, epilogue(dtype, relu, residual))


def tc_program(shape: Shape | Geometry, dtype: str, cfg: dict[str, Any], relu: bool, residual: bool = False):
    """channels_last: conv2d's `tc_program`, the epilogue applied per output channel (column)."""
    return CP.tc_program(geometry(shape), dtype, cfg, epilogue(dtype, relu, residual))


def nchw_tc_program(shape: Shape | Geometry, dtype: str, cfg: dict[str, Any], relu: bool, residual: bool = False):
    """NCHW: conv2d's `nchw_tc_program`, the epilogue applied per output channel (row)."""
    return CP.nchw_tc_program(geometry(shape), dtype, cfg, epilogue(dtype, relu, residual))
