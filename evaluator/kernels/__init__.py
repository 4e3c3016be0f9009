"""The registry of kernel families: one folder per family, one base class (`base.KernelFamily`).

In: a family name, or a profiled aten op. Out: the family object. Importing this package
imports every family folder in it (kernels/<family>/, whose `FAMILIES` it registers);
adding a family is adding its folder. A family defined
elsewhere (a test, a plug-in) calls `register` itself, and `unregister` to take it out.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Sequence

from ..errors import KernelError, UnknownFamilyError
from .base import KernelFamily

REGISTRY: dict[str, KernelFamily] = {}


def register(family: KernelFamily) -> KernelFamily:
    """Add `family` under its name. A taken name, or an aten op another family already
    covers, is refused: silently replacing one would make the family a name or an op
    resolves to depend on import order."""
    if not isinstance(family, KernelFamily):
        raise KernelError(
            f"cannot register a {type(family).__name__}: kernel families subclass evaluator.kernels.base.KernelFamily"
        )
    taken = REGISTRY.get(family.name)
    if taken is not None:
        raise KernelError(
            f"kernel family '{family.name}' is already registered (from {type(taken).__module__}); "
            "give the new family another name"
        )
    for other in REGISTRY.values():
        shared = sorted(family.aten_ops & other.aten_ops)
        if shared:
            raise KernelError(
                f"kernel family '{family.name}' covers {', '.join(shared)}, which "
                f"'{other.name}' already covers; an aten op maps to one family"
            )
    REGISTRY[family.name] = family
    return family


def unregister(name: str) -> KernelFamily:
    """Take a family out of the registry (a test's own family, after the test)."""
    family = get(name)
    del REGISTRY[name]
    return family


def get(name: str) -> KernelFamily:
    try:
        return REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(REGISTRY))
        raise UnknownFamilyError(f"unknown kernel family '{name}'; known families: {known}") from None


def family_for_aten(op: str, input_shapes: Sequence[Sequence[int]] = ()) -> KernelFamily | None:
    """The family that covers one profiled call of aten `op`, or None."""
    for fam in REGISTRY.values():
        if fam.covers(op, input_shapes):
            return fam
    return None


def _register_families() -> None:
    """Each family folder (kernels/<family>/) names its families in `FAMILIES`; they are
    registered here, in one place, folders sorted so the order does not depend on the
    filesystem."""
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.ispkg:
            for family in importlib.import_module(f"{__name__}.{info.name}").FAMILIES:
                register(family)


_register_families()
