"""Rotary position embedding of a decoder's queries and keys in one kernel, in the forms
transformers' models write it: llama's `apply_rotary_pos_emb(q, k, cos, sin)` (q * cos +
rotate_half(q) * sin, the same for k), GPT-NeoX's and Phi-3's, which rotate only the
first cos.shape[-1] dims of each head and pass the rest through, Cohere's, which rotates
interleaved pairs (2i, 2i+1), and GPT-J's and CodeGen's `apply_rotary_pos_emb(tensor,
sin, cos)`, one tensor a call, pairs rotated by angles read off a sin|cos table.

In: shape (batch, seq, q_heads, kv_heads, head_dim, per_batch[, rotary_dim, interleaved[,
q_row, q_head, k_row, k_head]]):
- head_dim: the width of q and k as the function receives them (a model that slices
  q[..., :rotary_ndims] itself, as Phi-2, StableLM and Persimmon do, passes that slice);
- rotary_dim (default head_dim): the leading dims rotated; the rest is copied;
- interleaved (default 0): 0 rotates halves (j, j + rotary_dim/2) with cos and sin per
  dim [.., rotary_dim]; 1 rotates pairs (2i, 2i+1) with cos and sin per dim; 2 rotates
  pairs with one angle a pair, from a table [.., rotary_dim] holding sin then cos (GPT-J
  splits its `embed_positions` rows so);
- kv_heads 0: one tensor a call, [batch, seq, heads, head_dim] (GPT-J rotates k, then q);
- q_row, q_head (and k's): the token and head strides, in elements, of a tensor that is a
  view into a wider projection (GPT-NeoX's packed qkv: 3 * head_dim per head; Phi-3's
  fused qkv_proj rows; a q[..., :rotary_dim] slice); (0, 0) is dense. The kernel reads
  such views in place instead of copying them.
Inputs: q[batch*seq, q_heads, head_dim] and k[batch*seq, kv_heads, head_dim] with those
strides, tokens outer (the projections' own memory, as `q_proj(x).view(b, s, h, d)` lies
before its transpose), then cos and sin [1 or batch, seq, rotary_dim] (per_batch says
which), or the sin|cos table for interleaved 2. Out: the rotated q and k, dense, tokens
outer ([batch, heads, seq, head_dim] views; [batch, seq, heads, head_dim] for one
tensor), compared against the model's own formula in PyTorch (elementwise calls, a cat
or a stack per tensor, and a cat where a part passes through); the kernel reads each
input once and writes each output once. Math in fp32. Schedules: on CUDA, `block_tokens`
tokens per block over all heads, `threads` threads; on CPU, loops over tokens.

Eager transformers llama at TinyLlama's widths spends 0.414 ms of 2.12 in elementwise
calls, most of them this (`reports/examples/hf-llama-tinyllama-4l/h200/2026-12-04/`), and
torch.compile fuses them: the gap to it that no other family closes.
"""

# No `from __future__ import annotations`: TileLang evaluates the kernel signatures'
# annotations, whose closure must resolve them.
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple, Sequence

import torch

from ...routing import written
from ...errors import KernelError
from ...results import Hardware, KernelConfig, Shape
from ...routing.calls import arg, dtype_mismatch
from ...routing.router import Route
from .. import common as C
from ..base import KernelFamily, Schedule

ACCUM = "float32"
CPU_DEFAULTS = {"block_tokens": 4}
GPU_DEFAULTS = {"block_tokens": 1, "threads": 256}
# The attribute make_inputs sets on q: (rotary_dim, interleaved, kv_heads), which the
# tensors' shapes alone do not say (halves and pairs take the same cos and sin).
FORM_ATTR = "rope_form"
COPIED = "input copied to contiguous"


class _Layout(NamedTuple):
    b: int
    s: int
    hq: int
    hk: int  # 0: one tensor
    d: int
    per_batch: int
    rot: int
    inter: int
    q_row: int  # token and head strides in elements (dense where the shape says 0)
    q_head: int
    k_row: int
    k_head: int
    q_strided: bool
    k_strided: bool
    cb: int  # rows of cos and sin: batch or 1
    tokens: int


def _layout(shape: Shape) -> _Layout:
    b, s, hq, hk, d, per_batch = shape[:6]
    rot, inter = (shape[6], shape[7]) if len(shape) > 6 else (d, 0)
    qr, qh, kr, kh = shape[8:12] if len(shape) > 8 else (0, 0, 0, 0)
    return _Layout(
        b,
        s,
        hq,
        hk,
        d,
        per_batch,
        rot,
        inter,
        qr or hq * d,
        qh or d,
        kr or hk * d,
        kh or d,
        bool(qr),
        bool(kr),
        b if per_batch else 1,
        b * s,
    )


def _pitches(tokens: int, heads: int, d: int, row: int, head: int) -> tuple[int, int] | None:
    """(row, head) strides canonical: (0, 0) where dense or not given; strides that a size-1
    dim makes meaningless filled in dense; None where heads or tokens would overlap."""
    if (row, head) == (0, 0) or heads == 0:
        return (0, 0)
    head = d if heads == 1 else head
    row = heads * head if tokens == 1 else row
    if head < d or row < (heads - 1) * head + d:
        return None
    return (0, 0) if (row, head) == (heads * d, d) else (row, head)


# ---------------------------------------------------------------- programs


def _value(X, Cs, Sn, t, h, j, L: _Layout, T):
    """Element (t, h, j < rotary_dim) of halves rotated: x[j] cos[j] -+ x[j +- half] sin[j], in fp32."""
    ci = (t // L.s) * L.per_batch
    si = t % L.s
    half = L.rot // 2
    x = T.cast(X[t, h, j], ACCUM)
    other = T.if_then_else(j < half, -T.cast(X[t, h, j + half], ACCUM), T.cast(X[t, h, j - half], ACCUM))
    return x * T.cast(Cs[ci, si, j], ACCUM) + other * T.cast(Sn[ci, si, j], ACCUM)


def _angle(Cs, Sn, t, j, L: _Layout, T, sine: bool):
    """cos (or sin) of dim j of token t's pairs: per dim, or GPT-J's one a pair (sin at
    i, cos at rotary_dim/2 + i of the table's row)."""
    ci = (t // L.s) * L.per_batch
    si = t % L.s
    if L.inter == 2:
        return T.cast(Cs[ci, si, j // 2 if sine else L.rot // 2 + j // 2], ACCUM)
    return T.cast((Sn if sine else Cs)[ci, si, j], ACCUM)


def _operand(T, L: _Layout, heads: int, strided: bool, row: int, head: int, dtype: str):
    if not strided:
        return T.Tensor((L.tokens, heads, L.d), dtype)
    return T.StridedTensor((L.tokens, heads, L.d), (row, head, 1), dtype)


def _entry(T, shape: Shape, dtype: str, body):
    L = _layout(shape)
    s, hq, hk, d, cb, tokens, rot = L.s, L.hq, L.hk, L.d, L.cb, L.tokens, L.rot
    # Each parameter its own buffer type: one annotation object shared by two parameters
    # would make them one buffer.
    Qt = _operand(T, L, hq, L.q_strided, L.q_row, L.q_head, dtype)
    Kt = _operand(T, L, hk, L.k_strided, L.k_row, L.k_head, dtype) if hk else None
    if hk and L.inter != 2:

        @T.prim_func
        def rope(
            Q: Qt,
            K: Kt,
            Cs: T.Tensor((cb, s, rot), dtype),
            Sn: T.Tensor((cb, s, rot), dtype),
            YQ: T.Tensor((tokens, hq, d), dtype),
            YK: T.Tensor((tokens, hk, d), dtype),
        ):
            body(Q, K, Cs, Sn, YQ, YK)
    elif hk:

        @T.prim_func
        def rope(
            Q: Qt,
            K: Kt,
            Tb: T.Tensor((cb, s, rot), dtype),
            YQ: T.Tensor((tokens, hq, d), dtype),
            YK: T.Tensor((tokens, hk, d), dtype),
        ):
            body(Q, K, Tb, None, YQ, YK)
    elif L.inter != 2:

        @T.prim_func
        def rope(
            Q: Qt,
            Cs: T.Tensor((cb, s, rot), dtype),
            Sn: T.Tensor((cb, s, rot), dtype),
            YQ: T.Tensor((tokens, hq, d), dtype),
        ):
            body(Q, None, Cs, Sn, YQ, None)
    else:

        @T.prim_func
        def rope(Q: Qt, Tb: T.Tensor((cb, s, rot), dtype), YQ: T.Tensor((tokens, hq, d), dtype)):
            body(Q, None, Tb, None, YQ, None)

    return rope


def _cpu_program(shape: Shape, dtype: str, cfg: dict[str, Any]):
    import tilelang.cpu.language as T

    L = _layout(shape)
    tokens, hq, hk, d, rot, BT = L.tokens, L.hq, L.hk, L.d, L.rot, cfg["block_tokens"]

    @T.macro
    def pairs(X, Cs, Sn, Y, t, heads):
        # pair (2i, 2i+1): x0 cos - x1 sin, x1 cos + x0 sin
        for h in T.serial(heads):
            for i in T.serial(rot // 2):
                x0 = T.cast(X[t, h, 2 * i], ACCUM)
                x1 = T.cast(X[t, h, 2 * i + 1], ACCUM)
                Y[t, h, 2 * i] = T.cast(
                    x0 * _angle(Cs, Sn, t, 2 * i, L, T, False) - x1 * _angle(Cs, Sn, t, 2 * i, L, T, True), dtype
                )
                Y[t, h, 2 * i + 1] = T.cast(
                    x1 * _angle(Cs, Sn, t, 2 * i + 1, L, T, False) + x0 * _angle(Cs, Sn, t, 2 * i + 1, L, T, True),
                    dtype,
                )

    @T.macro
    def passed(X, Y, t, heads):
        for h in T.serial(heads):
            for j in T.serial(d - rot):
                Y[t, h, rot + j] = X[t, h, rot + j]

    @T.macro
    def body(Q, K, Cs, Sn, YQ, YK):
        with T.Kernel(T.ceildiv(tokens, BT)) as bx:
            for r in T.serial(BT):
                if bx * BT + r < tokens:
                    if L.inter:
                        pairs(Q, Cs, Sn, YQ, bx * BT + r, hq)
                        if hk:
                            pairs(K, Cs, Sn, YK, bx * BT + r, hk)
                    else:
                        for h in T.serial(hq):
                            for j in T.serial(rot):
                                YQ[bx * BT + r, h, j] = T.cast(_value(Q, Cs, Sn, bx * BT + r, h, j, L, T), dtype)
                        if hk:
                            for h in T.serial(hk):
                                for j in T.serial(rot):
                                    YK[bx * BT + r, h, j] = T.cast(_value(K, Cs, Sn, bx * BT + r, h, j, L, T), dtype)
                    if rot < d:
                        passed(Q, YQ, bx * BT + r, hq)
                        if hk:
                            passed(K, YK, bx * BT + r, hk)

    return _entry(T, shape, dtype, body)


def _gpu_program(shape: Shape, dtype: str, cfg: dict[str, Any]):
    import tilelang.language as T

    L = _layout(shape)
    tokens, hq, hk, d, rot, BT = L.tokens, L.hq, L.hk, L.d, L.rot, cfg["block_tokens"]

    @T.macro
    def pairs(X, Cs, Sn, Y, bx, heads):
        # one pair (2i, 2i+1) an iteration: x read once, one angle a pair (TileLang does not
        # vectorise a partner index that alternates by lane)
        for r, h, i in T.Parallel(BT, heads, rot // 2):
            if bx * BT + r < tokens:
                x0 = T.cast(X[bx * BT + r, h, 2 * i], ACCUM)
                x1 = T.cast(X[bx * BT + r, h, 2 * i + 1], ACCUM)
                Y[bx * BT + r, h, 2 * i] = T.cast(
                    x0 * _angle(Cs, Sn, bx * BT + r, 2 * i, L, T, False)
                    - x1 * _angle(Cs, Sn, bx * BT + r, 2 * i, L, T, True),
                    dtype,
                )
                Y[bx * BT + r, h, 2 * i + 1] = T.cast(
                    x1 * _angle(Cs, Sn, bx * BT + r, 2 * i + 1, L, T, False)
                    + x0 * _angle(Cs, Sn, bx * BT + r, 2 * i + 1, L, T, True),
                    dtype,
                )

    @T.macro
    def passed(X, Y, bx, heads):
        for r, h, j in T.Parallel(BT, heads, d - rot):
            if bx * BT + r < tokens:
                Y[bx * BT + r, h, rot + j] = X[bx * BT + r, h, rot + j]

    @T.macro
    def body(Q, K, Cs, Sn, YQ, YK):
        with T.Kernel(T.ceildiv(tokens, BT), threads=cfg["threads"]) as bx:
            if L.inter:
                pairs(Q, Cs, Sn, YQ, bx, hq)
            else:
                for r, h, j in T.Parallel(BT, hq, rot):
                    if bx * BT + r < tokens:
                        YQ[bx * BT + r, h, j] = T.cast(_value(Q, Cs, Sn, bx * BT + r, h, j, L, T), dtype)
            if rot < d:  # the part that passes through: a copy
                passed(Q, YQ, bx, hq)
            if hk:
                if L.inter:
                    pairs(K, Cs, Sn, YK, bx, hk)
                else:
                    for r, h, j in T.Parallel(BT, hk, rot):
                        if bx * BT + r < tokens:
                            YK[bx * BT + r, h, j] = T.cast(_value(K, Cs, Sn, bx * BT + r, h, j, L, T), dtype)
                if rot < d:
                    passed(K, YK, bx, hk)

    return _entry(T, shape, dtype, body)


class _Rotated(C.LauncherWrapper):
    """The kernel as the formula returns: (q rotated, k rotated), each [batch, heads, seq,
    head_dim] in the projection's layout (tokens outer), as the formula's first multiply
    leaves it, or one tensor [batch, seq, heads, head_dim]; views of the kernel's outputs.
    q and k declared strided reach the kernel as the views they are (TileLang checks their
    strides against the ones it was built for)."""

    def __call__(self, *inputs: torch.Tensor) -> Any:
        L = _layout(self.launcher.shape)
        keep = [L.q_strided] + ([L.k_strided] if L.hk else [])
        out = self.launcher.kernel(*self.launcher.check_inputs(inputs, keep_strides=keep))
        if not L.hk:
            return out.view(L.b, L.s, L.hq, L.d)
        yq, yk = out
        return yq.view(L.b, L.s, L.hq, L.d).transpose(1, 2), yk.view(L.b, L.s, L.hk, L.d).transpose(1, 2)


# ---------------------------------------------------------------- one call as the kernel takes it


@dataclass(frozen=True)
class Plan:
    """One call of a rotary function as the kernel takes it: the problem shape, the
    kernel's inputs (views where it reads them in place) and the copies made on the way."""

    shape: Shape
    inputs: tuple
    notes: tuple[str, ...] = ()


def _rows(x: torch.Tensor, heads_first: bool) -> tuple[torch.Tensor, int, int] | None:
    """x ([b, h, s, d] with heads_first, else [b, s, h, d]) as [b*s, h, d] rows with its own
    (token, head) strides, where it lies tokens outer with unit-stride head dims (a view of
    a projection, sliced or not), 16-byte aligned on a GPU; else None."""
    xs = x.transpose(1, 2) if heads_first else x
    b, s, h, d = (int(v) for v in xs.shape)
    sb, ss, sh, sd = (int(v) for v in xs.stride())
    if d > 1 and sd != 1 or (xs.is_cuda and xs.data_ptr() % 16):
        return None
    head = sh if h > 1 else d
    if s > 1:
        if b > 1 and sb != s * ss:
            return None
        row = ss
    else:
        row = sb if b > 1 else h * head
    got = _pitches(b * s, h, d, row, head)
    if got is None:
        return None
    row, head = got if got != (0, 0) else (h * d, d)
    return xs.as_strided((b * s, h, d), (row, head, 1)), row, head


def _as_rows(x: torch.Tensor, heads_first: bool) -> tuple[torch.Tensor, tuple[int, int], bool]:
    """x as the kernel's [b*s, h, d] input, its shape's (row, head) pitches, and whether it was copied."""
    found = _rows(x, heads_first)
    h, d = int(x.shape[1 if heads_first else 2]), int(x.shape[3])
    if found is None:
        xs = x.transpose(1, 2) if heads_first else x
        return xs.reshape(-1, h, d).contiguous(), (0, 0), True
    view, row, head = found
    return view, ((0, 0) if (row, head) == (h * d, d) else (row, head)), False


def _table(sin: torch.Tensor, cos: torch.Tensor) -> tuple[torch.Tensor, bool]:
    """GPT-J's sin and cos as the one [rows, seq, 2w] table they are halves of (its
    `embed_positions` rows, split), read in place; a table made of them where they are not."""
    cb, s, w = (int(v) for v in sin.shape)
    st = [int(v) for v in sin.stride()]
    halves = (
        cos.shape == sin.shape
        and list(cos.stride()) == st
        and cos.data_ptr() == sin.data_ptr() + w * sin.element_size()
        and (w == 1 or st[2] == 1)
        and (s == 1 or st[1] == 2 * w)
        and (cb == 1 or st[0] == s * 2 * w)
        and not (sin.is_cuda and sin.data_ptr() % 16)
    )
    if halves:
        return sin.as_strided((cb, s, 2 * w), (s * 2 * w, 2 * w, 1)), False
    return torch.cat((sin, cos), dim=-1), True


def plan(q, k, cos, sin, form: "written.RopeForm" = written.HALVES) -> Plan | str:
    """The kernel's view of one call of a rotary function of `form` on these tensors, or
    why the kernel does not compute it: the llama form on q, k [batch, heads, seq, dim]
    and cos, sin [1 or batch, seq, rotary_dim] (narrower than dim only where the function
    rotates a part); GPT-J's on one tensor [batch, seq, heads, dim] and sin, cos [1 or
    batch, seq, dim/2]."""
    if not all(isinstance(t, torch.Tensor) for t in (q, cos, sin)) or not (form.single or isinstance(k, torch.Tensor)):
        return "not the tensors a rotary embedding takes"
    if form.value:
        return "the value rotated too (RoFormer's rotary_value): the kernel rotates q and k"
    if q.dim() != 4 or cos.dim() != 3 or sin.shape != cos.shape or (not form.single and k.dim() != 4):
        return "q, k not 4-D or cos, sin not [batch, seq, dim]"
    rot = int(cos.shape[2]) * (2 if form.interleaved == 2 else 1)  # GPT-J's sin, cos: one angle a pair
    if form.single:
        b, s, hq, d = (int(v) for v in q.shape)
        hk = 0
    else:
        b, hq, s, d = (int(v) for v in q.shape)
        hk = int(k.shape[1])
        if tuple(k.shape) != (b, hk, s, d):
            return "q and k of shapes that do not broadcast as rotary embeddings do"
    if min(b, s, hq, d) <= 0 or (not form.single and hk <= 0):
        return "empty input"
    if d % 2:
        return "odd head_dim"
    if int(cos.shape[1]) != s or int(cos.shape[0]) not in (1, b) or rot % 2 or rot <= 0:
        return "cos and sin of shapes that do not broadcast as rotary embeddings do"
    if rot > d or (rot < d and not (form.partial and not form.single)):
        return (
            "cos and sin narrower than q and k, and the function rotates all of them"
            if rot < d
            else "cos and sin wider than q and k"
        )
    per_batch = int(int(cos.shape[0]) == b and b > 1)
    qr, qp, copied = _as_rows(q, not form.single)
    ins = [qr]
    kp: tuple[int, int] = (0, 0)
    if hk:
        kr, kp, k_copied = _as_rows(k, True)
        ins.append(kr)
        copied = copied or k_copied
    notes = [COPIED] if copied else []
    if form.interleaved == 2:
        table, made = _table(sin, cos)
        ins.append(table)
        if made:
            notes.append("sin and cos copied into one table")
    else:
        # dense, and 16-byte aligned on a GPU (the kernel's vector loads): as they come from
        # the model's rotary embedding, else copied
        bad = [not t.is_contiguous() or (t.is_cuda and t.data_ptr() % 16) for t in (cos, sin)]
        if any(bad):
            notes.append("cos, sin copied to contiguous")
        ins += [t.clone(memory_format=torch.contiguous_format) if b_ else t for t, b_ in zip((cos, sin), bad)]
    shape = (b, s, hq, hk, d, per_batch, rot, form.interleaved) + qp + kp
    return Plan(FAMILY.check(shape), tuple(ins), tuple(notes))


def call_shape(q, k, cos, sin, form: "written.RopeForm" = written.HALVES) -> tuple[int, ...] | None:
    """The family's shape of one call of a rotary function of `form` on these tensors (the
    one its route will see, layout included), or None where the kernel does not compute it:
    what the profile's range names a written-out rotary embedding by (`written.marked`)."""
    found = plan(q, k, cos, sin, form)
    return None if isinstance(found, str) else found.shape


class RopeFamily(KernelFamily):
    name = "rope"
    title = "Rotary position embedding (q and k)"
    shape_names = (
        "batch",
        "seq",
        "q_heads",
        "kv_heads",
        "head_dim",
        "per_batch",
        "rotary_dim",
        "interleaved",
        "q_row",
        "q_head",
        "k_row",
        "k_head",
    )
    optional_dims = 6  # a full rotation of halves, dense q and k
    cpu_schedule = Schedule(CPU_DEFAULTS, _cpu_program)
    gpu_schedule = Schedule(GPU_DEFAULTS, _gpu_program)

    @property
    def awkward_dims(self) -> tuple[str, ...]:
        return ("seq",)  # heads and head_dim are the model's; a sequence length is any

    def check(self, shape: Sequence[int]) -> Shape:
        """The shape as ints, canonical (trailing defaults dropped, so one call has one key
        whichever way it was written), or KernelError saying what a valid shape is."""
        try:
            dims = tuple(int(v) for v in shape)
        except (TypeError, ValueError):
            dims = ()
        ok = len(dims) in (6, 8, 12)
        if ok:
            b, s, hq, hk, d, per_batch = dims[:6]
            rot, inter = dims[6:8] if len(dims) > 6 else (d, 0)
            qp = _pitches(b * s, hq, d, *dims[8:10]) if len(dims) > 8 else (0, 0)
            kp = _pitches(b * s, hk, d, *dims[10:12]) if len(dims) > 8 else (0, 0)
            ok = (
                min(b, s, hq, d) > 0
                and d % 2 == 0
                and hk >= 0
                and per_batch in (0, 1)
                and 0 < rot <= d
                and rot % 2 == 0
                and inter in (0, 1, 2)
                and qp is not None
                and kp is not None
                and min(dims[8:] or (0,)) >= 0
                and (hk or dims[10:12] in ((), (0, 0)))
            )
        if not ok:
            raise KernelError(
                f"rope: shape must be (batch, seq, q_heads, kv_heads, head_dim, per_batch[, rotary_dim, interleaved"
                f"[, q_row, q_head, k_row, k_head]]): batch, seq, q_heads and head_dim positive, head_dim even, "
                f"per_batch 0 or 1, kv_heads 0 (one tensor) or more, "
                f"rotary_dim (default head_dim) even and at most head_dim, "
                f"interleaved 0, 1 or 2, each tensor's row and head strides 0 (dense) or wide enough for its heads, "
                f"got {tuple(shape)}"
            )
        if qp != (0, 0) or kp != (0, 0):
            return dims[:6] + (rot, inter) + qp + kp
        return dims[:6] if (rot, inter) == (d, 0) else dims[:6] + (rot, inter)

    def layout_free(self, shape: Shape) -> Shape:
        return self.check(tuple(shape)[:8])

    def standard_shapes(self, device: str) -> list[Shape]:
        if device == "cpu":
            return [(1, 64, 4, 2, 32, 0), (2, 128, 8, 2, 64, 1), (1, 77, 4, 4, 64, 0)]
        # TinyLlama (32 q heads, 4 kv heads), llama-7B (32, 32), at the sequence lengths served
        return [(4, 512, 32, 4, 64, 0), (1, 4096, 32, 32, 128, 0), (8, 1024, 32, 8, 128, 1), (4, 509, 32, 4, 64, 0)]

    def make_inputs(self, shape: Shape, dtype: str, device: str, seed: int) -> tuple[torch.Tensor, ...]:
        L = _layout(self.check(shape))
        dtype = C.canonical_dtype(dtype)
        g = C.generator(seed)

        def rows(heads: int, strided: bool, row: int, head: int) -> torch.Tensor:
            if not strided:
                return C.randn((L.tokens, heads, L.d), dtype, device, g)
            # the heads of a wider projection's rows, as the model's view of it lies
            return C.randn((L.tokens, row), dtype, device, g).as_strided((L.tokens, heads, L.d), (row, head, 1))

        q = rows(L.hq, L.q_strided, L.q_row, L.q_head)
        ins = [q] + ([rows(L.hk, L.k_strided, L.k_row, L.k_head)] if L.hk else [])
        # cos and sin of real angles, as the model's rotary embedding makes them
        angle = torch.randn((L.cb, L.s, L.rot // 2), generator=g) * 3.0
        tdt = C.torch_dtype(dtype)
        if L.inter == 2:  # GPT-J's table row: sin, then cos, one angle a pair
            ins.append(torch.cat((angle.sin(), angle.cos()), dim=-1).to(device=device, dtype=tdt))
        else:  # llama's cat((freqs, freqs)); Cohere's repeat_interleave(freqs, 2)
            angle = angle.repeat_interleave(2, dim=-1) if L.inter else torch.cat((angle, angle), dim=-1)
            ins += [angle.cos().to(device=device, dtype=tdt), angle.sin().to(device=device, dtype=tdt)]
        setattr(q, FORM_ATTR, (L.rot, L.inter, L.hk))
        return tuple(ins)

    def reference(self, *inputs: torch.Tensor) -> Any:
        """The formula as the model writes it, in the input dtype: on the [batch, heads,
        seq, dim] views a llama attention passes (GPT-J's one tensor [batch, seq, heads,
        dim], its sin and cos repeated per pair); its results as they come (a copy to
        another layout would be timed as PyTorch's). The form is the one `make_inputs` put
        on q; without it, halves of q and k."""
        q = inputs[0]
        rot, inter, hk = getattr(q, FORM_ATTR, None) or (inputs[-1].shape[-1], 0, 1)
        if inter == 2:
            table = inputs[-1]
            sin, cos = table[..., : rot // 2], table[..., rot // 2 :]
        else:
            cos, sin = inputs[-2], inputs[-1]
        s, d = cos.shape[1], q.shape[-1]
        b = q.shape[0] // s
        if not hk:
            x = q.view(b, s, -1, d)
            c, sn = cos[:, :, None, :], sin[:, :, None, :]
            if inter == 2:  # GPT-J: torch.repeat_interleave(sin[:, :, None, :], 2, 3)
                c, sn = torch.repeat_interleave(c, 2, 3), torch.repeat_interleave(sn, 2, 3)
            return written.formula(x, c, sn, inter)
        c, sn = cos.unsqueeze(1), sin.unsqueeze(1)
        if inter == 2:
            c, sn = torch.repeat_interleave(c, 2, 3), torch.repeat_interleave(sn, 2, 3)
        qv = q.view(b, s, -1, d).transpose(1, 2)
        kv = inputs[1].view(b, s, -1, d).transpose(1, 2)
        return written.formula(qv, c, sn, inter), written.formula(kv, c, sn, inter)

    def search_space(self, shape: Shape, dtype: str, hardware: Hardware) -> list[KernelConfig]:
        L = _layout(self.check(shape))
        if C.is_cpu_target(hardware.target) or hardware.device == "cpu":
            return [{"block_tokens": 4}, {"block_tokens": 1}, {"block_tokens": 16}]
        per_token = (L.hq + L.hk) * L.d
        cands = []
        for threads in (128, 256, 512):
            for bt in (1, 2, 4, 8):
                # at least 4 elements a thread (the loads vectorise), at most 64
                if 4 <= bt * per_token // threads <= 64 and bt <= max(1, L.tokens // 264):
                    cands.append({"block_tokens": bt, "threads": threads})
        if not cands:
            cands = [dict(GPU_DEFAULTS)]
        # ~16 elements a thread first: enough loads in flight, few registers
        cands.sort(key=lambda c: (abs(c["block_tokens"] * per_token / c["threads"] - 16), -c["threads"]))
        if L.rot < L.d:
            # A part rotated and a part copied: TileLang vectorises each loop only as wide as
            # its elements a thread allow, so configs that give every loop whole 16-byte
            # vectors first (GPT-NeoX's 32 of 128 at 2 tokens of 16 heads a block, 128 threads).
            vec = max(1, 16 // C.dtype_bytes(C.canonical_dtype(dtype)))
            parts = [h * p for h in (L.hq, L.hk) if h for p in (L.rot, L.d - L.rot)]
            cands.sort(key=lambda c: -sum(c["block_tokens"] * n % (c["threads"] * vec) == 0 for n in parts))
        return cands[:8]

    def config_error(self, shape: Shape, dtype: str, config: dict, target: str) -> str | None:
        if config["block_tokens"] < 1:
            return f"block_tokens must be >= 1, got {config['block_tokens']}"
        if not C.is_cpu_target(target) and (config["threads"] % 32 or not 32 <= config["threads"] <= 1024):
            return f"threads must be a multiple of 32 in 32..1024, got {config['threads']}"
        return None

    def flops(self, shape: Shape) -> float:
        L = _layout(shape)
        return 3.0 * L.tokens * (L.hq + L.hk) * L.rot  # two multiplies and an add per rotated element

    def bytes(self, shape: Shape, dtype: str) -> float:
        L = _layout(shape)
        angles = L.cb * L.s * L.rot * (1 if L.inter == 2 else 2)
        return float((2 * L.tokens * (L.hq + L.hk) * L.d + angles) * C.dtype_bytes(C.canonical_dtype(dtype)))

    def tolerance(self, dtype: str, shape: Shape | None = None) -> tuple[float, float]:
        # PyTorch rounds q*cos and the rotated half*sin to 16 bits before adding them
        return {"float32": (1e-5, 1e-5), "float16": (4e-3, 4e-3), "bfloat16": (3e-2, 3e-2)}[C.canonical_dtype(dtype)]

    def input_shapes(self, shape: Shape) -> list[tuple[int, ...]]:
        L = _layout(self.check(shape))
        rows = [(L.tokens, L.hq, L.d)] + ([(L.tokens, L.hk, L.d)] if L.hk else [])
        angles = [(L.cb, L.s, L.rot)] * (1 if L.inter == 2 else 2)
        return rows + angles

    def compile(self, resolved, target: str) -> Callable[..., Any]:
        inputs = self.input_shapes(resolved.shape)
        n_out = 2 if _layout(resolved.shape).hk else 1
        return _Rotated(
            C.build_cached(
                self.name,
                resolved.shape,
                resolved.dtype,
                resolved.config,
                target,
                resolved.program,
                out_idx=list(range(len(inputs), len(inputs) + n_out)),
                input_shapes=inputs,
            )
        )

    # The router sees a model's rotary embedding function as one call of `written.rotary`
    # (evaluator.routing.written finds it by what it computes and patches it while routing), with
    # the form the probe found (halves or pairs, partial, one tensor a call).
    functions = (written.rotary,)

    def route(self, func: Callable, args: tuple, kwargs: dict, dtype: str) -> Route | str:
        q, k = arg(args, kwargs, 0, "q"), arg(args, kwargs, 1, "k")
        cos, sin = arg(args, kwargs, 2, "cos"), arg(args, kwargs, 3, "sin")
        form = kwargs.get("form") or written.HALVES
        bad = dtype_mismatch(dtype, *(t for t in (q, k, cos, sin) if isinstance(t, torch.Tensor)))
        if bad:
            return bad
        p = plan(q, k, cos, sin, form)  # the profile's range names the same shape (call_shape)
        if isinstance(p, str):
            return p
        L = _layout(p.shape)
        if L.hk and L.rot < L.d:
            # A function that rotates part of each head returns the rotated part concatenated
            # with the rest (torch.cat): contiguous [batch, heads, seq, dim]. The kernel's
            # views are copied to that layout, so that what reads them next (attention) sees
            # the layout it was profiled and tuned in, as without the kernel.
            def launch(kernel):
                yq, yk = kernel(*p.inputs)
                return yq.contiguous(), yk.contiguous()

            return Route(p.shape, launch, notes=p.notes + ("output copied to contiguous, as torch.cat returns it",))
        return Route(p.shape, lambda kernel: kernel(*p.inputs), notes=p.notes)


FAMILY = RopeFamily()


# The registry (evaluator.kernels) registers these, in this order.
FAMILIES = (FAMILY,)
