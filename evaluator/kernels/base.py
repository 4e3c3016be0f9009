"""The protocol every kernel family module implements, and shared helpers.

In: a problem shape (tuple of ints, meaning fixed per family), a dtype name, a config
dict and a TileLang target. Out: compiled TileLang callables that take and return torch
tensors exactly like the family's PyTorch reference, plus the metadata the tuning,
verification and benchmark stages need (search space, flops, bytes, tolerances).

A family module defines one class satisfying `KernelFamily` and registers an instance
in `evaluator.kernels.REGISTRY`.
"""

from __future__ import annotations

from typing import Callable, Protocol, Sequence, runtime_checkable

import torch

from ..results import Hardware, KernelConfig, Shape

# dtype names used throughout (TileLang spells them the same way)
TORCH_DTYPES = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
}
DTYPE_ALIASES = {
    "fp32": "float32", "float": "float32", "float32": "float32",
    "fp16": "float16", "half": "float16", "float16": "float16",
    "bf16": "bfloat16", "bfloat16": "bfloat16",
}
DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}

# Compile flags for TileLang's C backend: without them the generated C is built at -O0
# and runs ~10x slower, which would make every CPU measurement meaningless.
CPU_COMPILE_FLAGS = ["-O3", "-march=native", "-ffast-math"]


def torch_dtype(name: str) -> torch.dtype:
    return TORCH_DTYPES[DTYPE_ALIASES.get(name, name)]


def is_cpu_target(target: str) -> bool:
    return target.split()[0] in ("c", "llvm")


@runtime_checkable
class KernelFamily(Protocol):
    """What the pipeline needs from one operator family.

    Optional (not part of the runtime check, so families without it still satisfy the
    protocol): `reject_reason(shape, dtype, config, hardware) -> str | None`, why a
    config cannot run on the device (shared memory or registers over its limits...) or
    None. The tuner asks it before compiling each candidate, including the neighbours
    it invents around the best config, and records a non-empty answer as "rejected".
    """

    name: str  # registry key, e.g. "gemm"
    title: str  # for reports, e.g. "GEMM / linear (+bias)"
    aten_ops: frozenset[str]  # profiled aten ops this family covers, e.g. {"aten::addmm"}
    shape_names: tuple[str, ...]  # meaning of the shape tuple, e.g. ("M", "N", "K")

    def problem_shape(self, op: str, input_shapes: Sequence[Sequence[int]]) -> Shape | None:
        """The family's problem shape for one profiled call of aten `op`, or None."""

    def standard_shapes(self, device: str) -> list[Shape]:
        """3-5 representative shapes (small, medium, large, one with awkward tails)."""

    def awkward_shape(self, shape: Shape) -> Shape:
        """A shape near `shape` that is not a multiple of any tile, for verification."""

    def make_inputs(self, shape: Shape, dtype: str, device: str, seed: int) -> tuple[torch.Tensor, ...]:
        ...

    def reference(self, *inputs: torch.Tensor) -> torch.Tensor:
        """PyTorch's own result (what the vendor library computes)."""

    def search_space(self, shape: Shape, dtype: str, hardware: Hardware) -> list[KernelConfig]:
        """Candidate configs, already filtered to those that fit the device."""

    def build(self, shape: Shape, dtype: str, config: KernelConfig, target: str) -> Callable[..., torch.Tensor]:
        """Compile the TileLang program; the callable takes `make_inputs` tensors."""

    def flops(self, shape: Shape) -> float:
        ...

    def bytes(self, shape: Shape, dtype: str) -> float:
        """Minimum bytes moved to and from memory."""

    def tolerance(self, dtype: str, shape: Shape | None = None) -> tuple[float, float]:
        """(atol, rtol) for comparing against `reference` (may depend on the shape, e.g. K)."""

    # Swap-in at the operator (evaluator.swap.Router): the torch functions this family
    # takes over (F.linear, F.scaled_dot_product_attention, ...; empty for fused variants,
    # which have no single function), and `route(func, args, kwargs, dtype)`, which
    # returns a `swap.Route` (problem shape, kernel parameters, launch) for a call it
    # computes, or a one-line reason it falls back to PyTorch.
    functions: tuple

    def route(self, func: Callable, args: tuple, kwargs: dict, dtype: str) -> object:
        ...
