"""Swap-in at the operator the profiler saw, for any model as its authors wrote it.

In: the tuned kernels, one per (family, problem shape), with the dtype and target they
were built for. Out: a `Router` — a `torch.overrides.TorchFunctionMode` under which the
chosen families' torch functions (`F.linear`, `torch.addmm`, `F.scaled_dot_product_attention`,
`F.softmax`, `F.layer_norm`, `F.rms_norm`, `F.conv2d`, ...) run the TileLang kernel when
shape, dtype and layout match, and PyTorch otherwise — and `CallCount`s saying, per
family and shape, how many calls ran in TileLang and how many fell back, and why.

Why a function mode and not module replacement: the profiler sees aten operators
whoever called them (`nn.Linear`, transformers' `Conv1D` calling `torch.addmm`, SDPA
inside a timm block). Module replacement only finds the module types it knows; the
function mode sees every call site. Why not a dispatch mode: below autograd, SDPA and
linear arrive already decomposed into backend-specific ops, and keyword arguments such
as LayerNorm's eps or SDPA's scale are harder to read. The mode's host cost per
intercepted call is measured and reported (`router_overhead_us`); it does not reach
the device time, which is timed by CUDA-graph replay.
"""

from __future__ import annotations

import threading
import weakref
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import torch
from torch.overrides import TorchFunctionMode

from .results import CallCount, KernelConfig, Shape, shape_str


@dataclass(frozen=True)
class Route:
    """A family's answer for one call it can take: the problem shape, the kernel
    parameters that are not part of the shape (LayerNorm's eps), and how to launch a
    kernel on this call's arguments. `notes` name layout work done on the way (a copy
    to contiguous, NCHW read as NHWC), counted beside the call."""

    shape: Shape
    launch: Callable[[Callable[..., torch.Tensor]], torch.Tensor]
    params: dict[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()


@dataclass
class Entry:
    """One tuned kernel the router may use."""

    config: KernelConfig
    kernel: Callable[..., torch.Tensor] | None
    verified: bool = True
    why_not: str = ""  # when kernel is None or unverified: the reason calls fall back


class KernelTable:
    """(family, shape) -> tuned kernel, plus builds of the same config for other kernel
    parameters (an eps that differs from the tuned one is an input, not a reason to skip)."""

    def __init__(self, dtype: str, target: str, build: Callable[[str, Shape, KernelConfig], Callable] | None = None):
        self.dtype = dtype
        self.target = target
        self._build = build
        self._entries: dict[tuple[str, Shape], Entry] = {}
        self._variants: dict[tuple, Callable | str] = {}
        self._lock = threading.Lock()

    def add(self, family: str, shape: Shape, config: KernelConfig | None, kernel: Callable | None, *,
            verified: bool = True, why_not: str = "") -> None:
        self._entries[(family, tuple(shape))] = Entry(dict(config or {}), kernel, verified, why_not)

    def families(self) -> set[str]:
        return {f for f, _ in self._entries}

    def entries(self) -> dict[tuple[str, Shape], Entry]:
        return dict(self._entries)

    def lookup(self, family: str, shape: Shape, params: dict[str, Any],
               defaults: dict[str, Any] | None = None) -> tuple[Callable | None, str]:
        """The kernel for this call, or None and the reason it falls back. `defaults` are
        the family's kernel parameters that a tuned config leaves implicit."""
        entry = self._entries.get((family, tuple(shape)))
        if entry is None:
            return None, "shape not tuned"
        if entry.kernel is None:
            return None, entry.why_not or "no working kernel for this shape"
        if not entry.verified:
            return None, entry.why_not or "kernel failed verification"
        defaults = defaults or {}
        if not params or all(entry.config.get(k, defaults.get(k)) == v for k, v in params.items()):
            return entry.kernel, ""
        key = (family, tuple(shape), tuple(sorted(params.items())))
        with self._lock:
            got = self._variants.get(key)
        if got is None:
            if self._build is None:
                got = f"no build for parameters {params}"
            else:
                try:
                    got = self._build(family, tuple(shape), {**entry.config, **params})
                except Exception as exc:  # recorded per call as the fallback reason
                    got = f"build with {params} failed: {type(exc).__name__}: {str(exc)[:120]}"
            with self._lock:
                self._variants[key] = got
        return (None, got) if isinstance(got, str) else (got, "")


# Under torch.profiler each routed call runs inside a range named ROUTED_PREFIX + family,
# so the profile attributes its kernels (and any copies its launch makes) to the family,
# as it attributes an aten call's kernels to the aten op (profiling.family_times).
ROUTED_PREFIX = "tilelang::"


class Router(TorchFunctionMode):
    """Routes the families' torch functions to TileLang kernels while active.

    Inside `__torch_function__` the mode is switched off by PyTorch, so the kernels'
    own torch calls (output allocation, reshapes) and the PyTorch fallbacks are not
    intercepted again."""

    def __init__(self, families: Iterable[Any], table: KernelTable):
        super().__init__()
        self.table = table
        self.handlers: dict[Any, Any] = {}
        for fam in families:
            for fn in fam.functions:
                self.handlers.setdefault(fn, fam)
        self.reset()

    def reset(self) -> None:
        self.ran: Counter = Counter()
        self.fell_back: dict[tuple[str, str], Counter] = defaultdict(Counter)
        self.notes: dict[tuple[str, str], Counter] = defaultdict(Counter)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        fam = self.handlers.get(func)
        if fam is None:
            return func(*args, **kwargs)
        try:
            route = fam.route(func, args, kwargs, self.table.dtype)
        except Exception as exc:  # an odd call signature falls back, counted, never crashes the model
            route = f"unrecognised call ({type(exc).__name__})"
        if isinstance(route, str):
            self.fell_back[(fam.name, "")][route] += 1
            return func(*args, **kwargs)
        key = (fam.name, shape_str(route.shape))
        kernel, why = self.table.lookup(fam.name, route.shape, route.params, fam.params)
        if kernel is None:
            self.fell_back[key][why] += 1
            return func(*args, **kwargs)
        if torch.autograd._profiler_enabled():
            with torch.profiler.record_function(ROUTED_PREFIX + fam.name):
                out = route.launch(kernel)
        else:
            out = route.launch(kernel)
        self.ran[key] += 1
        for note in route.notes:
            self.notes[key][note] += 1
        return out

    def counts(self, profiled_ms: dict[tuple[str, str], float] | None = None) -> tuple[CallCount, ...]:
        """Calls per (family, shape) since the last reset, with each shape's profiled time."""
        profiled_ms = profiled_ms or {}
        keys = set(self.ran) | set(self.fell_back) | {k for k in profiled_ms if k[0] in self.families()}
        rows = [CallCount(family=f, shape=s, tilelang=int(self.ran.get((f, s), 0)),
                          fallback=dict(self.fell_back.get((f, s), {})), profiled_ms=float(profiled_ms.get((f, s), 0.0)),
                          notes=dict(self.notes.get((f, s), {})))
                for f, s in keys]
        return tuple(sorted(rows, key=lambda c: (c.family, -c.profiled_ms, c.shape)))

    def families(self) -> set[str]:
        return {fam.name for fam in self.handlers.values()}

    def only(self, *families: str) -> "Router":
        """The same kernels with only these families' calls routed: the others run PyTorch's."""
        return Router([f for f in dict.fromkeys(self.handlers.values()) if f.name in families], self.table)

    def passthrough(self) -> "Router":
        """The same interception with no kernels: every call falls back. Timing it
        against the plain model gives the router's own host cost."""
        return Router(dict.fromkeys(self.handlers.values()), KernelTable(self.table.dtype, self.table.target))


def coverage(counts: Iterable[CallCount], total_profiled_ms: float) -> float:
    """Share of the profiled time whose calls ran in TileLang: each shape's profiled
    time, weighted by the fraction of its calls that ran in TileLang."""
    if total_profiled_ms <= 0:
        return 0.0
    covered = 0.0
    for c in counts:
        calls = c.tilelang + sum(c.fallback.values())
        if calls and c.profiled_ms:
            covered += c.profiled_ms * c.tilelang / calls
    return min(1.0, covered / total_profiled_ms)


# ---------------------------------------------------------------- helpers the families' routes share


class DerivedWeights:
    """Weights in the layout a kernel wants (transformers' Conv1D weight transposed to
    nn.Linear's, a conv weight as KRSC), made once per weight tensor and remade only if
    the weight is replaced or updated in place."""

    def __init__(self):
        self._cache: dict[tuple, tuple[weakref.ref, torch.Tensor]] = {}
        self._lock = threading.Lock()

    def get(self, w: torch.Tensor, kind: str, make: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        try:
            version = w._version
        except RuntimeError:  # inference tensors keep no version counter (and cannot change)
            version = 0
        key = (id(w), kind, w.data_ptr(), w.dtype, str(w.device), version)
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None and hit[0]() is w:
                return hit[1]
        out = make(w.detach())
        with self._lock:
            self._cache[key] = (weakref.ref(w), out)
        return out

    def constant(self, kind: str, n: int, dtype: torch.dtype, device: torch.device, value: float) -> torch.Tensor:
        key = ("const", kind, n, dtype, str(device), value)
        with self._lock:
            hit = self._cache.get(key)
        if hit is not None:
            return hit[1]
        t = torch.full((n,), value, dtype=dtype, device=device)
        with self._lock:
            self._cache[key] = (lambda: None, t)
        return t


DERIVED = DerivedWeights()


def arg(args: tuple, kwargs: dict, index: int, name: str, default: Any = None) -> Any:
    """A torch function's argument by position or keyword."""
    if len(args) > index:
        return args[index]
    return kwargs.get(name, default)


def dtype_mismatch(dtype: str, *tensors: torch.Tensor | None) -> str | None:
    from .kernels.base import torch_dtype

    want = torch_dtype(dtype)
    for t in tensors:
        if t is not None and t.dtype != want:
            return f"dtype {str(t.dtype).replace('torch.', '')} (kernels are {dtype})"
    return None
