"""What the families' routes share: reading a call's arguments, weights in a kernel's layout.

In: a torch call's arguments, a weight tensor, the kernels' dtype. Out: `arg` (an argument
by position or keyword), `dtype_mismatch` (why a call's tensors are not the kernels'
dtype, or None), and `DERIVED`, weights in the layout a kernel wants (a Conv1D weight
transposed, a conv weight as KRSC, a Gemma norm's 1 + weight) made once per weight and
remade only when the weight changes.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any, Callable

import torch

from ..dtypes import torch_dtype


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
        # The entry goes when its weight does: a weight remade every call (weight_norm's)
        # leaves no trail of copies behind.
        ref = weakref.ref(w, lambda _r, key=key, cache=self._cache: cache.pop(key, None))
        with self._lock:
            self._cache[key] = (ref, out)
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


_TORCH_DTYPES: dict[str, torch.dtype] = {}


def dtype_mismatch(dtype: str, *tensors: torch.Tensor | None) -> str | None:
    want = _TORCH_DTYPES.get(dtype)
    if want is None:
        want = _TORCH_DTYPES[dtype] = torch_dtype(dtype)
    for t in tensors:
        if t is not None and t.dtype != want:
            return f"dtype {str(t.dtype).replace('torch.', '')} (kernels are {dtype})"
    return None
