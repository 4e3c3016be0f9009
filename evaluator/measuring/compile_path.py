"""Which program a model runs: its torch calls eagerly, and when it believes it is compiled.

In: a zero-argument callable running one forward pass. Out: `Recorder`, the torch functions
the pass calls counted by name and input dtypes, with every scaled_dot_product_attention
call described (mask, causal flag, the backend PyTorch's dispatcher picks); and
`compile_path_note`, one line naming the calls that differ when `torch.compiler.
is_compiling()` answers True, or "" when the pass calls the same functions either way.

Why: a model may ask whether it is being traced and run another program when it is.
transformers does (`is_tracing`): under torch.compile its BertModel builds an expanded
bool attention mask it never builds eagerly, so SDPA leaves cuDNN's kernel for another
backend (on the H200, reports/examples/hf-bert-base/h200/2026-12-02/: 1.239 ms compiled
against 0.882 ms eager). torch.compile's number is still what a team compiling the model
gets, but it is not kernel against kernel, and the report has to say so. The timer hides
its own CUDA-graph capture from the model for the same reason (timing.unobserved_capture);
this module only looks, it changes nothing the timer or the compile sees.
"""

from __future__ import annotations

import collections
import contextlib
from typing import Callable, Iterator

import torch
from torch.overrides import TorchFunctionMode

SDPA = torch.nn.functional.scaled_dot_product_attention
_QUALNAMES = (("_VariableFunctionsClass.", "torch."), ("TensorBase.", "Tensor."))
# How compile_path_note begins: the report finds the note by it (report/sections/e2e.py).
OTHER_PROGRAM = "the model runs another program under torch.compile"


def _dtypes(args, kwargs) -> str:
    seen = [a.dtype for a in list(args) + list(kwargs.values()) if isinstance(a, torch.Tensor)]
    return ",".join(str(d).replace("torch.", "") for d in seen)


def _backend(q, k, v, mask, dropout_p, is_causal, scale) -> str:
    try:
        choice = torch._fused_sdp_choice(q, k, v, mask, dropout_p, is_causal, scale=scale)
        return torch.nn.attention.SDPBackend(choice).name
    except Exception as exc:  # the private hook moved: say so rather than guess
        return f"unknown ({type(exc).__name__})"


def _mask_words(mask) -> str:
    if mask is None:
        return "no mask"
    return f"a {str(mask.dtype).replace('torch.', '')} mask {list(mask.shape)}"


class Recorder(TorchFunctionMode):
    """Counts (function, input dtypes) and describes each SDPA call. An SDPA call's key
    names its mask too, so a masked and an unmasked call count as different calls."""

    def __init__(self):
        super().__init__()
        self.calls: collections.Counter = collections.Counter()
        self.sdpa: list[dict] = []
        self.last = ""  # the call running or last run: where a failing pass stopped

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__qualname__", None) or getattr(func, "__name__", str(func))
        for inner, shown in _QUALNAMES:  # the C classes torch's functions live on, as users write them
            if name.startswith(inner):
                name = shown + name[len(inner) :]
        key = f"{name}({_dtypes(args, kwargs)})"
        if func is SDPA:
            q, k, v = args[:3]
            mask = kwargs.get("attn_mask", args[3] if len(args) > 3 else None)
            dropout_p = kwargs.get("dropout_p", args[4] if len(args) > 4 else 0.0)
            is_causal = kwargs.get("is_causal", args[5] if len(args) > 5 else False)
            self.sdpa.append(
                {
                    "q": [list(q.shape), list(q.stride()), str(q.dtype)],
                    "mask": None if mask is None else [str(mask.dtype), list(mask.shape), list(mask.stride())],
                    "dropout_p": float(dropout_p),
                    "is_causal": bool(is_causal),
                    "scale": kwargs.get("scale"),
                    "enable_gqa": kwargs.get("enable_gqa", False),
                    "backend": _backend(q, k, v, mask, dropout_p, is_causal, kwargs.get("scale")),
                }
            )
            key = f"{key} with {_mask_words(mask)}{', causal' if is_causal else ''}"
        # Attribute reads and size queries are bookkeeping, not work the device does.
        if "__get__" not in name and not name.endswith((".dim", ".size")):
            self.calls[key] += 1
            self.last = key
        return func(*args, **kwargs)


def record(fn: Callable[[], object]) -> Recorder:
    """One call of `fn` under a fresh recorder."""
    rec = Recorder()
    with rec:
        fn()
    return rec


@contextlib.contextmanager
def believed_compiling() -> Iterator[None]:
    """`torch.compiler.is_compiling()` answers True, as it does inside Dynamo's trace, while
    the code runs eagerly. The flag it reads is set, as torch's own export does
    (`torch._export.utils._compiling_state_context`), so code that imported the function
    by name sees it too; where a torch release has no such flag, the function is patched."""
    compiler = torch.compiler
    if hasattr(compiler, "_is_compiling_flag"):
        old = compiler._is_compiling_flag
        compiler._is_compiling_flag = True
        try:
            yield
        finally:
            compiler._is_compiling_flag = old
        return
    saved = compiler.is_compiling
    compiler.is_compiling = lambda: True
    try:
        yield
    finally:
        compiler.is_compiling = saved


def differing_calls(eager: collections.Counter, other: collections.Counter) -> dict[str, tuple[int, int]]:
    """Calls counted differently by the two sides: key -> (eager count, other count)."""
    return {
        k: (eager.get(k, 0), other.get(k, 0))
        for k in sorted(set(eager) | set(other))
        if eager.get(k, 0) != other.get(k, 0)
    }


def compile_path_note(fn: Callable[[], object], shown: int = 3) -> str:
    """ "" when `fn` calls the same torch functions whether or not it believes it is being
    compiled; otherwise one line naming the first `shown` calls that differ, so a reader
    knows torch.compile's time is of another program than the eager one. A model that
    fails when it believes it is compiled gets a line saying so (Dynamo may still trace it:
    its guards and fallbacks are not emulated here)."""
    with torch.inference_mode():
        eager = record(fn).calls
        try:
            with believed_compiling():
                traced = record(fn).calls
        except Exception as exc:
            return (
                f"could not check whether the model takes another path under torch.compile "
                f"({type(exc).__name__} when is_compiling() is True)"
            )
    diff = differing_calls(eager, traced)
    if not diff:
        return ""
    # Attention first, then calls that do work, then Python operators (indexing, masks' &).
    order = sorted(diff, key=lambda k: (SDPA.__name__ not in k, ".__" in k, k))
    only_traced = [f"{k} x{diff[k][1] - diff[k][0]}" for k in order if diff[k][1] > diff[k][0]]
    only_eager = [f"{k} x{diff[k][0] - diff[k][1]}" for k in order if diff[k][0] > diff[k][1]]
    parts = []
    if only_traced:
        parts.append("calls " + "; ".join(only_traced[:shown]) + (" ..." if len(only_traced) > shown else ""))
    if only_eager:
        parts.append("instead of " + "; ".join(only_eager[:shown]) + (" ..." if len(only_eager) > shown else ""))
    return (
        f"{OTHER_PROGRAM} than eagerly (it asks torch.compiler.is_compiling()): it "
        + ", ".join(parts)
        + "; torch.compile's time is of that program"
    )
