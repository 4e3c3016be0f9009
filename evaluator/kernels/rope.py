"""Rotary position embedding of a decoder's queries and keys, as transformers writes it
(`apply_rotary_pos_emb`: q * cos + rotate_half(q) * sin, the same for k), in one kernel.

In: shape (batch, seq, q_heads, kv_heads, head_dim, per_batch); inputs q[batch*seq,
q_heads, head_dim] and k[batch*seq, kv_heads, head_dim] (the projections' own memory,
tokens outer, as `q_proj(x).view(b, s, h, d)` lies before its transpose), cos and
sin[1 or batch, seq, head_dim] (per_batch says which). Out: the rotated q and k in
those shapes, compared against the formula in PyTorch, which is five elementwise calls
and a cat for each of q and k; the kernel reads each input once and writes each output
once. Math in fp32. Schedules: on CUDA, `block_tokens` tokens per block over all heads,
`threads` threads; on CPU, loops over tokens.

Eager transformers llama at TinyLlama's widths spends 0.414 ms of 2.12 in elementwise
calls, most of them this (session 20, `reports/examples/h200/session20/d3/`), and
torch.compile fuses them: the gap to it that no other family closes.
"""

# No `from __future__ import annotations`: TileLang evaluates the kernel signatures'
# annotations, whose closure must resolve them.
from typing import Any, Callable, Sequence

import torch

from .. import written
from ..errors import KernelError
from ..results import Hardware, KernelConfig, Shape
from ..swap import Route, arg, dtype_mismatch
from . import _common as C
from .base import KernelFamily, Schedule

ACCUM = "float32"
CPU_DEFAULTS = {"block_tokens": 4}
GPU_DEFAULTS = {"block_tokens": 1, "threads": 256}


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def _dims(shape: Shape) -> tuple[int, int, int, int, int, int, int]:
    b, s, hq, hk, d, per_batch = shape
    return b, s, hq, hk, d, per_batch, b if per_batch else 1


def _value(X, Cs, Sn, t, h, j, s: int, half: int, per_batch: int, T):
    """Element (t, h, j) rotated: x[j] cos[j] -+ x[j +- half] sin[j], in fp32."""
    ci = (t // s) * per_batch
    si = t % s
    x = T.cast(X[t, h, j], ACCUM)
    other = T.if_then_else(j < half, -T.cast(X[t, h, j + half], ACCUM), T.cast(X[t, h, j - half], ACCUM))
    return x * T.cast(Cs[ci, si, j], ACCUM) + other * T.cast(Sn[ci, si, j], ACCUM)


def _entry(T, shape: Shape, dtype: str, body):
    b, s, hq, hk, d, _, cb = _dims(shape)
    tokens = b * s

    @T.prim_func
    def rope(Q: T.Tensor((tokens, hq, d), dtype), K: T.Tensor((tokens, hk, d), dtype),
             Cs: T.Tensor((cb, s, d), dtype), Sn: T.Tensor((cb, s, d), dtype),
             YQ: T.Tensor((tokens, hq, d), dtype), YK: T.Tensor((tokens, hk, d), dtype)):
        body(Q, K, Cs, Sn, YQ, YK)

    return rope


def _cpu_program(shape: Shape, dtype: str, cfg: dict[str, Any]):
    import tilelang.cpu.language as T

    b, s, hq, hk, d, per_batch, _ = _dims(shape)
    tokens, half, BT = b * s, d // 2, cfg["block_tokens"]

    @T.macro
    def body(Q, K, Cs, Sn, YQ, YK):
        with T.Kernel(T.ceildiv(tokens, BT)) as bx:
            for r in T.serial(BT):
                if bx * BT + r < tokens:
                    for h in T.serial(hq):
                        for j in T.serial(d):
                            YQ[bx * BT + r, h, j] = T.cast(_value(Q, Cs, Sn, bx * BT + r, h, j, s, half, per_batch, T),
                                                           dtype)
                    for h in T.serial(hk):
                        for j in T.serial(d):
                            YK[bx * BT + r, h, j] = T.cast(_value(K, Cs, Sn, bx * BT + r, h, j, s, half, per_batch, T),
                                                           dtype)

    return _entry(T, shape, dtype, body)


def _gpu_program(shape: Shape, dtype: str, cfg: dict[str, Any]):
    import tilelang.language as T

    b, s, hq, hk, d, per_batch, _ = _dims(shape)
    tokens, half, BT = b * s, d // 2, cfg["block_tokens"]

    @T.macro
    def body(Q, K, Cs, Sn, YQ, YK):
        with T.Kernel(T.ceildiv(tokens, BT), threads=cfg["threads"]) as bx:
            for r, h, j in T.Parallel(BT, hq, d):
                if bx * BT + r < tokens:
                    YQ[bx * BT + r, h, j] = T.cast(_value(Q, Cs, Sn, bx * BT + r, h, j, s, half, per_batch, T), dtype)
            for r, h, j in T.Parallel(BT, hk, d):
                if bx * BT + r < tokens:
                    YK[bx * BT + r, h, j] = T.cast(_value(K, Cs, Sn, bx * BT + r, h, j, s, half, per_batch, T), dtype)

    return _entry(T, shape, dtype, body)


class _Pair(C.LauncherWrapper):
    """The kernel as the formula returns: (q rotated, k rotated), each [batch, heads, seq,
    head_dim] in the projection's layout (tokens outer), as the formula's first multiply
    leaves it; views of the kernel's outputs."""

    def __call__(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        b, s, hq, hk, d = self.launcher.shape[:5]
        yq, yk = self.launcher(*inputs)
        return yq.view(b, s, hq, d).transpose(1, 2), yk.view(b, s, hk, d).transpose(1, 2)


class RopeFamily(KernelFamily):
    name = "rope"
    title = "Rotary position embedding (q and k)"
    shape_names = ("batch", "seq", "q_heads", "kv_heads", "head_dim", "per_batch")
    cpu_schedule = Schedule(CPU_DEFAULTS, _cpu_program)
    gpu_schedule = Schedule(GPU_DEFAULTS, _gpu_program)

    @property
    def awkward_dims(self) -> tuple[str, ...]:
        return ("seq",)  # heads and head_dim are the model's; a sequence length is any

    def check(self, shape: Sequence[int]) -> Shape:
        """The shape as ints, or KernelError: five positive sizes, an even head_dim, per_batch 0 or 1."""
        try:
            dims = tuple(int(v) for v in shape)
        except (TypeError, ValueError):
            dims = ()
        if len(dims) != 6 or any(v <= 0 for v in dims[:5]) or dims[4] % 2 or dims[5] not in (0, 1):
            raise KernelError(f"rope: shape must be (batch, seq, q_heads, kv_heads, head_dim, per_batch): five "
                              f"positive ints, head_dim even, per_batch 0 or 1, got {tuple(shape)}")
        return dims

    def standard_shapes(self, device: str) -> list[Shape]:
        if device == "cpu":
            return [(1, 64, 4, 2, 32, 0), (2, 128, 8, 2, 64, 1), (1, 77, 4, 4, 64, 0)]
        # TinyLlama (32 q heads, 4 kv heads), llama-7B (32, 32), at the sequence lengths served
        return [(4, 512, 32, 4, 64, 0), (1, 4096, 32, 32, 128, 0), (8, 1024, 32, 8, 128, 1), (4, 509, 32, 4, 64, 0)]

    def make_inputs(self, shape: Shape, dtype: str, device: str, seed: int) -> tuple[torch.Tensor, ...]:
        b, s, hq, hk, d, per_batch, cb = _dims(self.check(shape))
        dtype = C.canonical_dtype(dtype)
        g = C.generator(seed)
        q = C.randn((b * s, hq, d), dtype, device, g)
        k = C.randn((b * s, hk, d), dtype, device, g)
        # cos and sin of real angles, as the model's rotary embedding makes them
        angle = torch.randn((cb, s, d // 2), generator=g) * 3.0
        angle = torch.cat((angle, angle), dim=-1)
        tdt = C.torch_dtype(dtype)
        return q, k, angle.cos().to(device=device, dtype=tdt), angle.sin().to(device=device, dtype=tdt)

    def reference(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The formula as transformers writes it, in the input dtype, on the [batch, heads,
        seq, dim] views a llama attention passes; its results as they come (a copy to
        another layout would be timed as PyTorch's)."""
        q, k, cos, sin = inputs
        cb, s, d = cos.shape
        b = q.shape[0] // s
        qv = q.view(b, s, -1, d).transpose(1, 2)
        kv = k.view(b, s, -1, d).transpose(1, 2)
        c, sn = cos.unsqueeze(1), sin.unsqueeze(1)
        return qv * c + rotate_half(qv) * sn, kv * c + rotate_half(kv) * sn

    def search_space(self, shape: Shape, dtype: str, hardware: Hardware) -> list[KernelConfig]:
        b, s, hq, hk, d, _, _ = _dims(self.check(shape))
        if C.is_cpu_target(hardware.target) or hardware.device == "cpu":
            return [{"block_tokens": 4}, {"block_tokens": 1}, {"block_tokens": 16}]
        per_token = (hq + hk) * d
        cands = []
        for threads in (128, 256, 512):
            for bt in (1, 2, 4, 8):
                # at least 4 elements a thread (the loads vectorise), at most 64
                if 4 <= bt * per_token // threads <= 64 and bt <= max(1, b * s // 264):
                    cands.append({"block_tokens": bt, "threads": threads})
        if not cands:
            cands = [dict(GPU_DEFAULTS)]
        # ~16 elements a thread first: enough loads in flight, few registers
        cands.sort(key=lambda c: (abs(c["block_tokens"] * per_token / c["threads"] - 16), -c["threads"]))
        return cands[:8]

    def config_error(self, shape: Shape, dtype: str, config: dict, target: str) -> str | None:
        if config["block_tokens"] < 1:
            return f"block_tokens must be >= 1, got {config['block_tokens']}"
        if not C.is_cpu_target(target) and (config["threads"] % 32 or not 32 <= config["threads"] <= 1024):
            return f"threads must be a multiple of 32 in 32..1024, got {config['threads']}"
        return None

    def flops(self, shape: Shape) -> float:
        b, s, hq, hk, d, _, _ = _dims(shape)
        return 3.0 * b * s * (hq + hk) * d  # two multiplies and an add per element

    def bytes(self, shape: Shape, dtype: str) -> float:
        b, s, hq, hk, d, _, cb = _dims(shape)
        return float((2 * b * s * (hq + hk) * d + 2 * cb * s * d) * C.dtype_bytes(C.canonical_dtype(dtype)))

    def tolerance(self, dtype: str, shape: Shape | None = None) -> tuple[float, float]:
        # PyTorch rounds q*cos and the rotated half*sin to 16 bits before adding them
        return {"float32": (1e-5, 1e-5), "float16": (4e-3, 4e-3), "bfloat16": (3e-2, 3e-2)}[C.canonical_dtype(dtype)]

    def input_shapes(self, shape: Shape) -> list[tuple[int, ...]]:
        b, s, hq, hk, d, _, cb = _dims(self.check(shape))
        return [(b * s, hq, d), (b * s, hk, d), (cb, s, d), (cb, s, d)]

    def compile(self, resolved, target: str) -> Callable[..., tuple[torch.Tensor, torch.Tensor]]:
        inputs = self.input_shapes(resolved.shape)
        return _Pair(C.build_cached(self.name, resolved.shape, resolved.dtype, resolved.config, target,
                                    resolved.program, out_idx=[4, 5], input_shapes=inputs))

    # The router sees transformers' apply_rotary_pos_emb as one call of `written.rotary`
    # (evaluator.written finds it by what it computes and patches it while routing).
    functions = (written.rotary,)

    def route(self, func: Callable, args: tuple, kwargs: dict, dtype: str) -> Route | str:
        q, k = arg(args, kwargs, 0, "q"), arg(args, kwargs, 1, "k")
        cos, sin = arg(args, kwargs, 2, "cos"), arg(args, kwargs, 3, "sin")
        if not all(isinstance(t, torch.Tensor) for t in (q, k, cos, sin)):
            return "not four tensors"
        bad = dtype_mismatch(dtype, q, k, cos, sin)
        if bad:
            return bad
        if q.dim() != 4 or k.dim() != 4 or cos.dim() != 3 or sin.shape != cos.shape:
            return "q, k not 4-D or cos, sin not [batch, seq, head_dim]"
        b, hq, s, d = (int(v) for v in q.shape)
        hk = int(k.shape[1])
        if tuple(k.shape) != (b, hk, s, d) or d % 2 or int(cos.shape[1]) != s or int(cos.shape[2]) != d \
                or int(cos.shape[0]) not in (1, b):
            return "q, k, cos and sin of shapes that do not broadcast as rotary embeddings do"
        # q as the projection wrote it: tokens outer ([b, s, h, d] dense), the transpose a view
        qs, ks = q.transpose(1, 2), k.transpose(1, 2)
        notes = () if qs.is_contiguous() and ks.is_contiguous() else ("input copied to contiguous",)
        shape = written.rope_shape(q, k, cos)  # the profile's range names the same shape

        def launch(kernel: Callable) -> tuple[torch.Tensor, torch.Tensor]:
            # [batch, heads, seq, head_dim] views in q's own layout, tokens outer
            return kernel(qs.reshape(b * s, hq, d), ks.reshape(b * s, hk, d), cos, sin)

        return Route(shape, launch, notes=notes)


FAMILY = RopeFamily()

from . import register  # noqa: E402  (the registry module defines register before importing us)

register(FAMILY)
