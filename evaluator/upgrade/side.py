"""Inside a worker process (this interpreter's, or the candidate toolchain's): one kernel
built, verified and readied for timing, then timed one sample at a time.

In: requests from the parent (evaluator/upgrade/compare.py) through the worker's
protocol (tuning/isolation.py), naming these functions as their handler: `check` with a
registered family's name, the shape, dtype, tuned config, target, device, seeds and the
timing policy's fields; `sample` with the side to sample (0: the TileLang kernel, 1:
PyTorch's reference). Out: plain dicts — check's status ("ok", "compile_error",
"wrong", "not_run"), the first line of its error, build seconds and the verification
(`to_dict` of a `VerifyResult`); sample's one time in milliseconds.

Both interpreters run this same code from the same checkout, so the two sides differ in
their TileLang (and whatever else the candidate interpreter brings) only. The kernel is
verified as tuning/verify.py verifies it (the model shape on every seed, and an awkward
shape), and timed by the measuring timer's own samplers (graph replay on CUDA, host
rounds on a CPU) over inputs rotated as the op benchmark rotates them; the parent
interleaves the samples of both processes.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import torch

from .. import kernels
from ..device import hardware
from ..measuring import bench
from ..measuring.checks import short_error
from ..measuring.timing import TimingPolicy, make_sampler
from ..results import shape_str, to_dict
from ..tuning import verify

HANDLER_MODULE = __name__


def check(req: dict[str, Any], send: Callable[[dict], None], state: dict[str, Any]) -> dict[str, Any]:
    """Build the kernel, verify it, and ready both sides' samplers for `sample`."""
    state.clear()  # the previous kernel's samplers go: one kernel at a time
    device = req["device"]
    hardware.pin_threads(device)  # the same threads as the parent's timer uses
    fam = kernels.get(req["family"])
    shape, dtype, config, target = tuple(req["shape"]), req["dtype"], dict(req["config"]), req["target"]
    t0 = time.perf_counter()
    try:
        kernel = fam.build(shape, dtype, config, target)
    except Exception as exc:
        return {"status": "compile_error", "error": short_error(exc), "build_s": time.perf_counter() - t0}
    build_s = time.perf_counter() - t0
    send({"stage": "built", "build_s": build_s})
    if device == "cuda" and not torch.cuda.is_available():
        return {
            "status": "not_run",
            "error": "this interpreter's torch sees no CUDA device: the kernel was lowered and built, not run",
            "build_s": build_s,
        }
    vr = verify.verify(fam, shape, dtype, config, target, device, seeds=tuple(req["seeds"]))
    out = {"build_s": build_s, "verify": to_dict(vr)}
    if not vr.passed:
        bad = next((c for c in vr.cases if not c.passed), None)
        why = f"{shape_str(bad.shape)} seed {bad.seed}: {bad.reason or 'mismatch'}" if bad else "no case verified"
        return {**out, "status": "wrong", "error": why}
    policy = TimingPolicy(**req["policy"])
    sets = bench.rotated_inputs(fam, shape, dtype, device, 0, policy)
    sides = (
        [(lambda ins=ins: kernel(*ins)) for ins in sets],
        [(lambda ins=ins: fam.reference(*ins)) for ins in sets],
    )
    made = [make_sampler(fns, device, policy) for fns in sides]
    state["samplers"] = [m[0] for m in made]
    return {**out, "status": "ok", "timers": [m[1] for m in made], "notes": [m[2] for m in made]}


def sample(req: dict[str, Any], send: Callable[[dict], None], state: dict[str, Any]) -> dict[str, Any]:
    """One sample of one side of the kernel `check` readied: milliseconds per call."""
    samplers = state.get("samplers")
    if not samplers:
        return {"status": "runtime_error", "error": "no kernel readied: check it first"}
    return {"status": "ok", "ms": samplers[int(req["side"])].sample()}
