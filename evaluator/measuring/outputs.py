"""Outputs of any structure compared relative to their own magnitude.

In: a model's output with TileLang kernels routed in, the unmodified model's output, and
the dtype. Out: an `OutputCheck` — pass or fail, the relative L2 error and the largest
error relative to max|ref| over every floating-point leaf (tensors in tuples, lists,
dicts, dataclasses, transformers' ModelOutput, cache objects), and why it failed. NaN or
Inf on either side fails, counted per side; a reference without signal (near zero, or
constant) is compared with an absolute floor and flagged (`no_signal`), since any kernel
would "match" it.
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


# A reference whose largest value is below this (per dtype) or whose values do not vary
# carries no signal: any kernel "matches" it. It is compared with an absolute floor and
# flagged instead (MobileNetV2 at a tiny width outputs values around 1e-24).
NO_SIGNAL_PEAK = {"float32": 1e-12, "float16": 1e-4, "bfloat16": 1e-12}
ABSOLUTE_FLOOR = {"float32": 1e-6, "float16": 1e-3, "bfloat16": 1e-2}
NO_SIGNAL = "the reference carries no signal at this input"


@dataclass(frozen=True)
class OutputCheck:
    ok: bool
    rel_l2: float | None
    rel_max: float | None
    max_abs: float | None
    reason: str = ""
    # Non-finite values per side: {"swapped NaN": n, "reference Inf": n, ...}, zeros left out.
    nonfinite: dict[str, int] = dataclasses.field(default_factory=dict)
    values: int = 0  # floating-point values compared
    # Every floating-point leaf of the reference is (near) zero or constant: compared with an
    # absolute floor, and the match (if any) says nothing about the kernels.
    no_signal: str = ""

    @property
    def reference_broken(self) -> bool:
        """The unmodified model's own output is NaN or Inf somewhere: nothing can be compared."""
        return any(k.startswith("reference") for k in self.nonfinite)


def _count_nonfinite(t: torch.Tensor) -> tuple[int, int]:
    return int(torch.isnan(t).sum()), int(torch.isinf(t).sum())


def _described(counts: dict[str, int], values: int) -> str:
    """'swapped output has 1,024 NaN of 98,304 values' / 'the reference itself has ...'."""
    parts = []
    for side, lead in (("reference", "the reference itself has"), ("swapped", "swapped output has")):
        kinds = [f"{counts[f'{side} {k}']:,} {k}" for k in ("NaN", "Inf") if counts.get(f"{side} {k}")]
        if kinds:
            parts.append(f"{lead} {' and '.join(kinds)} of {values:,} values")
    return "; ".join(parts)


def signal(ref: object, dtype: str) -> str:
    """Why the reference output carries no signal (every floating-point leaf near zero or
    constant), or "" where it does."""
    peak_floor = NO_SIGNAL_PEAK.get(dtype, NO_SIGNAL_PEAK["float32"])
    floats = [t for t in leaves(ref) if isinstance(t, torch.Tensor) and t.is_floating_point() and t.numel()]
    if not floats:
        return ""
    peaks, spreads = [], []
    for t in floats:
        y = t.detach().double()
        y = y[torch.isfinite(y)]
        if y.numel() == 0:
            return ""  # all non-finite: reported as such, not as a missing signal
        peak = float(y.abs().max())
        peaks.append(peak)
        spreads.append(float(y.max() - y.min()) / peak if peak > 0 else 0.0)
        if peak >= peak_floor and spreads[-1] > 1e-6:
            return ""
    peak = max(peaks)
    if peak < peak_floor:
        return f"{NO_SIGNAL} (largest value {peak:.2g})"
    return f"{NO_SIGNAL} (every value the same, {peak:.4g})"


def compare_outputs(out: object, ref: object, dtype: str) -> OutputCheck:
    """Swapped output against the reference: NaN or Inf on either side fails with counts; a
    reference without signal is compared with an absolute floor and says so."""
    tol = OUTPUT_TOLERANCE.get(dtype, OUTPUT_TOLERANCE["float32"])
    a, b = leaves(out), leaves(ref)
    if len(a) != len(b):
        return OutputCheck(False, None, None, None, f"output structure differs ({len(a)} vs {len(b)} leaves)")
    rel_l2 = rel_max = max_abs = 0.0
    counts: dict[str, int] = {}
    values = 0
    pairs = []
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
            values += yf.numel()
            for side, t in (("swapped", xf), ("reference", yf)):
                nan, inf = _count_nonfinite(t)
                for kind, n in (("NaN", nan), ("Inf", inf)):
                    if n:
                        counts[f"{side} {kind}"] = counts.get(f"{side} {kind}", 0) + n
            pairs.append((xf, yf))
        elif x != y and not (isinstance(x, float) and isinstance(y, float) and math.isclose(x, y, rel_tol=1e-3)):
            return OutputCheck(False, None, None, None, "a non-tensor output differs")
    if counts:
        return OutputCheck(False, None, None, None, _described(counts, values), counts, values)
    quiet = signal(ref, dtype)
    for xf, yf in pairs:
        diff = xf - yf
        norm = float(yf.norm())
        peak = float(yf.abs().max())
        rel_l2 = max(rel_l2, float(diff.norm()) / norm if norm > 0 else float(diff.norm()))
        rel_max = max(rel_max, float(diff.abs().max()) / peak if peak > 0 else float(diff.abs().max()))
        max_abs = max(max_abs, float(diff.abs().max()))
    if quiet:
        floor = ABSOLUTE_FLOOR.get(dtype, ABSOLUTE_FLOOR["float32"])
        ok = max_abs <= floor
        return OutputCheck(
            ok,
            rel_l2,
            rel_max,
            max_abs,
            "" if ok else f"error over the absolute floor {floor:g} (max abs {max_abs:.2g})",
            values=values,
            no_signal=quiet,
        )
    ok = rel_l2 <= tol["rel_l2"] and rel_max <= tol["rel_max"]
    return OutputCheck(
        ok,
        rel_l2,
        rel_max,
        max_abs,
        "" if ok else f"error over tolerance (relative L2 {rel_l2:.2g}, relative max {rel_max:.2g})",
        values=values,
    )
