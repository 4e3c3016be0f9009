"""Find the model's hot operators with torch.profiler.

In: a `LoadedModel`, how many forward passes to profile, how many families to pick
(or an explicit list). Out: `HotOps` — one row per operator family (time per forward
pass, share, calls, the distinct problem shapes, whether we have a TileLang kernel for
it) and the families chosen for rewriting.

Each profiled aten call is attributed to the *outermost* operator we recognise, so
aten::linear -> aten::addmm -> aten::mm counts once, as gemm, with the time of the whole
call (device time on CUDA, CPU time otherwise), and a family's time per pass is the
median over the profiled passes, which one pause of a shared host does not move. Which ops belong to a family with a
kernel, and the problem shape of each call, come from the kernel registry alone (each
family's `covers` and `problem_shape`); the tables here name the operator families we
account for but have no kernel for.

The memory layout of a call (attention's q/k/v views, a convolution's NCHW or
channels_last) comes from the profiler's recorded strides, which torch before 2.12 does
not record. So the shapes are also checked against one forward pass under the router
with no kernels, which sees the real tensors: where a profiled shape differs from the
routed one only in layout, the routed one is kept, since that is the shape a kernel
will be asked for.

Fused variants (gemm_gelu, layernorm_residual) have no aten op of their own. Where a chosen
family has one, a forward pass under the router's scan (`fusions`) says whether the model
has its pattern and at which shapes; those variants join the selection with those shapes.
A norm the model writes out as several calls (transformers' LlamaRMSNorm) is profiled as
written, inside a range naming its family and shape (`written`): its calls are that family's.
"""

from __future__ import annotations

import bisect
import contextlib
import os
import sys
import time
from collections import Counter, defaultdict
from typing import Callable, Sequence

import pandas as pd
import torch
from torch.autograd import DeviceType
from torch.overrides import TorchFunctionMode
from torch.profiler import ProfilerActivity, profile, record_function

from .. import kernels
from ..kernels import rope
from ..routing import written
from ..errors import ConfigError, ModelLoadError
from ..models import LoadedModel
from ..results import Fusion, HotOp, HotOps, parse_shape, shape_str
from ..routing.router import ROUTED_PREFIX

# Operator families we account for but have no kernel for; ops a registered family
# covers never get here (a matmul by a weight is gemm's, a batched one bmm's).
OTHER_FAMILIES: dict[str, str] = {
    "aten::batch_norm": "batchnorm",
    "aten::_batch_norm_impl_index": "batchnorm",
    "aten::native_batch_norm": "batchnorm",
    "aten::_native_batch_norm_legit_no_training": "batchnorm",
    "aten::embedding": "embedding",
    "aten::max_pool2d": "pooling",
    "aten::max_pool2d_with_indices": "pooling",
    "aten::adaptive_avg_pool2d": "pooling",
    "aten::avg_pool2d": "pooling",
}
ELEMENTWISE = {
    "aten::gelu",
    "aten::relu",
    "aten::relu_",
    "aten::silu",
    "aten::silu_",
    "aten::add",
    "aten::add_",
    "aten::mul",
    "aten::mul_",
    "aten::div",
    "aten::div_",
    "aten::sub",
    "aten::neg",
    "aten::tanh",
    "aten::sigmoid",
    "aten::masked_fill",
    "aten::masked_fill_",
    "aten::pow",
    "aten::rsqrt",
    "aten::cos",
    "aten::sin",
    "aten::exp",
    "aten::where",
}
# Families without a kernel whose report still lists the raw operand shapes.
RAW_SHAPES: set[str] = set()
# The range around each profiled forward pass.
PASS_RANGE = "evaluator::pass"


def classify(name: str, input_shapes: list) -> str | None:
    """Family of one aten op, or None if it is not an operator we account for by name."""
    fam = kernels.family_for_aten(name, input_shapes)
    if fam is not None:
        return fam.name
    if name in OTHER_FAMILIES:
        return OTHER_FAMILIES[name]
    if name in ELEMENTWISE:
        return "elementwise"
    return None


def _batch_of_one(shapes: list) -> bool:
    """Two 3-D operands with a batch of 1 (a GEMM in bmm's clothes)."""
    return len(shapes) >= 2 and all(isinstance(s, (list, tuple)) and len(s) == 3 and s[0] == 1 for s in shapes[:2])


def _problem_shape(
    family: str, op: str, shapes: list, concrete: list | None = None, strides: list | None = None
) -> str | None:
    if family not in kernels.REGISTRY:
        if family in RAW_SHAPES:
            return ";".join(shape_str(s) for s in shapes if isinstance(s, (list, tuple)) and s)
        return None
    try:
        # Scalar arguments (attention's is_causal, a convolution's stride and padding)
        # are not in the input shapes: the family reads them from the concrete inputs,
        # and a memory layout (a convolution's NCHW or channels_last) from the strides.
        shape = kernels.REGISTRY[family].problem_shape(op, shapes, concrete, input_strides=strides)
    except Exception:  # an odd call signature must not stop the profile
        return None
    return shape_str(shape) if shape else None


def _unrecorded_shapes(family: str, op: str, shapes: list, concrete: list | None, strides: list | None) -> tuple:
    """The shapes a call may have where the profiler left out an argument its shape needs
    (a convolution's string padding): the family's `unrecorded_shapes`, as text."""
    fam = kernels.REGISTRY.get(family)
    try:
        found = fam.unrecorded_shapes(op, shapes, concrete, strides) if hasattr(fam, "unrecorded_shapes") else ()
    except Exception:  # an odd call signature must not stop the profile
        return ()
    return tuple(shape_str(s) for s in found)


@contextlib.contextmanager
def _quiet_stderr():
    """Kineto writes 'USDT: profiler_start/stop' lines straight to fd 2; keep them off the terminal."""
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(devnull)
        os.close(saved)


def _profiled(fn: Callable[[], object], use_cuda: bool, iters: int, warmup: int):
    """`iters` calls of `fn` under torch.profiler (after `warmup` unprofiled ones):
    the profile and the wall time of one call."""
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if use_cuda else [])
    with torch.inference_mode():
        for _ in range(warmup):
            fn()
        if use_cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        prof = profile(activities=activities, record_shapes=True)
        with _quiet_stderr():
            prof.start()
        try:
            for _ in range(iters):
                with record_function(PASS_RANGE):  # which pass each call belongs to (hot_ops' median)
                    fn()
            if use_cuda:
                torch.cuda.synchronize()
        finally:
            with _quiet_stderr():
                prof.stop()
    return prof, (time.perf_counter() - t0) / iters


def _attributed(prof, use_cuda: bool, shapes: bool = True) -> list[dict]:
    """One row per attributed call: the outermost aten op we recognise, or a routed
    TileLang call (the router's `tilelang::<family>` range, which claims the aten ops its
    launch makes inside it, as aten::linear claims aten::addmm)."""
    rows = []
    events = prof.events()
    passes = sorted(e.time_range.start for e in events if e.name == PASS_RANGE and e.device_type == DeviceType.CPU)
    if use_cuda:
        # A routed range's device time is the kernels that ran inside the GPU's copy of it
        # (a user annotation, from its first kernel's start to its last one's end). Its
        # CPU side holds only the kernels the profiler correlated with it, and TileLang's
        # own launches are not among them; the span itself counts the host's gaps between
        # kernels, which a pair of PyTorch calls held back and run together has (58 us a
        # linear+GELU pair on the H200, where its two kernels take 16).
        ranges = [e for e in events if e.device_type != DeviceType.CPU and e.name.startswith(ROUTED_PREFIX)]
        kernels = [
            (e.time_range.start, e.time_range.end)
            for e in events
            if e.device_type != DeviceType.CPU
            and not getattr(e, "is_user_annotation", False)
            and not e.name.startswith(ROUTED_PREFIX)
        ]
        inside = kernel_time_in([(e.time_range.start, e.time_range.end) for e in ranges], kernels)
        rows += [
            {
                "family": e.name[len(ROUTED_PREFIX) :],
                "op": e.name,
                "time_us": float(t),
                "shape": None,
                "routed": True,
                "pass": -1,
                "call": None,
            }
            for e, t in zip(ranges, inside)
        ]
    # An op we do not recognise (aten::einsum) may call one we do (aten::bmm): the inner call
    # is its family's, and the outer row keeps only the rest of its time, so that the
    # families' times add up to the whole (DeBERTa's shares summed to 102%).
    top_rows: dict[int, int] = {}  # id of an unrecognised top-level op's event -> its row
    inner_us: dict[int, float] = defaultdict(float)  # ... -> time of recognised calls inside it
    for evt in events:
        routed = evt.name.startswith(ROUTED_PREFIX)
        if not (routed or evt.name.startswith("aten::")):
            continue
        if evt.device_type != DeviceType.CPU or (routed and use_cuda):
            continue  # on CUDA a routed range is counted above; its CPU side only claims its ops
        parent, claimed, top, spelled, spelled_by = evt.cpu_parent, False, True, None, None
        outer = None  # the outermost aten op around this call
        while parent is not None:
            if parent.name.startswith(ROUTED_PREFIX):
                claimed = True
                break
            if spelled_by is None and parent.name.startswith(written.PREFIX):
                # a written-out norm or rotary embedding: its top-level calls are the
                # family's, at the range's shape, unless a routed range holds it (a scan's
                # add and norm, fused)
                claimed, spelled, spelled_by = not top, written.parse_range(parent.name), parent
            elif spelled_by is None and parent.name.startswith("aten::"):
                top = False
                outer = parent
                if classify(parent.name, parent.input_shapes) is not None:
                    claimed = True
                    break
            parent = parent.cpu_parent
        if claimed:
            continue
        family = evt.name[len(ROUTED_PREFIX) :] if routed else classify(evt.name, evt.input_shapes)
        op, op_shapes, op_strides = evt.name, evt.input_shapes, _event_strides(evt)
        if family == "bmm" and outer is not None and outer.name == "aten::einsum" and _batch_of_one(op_shapes):
            # einsum computes a product by a weight ("bsk,kn->bsn") as a bmm of batch 1, and
            # the router takes that einsum as a GEMM: profiled as one, it is tuned as one
            family, op, op_shapes = "gemm", "aten::mm", [list(s)[1:] for s in op_shapes[:2]]
            op_strides = [list(s)[1:] if s else s for s in op_strides[:2]] if op_strides else op_strides
        if spelled is not None:
            family = spelled[0]
        if family is None and not top:
            continue  # an unrecognised helper inside an unrecognised top-level op: counted there
        t_us = evt.device_time_total if use_cuda else evt.cpu_time_total
        shape, maybe = None, ()
        if spelled is not None:
            shape = spelled[1] if shapes else None
        elif family and shapes and not routed:
            shape = _problem_shape(family, op, op_shapes, evt.concrete_inputs, op_strides)
            if shape is None:
                maybe = _unrecorded_shapes(family, op, op_shapes, evt.concrete_inputs, op_strides)
                shape = maybe[0] if len(maybe) == 1 else None
        if top and family is None and spelled is None:
            top_rows[id(evt)] = len(rows)
        elif not top and outer is not None and family is not None:
            inner_us[id(outer)] += float(t_us)
        rows.append(
            {
                "family": family or "other",
                "op": evt.name,
                "time_us": float(t_us),
                "shape": shape,
                "routed": routed,
                "pass": bisect.bisect_right(passes, evt.time_range.start) - 1,
                # the one call several rows make up: a written-out norm's range
                "call": spelled_by.time_range.start if spelled_by is not None else None,
                # the shapes the call may have, where an argument went unrecorded
                "maybe": maybe if shape is None else (),
            }
        )
    for key, inner in inner_us.items():
        if key in top_rows:
            row = rows[top_rows[key]]
            row["time_us"] = max(0.0, row["time_us"] - inner)
    return rows


def kernel_time_in(spans: Sequence[tuple[float, float]], kernels: Sequence[tuple[float, float]]) -> list[float]:
    """Per span (start, end), the summed duration of the kernels that start inside it."""
    starts = sorted(kernels)
    keys = [k[0] for k in starts]
    out = []
    for lo, hi in spans:
        i, j = bisect.bisect_left(keys, lo), bisect.bisect_right(keys, hi)
        out.append(sum(e - b for b, e in starts[i:j]))
    return out


class _AsRouted(TorchFunctionMode):
    """A function mode that changes no call. Some modules take another path where no mode
    is active: nn.MultiheadAttention and nn.TransformerEncoderLayer run a fused fast path
    (aten::_native_multi_head_attention: bmm and softmax inside), and under any mode, the
    router included, F.multi_head_attention_forward (linears and one SDPA). Profiled under
    this, the model makes the calls the router will be handed."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def profile_model(model: LoadedModel, *, iters: int = 3, warmup: int = 2) -> pd.DataFrame:
    """Profile `iters` forward passes; one row per attributed aten call."""
    use_cuda = model.device == "cuda"
    # norms and rotary embeddings written out as several calls: their range names them
    with written.marked(model.module, rope_shape=rope.call_shape), _AsRouted():
        prof, wall = _profiled(lambda: model.module(*model.inputs), use_cuda, iters, warmup)
    rows = [{k: v for k, v in r.items() if k != "routed"} for r in _attributed(prof, use_cuda)]
    if rows:
        _layouts_as_routed(rows, _routed_shapes(model))
    df = pd.DataFrame(rows, columns=["family", "op", "time_us", "shape", "pass", "call"])
    df.attrs["iters"] = iters
    df.attrs["wall_ms"] = wall * 1e3
    return df


def family_times(
    fn: Callable[[], object], device: str, *, iters: int = 3, warmup: int = 1
) -> tuple[dict[str, float], dict[str, float]]:
    """Operator time per call of `fn` (a forward pass, maybe under a swap.Router) by
    family, in ms: device time on CUDA, CPU time otherwise. Returns (all calls, the part
    that ran in TileLang): inside a router, a family's time is its TileLang calls plus
    the calls that fell back to PyTorch, attributed the same way as the profile stage's."""
    use_cuda = device == "cuda"
    prof, _ = _profiled(fn, use_cuda, iters, warmup)
    total: dict[str, float] = defaultdict(float)
    routed: dict[str, float] = defaultdict(float)
    for r in _attributed(prof, use_cuda, shapes=False):
        total[r["family"]] += r["time_us"] / 1e3 / iters
        if r["routed"]:
            routed[r["family"]] += r["time_us"] / 1e3 / iters
    return dict(total), dict(routed)


def _event_strides(evt) -> list | None:
    """The call's input strides where this torch records them (2.12 and later)."""
    return getattr(evt, "structured_input_strides", None)


def _routed_shapes(model: LoadedModel) -> dict[tuple[str, tuple], Counter]:
    """(family, layout-free shape) -> Counter of the shapes the routes see, from one
    forward pass under a router with no kernels (every call falls back, counted)."""
    from ..routing import router as swap

    fams = [f for f in kernels.REGISTRY.values() if f.functions]
    router = swap.Router(fams, swap.KernelTable(_model_dtype(model), "c"), model=model.module)
    try:
        with torch.inference_mode(), router:
            model.module(*model.inputs)
    except Exception:  # the profile stands on its own; this only refines layouts
        return {}
    out: dict[tuple[str, tuple], Counter] = defaultdict(Counter)
    for (name, text), reasons in router.fell_back.items():
        if text:
            shape = parse_shape(text)
            out[(name, kernels.REGISTRY[name].layout_free(shape))][text] += sum(reasons.values())
    return out


def _model_dtype(model: LoadedModel) -> str:
    return next(
        (str(p.dtype).removeprefix("torch.") for p in model.module.parameters() if p.is_floating_point()), "float32"
    )


def fusions(model: LoadedModel, selected: Sequence[str]) -> tuple[Fusion, ...]:
    """The fused variants of the chosen families (or chosen themselves) whose pattern the
    model has, from one forward pass with the patterns found and run in PyTorch
    (swap.fusible): per variant, the shapes where it can be fused, most calls first, and
    those where it cannot because the first call's result is read again after the second
    (a pre-norm model's residual sum is also the next block's input: fusing the norm
    would compute the sum twice). A variant whose kernel also writes the first call's
    result (add_layernorm) takes exactly those shapes from its siblings on the pattern."""
    from ..routing import router as swap

    fams = [f for f in kernels.REGISTRY.values() if f.fuses and (f.profile_family in selected or f.name in selected)]
    if not fams:
        return ()
    try:
        with torch.inference_mode():
            seen, reused = swap.fusible(
                lambda: model.module(*model.inputs), fams, _model_dtype(model), model=model.module
            )
    except Exception:  # the profile stands on its own; fusion only adds to it
        return ()
    # Shapes where a family that also writes the first call's result (add_layernorm) takes
    # the pattern: its siblings on the same pattern leave them to it.
    kept = {
        (fam.fuses, fam.fused_op): {s for (f, s), n in reused.items() if f == fam.name and n}
        for fam in fams
        if getattr(fam, "keeps_first", False)
    }
    # Patterns a variant that does not write the sum also takes (layernorm_residual's):
    # there, the one that does keeps only the shapes whose sum is read again.
    lighter = {(fam.fuses, fam.fused_op) for fam in fams if not getattr(fam, "keeps_first", False)}
    out = []
    for fam in fams:
        calls = Counter({s: n for (f, s), n in seen.items() if f == fam.name})
        again = tuple(sorted(s for s in calls if reused.get((fam.name, s))))
        if getattr(fam, "keeps_first", False):  # a later read is what it is for
            shared = (fam.fuses, fam.fused_op) in lighter
            good, again = tuple(s for s, _ in calls.most_common() if s in again or not shared), ()
        else:
            good = tuple(s for s, _ in calls.most_common() if s not in again)
            again = tuple(s for s in again if s not in kept.get((fam.fuses, fam.fused_op), set()))
        if good or again:
            out.append(Fusion(family=fam.name, shapes=good, calls=sum(calls[s] for s in good), reused=again))
    return tuple(out)


def with_fusions(selected: tuple[str, ...], found: Sequence[Fusion]) -> tuple[str, ...]:
    """The selection with each fused variant that has shapes right after its base family."""
    out = list(selected)
    for fu in found:
        if not fu.shapes or fu.family in out:
            continue
        base = kernels.get(fu.family).profile_family
        at = max(
            (i for i, f in enumerate(out) if f == base or kernels.get(f).profile_family == base), default=len(out) - 1
        )
        out.insert(at + 1, fu.family)
    return tuple(out)


def _layouts_as_routed(rows: list[dict], routed: dict[tuple[str, tuple], Counter]) -> None:
    """Each row's shape as the router's pass saw the call (`_routed_shapes`), layout
    included: the profiler records the strides of the aten call, which for a call made
    inside another (einsum's bmm) are of operands the outer op has already reshaped."""
    several: dict[tuple[str, tuple], list[dict]] = defaultdict(list)
    for row in rows:
        fam, text = row["family"], row["shape"]
        if not text and row.get("maybe"):
            # an unrecorded argument: the candidate the router's pass saw most often
            seen = Counter()
            for m in row["maybe"]:
                seen += routed.get((fam, kernels.REGISTRY[fam].layout_free(parse_shape(m))), Counter())
            if seen:
                row["shape"] = seen.most_common(1)[0][0]
            continue
        if fam not in kernels.REGISTRY or not text:
            continue
        key = (fam, kernels.REGISTRY[fam].layout_free(parse_shape(text)))
        seen = routed.get(key)
        if seen and len(seen) > 1:
            several[key].append(row)
        elif seen and text not in seen:
            row["shape"] = seen.most_common(1)[0][0]
    # A shape the router saw at several layouts (Funnel's einsums: half their products read
    # a transposed operand) gets each layout as often a pass as the router saw it, so that
    # each is profiled, chosen and tuned; a call whose own layout is one of them keeps it.
    for key, group in several.items():
        by_pass: dict[int, list[dict]] = defaultdict(list)
        for row in group:
            by_pass[row["pass"]].append(row)
        for members in by_pass.values():
            quota, rest = Counter(routed[key]), []
            for row in members:
                if quota[row["shape"]] > 0:
                    quota[row["shape"]] -= 1
                else:
                    rest.append(row)
            for row in rest:
                left = +quota
                row["shape"] = (left or routed[key]).most_common(1)[0][0]
                quota[row["shape"]] -= 1


def unnamed(hot: HotOps) -> tuple[HotOp, ...]:
    """Families with a kernel that the model calls, but never at a shape the kernel takes
    (a call form no route reads): `--ops` cannot choose them, and the run says so."""
    return tuple(o for o in hot.ops if o.has_kernel and o.calls and not o.shapes)


def left_out(hot: HotOps, min_share: float = 0.05) -> tuple[HotOp, ...]:
    """Families with a kernel and at least `min_share` of the profiled time that the
    selection left out: what `--ops` one higher would also rewrite (ViT-B's layernorm,
    11.5% of its time, took the model from 1.02x to 1.10x on the H200)."""
    return tuple(
        o for o in hot.ops if o.has_kernel and o.shapes and o.share >= min_share and o.family not in hot.selected
    )


def _pass_ms(rows: pd.DataFrame, n: int) -> float:
    """Time per forward pass of some profiled calls, in ms: the median over the `n` passes
    of each pass's sum. A pause of the shared host inside one call moves a sum over passes
    as far as it likes (CI once ranked resnet-tiny's batchnorm, 11% of its time, above its
    convolutions, 78%); with three passes or more it moves the median only if it hits most
    of them. Fewer passes, or calls with no pass of their own, take the mean."""
    if n < 3 or (rows["pass"] < 0).any() or (rows["pass"] >= n).any():
        return float(rows["time_us"].sum()) / n / 1e3
    return float(rows.groupby("pass")["time_us"].sum().reindex(range(n), fill_value=0.0).median()) / 1e3


def _calls(rows: pd.DataFrame) -> int:
    """Calls among some profiled rows: a written-out norm's rows are one call."""
    return int(rows["call"].isna().sum()) + rows["call"].nunique()


def hot_ops(
    model: LoadedModel, *, top: int = 2, families: tuple[str, ...] = (), iters: int = 3, fuse: bool = True
) -> HotOps:
    for name in families:
        kernels.get(name)  # raises UnknownFamilyError with the known names
    try:
        df = profile_model(model, iters=iters)
    except Exception as exc:  # the user's model: its failure is one line, not our traceback
        first = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
        raise ModelLoadError(f"the model's forward raised {type(exc).__name__}: {first}") from exc
    n = df.attrs["iters"]
    times = {fam: _pass_ms(g, n) for fam, g in df.groupby("family")}
    # The whole is the sum of its families (each the median over the passes), so their
    # shares, "other" included, add up to 100%; a median of whole passes would not.
    total = sum(times.values())
    ops = []
    for fam, g in df.groupby("family"):
        t = times[fam]
        # Shapes hottest first: --max-shapes keeps the ones that matter, not the first seen.
        with_shape = g[g["shape"].map(lambda s: isinstance(s, str) and bool(s))]
        per_shape = pd.Series(
            {s: _pass_ms(gs, n) for s, gs in with_shape.groupby("shape", sort=False)}, dtype=float
        ).sort_values(ascending=False, kind="stable")
        calls = _calls(g)
        shape_calls = tuple(_calls(with_shape[with_shape["shape"] == s]) // n for s in per_shape.index)
        ops.append(
            HotOp(
                family=str(fam),
                time_ms=t,
                share=(t / total if total else 0.0),
                calls=calls // n,
                shapes=tuple(str(s) for s in per_shape.index),
                aten_ops=tuple(sorted(set(g["op"]))),
                has_kernel=fam in kernels.REGISTRY,
                shape_ms=tuple(float(v) for v in per_shape.values),
                shape_calls=shape_calls,
            )
        )
    ops.sort(key=lambda o: o.time_ms, reverse=True)
    if families:
        # A family the model does not call would be benchmarked on made-up shapes and
        # decide nothing about this model.
        profiled = {o.family for o in ops if o.shapes}
        unused = [f for f in families if kernels.get(f).profile_family not in profiled]
        if unused:
            have = ", ".join(sorted(f for f in profiled if f in kernels.REGISTRY)) or "none"
            called = {o.family: o for o in ops if not o.shapes and o.calls}
            said = [
                f"{f}: the model calls it {called[kernels.get(f).profile_family].calls} times a pass, but at no "
                f"shape its kernel takes"
                if kernels.get(f).profile_family in called
                else f"{f}: the model makes no such call"
                for f in unused
            ]
            raise ConfigError(
                f"--families {','.join(unused)}: {'; '.join(said)}; "
                f"families it calls at shapes that have kernels: {have}"
            )
        selected = tuple(families)
    else:
        selected = tuple(o.family for o in ops if o.has_kernel and o.shapes)[:top]
    found = fusions(model, selected) if fuse or any(kernels.get(f).fuses for f in selected) else ()
    if not fuse:  # only the fused families named in --families
        found = tuple(fu for fu in found if fu.family in selected)
    return HotOps(
        device=model.device,
        total_ms=total,
        ops=tuple(ops),
        selected=with_fusions(selected, found),
        wall_ms=df.attrs["wall_ms"],
        fusions=found,
    )
