"""Correctness of a tuned kernel against the PyTorch reference.

In: a family, the model's problem shape, the tuned config, a dtype, a target, seeds.
Out: `VerifyResult` — one case per (shape, seed): the model shape on every seed and a
nearby shape that is not a multiple of any tile (tails are where tiled kernels break),
each with max abs/rel error and the tolerance used. NaN, Inf and all-zero outputs fail
even where allclose would not notice.
"""

from __future__ import annotations

import torch

from .kernels.base import KernelFamily
from .measure import check_output
from .results import KernelConfig, Shape, VerifyCase, VerifyResult


def verify(family: KernelFamily, shape: Shape, dtype: str, config: KernelConfig, target: str, device: str,
           *, seeds: tuple[int, ...] = (0, 1, 2)) -> VerifyResult:
    cases = []
    awkward = tuple(family.awkward_shape(tuple(shape)))
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
            ok, reason, max_abs, max_rel = False, f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}", None, None
        cases.append(VerifyCase(family.name, shp, dtype, seed, max_abs, max_rel, atol, rtol, ok, reason))
    return VerifyResult(family.name, tuple(cases))
