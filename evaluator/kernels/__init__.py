"""The registry of kernel families: one module per family, one protocol (`base.KernelFamily`).

In: a family name. Out: the family object. `family_for_aten(op)` maps a profiled aten op
to the family that covers it.
"""

from __future__ import annotations

from ..errors import UnknownFamilyError
from .base import KernelFamily

REGISTRY: dict[str, KernelFamily] = {}


def register(family: KernelFamily) -> KernelFamily:
    REGISTRY[family.name] = family
    return family


def get(name: str) -> KernelFamily:
    try:
        return REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(REGISTRY))
        raise UnknownFamilyError(f"unknown kernel family '{name}'; known families: {known}") from None


def family_for_aten(op: str) -> KernelFamily | None:
    for fam in REGISTRY.values():
        if op in fam.aten_ops:
            return fam
    return None


# Importing the family modules registers them.
from . import gemm, softmax, layernorm, rmsnorm, attention, conv2d  # noqa: E402,F401
