"""How a kernel's output and a failure are judged, shared by the stages that run kernels.

In: a kernel's output and PyTorch's reference with a tolerance; a built kernel with its
inputs and a timing policy; an exception. Out: pass/fail with the reason and the errors
(`check_output`), a candidate's status, median latency and error (`measure`), and one
short line for an error (`short_error`).

Tuning (in process), the isolated tuning worker and verification all judge kernels with
these, so a candidate, a worker result and a verification case agree on what "wrong"
means. This module imports none of them: it is the leaf they share.
"""

from __future__ import annotations

from typing import Callable

import torch

from .bench import TimingPolicy, time_callable


def check_output(out: torch.Tensor, ref: torch.Tensor, atol: float, rtol: float) -> tuple[bool, str, float, float]:
    """(passed, reason, max_abs_err, max_rel_err) — NaN, Inf and all-zero outputs fail. A
    reference of several tensors (add_layernorm's norm and sum) checks each in turn."""
    if isinstance(ref, tuple):
        if not isinstance(out, tuple) or len(out) != len(ref):
            got = f"{len(out)} outputs" if isinstance(out, tuple) else type(out).__name__
            return False, f"wrong outputs: {got}, expected {len(ref)}", float("inf"), float("inf")
        worst_abs = worst_rel = 0.0
        for k, (o, r) in enumerate(zip(out, ref)):
            ok, reason, a, rel = check_output(o, r, atol, rtol)
            if not ok:
                return False, f"output {k}: {reason}", a, rel
            worst_abs, worst_rel = max(worst_abs, a), max(worst_rel, rel)
        return True, "", worst_abs, worst_rel
    if not isinstance(out, torch.Tensor) or out.shape != ref.shape:
        got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        return False, f"wrong output shape {got}, expected {tuple(ref.shape)}", float("inf"), float("inf")
    o, r = out.float(), ref.float()
    if torch.isnan(o).any():
        return False, "NaN in output", float("nan"), float("nan")
    if torch.isinf(o).any() and not torch.isinf(r).any():
        return False, "Inf in output", float("inf"), float("inf")
    if not o.any() and r.any():
        return False, "output is all zeros", float((r).abs().max()), 1.0
    diff = (o - r).abs()
    max_abs = float(diff.max()) if diff.numel() else 0.0
    max_rel = float((diff / r.abs().clamp_min(1e-6)).max()) if diff.numel() else 0.0
    ok = bool(torch.allclose(o, r, atol=atol, rtol=rtol))
    return (
        ok,
        ("" if ok else f"mismatch: max abs err {max_abs:.3g} > atol {atol:g} + rtol {rtol:g}*|ref|"),
        max_abs,
        max_rel,
    )


def short_error(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    # TileLang's compile errors carry the whole generated source; the first lines say why
    return " | ".join(line.strip() for line in text.splitlines()[:3])[:400]


def measure(
    kernel: Callable, inputs: tuple, ref: torch.Tensor, atol: float, rtol: float, device: str, policy: TimingPolicy
) -> tuple[str, float | None, str]:
    """Run a built kernel once, check it, time it: (status, median ms, error)."""
    try:
        out = kernel(*inputs)
        if device == "cuda":
            torch.cuda.synchronize()
    except Exception as exc:
        return "runtime_error", None, short_error(exc)
    ok, reason, _, _ = check_output(out, ref, atol, rtol)
    if not ok:
        return "wrong", None, reason
    return "ok", time_callable(lambda: kernel(*inputs), device, policy).median_ms, ""
