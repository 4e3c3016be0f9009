"""Correctness of a tuned kernel against the PyTorch reference.

In: a family, the model's problem shape, the tuned config, a dtype, a target, seeds.
Out: `VerifyResult` — one case per (shape, seed): the model shape on every seed and a
nearby shape that is not a multiple of any tile (tails are where tiled kernels break),
each with max abs/rel error and the tolerance used. The nearby shape is the family's
first awkward shape the config accepts: a schedule that loads rows by TMA refuses K off
multiples of 8 and is checked on tails at multiples of 8 instead; a config that accepts
none fails on the first, with its reason. NaN, Inf and all-zero outputs fail
even where allclose would not notice.
"""

from __future__ import annotations

import torch

from ..errors import KernelError
from ..kernels.base import KernelFamily
from ..measuring.checks import check_output
from ..results import KernelConfig, Shape, VerifyCase, VerifyResult


def awkward_for(family: KernelFamily, shape: Shape, dtype: str, config: KernelConfig, target: str) -> Shape:
    """The first of the family's awkward shapes near `shape` that `config` resolves at
    (its first where none does, so the failure is the config's to report)."""
    shapes = [tuple(s) for s in family.awkward_shapes(shape)]
    for s in shapes:
        try:
            family.resolve(s, dtype, config, target)
            return s
        except KernelError:
            continue
    return shapes[0]


def verify(
    family: KernelFamily,
    shape: Shape,
    dtype: str,
    config: KernelConfig,
    target: str,
    device: str,
    *,
    seeds: tuple[int, ...] = (0, 1, 2),
) -> VerifyResult:
    cases = []
    awkward = awkward_for(family, tuple(shape), dtype, config, target)
    plan = [(tuple(shape), s) for s in seeds] + [(awkward, seeds[0] + 100)]
    kernels: dict[Shape, object] = {}
    for shp, seed in plan:
        atol, rtol = family.tolerance(dtype, shp)  # gemm's grows with K
        try:
            if shp not in kernels:
                kernels[shp] = family.build(shp, dtype, config, target)
            inputs = family.make_inputs(shp, dtype, device, seed)
            out = kernels[shp](*inputs)
            ref = family.reference(*inputs)
            if device == "cuda":
                torch.cuda.synchronize()
            ok, reason, max_abs, max_rel = check_output(out, ref, atol, rtol)
        except Exception as exc:  # one failing case is a result, not a crash
            ok, reason, max_abs, max_rel = (
                False,
                f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}",
                None,
                None,
            )
        cases.append(VerifyCase(family.name, shp, dtype, seed, max_abs, max_rel, atol, rtol, ok, reason))
    return VerifyResult(family.name, tuple(cases))
