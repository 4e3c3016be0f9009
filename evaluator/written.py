"""Norms a model writes out as several calls, found by what they compute.

In: a model (nn.Module). Out: `find(module)`, its submodules whose forward computes
RMSNorm over the last dim with their own weight and eps, as transformers writes
LlamaRMSNorm (and Mistral's, Qwen2's, T5's layer norm): a cast to fp32, `pow(2)`,
`mean(-1)`, `rsqrt`, two multiplies and a cast back; or Gemma's, which scales by
`1 + weight` (the kernel then takes that sum as its weight, made once per weight). No single torch function carries
such a norm, so neither the profiler's aten table nor the router's function mode sees
one, and on HF llama models the family that matters most after the GEMMs went
unrouted. They are found by behaviour, never by class name: each candidate (a leaf
module with one 1-D weight, an eps attribute, and a class of the model's own) runs on
random rows, one of them scaled to sqrt(eps) so that eps decides its result, and must
match F.rms_norm with its weight (or 1 + weight) and eps within a 16-bit rounding or two.

Two context managers use them. `marked` wraps each forward, as written, in a profiler
range naming the family and the shape (the profile attributes the calls inside to
rmsnorm: what the written norm costs is what the model pays). `as_calls` makes each
forward one F.rms_norm call while a router is active; the router takes that call like
any other and, after a residual add, fuses the pair into add_rmsnorm. A scanning
router (patterns found and run in PyTorch) sees the same call and runs it as written
(`call`). Outside the two nothing of the model is changed.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from dataclasses import dataclass
from typing import Iterator

import torch
import torch.nn.functional as F
from torch.profiler import record_function

# A profiler range around a written-out norm: "evaluator::written::rmsnorm::<rows>x<cols>".
PREFIX = "evaluator::written::"
FAMILY = "rmsnorm"
_EPS_ATTRS = ("variance_epsilon", "eps", "epsilon")
# Probe tolerance (atol = rtol) per dtype: the written form rounds twice in 16-bit (the
# cast back, then the weight), F.rms_norm once.
_TOL = {torch.float32: 1e-5, torch.float16: 4e-3, torch.bfloat16: 3e-2}


@dataclass(frozen=True)
class WrittenNorm:
    """One submodule that computes F.rms_norm(x, (cols,), offset + module.weight, eps)."""

    path: str
    module: torch.nn.Module
    cols: int
    eps: float
    offset: float = 0.0  # Gemma's norms scale by 1 + weight

    def weight(self) -> torch.Tensor:
        w = self.module.weight
        if not self.offset:
            return w
        from .swap import DERIVED  # made once per weight tensor, remade if it changes

        return DERIVED.get(w, f"plus {self.offset:g}", lambda t: t + self.offset)


_FOUND: "weakref.WeakKeyDictionary[torch.nn.Module, tuple[tuple, tuple[WrittenNorm, ...]]]" = \
    weakref.WeakKeyDictionary()


def find(model: torch.nn.Module) -> tuple[WrittenNorm, ...]:
    """The model's written-out RMSNorms (cached per model, dtype and device)."""
    p = next(model.parameters(), None)
    key = (p.dtype, p.device) if p is not None else ()
    hit = _FOUND.get(model)
    if hit is not None and hit[0] == key:
        return hit[1]
    found = tuple(w for w in (_probe(path, m) for path, m in model.named_modules()) if w is not None)
    _FOUND[model] = (key, found)
    return found


def _candidate(m: torch.nn.Module) -> tuple[int, float] | None:
    if next(m.children(), None) is not None or type(m).__module__.startswith("torch."):
        return None  # torch's own norms call F.rms_norm / F.layer_norm, which route already
    params = {k: v for k, v in m._parameters.items() if v is not None}
    w = params.get("weight")
    if set(params) != {"weight"} or w.dim() != 1 or not w.is_floating_point() or w.dtype not in _TOL:
        return None
    eps = next((getattr(m, a) for a in _EPS_ATTRS if isinstance(getattr(m, a, None), float)), None)
    if eps is None or not eps > 0:
        return None
    return int(w.shape[0]), float(eps)


def _probe(path: str, m: torch.nn.Module) -> WrittenNorm | None:
    shape = _candidate(m)
    if shape is None:
        return None
    cols, eps = shape
    w = m.weight
    g = torch.Generator(device="cpu").manual_seed(0)
    x = torch.randn(2, 3, cols, generator=g)
    x[0, 0] *= eps ** 0.5  # mean(x^2) near eps: a different eps, or none, reads another value here
    x = x.to(device=w.device, dtype=w.dtype)
    try:
        with torch.no_grad():
            out = m.forward(x)
    except Exception:  # a forward that wants more than one tensor is not a norm of one
        return None
    if not isinstance(out, torch.Tensor) or out.shape != x.shape or out.dtype != x.dtype:
        return None
    tol = _TOL[w.dtype]
    for offset in (0.0, 1.0):
        with torch.no_grad():
            ref = F.rms_norm(x.float(), (cols,), w.float() + offset, eps).to(w.dtype)
        if torch.allclose(out.float(), ref.float(), rtol=tol, atol=tol):
            return WrittenNorm(path, m, cols, eps, offset)
    return None


def range_name(rows: int, cols: int) -> str:
    return f"{PREFIX}{FAMILY}::{rows}x{cols}"


def parse_range(name: str) -> tuple[str, str] | None:
    """(family, shape text) of a written-out norm's profiler range, or None."""
    if not name.startswith(PREFIX):
        return None
    family, _, shape = name[len(PREFIX):].partition("::")
    return family, shape


@contextlib.contextmanager
def _patched(norms: tuple[WrittenNorm, ...], make) -> Iterator[None]:
    saved = []
    try:
        for n in norms:
            previous = n.module.__dict__.get("forward")  # an instance forward someone set (accelerate's hooks)
            saved.append((n.module, previous))
            # straight into the instance dict: nn.Module.__setattr__ would search its
            # parameter, buffer and module tables on every router entry, per norm
            n.module.__dict__["forward"] = make(n, n.module.forward)
        yield
    finally:
        for m, previous in reversed(saved):
            if previous is None:
                m.__dict__.pop("forward", None)
            else:
                m.__dict__["forward"] = previous


# Set while a scan runs a fused pair inside its own range: a norm's range nested there
# would take its kernels from the pair's GPU range (the profiler gives each kernel the
# innermost range), and the pair would be timed as its add alone.
_UNMARKED = threading.local()


@contextlib.contextmanager
def unmarked() -> Iterator[None]:
    """Written-out norms run inside this without their `marked` range."""
    before = getattr(_UNMARKED, "on", False)
    _UNMARKED.on = True
    try:
        yield
    finally:
        _UNMARKED.on = before


def marked(model: torch.nn.Module) -> contextlib.AbstractContextManager:
    """Each written-out norm's forward, unchanged, inside a profiler range with its shape."""
    def make(n: WrittenNorm, forward):
        def marked_forward(x, *args, **kwargs):
            if not isinstance(x, torch.Tensor) or x.shape[-1:] != (n.cols,) or getattr(_UNMARKED, "on", False):
                return forward(x, *args, **kwargs)
            with record_function(range_name(x.numel() // n.cols, n.cols)):
                return forward(x, *args, **kwargs)
        return marked_forward

    return _patched(find(model), make)


# as_calls(as_written=True): the F.rms_norm calls in flight, by id of their input, each
# with that input (weakly) and the norm's forward as written; `call` runs that forward.
_IN_FLIGHT: dict[int, tuple["weakref.ref[torch.Tensor]", object]] = {}


def as_calls(model: torch.nn.Module, *, as_written: bool = False) -> contextlib.AbstractContextManager:
    """Each written-out norm's forward as one F.rms_norm call (for a router to take).
    With `as_written` (a scanning router, which routes nothing: its PyTorch side must be
    the model as written), the call still reaches the router as F.rms_norm, so that a
    residual add before it is seen as add_rmsnorm's pattern, but `call` runs it as the
    model wrote it: on the H200 a reference that ran F.rms_norm instead timed llama's
    written norms as if PyTorch fused them."""
    def make(n: WrittenNorm, forward):
        def as_call(x, *args, **kwargs):
            if args or kwargs or not isinstance(x, torch.Tensor) or x.shape[-1:] != (n.cols,) \
                    or x.dtype != n.module.weight.dtype:
                return forward(x, *args, **kwargs)
            if not as_written:
                return F.rms_norm(x, (n.cols,), n.weight(), n.eps)
            _IN_FLIGHT[id(x)] = (weakref.ref(x), forward)
            try:
                return F.rms_norm(x, (n.cols,), n.weight(), n.eps)
            finally:
                _IN_FLIGHT.pop(id(x), None)
        return as_call

    return _patched(find(model), make)


def call(func, args: tuple, kwargs: dict):
    """Run a call a router did not take: an F.rms_norm that `as_calls(as_written=True)`
    made of a written-out norm runs that norm's forward as written; any other call as is."""
    if func is F.rms_norm and args and isinstance(args[0], torch.Tensor):
        hit = _IN_FLIGHT.get(id(args[0]))
        if hit is not None and hit[0]() is args[0]:
            return hit[1](args[0])
    return func(*args, **kwargs)
