"""The PrimFunc every whole-K GEMM body goes through, and kernel names.

In: a TileLang language module, the problem shape, the dtype, a body macro and whether
the product is gated. Out: `linear_program`, the prim_func of nn.Linear's (A, W, Bias) -> Y
(or with the gate G) around the body, under the kernel name profilers and tests know;
`renamed`, a prim_func under another name. The CPU, SIMT, wave, swap and ping-pong
programs (programs.py, pingpong.py) all end here.
"""

# No `from __future__ import annotations`: a program's tensor annotations are evaluated
# where it is defined (T, M, N and K are this function's).
from typing import Any

from ...results import Shape


def renamed(program: Any, name: str) -> Any:
    """`program` under the kernel name `name`: one prim_func written once serves several
    variants, each keeping the name profilers and tests know it by (`name` + "_kernel")."""
    return program.with_attr("global_symbol", name)


def linear_program(T: Any, shape: Shape, dtype: str, body: Any, gate: bool, name: str) -> Any:
    """The PrimFunc of a whole-K program: nn.Linear's (A, W, Bias) -> Y, or with `gate`
    (A, W, Bias, G) -> Y, around `body(A, W, Bias, G, Y)`, a macro that reads G only when
    gated (it gets None otherwise). Named `name`, or `name` + "_mul" when gated."""
    M, N, K = shape
    if gate:

        @T.prim_func
        def linear_mul(
            A: T.Tensor((M, K), dtype),
            W: T.Tensor((N, K), dtype),
            Bias: T.Tensor((N,), dtype),
            G: T.Tensor((M, N), dtype),
            Y: T.Tensor((M, N), dtype),
        ):
            body(A, W, Bias, G, Y)

        return renamed(linear_mul, name + "_mul")

    @T.prim_func
    def linear(
        A: T.Tensor((M, K), dtype),
        W: T.Tensor((N, K), dtype),
        Bias: T.Tensor((N,), dtype),
        Y: T.Tensor((M, N), dtype),
    ):
        body(A, W, Bias, None, Y)

    return renamed(linear, name)
