"""Test helper: run a model under the operator router with kernels built for the calls
it makes (first config of each family's search space, C target), as the pipeline does
after tuning (or, with target="cuda", built for the GPU). Out: the router (with its call counts), the routed output
and PyTorch's."""

from __future__ import annotations

import torch

from evaluator.device import hardware
from evaluator import kernels
from evaluator.routing import router as swap
from evaluator.results import parse_shape

CPU_HW = hardware.detect("cpu")


def route_model(families, model, inputs, *, dtype="float32", build=None, skip=(), target="c"):
    """`build(family, shape)` -> bool says which shapes get a kernel (default: all but `skip`)."""
    fams = [kernels.get(f) for f in families]
    hw = CPU_HW if target == "c" else hardware.detect("cuda")
    table = swap.KernelTable(dtype, target, build=lambda f, s, c: kernels.get(f).build(s, dtype, c, target))
    router = swap.Router(fams, table, model=model)  # its written-out norms too (evaluator.routing.written)
    model = model.eval()
    with torch.inference_mode():
        expected = model(*inputs)
        with router:  # dry run: which (family, shape) the model calls
            model(*inputs)
    wanted = {k for k in router.fell_back if k[1]}
    fused = [f for f in fams if f.fuses]
    if fused:  # a fused family's shapes: where the scan saw its pattern
        with torch.inference_mode():
            seen, _ = swap.fusible(lambda: model(*inputs), fused, dtype, model=model)
        wanted |= set(seen)
    for fam_name, shape_text in wanted:
        shape = parse_shape(shape_text)
        if (fam_name, shape) in skip or (build is not None and not build(fam_name, shape)):
            continue
        fam = kernels.get(fam_name)
        conf = fam.search_space(shape, dtype, hw)[0]
        table.add(fam_name, shape, conf, fam.build(shape, dtype, conf, target))
    router.reset()
    with torch.inference_mode(), router:
        got = model(*inputs)
    return router, got, expected


def count(router, family):
    """(calls in TileLang, calls fallen back) of one family."""
    rows = [c for c in router.counts() if c.family == family]
    return sum(c.tilelang for c in rows), sum(sum(c.fallback.values()) for c in rows)
