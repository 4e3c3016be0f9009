"""Swap-in at the operator the profiler saw, for any model as its authors wrote it.

In: the tuned kernels, one per (family, problem shape), with the dtype and target they
were built for. Out: a `Router` — a `torch.overrides.TorchFunctionMode` under which the
chosen families' torch functions (`F.linear`, `torch.addmm`, `F.scaled_dot_product_attention`,
`F.softmax`, `F.layer_norm`, `F.rms_norm`, `F.conv2d`, ...) run the TileLang kernel when
shape, dtype and layout match, and PyTorch otherwise — and `CallCount`s saying, per
family and shape, how many calls ran in TileLang and how many fell back, and why. Fused
families' two-call patterns (a linear then its GELU; an add then its LayerNorm) are
taken by holding the first call back until the next call on its result, and longer
ones (a convolution, its batch norm, a residual add, a ReLU) by holding each further
call back as well (`Router`).

Why a function mode and not module replacement: the profiler sees aten operators
whoever called them (`nn.Linear`, transformers' `Conv1D` calling `torch.addmm`, SDPA
inside a timm block). Module replacement only finds the module types it knows; the
function mode sees every call site. Why not a dispatch mode: below autograd, SDPA and
linear arrive already decomposed into backend-specific ops, and keyword arguments such
as LayerNorm's eps or SDPA's scale are harder to read. The mode's host cost per
intercepted call is measured and reported (`router_overhead_us`); it does not reach
the device time, which is timed by CUDA-graph replay. A norm written out as several
calls (transformers' LlamaRMSNorm) has no function to see: given the model, the router
makes each such module one F.rms_norm call while it is active (`written`).
"""

from __future__ import annotations

import threading
import types
import weakref
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode, _pop_mode, _push_mode

from . import written
from ..results import FUSED_INTO, CallCount, KernelConfig, Shape, shape_str


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
    # What the call returns (size, dtype, device), where the family can say without
    # running it: a fused pattern's first call is held back on this (`Start.out`).
    out: tuple | None = None
    # A fused route whose kernel also computes the held first call's result: `launch`
    # returns (this call's result, the first call's), and a later read of the first
    # finds it written (add_layernorm's sum, the pre-norm residual stream).
    also_first: bool = False


@dataclass(frozen=True)
class Start:
    """A fused pattern's first call as its family sees it (`KernelFamily.first`): the
    fused kernel's problem shape, what the call returns (size, dtype, device), for the
    placeholder the router hands back while it waits for the second, and what the
    second needs from the first (`state`: gemm's route, the add's operands)."""

    shape: Shape
    out: tuple
    state: Any = None
    # The call as the plain family's route, where the family made one on the way (gemm's
    # fused variants route the linear first): when the pattern is not taken, the router
    # launches the call from it instead of routing the same call a second time.
    route: Route | None = None


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
        self._families: set[str] | None = None

    def add(
        self,
        family: str,
        shape: Shape,
        config: KernelConfig | None,
        kernel: Callable | None,
        *,
        verified: bool = True,
        why_not: str = "",
    ) -> None:
        self._entries[(family, tuple(shape))] = Entry(dict(config or {}), kernel, verified, why_not)
        self._families = None

    def families(self) -> set[str]:
        # Asked on every call a fused pattern could start: built once per change.
        if self._families is None:
            self._families = {f for f, _ in self._entries}
        return self._families

    def entries(self) -> dict[tuple[str, Shape], Entry]:
        return dict(self._entries)

    def lookup(
        self, family: str, shape: Shape, params: dict[str, Any], defaults: dict[str, Any] | None = None
    ) -> tuple[Callable | None, str]:
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


# Calls that read only what a held placeholder already has right (its size, dtype,
# device): they leave a held first call held.
_METADATA = frozenset(
    {
        torch.Tensor.shape.__get__,
        torch.Tensor.dtype.__get__,
        torch.Tensor.device.__get__,
        torch.Tensor.ndim.__get__,
        torch.Tensor.is_cuda.__get__,
        torch.Tensor.layout.__get__,
        torch.Tensor.requires_grad.__get__,
        torch.Tensor.size,
        torch.Tensor.dim,
        torch.Tensor.numel,
        torch.Tensor.stride,
        torch.Tensor.is_contiguous,
        torch.Tensor.__len__,
    }
)


def _mutates(func: Callable, kwargs: dict) -> bool:
    """Whether a call may write one of its tensor arguments (x.add_(...), x[i] = v, out=)."""
    name = getattr(func, "__name__", "")
    return (
        kwargs.get("out") is not None
        or kwargs.get("inplace") is True
        or name == "__setitem__"
        or name.startswith("__i")
        or (name.endswith("_") and not name.endswith("__"))
    )


# Elementwise calls a held activation chain may take (operands: the chain's own results
# and Python numbers); `0.5 * x` arrives as Tensor.mul(x, 0.5), `1 - x` as Tensor.__rsub__.
_CHAIN = frozenset(
    f
    for f in (
        *(
            getattr(torch.Tensor, n, None)
            for n in (
                "mul",
                "add",
                "sub",
                "div",
                "pow",
                "neg",
                "tanh",
                "sigmoid",
                "exp",
                "erf",
                "__rsub__",
                "__rdiv__",
                "__rtruediv__",
                "__rpow__",
            )
        ),
        *(getattr(torch, n, None) for n in ("mul", "add", "sub", "div", "pow", "neg", "tanh", "sigmoid", "exp", "erf")),
    )
    if f is not None
)
# Shape-only steps (transformers' Conv1D views torch.addmm's result before its activation).
_CHAIN_VIEWS = frozenset({torch.Tensor.view, torch.Tensor.reshape})
_CHAIN_STEPS = 24  # longer chains run as written
# Where a chain is compared with an activation: fp32, across every region of the curves.
_PROBE = torch.linspace(-6.0, 6.0, 241)


def _opened(func: Callable) -> Callable:
    """`func`'s body without its opening `if has_torch_function(...)`, which sends the whole
    call to an active mode as one (a mode is a torch function handler)."""
    body = types.FunctionType(
        func.__code__,
        dict(func.__globals__, has_torch_function=lambda *_: False),
        func.__name__,
        func.__defaults__,
        func.__closure__,
    )
    body.__kwdefaults__ = func.__kwdefaults__
    return body


# Functions written in Python out of calls the families know, which reach a mode as one
# call: nn.MultiheadAttention (and nn.Transformer's layers) projects and attends inside
# F.multi_head_attention_forward. The router runs their body with itself active, so each
# projection and attention inside is routed and counted as any other call.
_OPENED = {F.multi_head_attention_forward: _opened(F.multi_head_attention_forward)}


def _tensors(args: tuple, kwargs: dict) -> list[torch.Tensor]:
    """Every tensor in a call's arguments, inside tuples, lists and dicts at any depth
    (identity is what the callers use; the order is the arguments').

    Written out rather than torch's pytree flatten: it runs on every call while a pattern
    is held, and pytree's node-type checks cost a routed convolutional net a few
    milliseconds of host time a forward pass on a CPU (cProfile)."""
    out: list[torch.Tensor] = []
    for x in (*args, *kwargs.values()) if kwargs else args:
        if isinstance(x, torch.Tensor):
            out.append(x)
        elif isinstance(x, (tuple, list, dict)):
            out.extend(_tensors(tuple(x.values()) if isinstance(x, dict) else x, {}))
    return out


_SELF = object()  # in a held call's arguments: its own placeholder


class _Held:
    """A first call of a fused pattern, not yet run: its placeholder (by weak reference, so
    a result nobody keeps is never computed), the call itself, and the patterns it may start."""

    __slots__ = ("ref", "func", "_args", "kwargs", "starts", "inputs", "spent", "done", "chain", "links", "origin")

    def __init__(self, ref, func, args, kwargs, starts, inputs):
        self.ref, self.func, self.args, self.kwargs = ref, func, args, kwargs
        self.starts, self.inputs = starts, inputs
        self.spent: tuple = ()  # the (fused family, shape) keys whose kernel consumed it, once one has
        self.done = False  # scan: computed already, watched only for a late read
        # Elementwise calls on the result, held back too (an activation written out, as
        # GPT-2's gelu_new is): (func, args with ("m", k) for chain member k; 0 is the
        # result itself), and a weak reference to each call's placeholder.
        self.chain: list[tuple[Any, tuple]] = []
        self.links: list[weakref.ref] = []
        # A held second call (a three-call pattern's): the held first call it reads.
        self.origin: _Held | None = None

    @property
    def args(self) -> tuple:
        return tuple(self.ref() if a is _SELF else a for a in self._args)

    @args.setter
    def args(self, args: tuple) -> None:
        # A call in place on its own placeholder (`out += identity`) holds it by weak
        # reference only, as every placeholder is held: a strong one would keep the call
        # alive past the forward pass, and the router would compute it again at the end
        # after its fused kernel had taken it.
        placeholder = self.ref()
        self._args = tuple(_SELF if placeholder is not None and a is placeholder else a for a in args)

    def member_ids(self) -> set[int]:
        return {id(m) for m in (r() for r in [self.ref, *self.links]) if m is not None}

    def replay(self, first: torch.Tensor, upto: int | None = None, *, probe: bool = False) -> list[torch.Tensor]:
        """The chain's calls run on `first` in place of the held call's result: every
        member's value (on a probe, a view is the values unchanged)."""
        vals = [first]
        for func, template in self.chain[:upto]:
            if probe and func in _CHAIN_VIEWS:
                vals.append(vals[template[0][1]])
            else:
                vals.append(func(*(vals[a[1]] if isinstance(a, tuple) and a[:1] == ("m",) else a for a in template)))
        return vals

    def alive(self) -> list[int]:
        return [k for k, r in enumerate([self.ref, *self.links]) if r() is not None]


class Router(TorchFunctionMode):
    """Routes the families' torch functions to TileLang kernels while active.

    Inside `__torch_function__` the mode is switched off by PyTorch, so the kernels'
    own torch calls (output allocation, reshapes) and the PyTorch fallbacks are not
    intercepted again.

    Fused families (gemm_gelu: LINEAR then GELU; layernorm_residual: ADD then LAYER_NORM)
    are two calls, and the first has run before the second is seen. So a call that can
    start a pattern whose fused kernel is in the table is held back: the router returns
    a placeholder of the right size, dtype and device, with nothing computed, and waits.
    The next call that reads the placeholder either completes the pattern (the fused
    kernel runs once, on the first call's inputs) or does anything else, and then the
    first call runs as it would have, into the placeholder (`Tensor.set_`, no copy),
    before that call goes on. A call that may write one of the held call's inputs runs
    it first; leaving the mode runs whatever is still held. So a held call changes when
    a kernel is launched, never what any call reads. A placeholder that the fused kernel
    consumed and something reads later (a pre-norm model's residual sum, also the next
    block's input) is computed then, late: correct, and slower than no fusion, which is
    why the profile stage fuses a pattern only where its scan saw no such read
    (`scan=True`: patterns run in PyTorch under the fused family's profiler range and
    are counted in `fusible`, with late reads in `reused`).

    A longer pattern (conv_bn_relu: a convolution, its eval batch norm, its ReLU;
    conv_bn_add_relu: the norm, a residual add, the ReLU) goes on the same way: the
    family's `second` answers a call with a `Start` instead of a route, and the router
    holds that call too, behind a placeholder of its own (an in-place call, `out +=
    identity`, keeps the one it writes into), until the call after it. That call either
    completes the pattern (the fused kernel runs once, on the first call's inputs) or
    does anything else, and then the held call runs as it would have, through the router
    with the calls before it still held, so a shorter pattern on the same first call
    (conv_bn) can still take them."""

    def __init__(
        self,
        families: Iterable[Any],
        table: KernelTable,
        *,
        scan: bool = False,
        where: KernelTable | None = None,
        model: torch.nn.Module | None = None,
        watch: Iterable[Any] = (),
    ):
        super().__init__()
        self.table = table
        self.scan = scan
        self.where = where  # scan: hold only where this table has the fused kernel (None: everywhere)
        # The model, where its written-out norms (written.find) should reach the router as
        # one F.rms_norm call each while it is active; None routes only what it sees.
        self.model = model
        self._written: Any = None
        self.all = tuple(dict.fromkeys(families))
        # Families whose calls are only counted, never routed (those not chosen for
        # rewriting): every call a family knows is accounted for, as ran in PyTorch.
        self.watched = tuple(f for f in dict.fromkeys(watch) if f not in self.all)
        # A function several families take (torch.matmul: gemm's by a weight, bmm's when
        # batched) goes to the first that `owns` the call, in registry order.
        self.handlers: dict[Any, list] = defaultdict(list)
        self.starters: dict[Any, list] = defaultdict(list)
        for fam in (*self.all, *self.watched):
            for fn in fam.functions:
                if fam not in self.handlers[fn]:
                    self.handlers[fn].append(fam)
        for fam in self.all:
            for fn in getattr(fam, "fuses", ()):
                self.starters[fn].append(fam)
        # Most of a forward pass's torch calls (views, adds, dropout) are no family's: with
        # nothing held they go straight back to PyTorch (the eager view's host time).
        self._known = frozenset(self.handlers) | frozenset(self.starters) | frozenset(_OPENED)
        self.reset()

    def reset(self) -> None:
        self.ran: Counter = Counter()
        self.fell_back: dict[tuple[str, str], Counter] = defaultdict(Counter)
        self.notes: dict[tuple[str, str], Counter] = defaultdict(Counter)
        self.fusible: Counter = Counter()  # scan: (fused family, shape) -> patterns seen
        self.reused: Counter = Counter()  # (fused family, shape) -> consumed results read later
        self._held: dict[int, _Held] = {}
        self._links: dict[int, tuple[_Held, int]] = {}  # a chain call's placeholder -> (its held call, k)

    def __enter__(self):
        # watched families too: a written-out LayerNorm is layernorm's call to count
        wanted = frozenset(getattr(f, "profile_family", None) for f in (*self.all, *self.watched)) & written.AS_CALLS
        if self.model is not None and wanted:
            # the router sees each norm as one call; one it does not take runs as written
            self._written = written.as_calls(self.model, families=wanted)
            self._written.__enter__()  # before the mode: finding them runs the norms once, unrouted
        return super().__enter__()

    def __exit__(self, *exc):
        try:
            out = super().__exit__(*exc)
            held = self._pending()
            if exc[0] is None:
                # The model returned: a placeholder still alive is referenced by what it
                # returns (the rest died with the forward's frames), so it must be computed.
                for h in held:
                    self._run_held(h)
            self._held, self._links = {}, {}
        finally:
            if self._written is not None:
                self._written.__exit__(None, None, None)
                self._written = None
        return out

    def _pending(self) -> list[_Held]:
        """Every held call: those whose placeholder is alive, and those only a chain keeps."""
        return list({id(h): h for h in [*self._held.values(), *(h for h, _ in self._links.values())]}.values())

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func not in self._known and not (self._held or self._links or self.scan):
            return func(*args, **kwargs) if kwargs else func(*args)
        kwargs = kwargs or {}
        if (self._held or self._links) and func not in _METADATA:
            done, out = self._settle(func, args, kwargs)
            if done:
                return out
        if func in _OPENED:
            _push_mode(self)  # PyTorch switched the mode off for this call: on again for its body
            try:
                return _OPENED[func](*args, **kwargs)
            finally:
                _pop_mode()
        starters = self.starters.get(func)
        routed = None
        if starters:
            placeholder, routed = self._hold(starters, func, args, kwargs)
            if placeholder is not None:
                return placeholder
        return self._call(func, args, kwargs, routed)

    def _handler(self, func, args, kwargs) -> Any:
        """The family that takes this call: the first of the function's families that owns
        it, else the last (whose route says why it stays in PyTorch); None if no family knows it."""
        fams = self.handlers.get(func)
        if not fams:
            return None
        if len(fams) == 1:
            return fams[0]
        for fam in fams:
            try:
                if fam.owns(func, args, kwargs):
                    return fam
            except Exception:  # an odd call is the last family's to name
                continue
        return fams[-1]

    def _call(self, func, args, kwargs, routed: "Route | None" = None):
        """`routed`: this call's route as a starter of the handler's own class made it."""
        fam = self._handler(func, args, kwargs)
        if self.scan:
            return written.call(func, args, kwargs)
        if fam is None:
            return func(*args, **kwargs)
        if fam in self.watched:
            return self._watch(fam, func, args, kwargs)
        if routed is not None and type(routed[0]) is type(fam):
            route = routed[1]
        else:
            try:
                route = fam.route(func, args, kwargs, self.table.dtype)
            except Exception as exc:  # an odd call signature falls back, counted, never crashes the model
                route = f"unrecognised call ({type(exc).__name__})"
        if isinstance(route, str):
            self.fell_back[(fam.name, "")][route] += 1
            return written.call(func, args, kwargs)
        key = (fam.name, _shape_key(route.shape))
        kernel, why = self.table.lookup(fam.name, route.shape, route.params, fam.params)
        if kernel is None:
            self.fell_back[key][why] += 1
            return written.call(func, args, kwargs)
        out = self._launch(fam, route, kernel)
        self._count(key, route)
        return out

    NOT_CHOSEN = "not rewritten: the family was not chosen (--ops, --families)"

    def _watch(self, fam, func, args, kwargs):
        """A call of a family that was not chosen: counted at its shape, run as written."""
        try:
            route = fam.route(func, args, kwargs, self.table.dtype)
        except Exception as exc:
            route = f"unrecognised call ({type(exc).__name__})"
        shape = "" if isinstance(route, str) else _shape_key(route.shape)
        # A call the family's kernel cannot take says that alone: choosing the family
        # (--ops, --families) would not change where it runs.
        self.fell_back[(fam.name, shape)][self.NOT_CHOSEN if shape else route] += 1
        return written.call(func, args, kwargs)

    def _count(self, key: tuple[str, str], route: Route, held: "_Held | None" = None, last: Any = None) -> None:
        """One call ran in TileLang; a fused one also says so on its first call's row, and
        on the row of `last` (the family of the call that completed the pattern) where that
        is another family's (LN(x + r): the add is no family's, the norm is layernorm's)."""
        self.ran[key] += 1
        for note in route.notes:
            self.notes[key][note] += 1
        while held is not None and held.origin is not None:
            held = held.origin  # a longer pattern's row is its first call's
        base = self._handler(held.func, held.args, held.kwargs) if held is not None else None
        for fam in dict.fromkeys(f for f in (base, last) if f is not None):
            self.notes[(fam.name, key[1])][f"{FUSED_INTO}{key[0]}"] += 1

    @staticmethod
    def _launch(fam, route: Route, kernel: Callable) -> torch.Tensor:
        if torch.autograd._profiler_enabled():
            with torch.profiler.record_function(ROUTED_PREFIX + fam.name):
                return route.launch(kernel)
        return route.launch(kernel)

    # ------------------------------------------------------------ fused patterns

    def _hold(self, starters: list, func, args, kwargs) -> tuple[torch.Tensor | None, tuple | None]:
        """The placeholder of a held call (or None), and a (family, Route) one of the
        starters made of the call on the way, for `_call` to launch it from."""
        starts, routed = [], None
        table = self.where if self.scan else self.table
        made: dict[type, Any] = {}  # first_by_class: one answer per family class
        for fam in starters:
            if table is not None and fam.name not in table.families():
                continue  # no fused kernel at any shape: not worth routing the call to find out
            if fam.first_by_class and type(fam) in made:
                start = made[type(fam)]
            else:
                try:
                    start = fam.first(func, args, kwargs, self.table.dtype)
                except Exception:  # not this pattern's call: it runs as any other
                    start = None
                if fam.first_by_class:
                    made[type(fam)] = start
            if start is None:
                continue
            if isinstance(start, Start) and start.route is not None and routed is None:
                routed = (fam, start.route)
            if isinstance(start, Start) and (
                table is None or table.lookup(fam.name, start.shape, {}, fam.params)[0] is not None
            ):
                starts.append((fam, start))
        if not starts:
            return None, routed
        size, dtype, device = starts[0][1].out
        placeholder = torch.empty(size, dtype=dtype, device=device)
        key = id(placeholder)
        ref = weakref.ref(placeholder, lambda _r, k=key, held=self._held: held.pop(k, None))
        self._held[key] = _Held(ref, func, args, kwargs, tuple(starts), tuple(id(t) for t in _tensors(args, kwargs)))
        return placeholder, routed

    def _settle(self, func, args, kwargs, go_on: bool = True) -> tuple[bool, Any]:
        """Before any call while something is held: complete a pattern (True and the fused
        result), hold this call as a longer pattern's second (True and its placeholder;
        not with `go_on` False), or run the held calls this one reads or may write the
        inputs of."""
        seen = {id(t) for t in _tensors(args, kwargs)}
        mutating = _mutates(func, kwargs)
        read: dict[int, tuple[_Held, set]] = {}  # held call -> which of its chain members this call reads
        for tid in seen:
            if tid in self._links:
                h, k = self._links[tid]
            elif tid in self._held and self._held[tid].ref() is not None:
                h, k = self._held[tid], 0
            else:
                continue
            read.setdefault(id(h), (h, set()))[1].add(k)
        for h, ks in read.values():
            if ks == {0} and not h.spent and not h.chain:
                placeholder = h.ref()
                found = []
                for fam, start in h.starts:
                    try:
                        route = fam.second(func, args, kwargs, start, placeholder)
                    except Exception:
                        route = None
                    if isinstance(route, Route) or (isinstance(route, Start) and go_on and self._has(fam, route)):
                        found.append((fam, route))
                # A pattern that goes on past this call first: its fused kernel replaces more.
                found.sort(key=lambda fr: not isinstance(fr[1], Start))
                if found:
                    fam, route = found[0]
                    # The fused kernel reads this call's other tensors as they are:
                    # one still held (gemm_mul's g, itself a linear not yet run) is
                    # computed first.
                    for other, other_ks in read.values():
                        if other is not h:
                            self._complete(other, other_ks)
                    if isinstance(route, Start):
                        goes_on = [(f, r) for f, r in found if isinstance(r, Start)]
                        return True, self._go_on(h, goes_on, func, args, kwargs)
                    return True, self._fuse(h, fam, route, func, args, kwargs)
            if not h.spent and self._extends(h, func, args, kwargs, seen):
                return True, self._extend(h, func, args, kwargs)
            self._complete(h, ks)
        if mutating:
            for h in [h for h in self._pending() if not h.spent and seen & set(h.inputs)]:
                self._run_held(h)
        return False, None

    def _has(self, fam, start: Start) -> bool:
        """Whether a pattern's fused kernel is there to be waited for at `start`'s shape."""
        table = self.where if self.scan else self.table
        return table is None or (
            fam.name in table.families() and table.lookup(fam.name, start.shape, {}, fam.params)[0] is not None
        )

    def _go_on(self, h: _Held, starts: list, func, args, kwargs) -> torch.Tensor:
        """Hold a pattern's next call as well (its placeholder, nothing computed), for every
        family whose pattern goes on (`starts`: (family, Start)): the call after it decides,
        as for a first call. A call in place on the held result (`out += identity`) keeps
        its placeholder, as PyTorch's returns its input."""
        size, dtype, device = starts[0][1].out
        same = _mutates(func, kwargs) and bool(args) and args[0] is h.ref()
        placeholder = args[0] if same else torch.empty(size, dtype=dtype, device=device)
        key = id(placeholder)
        ref = weakref.ref(placeholder, lambda _r, k=key, held=self._held: held.pop(k, None))
        # A call that may write the first call's inputs runs this one too (the first call with it).
        inputs = (*h.inputs, *(id(t) for t in _tensors(args, kwargs)))
        second = _Held(ref, func, args, kwargs, tuple(starts), inputs)
        second.origin = h
        self._held[key] = second
        return placeholder

    def _again(self, h: _Held, plain: bool = False) -> torch.Tensor:
        """A held second call as it would have run: through the router, its first call
        still held, so a two-call pattern on the pair can still take it; `plain`: the
        first call and this one as written (a scan's longer pattern, counted once)."""
        origin, placeholder = h.origin, h.origin.ref()
        if placeholder is not None and placeholder is h.ref():
            # A call in place on its first call's result: that result is held again, to be
            # computed before this call writes into it.
            self._held[id(placeholder)] = origin
        if plain:
            placeholder = origin.ref()
            if placeholder is not None and self._held.get(id(placeholder)) is origin:
                self._run_held(origin, plain=True)
            return self._call(h.func, h.args, h.kwargs)
        done, out = self._settle(h.func, h.args, h.kwargs, go_on=False)
        return out if done else self._call(h.func, h.args, h.kwargs)

    def _extends(self, h: _Held, func, args, kwargs, seen: set[int]) -> bool:
        """Whether this call is one more step of an activation chain on `h`: elementwise on
        the chain's results (one shape) and Python numbers, or a view of one result."""
        if (
            kwargs
            or len(h.chain) >= _CHAIN_STEPS
            or not seen <= h.member_ids()
            or not any(getattr(fam, "chains", False) for fam, _ in h.starts)
        ):
            return False
        if func in _CHAIN_VIEWS:
            return (
                bool(args)
                and isinstance(args[0], torch.Tensor)
                and all(
                    isinstance(a, int)
                    or (isinstance(a, (tuple, list, torch.Size)) and all(isinstance(d, int) for d in a))
                    for a in args[1:]
                )
            )
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        return (
            func in _CHAIN
            and len({tuple(t.shape) for t in tensors}) == 1
            and all(
                isinstance(a, torch.Tensor) or (isinstance(a, (int, float)) and not isinstance(a, bool)) for a in args
            )
        )

    def _extend(self, h: _Held, func, args, kwargs) -> torch.Tensor:
        members = {id(r()): k for k, r in enumerate([h.ref, *h.links]) if r() is not None}
        template = tuple(("m", members[id(a)]) if isinstance(a, torch.Tensor) else a for a in args)
        first = args[0] if isinstance(args[0], torch.Tensor) else next(a for a in args if isinstance(a, torch.Tensor))
        size, dtype, device = tuple(first.shape), first.dtype, first.device
        if func in _CHAIN_VIEWS:  # the view's shape, worked out on a tensor with no storage
            size = tuple(func(torch.empty(size, device="meta"), *args[1:]).shape)
        placeholder = torch.empty(size, dtype=dtype, device=device)
        key = id(placeholder)
        h.chain.append((func, template))
        h.links.append(weakref.ref(placeholder, lambda _r, k=key, links=self._links: links.pop(k, None)))
        self._links[key] = (h, len(h.chain))
        return placeholder

    def _complete(self, h: _Held, ks: set) -> None:
        """A chain member read by a call that is not one more step: where nothing else of
        the chain is alive and the chain computes a fused family's activation, the fused
        kernel writes that member; otherwise everything held runs as written."""
        k = next(iter(ks))
        # Members that are views of one value are that value: a view of the chain's last
        # result may be what the next call reads while the result itself is still in scope.
        value = [0]
        for func, template in h.chain:
            value.append(value[template[0][1]] if func in _CHAIN_VIEWS else len(value))
        if h.chain and value[k] > 0 and {value[j] for j in h.alive()} == {value[k]}:
            vals = h.replay(_PROBE, k, probe=True)
            for fam, start in h.starts:
                try:
                    route = fam.ends_chain(_PROBE, vals[k], start)
                except Exception:
                    route = None
                if isinstance(route, Route) and self._fuse_chain(h, k, fam, route):
                    return
        self._run_held(h)

    def _fuse_chain(self, h: _Held, k: int, fam, route: Route) -> bool:
        key = (fam.name, _shape_key(route.shape))
        if self.scan:
            self.fusible[key] += 1
            with torch.profiler.record_function(ROUTED_PREFIX + fam.name), written.unmarked():
                self._run_held(h)
            return True
        kernel, why = self.table.lookup(fam.name, route.shape, route.params, fam.params)
        if kernel is None:
            self.fell_back[key][why] += 1
            return False
        out = self._launch(fam, route, kernel)
        with torch.no_grad():
            for m in (r() for r in h.links):  # the result, and any views of it still in scope
                if m is not None:
                    m.set_(out.reshape(m.shape))
        self._forget(h)
        self._count(key, route, h)
        return True

    def _forget(self, h: _Held) -> None:
        placeholder = h.ref()
        if placeholder is not None and self._held.get(id(placeholder)) is h:
            del self._held[id(placeholder)]
        for r in h.links:
            m = r()
            if m is not None:
                self._links.pop(id(m), None)

    def _fuse(self, h: _Held, fam, route: Route, func, args, kwargs) -> torch.Tensor:
        key = (fam.name, _shape_key(route.shape))
        if self.scan:
            # Every family this pair could fuse into sees it (layernorm_residual and
            # add_layernorm share a pattern; a later read decides which one takes it).
            keys = (key, *self._also_fusing(h, fam, func, args, kwargs))
            for k in keys:
                self.fusible[k] += 1
            with torch.profiler.record_function(ROUTED_PREFIX + fam.name), written.unmarked():
                self._run_held(h, plain=True)
                out = self._call(func, args, kwargs)
            h.spent, h.done = keys, True  # watched for a later read of the first call's result
            placeholder = h.ref()
            # An in-place second (nn.ReLU(inplace=True)) returns the held result itself:
            # reading it later reads the pattern's result, not the first call's.
            if placeholder is not None and out is not placeholder:
                self._held[id(placeholder)] = h
            return out
        kernel, why = self.table.lookup(fam.name, route.shape, route.params, fam.params)
        if kernel is None:  # another eps than the tuned kernel's, and no build for it
            self.fell_back[key][why] += 1
            self._run_held(h)
            return self._call(func, args, kwargs)
        out = self._launch(fam, route, kernel)
        self._count(key, route, h, self._handler(func, args, kwargs))
        if h.origin is not None and not h.origin.spent:
            h.origin.spent = (key,)  # the first call's result, read later, is computed then
        if route.also_first:
            out, first = out
            placeholder = h.ref()
            self._forget(h)
            if placeholder is not None:
                with torch.no_grad():
                    placeholder.set_(first)
            return out
        h.spent = (key,)  # kept: a later read of the first call's result computes it then
        return out

    @staticmethod
    def _also_fusing(h: _Held, taken, func, args, kwargs) -> list[tuple[str, str]]:
        """The other families whose second this call also is (scan only)."""
        out = []
        for fam, start in h.starts:
            if fam is taken:
                continue
            try:
                route = fam.second(func, args, kwargs, start, h.ref())
            except Exception:
                route = None
            if isinstance(route, Route):
                out.append((fam.name, _shape_key(route.shape)))
        return out

    def _run_held(self, h: _Held, plain: bool = False) -> None:
        """Run a held first call as it would have run, into its placeholder, and its
        chain's calls after it, into theirs (a held second call: `_again`). Once: a call
        that reads two held results may complete one of them twice."""
        placeholder = h.ref()
        links = [r() for r in h.links]
        self._forget(h)
        if placeholder is None and not any(m is not None for m in links):
            return
        for key in h.spent:
            self.reused[key] += 1
        if h.done:
            return
        h.done = True
        if h.origin is not None:
            if h.origin.spent == h.spent:
                h.origin.spent = ()  # one late read, counted once: the pair runs as it would have
            first = self._again(h, plain)
            h.args, h.kwargs = (), {}  # its first call's placeholder is no longer wanted through it
        else:
            first = self._call(h.func, h.args, h.kwargs)
        vals = h.replay(first)
        h.chain, h.links = [], []
        with torch.no_grad():
            for m, v in zip([placeholder, *links], vals):
                if m is not None:
                    m.set_(v)

    def counts(self, profiled_ms: dict[tuple[str, str], float] | None = None) -> tuple[CallCount, ...]:
        """Calls per (family, shape) since the last reset, with each shape's profiled time."""
        profiled_ms = profiled_ms or {}
        keys = (
            set(self.ran) | set(self.fell_back) | set(self.notes) | {k for k in profiled_ms if k[0] in self.families()}
        )
        rows = [
            CallCount(
                family=f,
                shape=s,
                tilelang=int(self.ran.get((f, s), 0)),
                fallback=dict(self.fell_back.get((f, s), {})),
                profiled_ms=float(profiled_ms.get((f, s), 0.0)),
                notes=dict(self.notes.get((f, s), {})),
            )
            for f, s in keys
        ]
        return tuple(sorted(rows, key=lambda c: (c.family, -c.profiled_ms, c.shape)))

    def families(self) -> set[str]:
        return {fam.name for fam in self.all}

    def watching(self, families: Iterable[Any]) -> "Router":
        """The same kernels, and the calls of these further families counted (never routed)."""
        return Router(self.all, self.table, model=self.model, watch=families)

    def only(self, *families: str) -> "Router":
        """The same kernels with only these families' calls routed: the others run PyTorch's
        (a fused family alone still holds its first calls back; unfused, they run PyTorch's)."""
        return Router([f for f in self.all if f.name in families], self.table, model=self.model)

    def passthrough(self) -> "Router":
        """The same interception with no kernels: every call falls back. Timing it
        against the plain model gives the router's own host cost."""
        return Router(self.all, KernelTable(self.table.dtype, self.table.target), model=self.model)


def fusible(
    fn: Callable[[], Any], families: Iterable[Any], dtype: str, model: torch.nn.Module | None = None
) -> tuple[Counter, Counter]:
    """Run `fn` (a forward pass) once with the fused families' patterns found and run in
    PyTorch: (fused family, shape) -> patterns seen, and -> consumed results read later.
    With `model`, its written-out norms count as the calls they compute (Router)."""
    router = Router(families, KernelTable(dtype, "c"), scan=True, model=model)
    with router:
        fn()
    return router.fusible, router.reused


def coverage(
    counts: Iterable[CallCount],
    total_profiled_ms: float,
    base_of: dict[str, str] | None = None,
    absorbs: dict[str, tuple[str, ...]] | None = None,
    ms_a_call: dict[str, float] | None = None,
) -> float:
    """Share of the profiled time whose calls ran in TileLang: each shape's profiled
    time, weighted by the fraction of its calls that ran in TileLang. A fused family's
    rows carry the time of its base family's shape (llama's 2048x5632x2048 linears are
    gemm_silu's gate and gemm_mul's up projection), so the families of one profiled shape
    share that time by their calls instead of each counting it whole.

    The calls a fused kernel takes in beside its base call (`absorbs`, by family: a
    convolution's batch norm, ReLU and residual add) ran in TileLang too: each fused
    call adds their profile families' mean time a call (`ms_a_call`), so a ResNet whose
    every convolution runs fused is not reported as covering only its convolutions'
    share."""
    if total_profiled_ms <= 0:
        return 0.0
    counts = list(counts)
    shapes: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0, 0])  # ms, in TileLang, calls
    for c in counts:
        row = shapes[((base_of or {}).get(c.family, c.family), c.shape)]
        row[0] = max(row[0], c.profiled_ms)
        row[1] += c.tilelang
        row[2] += c.tilelang + sum(c.fallback.values())
    covered = sum(ms * ran / calls for ms, ran, calls in shapes.values() if calls and ms)
    covered += sum(
        c.tilelang * sum((ms_a_call or {}).get(f, 0.0) for f in (absorbs or {}).get(c.family, ())) for c in counts
    )
    # Not clamped: the profile's total is the sum of its families, so a share over 1 would
    # be a bug in the accounting, to be seen, not hidden.
    return covered / total_profiled_ms


_SHAPE_KEYS: dict[tuple, str] = {}


def _shape_key(shape: Shape) -> str:
    """shape_str, remembered: a model calls the same few shapes on every forward pass."""
    key = _SHAPE_KEYS.get(shape)
    if key is None:
        if len(_SHAPE_KEYS) > 4096:  # a model fed ever new sequence lengths: keep it bounded
            _SHAPE_KEYS.clear()
        key = _SHAPE_KEYS[shape] = shape_str(shape)
    return key
