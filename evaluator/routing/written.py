"""Norms and rotary embeddings a model writes out as several calls, found by what they compute.

In: a model (nn.Module). Out: `find(module)`, its submodules whose forward computes
RMSNorm over the last dim with their own weight and eps, as transformers writes
LlamaRMSNorm (and Mistral's, Qwen2's, T5's layer norm): a cast to fp32, `pow(2)`,
`mean(-1)`, `rsqrt`, two multiplies and a cast back; or Gemma's, which scales by
`1 + weight` (the kernel then takes that sum as its weight, made once per weight); or a
LayerNorm written out the same way (Cohere's, without a bias): F.layer_norm's call, the
layernorm family's. No single torch function carries such a norm, so neither the
profiler's aten table nor the router's function mode sees one, and on HF llama models
the family that matters most after the GEMMs went unrouted. They are found by
behaviour, never by class name: each candidate (a leaf module with a 1-D weight, perhaps
a bias, an eps attribute, and a class of the model's own) runs on
random rows, one of them scaled to sqrt(eps) so that eps decides its result, and must
match F.rms_norm with its weight (or 1 + weight) and eps, or F.layer_norm with its weight,
bias (if any) and eps, within a 16-bit rounding or two.

Two context managers use them. `marked` wraps each forward, as written, in a profiler
range naming the family and the shape (the profile attributes the calls inside to the
family: what the written norm costs is what the model pays). `as_calls` makes each
forward one F.rms_norm (F.layer_norm) call while a router is active, also one that
only counts its family's calls (not chosen); the router takes that call like
any other and, after a residual add, fuses the pair into add_rmsnorm. A call it does not
take (a shape not tuned, another dtype, any call of a scanning router's, which finds
patterns and runs them in PyTorch) runs as written (`call`); a kernel's result is handed
on in the layout the written norm gives. Outside the two nothing of the model is changed.

Rotary embeddings are functions, not modules: transformers' `apply_rotary_pos_emb(q, k,
cos, sin)`, which llama, mistral, qwen2, gemma, GPT-NeoX, Phi and Cohere each define in
their modeling module and call by its global name, and GPT-J's and CodeGen's
`apply_rotary_pos_emb(tensor, sin, cos)`, called once for k and once for q, and
RoFormer's static method `apply_rotary_position_embeddings(sinusoidal_pos, q, k,
v=None)`, one table holding sin then cos before q and k. `find_rotary` looks in the
namespaces of the model's own classes (and among their static methods) for functions
whose first parameters are the query, the key, cos and sin (or one tensor, then sin and
cos; or a table, then q and k), and keeps those that compute a rotation on random
tensors, recording its form (`RopeForm`): halves (q * cos + rotate_half(q) * sin, the
same for k) or interleaved pairs (2i, 2i+1); whether cos narrower than q rotates only
that part of each head and passes the rest (GPT-NeoX's and Phi-3's partial rotary;
Phi-2, StableLM and Persimmon slice q themselves and pass the slice); GPT-J's one tensor
a call with one sin and cos a pair; RoFormer's table with one angle a pair. The two
managers patch such a function in its namespace: `marked` with a range named `rope` and the shape the
rope family's route will see (`rope_shape`), `as_calls` as one call of `rotary`, a
function that takes part in torch's function modes, so a router sees and routes it; not
routed, it runs the function as written.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import sys
import threading
import types
import weakref
from dataclasses import dataclass
from typing import Callable, Iterator

import torch
import torch.nn.functional as F
from torch.overrides import handle_torch_function, has_torch_function
from torch.profiler import record_function

from .calls import DERIVED  # made once per weight tensor, remade if it changes

# A profiler range around a written-out norm: "evaluator::written::rmsnorm::<rows>x<cols>".
PREFIX = "evaluator::written::"
FAMILY = "rmsnorm"
LAYERNORM = "layernorm"  # a LayerNorm written out (Cohere's, without a bias): F.layer_norm's family
ROPE = "rope"  # a rotary embedding function: "evaluator::written::rope::<the rope family's shape, with x>"
FAMILIES = frozenset({FAMILY, ROPE})
# Families whose written-out calls `as_calls` hands a router as one call: the above, and
# layernorm, whose torch function the router also sees where the model calls it.
AS_CALLS = FAMILIES | {LAYERNORM}
_EPS_ATTRS = ("variance_epsilon", "eps", "epsilon")
# Probe tolerance (atol = rtol) per dtype: the written form rounds twice in 16-bit (the
# cast back, then the weight), F.rms_norm once.
_TOL = {torch.float32: 1e-5, torch.float16: 4e-3, torch.bfloat16: 3e-2}


@dataclass(frozen=True)
class WrittenNorm:
    """One submodule that computes F.rms_norm(x, (cols,), offset + module.weight, eps),
    or, for family layernorm, F.layer_norm(x, (cols,), module.weight, module.bias, eps)."""

    path: str
    module: torch.nn.Module
    cols: int
    eps: float
    offset: float = 0.0  # Gemma's norms scale by 1 + weight
    family: str = FAMILY

    def bias(self) -> torch.Tensor | None:
        return getattr(self.module, "bias", None) if self.family == LAYERNORM else None

    def as_call(self, x: torch.Tensor) -> torch.Tensor:
        """The norm as its one torch function."""
        if self.family == LAYERNORM:
            return F.layer_norm(x, (self.cols,), self.module.weight, self.bias(), self.eps)
        return F.rms_norm(x, (self.cols,), self.weight(), self.eps)

    def weight(self) -> torch.Tensor:
        w = self.module.weight
        if not self.offset:
            return w

        return DERIVED.get(w, f"plus {self.offset:g}", lambda t: t + self.offset)


_FOUND: "weakref.WeakKeyDictionary[torch.nn.Module, tuple[tuple, tuple[WrittenNorm, ...]]]" = (
    weakref.WeakKeyDictionary()
)


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
    w, b = params.get("weight"), params.get("bias")
    if set(params) - {"bias"} != {"weight"} or w.dim() != 1 or not w.is_floating_point() or w.dtype not in _TOL:
        return None
    if b is not None and (b.shape != w.shape or b.dtype != w.dtype):
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
    x[0, 0] *= eps**0.5  # mean(x^2) near eps: a different eps, or none, reads another value here
    x = x.to(device=w.device, dtype=w.dtype)
    try:
        with torch.no_grad():
            out = m.forward(x)
    except Exception:  # a forward that wants more than one tensor is not a norm of one
        return None
    if not isinstance(out, torch.Tensor) or out.shape != x.shape or out.dtype != x.dtype:
        return None
    tol = _TOL[w.dtype]
    b = m._parameters.get("bias")
    refs = [] if b is not None else [(0.0, FAMILY), (1.0, FAMILY)]  # an RMSNorm has no bias
    for offset, family in [*refs, (0.0, LAYERNORM)]:
        with torch.no_grad():
            if family == LAYERNORM:
                ref = F.layer_norm(x.float(), (cols,), w.float(), None if b is None else b.float(), eps)
            else:
                ref = F.rms_norm(x.float(), (cols,), w.float() + offset, eps)
        if torch.allclose(out.float(), ref.to(w.dtype).float(), rtol=tol, atol=tol):
            return WrittenNorm(path, m, cols, eps, offset, family)
    return None


def range_name(rows: int, cols: int, family: str = FAMILY) -> str:
    return f"{PREFIX}{family}::{rows}x{cols}"


def parse_range(name: str) -> tuple[str, str] | None:
    """(family, shape text) of a written-out norm's profiler range, or None."""
    if not name.startswith(PREFIX):
        return None
    family, _, shape = name[len(PREFIX) :].partition("::")
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


def marked(model: torch.nn.Module, rope_shape: Callable | None = None) -> contextlib.AbstractContextManager:
    """Each written-out norm's forward and rotary embedding, unchanged, inside a profiler
    range with its shape. `rope_shape(q, k, cos, sin, form)` names a rotary call's shape
    as the rope family's route will see it (None, or no callable: the call is not marked)."""

    def make(n: WrittenNorm, forward):
        def marked_forward(x, *args, **kwargs):
            if not isinstance(x, torch.Tensor) or x.shape[-1:] != (n.cols,) or getattr(_UNMARKED, "on", False):
                return forward(x, *args, **kwargs)
            with record_function(range_name(x.numel() // n.cols, n.cols, n.family)):
                return forward(x, *args, **kwargs)

        return marked_forward

    def make_rope(r: WrittenRope, fn):
        def marked_rope(*args, **kwargs):
            shape = None
            n = 3 if r.form.single or r.form.table else 4
            rest = args[n:]
            # further arguments at their defaults compute what the probe checked (the table form takes none)
            plain = not (rest or kwargs) if r.form.table else _at_defaults(fn, n, rest, kwargs)
            if rope_shape is not None and not getattr(_UNMARKED, "on", False) and len(args) >= n and plain:
                head = args[:n]
                if r.form.single:
                    x, a, b = head
                    sin, cos = (a, b) if r.form.sin_first else (b, a)
                    shape = rope_shape(x, None, cos, sin, r.form)
                elif r.form.table:
                    angles = table_angles(head[0])
                    shape = None if angles is None else rope_shape(head[1], head[2], *angles, form=r.form)
                else:
                    shape = rope_shape(*head, form=r.form)
            if shape is None:
                return fn(*args, **kwargs)
            with record_function(f"{PREFIX}{ROPE}::{'x'.join(map(str, shape))}"):
                return fn(*args, **kwargs)

        return marked_rope

    stack = contextlib.ExitStack()
    stack.enter_context(_patched(find(model), make))
    stack.enter_context(_patched_globals(find_rotary(model), make_rope))
    return stack


# as_calls: the F.rms_norm calls in flight, by id of their input, each with that input
# (weakly) and the norm's forward as written; `call` runs that forward.
_IN_FLIGHT: dict[int, tuple["weakref.ref[torch.Tensor]", object]] = {}


def as_calls(model: torch.nn.Module, *, families: frozenset = AS_CALLS) -> contextlib.AbstractContextManager:
    """Each written-out norm's forward as one F.rms_norm call (for a router to take). A
    call the router does not take (a scanning router's, which routes nothing; a shape not
    tuned) runs as the model wrote it (`call`): on the H200 a reference that ran
    F.rms_norm instead timed llama's written norms as if PyTorch fused them, and
    F.rms_norm returns a contiguous tensor where the written form keeps its input's
    layout (Gemma 3 norms q and k as transposed views), so the calls after it would see
    other shapes than the model's."""

    def make(n: WrittenNorm, forward):
        def as_call(x, *args, **kwargs):
            # Another dtype than the weight's (Mamba's last norm on its float32 residual
            # stream, float16 weight) is still the family's call: the route says why it
            # stays in PyTorch, and `call` runs it as written.
            if args or kwargs or not isinstance(x, torch.Tensor) or x.shape[-1:] != (n.cols,):
                return forward(x, *args, **kwargs)
            _IN_FLIGHT[id(x)] = (weakref.ref(x), forward)
            try:
                out = n.as_call(x)
            finally:
                _IN_FLIGHT.pop(id(x), None)
            return _laid_out_as(out, x)

        return as_call

    stack = contextlib.ExitStack()
    norms = tuple(n for n in find(model) if n.family in families)
    if norms:
        stack.enter_context(_patched(norms, make))
    if ROPE in families:  # one `rotary` call each, which runs the function as written unless routed
        stack.enter_context(_patched_globals(find_rotary(model), _as_rotary))
    return stack


def _laid_out_as(out, x: torch.Tensor):
    """A norm's result in the layout its written form gives: elementwise ops keep their
    input's (Gemma 3 norms q and k as transposed views), where a kernel writes rows in
    order. The calls after it then see the model's layouts (attention's row pitch), as
    the profile did."""
    if not isinstance(out, torch.Tensor) or out.shape != x.shape:
        return out
    with torch._C.DisableTorchFunction():  # bookkeeping: no mode (a router, a count) is to see it
        if x.is_contiguous():
            return out
        like = torch.empty_like(x, dtype=out.dtype)
        return out if like.stride() == out.stride() else like.copy_(out)


def call(func, args: tuple, kwargs: dict):
    """Run a call a router did not take: an F.rms_norm that `as_calls` made of a
    written-out norm runs that norm's forward as written; any other call as is."""
    if (func is F.rms_norm or func is F.layer_norm) and args and isinstance(args[0], torch.Tensor):
        hit = _IN_FLIGHT.get(id(args[0]))
        if hit is not None and hit[0]() is args[0]:
            return hit[1](args[0])
    return func(*args, **kwargs)


# ---------------------------------------------------------------- rotary embeddings


@dataclass(frozen=True)
class RopeForm:
    """What a model's rotary embedding function computes, as its probe found it."""

    # fn(x, sin, cos) (or (x, cos, sin), `sin_first` False): one tensor a call, [batch,
    # seq, heads, dim], as GPT-J and CodeGen rotate k, then q; else fn(q, k, cos, sin) on
    # [batch, heads, seq, dim] with cos, sin [1 or batch, seq, dim] unsqueezed at 1.
    single: bool = False
    # 0: halves (j, j + dim/2), llama's rotate_half; 1: pairs (2i, 2i+1) with cos and sin
    # per dim (Cohere's); 2: pairs with one sin and cos a pair, repeated (GPT-J's).
    interleaved: int = 0
    # With cos narrower than q and k, the first cos.shape[-1] dims rotated and the rest
    # passed through (GPT-NeoX's, Phi-3's); otherwise such a call is not the kernel's.
    partial: bool = False
    sin_first: bool = True
    # fn(table, q, k): RoFormer's, pairs rotated by one table [.., seq, dim] holding sin
    # then cos (the rotary call's cos and sin are views into it, `table_angles`).
    table: bool = False
    # The call rotates the value too (RoFormer's rotary_value): no kernel takes three.
    value: bool = False


HALVES = RopeForm()


def rotary(q, k, cos, sin, *, written=None, form: RopeForm = HALVES):
    """A rotary embedding function of the model's (`written`, of `form`) called on its
    tensors (k None for one tensor a call), as one call that a torch function mode sees:
    a router routes it to the rope family or, not taking it, calls it again with no mode
    active, which runs `written` as the model wrote it (its other parameters at their
    defaults, which the probe checked)."""
    if has_torch_function((q, k, cos, sin)):
        return handle_torch_function(rotary, (q, k, cos, sin), q, k, cos, sin, written=written, form=form)
    if form.single:
        return written(q, sin, cos) if form.sin_first else written(q, cos, sin)
    return written(q, k, cos, sin)


def table_angles(table) -> tuple[torch.Tensor, torch.Tensor] | None:
    """(cos, sin) [1 or batch, seq, dim/2] as views of RoFormer's sin|cos table [1 or batch,
    1, seq, dim] (sin the first half), or None for a table of another shape."""
    if not isinstance(table, torch.Tensor) or table.dim() != 4 or table.shape[1] != 1 or table.shape[-1] % 2:
        return None
    sin, cos = table[:, 0].chunk(2, dim=-1)
    return cos, sin


def _as_rotary(r: WrittenRope, fn):
    if r.form.table:

        def as_table_call(table, q, k, *args, **kwargs):
            angles = table_angles(table)
            if angles is None or len(args) + len(kwargs) > 1 or (kwargs and "value_layer" not in kwargs):
                return fn(table, q, k, *args, **kwargs)
            v = args[0] if args else kwargs.get("value_layer")
            form = dataclasses.replace(r.form, value=v is not None)

            # the call as written, on the table it was given, where the router does not take it
            def as_written(q, k, cos, sin):
                return fn(table, q, k, *args, **kwargs)

            return rotary(q, k, *angles, written=as_written, form=form)

        return as_table_call

    if r.form.single:

        def as_one_call(x, a, b, *args, **kwargs):
            if not _at_defaults(fn, 3, args, kwargs):  # a parameter of another version's: as written
                return fn(x, a, b, *args, **kwargs)
            sin, cos = (a, b) if r.form.sin_first else (b, a)
            return rotary(x, None, cos, sin, written=fn, form=r.form)

        return as_one_call

    def as_call(q, k, cos, sin, *args, **kwargs):
        if not _at_defaults(fn, 4, args, kwargs):  # another unsqueeze_dim, or a parameter of another version's
            return fn(q, k, cos, sin, *args, **kwargs)
        return rotary(q, k, cos, sin, written=fn, form=r.form)

    return as_call


# ---------------------------------------------------------------- what a rotary embedding computes


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rotate_pairs(x: torch.Tensor) -> torch.Tensor:
    """(x0, x1, x2, x3, ...) -> (-x1, x0, -x3, x2, ...), as GPT-J's rotate_every_two."""
    return torch.stack((-x[..., 1::2], x[..., ::2]), dim=-1).flatten(-2)


def formula(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, interleaved: int) -> torch.Tensor:
    """x's first cos.shape[-1] dims rotated (cos and sin broadcast against them), the rest
    passed through, in x's dtype, as the models write it."""
    rot = cos.shape[-1]
    turn = rotate_pairs if interleaved else rotate_half
    if rot == x.shape[-1]:
        return x * cos + turn(x) * sin
    xr, xp = x[..., :rot], x[..., rot:]
    return torch.cat((xr * cos + turn(xr) * sin, xp), dim=-1)


@dataclass(frozen=True)
class WrittenRope:
    """A module-level function `module.name` (or a class's static method) that computes a
    rotary embedding of q and k (or of one tensor) in `form`."""

    module: types.ModuleType | type
    name: str
    fn: Callable
    form: RopeForm = HALVES


_ROPES: "weakref.WeakKeyDictionary[torch.nn.Module, tuple[WrittenRope, ...]]" = weakref.WeakKeyDictionary()


def find_rotary(model: torch.nn.Module) -> tuple[WrittenRope, ...]:
    """The rotary embedding functions the model's own modules can call: functions in the
    namespaces of the model's classes (not torch's) whose first parameters are the query,
    the key, cos and sin (or one tensor, then sin and cos, as GPT-J's), each confirmed by
    running it on random tensors against the formula in each form it may have. Found by
    what they compute, as the norms are; cached per model."""
    hit = _ROPES.get(model)
    if hit is not None:
        return hit
    names = sorted({type(m).__module__ for m in model.modules()} - {None})
    found = []
    # static methods of the model's own classes and their bases (RoFormer's), patched on
    # the class that defines them
    own = ("torch.", "builtins")
    classes = {c for m in model.modules() for c in type(m).__mro__ if not c.__module__.startswith(own)}
    for cls in sorted(classes, key=lambda c: (c.__module__, c.__qualname__)):
        for name, raw in sorted(vars(cls).items()):
            if isinstance(raw, staticmethod) and _rope_signature(raw.__func__) == "table":
                form = _table_probe(raw.__func__)
                if form is not None:
                    found.append(WrittenRope(cls, name, raw.__func__, form))
    for modname in names:
        module = sys.modules.get(modname)
        if module is None or modname.startswith("torch."):
            continue
        for name, fn in sorted(vars(module).items()):
            # a plain function, or (transformers with the hub's `kernels` installed) a
            # module wrapping one so that it can be swapped for a hub kernel
            if not (inspect.isfunction(fn) or isinstance(fn, torch.nn.Module)):
                continue
            sig = _rope_signature(fn)
            if sig == "qk":
                form = _rope_probe(fn)
            elif sig == "table":
                form = _table_probe(fn)
            else:
                form = _one_tensor_probe(fn, sig == "sin") if sig else None
            if form is not None:
                found.append(WrittenRope(module, name, fn, form))
    _ROPES[model] = tuple(found)
    return _ROPES[model]


def _at_defaults(fn, n: int, args: tuple, kwargs: dict) -> bool:
    """Whether the arguments after fn's first n each give its parameter's default (ModernBERT
    passes `unsqueeze_dim=1`, the default, by name): such a call computes what the probe
    checked, so it is the kernel's as much as the call without them."""
    if not args and not kwargs:
        return True
    try:
        params = list(inspect.signature(fn.forward if isinstance(fn, torch.nn.Module) else fn).parameters.values())
    except (TypeError, ValueError):
        return False
    named = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)][n:]
    if len(args) > len(named):
        return False
    given = {p.name: v for p, v in zip(named, args)}
    keywords = {p.name: p for p in named if p.kind is p.POSITIONAL_OR_KEYWORD}
    keywords |= {p.name: p for p in params if p.kind is p.KEYWORD_ONLY}
    for name, v in kwargs.items():
        if name in given or name not in keywords:
            return False
        given[name] = v
    defaults = {p.name: p.default for p in params}
    # plain values only (an int, a bool, None): a tensor's == is not one answer
    return all(
        defaults[name] is not inspect.Parameter.empty
        and isinstance(v, (int, float, bool, str, type(None)))
        and type(v) is type(defaults[name])
        and v == defaults[name]
        for name, v in given.items()
    )


def _rope_signature(fn) -> str | None:
    """ "qk" for fn(q, k, cos, sin, ...), "sin" or "cos" for fn(x, sin, cos, ...) or fn(x,
    cos, sin, ...) (by which comes first), "table" for fn(table, q, k, ...), where every
    later parameter has a default."""
    try:
        params = list(inspect.signature(fn.forward if isinstance(fn, torch.nn.Module) else fn).parameters.values())
    except (TypeError, ValueError):
        return None
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    names = [p.name.lower() for p in positional]

    def rest_defaulted(n: int) -> bool:
        return positional[:n] == params[:n] and all(
            p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params[n:]
        )

    if (
        len(names) >= 4
        and names[0].startswith("q")
        and names[1].startswith("k")
        and names[2].startswith("cos")
        and names[3].startswith("sin")
        and rest_defaulted(4)
    ):
        return "qk"
    if len(names) >= 3 and {names[1][:3], names[2][:3]} == {"sin", "cos"} and rest_defaulted(3):
        return names[1][:3]
    if len(names) >= 3 and names[1].startswith("q") and names[2].startswith("k") and rest_defaulted(3):
        return "table"
    return None


def _angles(g: torch.Generator, *size: int) -> tuple[torch.Tensor, torch.Tensor]:
    angle = torch.randn(*size, generator=g) * 3.0
    return angle.cos(), angle.sin()


def _matches(out, want) -> bool:
    outs, wants = (out, want) if isinstance(want, tuple) else ((out,), (want,))
    if not (
        isinstance(out, tuple) == isinstance(want, tuple)
        and len(outs) == len(wants)
        and all(isinstance(t, torch.Tensor) for t in outs)
    ):
        return False
    return all(o.shape == w.shape and torch.allclose(o, w, atol=1e-5, rtol=1e-5) for o, w in zip(outs, wants))


def _run(fn, *args):
    try:
        with torch.no_grad():
            return fn(*args)
    except Exception:  # a function of other things, or of other shapes
        return None


def _rope_probe(fn) -> RopeForm | None:
    """fn(q, k, cos, sin)'s form: halves or pairs of the whole head with cos and sin given
    per dim (an angle of its own each, so that neither the pairs' layout nor the halves'
    is assumed), and whether cos half as wide rotates only that part of each head."""
    g = torch.Generator(device="cpu").manual_seed(0)
    b, hq, hk, s, d = 2, 3, 1, 5, 8
    q, k = torch.randn(b, hq, s, d, generator=g), torch.randn(b, hk, s, d, generator=g)
    cos, sin = _angles(g, 1, s, d)
    out = _run(fn, q, k, cos, sin)
    c, sn = cos.unsqueeze(1), sin.unsqueeze(1)
    inter = next((i for i in (0, 1) if _matches(out, (formula(q, c, sn, i), formula(k, c, sn, i)))), None)
    if inter is None:
        return None
    cos, sin = _angles(g, b, s, d // 2)  # per sequence, as a padded batch's positions give them
    c, sn = cos.unsqueeze(1), sin.unsqueeze(1)
    partial = _matches(_run(fn, q, k, cos, sin), (formula(q, c, sn, inter), formula(k, c, sn, inter)))
    return RopeForm(interleaved=inter, partial=partial)


def _one_tensor_probe(fn, sin_first: bool) -> RopeForm | None:
    """GPT-J's form: fn(x [batch, seq, heads, dim], sin, cos [1 or batch, seq, dim/2]), each
    pair (2i, 2i+1) of x rotated by angle i (sin and cos repeated per pair)."""
    g = torch.Generator(device="cpu").manual_seed(0)
    b, s, h, d = 2, 5, 3, 8
    x = torch.randn(b, s, h, d, generator=g)
    for rows in (1, b):
        cos, sin = _angles(g, rows, s, d // 2)
        out = _run(fn, x, sin, cos) if sin_first else _run(fn, x, cos, sin)
        c = torch.repeat_interleave(cos[:, :, None, :], 2, 3)
        sn = torch.repeat_interleave(sin[:, :, None, :], 2, 3)
        if not _matches(out, formula(x, c, sn, 1)):
            return None
    return RopeForm(single=True, interleaved=2, sin_first=sin_first)


def _table_probe(fn) -> RopeForm | None:
    """RoFormer's form: fn(table [1 or batch, 1, seq, dim], q, k [batch, heads, seq, dim]),
    the table sin then cos of one angle a pair, each pair (2i, 2i+1) rotated by angle i."""
    g = torch.Generator(device="cpu").manual_seed(0)
    b, hq, hk, s, d = 2, 3, 1, 5, 8
    q, k = torch.randn(b, hq, s, d, generator=g), torch.randn(b, hk, s, d, generator=g)
    for rows in (1, b):
        cos, sin = _angles(g, rows, s, d // 2)
        out = _run(fn, torch.cat((sin, cos), -1)[:, None], q, k)
        c = torch.repeat_interleave(cos, 2, -1)[:, None]
        sn = torch.repeat_interleave(sin, 2, -1)[:, None]
        if not _matches(out, (formula(q, c, sn, 1), formula(k, c, sn, 1))):
            return None
    return RopeForm(interleaved=2, table=True)


@contextlib.contextmanager
def _patched_globals(ropes: tuple[WrittenRope, ...], make) -> Iterator[None]:
    """Each function replaced in its module's namespace by `make(rope, the current one)`,
    and put back (a model's forward looks the name up there on every call)."""
    saved = []
    try:
        for r in ropes:
            # a class's static method stays one (the raw descriptor put back as it was)
            raw = vars(r.module)[r.name] if isinstance(r.module, type) else getattr(r.module, r.name)
            current = raw.__func__ if isinstance(raw, staticmethod) else raw
            saved.append((r, raw))
            new = make(r, current)
            setattr(r.module, r.name, staticmethod(new) if isinstance(raw, staticmethod) else new)
        yield
    finally:
        for r, raw in reversed(saved):
            setattr(r.module, r.name, raw)
