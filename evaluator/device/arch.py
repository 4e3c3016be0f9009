"""Which TileLang target a kernel is built for, and what that target can run.

In: a `--target` spelling ("cuda:sm_80", "hip:gfx942", "maca", "c"), a target as the kernel
families take it ("cuda -arch=sm_90a", "hip -mcpu=gfx942", "c", or a JSON dict), or what
torch reports of a device (a CUDA compute capability, a ROCm `gcnArchName`). Out: a
`Target` (kind and architecture) that writes itself back as the families' string (`build`,
which `kernels.common.normalize_target` turns into the dict `tvm.target.Target` takes, the
form of `targets.TargetSpec.tilelang_target`), as the `--target` spelling (`flag`) and as
that dict; and `unsupported`, the one check of whether a program that uses some hardware
features (wgmma, TMA, setmaxnreg, thread-block clusters) can run on a target. Every
family's `resolve` and `reject_reason` ask it, so the tuner's candidates, the search
spaces and the portability matrix's cells all get the same answer; and the vendors'
published peaks per architecture (`PEAKS_BY_ARCH`, `published_peaks`), with the document
each comes from. Imports neither torch nor TileLang.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Iterable

from ..errors import ConfigError

# The --target spellings, for the one-line error that names them.
FORMS = "cuda:sm_XY (e.g. cuda:sm_80, cuda:sm_90a), hip:gfxNNN (e.g. hip:gfx942), maca or c"
_SM = re.compile(r"sm_(\d{2,3})([af]?)")
_GFX = re.compile(r"gfx[0-9a-f]{3,4}")

# What each hardware feature a program may use is called in sentences, and the CUDA
# architectures that have it. wgmma exists only in sm_90a (Blackwell's MMA is tcgen05);
# setmaxnreg in the arch-specific variants from sm_90a on; TMA and thread-block clusters
# from sm_90 on; cp.async from sm_80 on. AMD's and MetaX's targets have none of them.
FEATURE_WORDS = {
    "wgmma": "wgmma",
    "setmaxnreg": "setmaxnreg",
    "tma": "TMA",
    "cluster": "thread-block clusters",
    "cp_async": "cp.async",
}
_NEEDS = {
    "wgmma": "CUDA sm_90a",
    "setmaxnreg": "CUDA sm_90a",
    "tma": "CUDA sm_90 or newer",
    "cluster": "CUDA sm_90 or newer",
    "cp_async": "CUDA sm_80 or newer",
}


# Published dense fp16/bf16 tensor TFLOP/s (no sparsity), memory bandwidth in GB/s and the
# document they come from, per architecture and, within one, per part: a key is matched
# as a lowercase substring of the device's name, and only under the device's own
# architecture (the H100 and H200 share sm_90a, not their bandwidth). A device the table
# lacks has no published roof: the measured ceilings (hardware.measure_ceilings) are its only one.
PEAKS_BY_ARCH: dict[str, dict[str, tuple[float, float, str]]] = {
    "sm_90a": {
        "h200": (989.0, 4800.0, "NVIDIA H200 datasheet (SXM)"),
        "h100": (989.0, 3350.0, "NVIDIA H100 datasheet (SXM)"),
    },
    "sm_80": {"a100": (312.0, 2039.0, "NVIDIA A100 datasheet (80GB SXM)")},
    "sm_89": {"l40s": (362.0, 864.0, "NVIDIA L40S datasheet")},
    "gfx942": {"mi300x": (1307.0, 5300.0, "AMD Instinct MI300X datasheet")},
    "maca": {"c500": (280.0, 1800.0, "MetaX C500 product brief")},
}
# The same numbers by part, for what knows a part and not its architecture (targets.py).
PEAKS: dict[str, tuple[float, float, str]] = {k: v for parts in PEAKS_BY_ARCH.values() for k, v in parts.items()}


def published_peaks(name: str, arch: str) -> tuple[float, float, str] | None:
    """(TFLOP/s, GB/s, source) the vendor publishes for this part of this architecture, or None."""
    low = name.lower()
    return next((v for k, v in PEAKS_BY_ARCH.get(arch, {}).items() if k in low), None)


@dataclass(frozen=True)
class Target:
    """A TileLang target: its kind and, where it has one, its architecture."""

    kind: str  # "cuda" | "hip" | "maca" | "c" | "llvm"
    arch: str = ""  # "sm_90a" | "gfx942" | "" (the kind's default, or none)
    # CUDA only: the machine code built from `arch`'s PTX, where it is not `arch` alone.
    # TileLang writes a cubin for `arch` and nothing else, and a cubin runs only on its own
    # major version: sm_80 code on a Hopper card is `("sm_80", "sm_90")`, the same
    # Ampere program (mma.sync, cp.async) with Hopper machine code beside its own.
    code: tuple[str, ...] = ()

    @property
    def build(self) -> str:
        """What the families' `build(shape, dtype, config, target)` and `tilelang.compile` take."""
        if self.kind == "cuda" and self.arch and self.code:
            return f"cuda -arch={self.arch} -code={','.join(self.code)}"
        if self.kind == "cuda" and self.arch:
            return f"cuda -arch={self.arch}"
        if self.kind == "hip" and self.arch:
            return f"hip -mcpu={self.arch}"
        return self.kind

    @property
    def flag(self) -> str:
        """As --target spells it: "cuda:sm_80", "hip:gfx942", "c"."""
        return f"{self.kind}:{self.arch}" if self.arch else self.kind

    def tilelang(self) -> dict[str, str]:
        """The dict tvm.target.Target takes (TargetSpec.tilelang_target's form)."""
        if self.kind == "cuda" and self.arch:
            return {"kind": "cuda", "arch": self.arch, **({"code": list(self.code)} if self.code else {})}
        if self.kind == "hip" and self.arch:
            return {"kind": "hip", "mcpu": self.arch}
        return {"kind": self.kind}

    @property
    def is_cpu(self) -> bool:
        return self.kind in ("c", "llvm")

    def features(self) -> frozenset[str] | None:
        """The hardware features programs built for this target may use; None where the
        target names no architecture and its kind has several (plain "cuda": the device's
        own, whatever it is)."""
        if self.kind != "cuda":
            return frozenset()
        m = _SM.fullmatch(self.arch)
        if m is None:
            return None
        sm, variant = int(m.group(1)), m.group(2)
        have = set()
        if sm >= 80:
            have.add("cp_async")
        if sm >= 90:
            have |= {"tma", "cluster"}
        if variant == "a" and sm >= 90:
            have.add("setmaxnreg")
            if sm == 90:
                have.add("wgmma")
        return frozenset(have)


# AMD's CDNA parts (gfx90a, gfx942: the gfx9 targets with matrix cores) issue MFMA from
# 64-thread wavefronts on 32x32 (or 16x16) blocks of the output.
WAVEFRONT = 64
MFMA_BLOCK = 32


def is_cdna(where: Any) -> bool:
    """Whether `where` (a target string, a Target or a Hardware record) builds for a gfx9
    part with MFMA matrix cores, whose search spaces are sized for MFMA blocks and LDS."""
    t = _target_of(where)
    return t.kind == "hip" and t.arch.startswith("gfx9")


def cuda_arch(major: int, minor: int) -> str:
    """A CUDA device's own arch as TileLang builds for it (contrib.nvcc.get_target_arch):
    sm_80, sm_89, and the arch-specific sm_90a, sm_100a... from 9.0 on, where wgmma,
    setmaxnreg and tcgen05 live."""
    return f"sm_{major}{minor}" + ("a" if major >= 9 else "")


def gfx_arch(gcn_arch_name: str) -> str:
    """ "gfx942:sramecc+:xnack-" -> "gfx942": the ISA, without the feature flags ROCm appends."""
    return str(gcn_arch_name or "").split(":")[0].strip()


def parse_flag(text: str | None) -> Target | None:
    """--target as typed -> a Target (None: not given, the device's own), or ConfigError
    naming the forms allowed."""
    if text is None:
        return None
    raw = str(text).strip().lower()
    kind, _, arch = raw.partition(":")
    if kind in ("c", "maca") and not arch:
        return Target(kind)
    if kind == "cuda" and _SM.fullmatch(arch):
        return Target("cuda", arch)
    if kind == "hip" and _GFX.fullmatch(arch):
        return Target("hip", arch)
    raise ConfigError(f"--target '{text}' is not a target; use {FORMS}")


def parse(target: Any) -> Target:
    """A target as the families take it ("cuda -arch=sm_80", "hip -mcpu=gfx942", "c", a
    JSON or dict form, or a Target) -> Target."""
    if isinstance(target, Target):
        return target
    if isinstance(target, dict):
        spec = target
    else:
        text = str(target or "c").strip()
        if text.startswith("{"):
            spec = json.loads(text)
        else:
            parts = text.split()
            spec = {"kind": parts[0] if parts else "c"}
            for opt in parts[1:]:
                key, _, value = opt.lstrip("-").partition("=")
                spec[key] = value
    kind = str(spec.get("kind", "c"))
    code = spec.get("code") or ()
    code = tuple(code.split(",") if isinstance(code, str) else code)
    return Target(kind, str(spec.get("arch") or spec.get("mcpu") or ""), code if kind == "cuda" else ())


def of_hardware(hardware: Any) -> Target:
    """The target a `results.Hardware` record builds for. A record that names the kind
    only ("cuda": written without an arch) takes the arch from its compute capability."""
    t = parse(getattr(hardware, "target", "") or "c")
    if t.kind == "cuda" and not t.arch:
        m = re.fullmatch(r"(\d+)\.(\d+)", str(getattr(hardware, "compute_capability", "") or ""))
        if m:
            return Target("cuda", cuda_arch(int(m.group(1)), int(m.group(2))))
    return t


def unsupported(what: str, needs: Iterable[str], where: Any) -> str | None:
    """Why a program that uses `needs` (FEATURE_WORDS' keys) cannot run on `where` (a
    target string, a Target or a Hardware record), in one sentence; None when it can, or
    when the target names no architecture to judge by (plain "cuda")."""
    needs = [n for n in needs]
    if not needs:
        return None
    t = _target_of(where)
    have = t.features()
    if have is None:
        return None
    missing = [n for n in needs if n not in have]
    if not missing:
        return None
    need = max((_NEEDS[n] for n in missing), key=lambda s: ("sm_90a" in s, "sm_90" in s))
    used = ", ".join(FEATURE_WORDS[n] for n in needs)
    return f"{what} ({used}) needs {need}; the target is {t.flag}"


def offers(where: Any, needs: Iterable[str]) -> bool:
    """Whether `where` is known to have every feature in `needs`: what a search space asks
    before offering a config that uses them (a target of unknown arch gets none)."""
    have = _target_of(where).features()
    return have is not None and all(n in have for n in needs)


def _target_of(where: Any) -> Target:
    """A Target from a Target, a Hardware record or a target string."""
    return where if isinstance(where, Target) else of_hardware(where) if hasattr(where, "target") else parse(where)
