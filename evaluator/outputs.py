"""Outputs of any structure compared relative to their own magnitude.

In: a model's output with TileLang kernels routed in, the unmodified model's output, and
the dtype. Out: an `OutputCheck` — pass or fail, the relative L2 error and the largest
error relative to max|ref| over every floating-point leaf (tensors in tuples, lists,
dicts, dataclasses, transformers' ModelOutput, cache objects), and why it failed.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch


# Output tolerances, relative to the reference's own magnitude so that depth and scale
# do not decide the verdict: the relative L2 error ||out - ref|| / ||ref|| over each
# floating-point output, and the largest elementwise error over max|ref|. A model's
# error accumulates over dozens of layers, so these sit well above one kernel's.
OUTPUT_TOLERANCE = {
    "float32": {"rel_l2": 1e-4, "rel_max": 1e-3},
    "float16": {"rel_l2": 1e-2, "rel_max": 5e-2},
    "bfloat16": {"rel_l2": 2e-2, "rel_max": 1e-1},
}


def leaves(obj: object, depth: int = 0) -> list[object]:
    """Every leaf of a model output: tensors in tuples, lists, dicts, dataclasses,
    transformers' ModelOutput (a dict and a dataclass at once) and plain objects such
    as a key/value cache (through their attributes), in a stable order."""
    if isinstance(obj, torch.Tensor) or obj is None or isinstance(obj, (int, float, bool, str)):
        return [obj]
    if depth > 8:
        return []
    if isinstance(obj, dict) or (hasattr(obj, "keys") and hasattr(obj, "__getitem__")):
        return [x for k in obj.keys() for x in leaves(obj[k], depth + 1)]
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return [x for f in dataclasses.fields(obj) for x in leaves(getattr(obj, f.name), depth + 1)]
    if isinstance(obj, (tuple, list)):
        return [x for item in obj for x in leaves(item, depth + 1)]
    if hasattr(obj, "__dict__") and not callable(obj):
        return [x for k in sorted(vars(obj)) if not k.startswith("__") for x in leaves(vars(obj)[k], depth + 1)]
    return []  # functions, modules, devices: not outputs


@dataclass(frozen=True)
class OutputCheck:
    ok: bool
    rel_l2: float | None
    rel_max: float | None
    max_abs: float | None
    reason: str = ""


def compare_outputs(out: object, ref: object, dtype: str) -> OutputCheck:
    tol = OUTPUT_TOLERANCE.get(dtype, OUTPUT_TOLERANCE["float32"])
    a, b = leaves(out), leaves(ref)
    if len(a) != len(b):
        return OutputCheck(False, None, None, None, f"output structure differs ({len(a)} vs {len(b)} leaves)")
    rel_l2 = rel_max = max_abs = 0.0
    for x, y in zip(a, b):
        if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor):
            if x.shape != y.shape:
                return OutputCheck(False, None, None, None, f"output shape {tuple(x.shape)} vs {tuple(y.shape)}")
            if not y.is_floating_point():
                if not torch.equal(x, y):
                    return OutputCheck(False, None, None, None, "a non-float output differs")
                continue
            if x.numel() == 0:
                continue
            xf, yf = x.detach().double(), y.detach().double()
            if bool(torch.isnan(xf).any()) and not bool(torch.isnan(yf).any()):
                return OutputCheck(False, None, None, None, "NaN in the output")
            diff = (xf - yf).nan_to_num(0.0)
            norm = float(yf.nan_to_num(0.0).norm())
            peak = float(yf.nan_to_num(0.0).abs().max())
            rel_l2 = max(rel_l2, float(diff.norm()) / norm if norm > 0 else float(diff.norm()))
            rel_max = max(rel_max, float(diff.abs().max()) / peak if peak > 0 else float(diff.abs().max()))
            max_abs = max(max_abs, float(diff.abs().max()))
        elif x != y and not (isinstance(x, float) and isinstance(y, float) and math.isclose(x, y, rel_tol=1e-3)):
            return OutputCheck(False, None, None, None, "a non-tensor output differs")
    ok = rel_l2 <= tol["rel_l2"] and rel_max <= tol["rel_max"]
    return OutputCheck(ok, rel_l2, rel_max, max_abs,
                       "" if ok else f"error over tolerance (relative L2 {rel_l2:.2g}, relative max {rel_max:.2g})")
