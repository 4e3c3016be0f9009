"""The accelerators a rewritten kernel can be checked against before the hardware arrives.

In: target keys ("a100", "h100", "h200", "b200", "v100", "t4", "mi250x", "mi300x", "c500",
or "local" for this machine's GPU). Out: frozen `TargetSpec` records: the TileLang target
dict to lower for, the published limits that decide whether a kernel config can launch
there (shared memory / LDS per block and per SM/CU, registers, threads per block,
warp/wavefront width, SM/CU count), the matrix-core features (generation, the instruction
`T.gemm` should become, wgmma, TMA, async copy, fp16/bf16 support) and `source`, the
public document each number comes from. `TargetSpec.hardware()` turns a spec into the
`results.Hardware` record the kernel families' `search_space` and `reject_reason` take,
so a family can be asked "what would you run there?" without the device.
Nothing here touches a device except `local_spec()`, which reads torch's properties.
A limit of 0 means "not published in the sources named": the families treat 0 as no limit.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from dataclasses import dataclass, field
from typing import Iterable

from ..errors import ConfigError
from ..results import Hardware
from . import arch as A

# The published peaks live in arch.PEAKS_BY_ARCH (one table for the whole project).
from .arch import PEAKS

KB = 1024


@dataclass(frozen=True)
class TargetSpec:
    """One accelerator as far as TileLang lowering and launch limits are concerned."""

    key: str  # "mi300x"
    name: str  # "AMD Instinct MI300X"
    vendor: str  # "nvidia" | "amd" | "metax" | the local device's vendor
    kind: str  # what the families' `program(..., target)` is told: "cuda" | "hip" | "maca"
    arch: str  # "sm_90a", "gfx942"
    # The dict `tvm.target.Target` takes; TileLang 0.1.15 no longer parses "cuda -arch=..." strings.
    tilelang_target: dict[str, str] = field(hash=False)
    smem_per_block: int = 0  # bytes a block may allocate (NVIDIA: the opt-in maximum)
    smem_per_sm: int = 0  # bytes of shared memory (LDS) per SM (CU)
    regs_per_sm: int = 0  # 32-bit registers per SM (CU)
    regs_per_block: int = 0  # 32-bit registers one block may use
    max_threads_per_block: int = 1024
    warp_size: int = 32  # warp (NVIDIA) or wavefront (AMD) width
    sm_count: int = 0  # SMs (NVIDIA) or CUs (AMD) of one device as the runtime sees it
    matrix_cores: str = ""  # "4th-gen tensor cores", "CDNA3 matrix cores"
    # What `T.gemm` should lower to for full speed there: "wgmma", "mma.sync", "tcgen05", "mfma".
    matrix_instruction: str = ""
    wgmma: bool = False
    tma: bool = False
    async_copy: bool = False  # cp.async (global -> shared without registers)
    fp16: bool = True  # matrix cores take fp16 operands
    bf16: bool = True  # matrix cores take bf16 operands
    source: str = ""  # the public documents the numbers come from
    notes: str = ""
    # The TileLang build that serves `kind`, named when it is not installed (`backend_gap`
    # decides that at check time, not here: a fork may be installed on the box later).
    backend: str = ""

    @property
    def short(self) -> str:
        """The name without the vendor, for sentences: "MI300X", "H100"."""
        return self.name.split(" ", 1)[1].replace("Instinct ", "") if " " in self.name else self.name

    @property
    def smem_word(self) -> str:
        return "LDS" if self.vendor == "amd" else "shared memory"

    @property
    def block_word(self) -> str:
        return "workgroup" if self.vendor == "amd" else "block"

    def target_json(self) -> str:
        """The target as the JSON string `kernels._common.normalize_target` accepts."""
        return json.dumps(self.tilelang_target, sort_keys=True)

    @property
    def target(self) -> A.Target:
        return A.parse(self.tilelang_target)

    def hardware(self) -> Hardware:
        """This target as the Hardware record families size their configs against: its
        target string names the arch, as a device's own does (hardware.detect)."""
        peak = PEAKS.get(self.key)
        return Hardware(
            target=self.target.build,
            arch=self.arch if self.kind != "maca" else "",
            device="cuda",
            name=self.name,
            platform=self.key,
            cores=self.sm_count,
            smem_per_block=self.smem_per_block,
            smem_per_sm=self.smem_per_sm,
            regs_per_block=self.regs_per_block,
            regs_per_sm=self.regs_per_sm,
            compute_capability=_capability(self.arch),
            peak_tflops=peak[0] if peak else None,
            peak_gbps=peak[1] if peak else None,
            peak_source=peak[2] if peak else "",
        )

    def describe(self) -> str:
        """One line of limits for reports: what a config must fit."""

        def kb(n: int) -> str:
            return f"{n // KB} KB" if n else "unpublished"

        if not (self.smem_per_block or self.sm_count):
            return f"{self.name} ({self.arch}): launch limits not in the public sources; {self.matrix_cores}"
        return (
            f"{self.name} ({self.arch}): {kb(self.smem_per_block)} {self.smem_word} per {self.block_word}, "
            f"{kb(self.smem_per_sm)} per {'CU' if self.vendor == 'amd' else 'SM'}, "
            f"{self.max_threads_per_block or 'unpublished'} threads per block, "
            f"{'wavefront' if self.vendor == 'amd' else 'warp'} {self.warp_size or 'unpublished'}, "
            f"{self.sm_count or 'unpublished'} {'CUs' if self.vendor == 'amd' else 'SMs'}; "
            f"{self.matrix_cores or 'matrix cores unpublished'}"
        )


def _capability(arch: str) -> str:
    if arch.startswith("sm_"):
        digits = "".join(ch for ch in arch[3:] if ch.isdigit())
        return f"{digits[:-1]}.{digits[-1]}" if len(digits) >= 2 else arch
    return arch


_CUDA_GUIDE = "NVIDIA CUDA C++ Programming Guide, 'Technical Specifications per Compute Capability'"
_CDNA_LDS = "ROCm HIP documentation (hardware implementation: 64 KB of LDS per CU, 1024 work-items per workgroup)"

_H100 = TargetSpec(
    key="h100",
    name="NVIDIA H100",
    vendor="nvidia",
    kind="cuda",
    arch="sm_90a",
    tilelang_target={"kind": "cuda", "arch": "sm_90a"},
    smem_per_block=227 * KB,
    smem_per_sm=228 * KB,
    regs_per_sm=65536,
    regs_per_block=65536,
    max_threads_per_block=1024,
    warp_size=32,
    sm_count=132,
    matrix_cores="4th-gen tensor cores",
    matrix_instruction="wgmma",
    wgmma=True,
    tma=True,
    async_copy=True,
    fp16=True,
    bf16=True,
    source=f"{_CUDA_GUIDE} (compute capability 9.0); NVIDIA Hopper Tuning Guide (228 KB shared memory per "
    "SM, 227 KB per block); NVIDIA H100 Tensor Core GPU datasheet (SXM5: 132 SMs)",
)


# The table. Per-block shared memory on NVIDIA is the opt-in maximum (cudaFuncSetAttribute
# ...MaxDynamicSharedMemorySize), which TileLang's generated launchers request; the
# 48 KB static default would reject every tuned GEMM config.
TARGETS: dict[str, TargetSpec] = {
    s.key: s
    for s in (
        TargetSpec(
            key="a100",
            name="NVIDIA A100",
            vendor="nvidia",
            kind="cuda",
            arch="sm_80",
            tilelang_target={"kind": "cuda", "arch": "sm_80"},
            smem_per_block=163 * KB,
            smem_per_sm=164 * KB,
            regs_per_sm=65536,
            regs_per_block=65536,
            max_threads_per_block=1024,
            warp_size=32,
            sm_count=108,
            matrix_cores="3rd-gen tensor cores",
            matrix_instruction="mma.sync",
            wgmma=False,
            tma=False,
            async_copy=True,
            fp16=True,
            bf16=True,
            source=f"{_CUDA_GUIDE} (compute capability 8.0: 164 KB shared memory per SM, 163 KB per block opt-in, "
            "64K registers); NVIDIA A100 Tensor Core GPU Architecture whitepaper (108 SMs)",
        ),
        _H100,
        # The H200 is the H100's Hopper die with more and faster memory: the limits a
        # program is sized against are the same.
        dataclasses.replace(
            _H100,
            key="h200",
            name="NVIDIA H200",
            source=f"{_CUDA_GUIDE} (compute capability 9.0); NVIDIA Hopper Tuning Guide; 132 SMs and 232448 B "
            "per block as torch reported them on the H200 of reports/examples/h200",
        ),
        TargetSpec(
            key="b200",
            name="NVIDIA B200",
            vendor="nvidia",
            kind="cuda",
            arch="sm_100a",
            tilelang_target={"kind": "cuda", "arch": "sm_100a"},
            smem_per_block=227 * KB,
            smem_per_sm=228 * KB,
            regs_per_sm=65536,
            regs_per_block=65536,
            max_threads_per_block=1024,
            warp_size=32,
            sm_count=148,
            matrix_cores="5th-gen tensor cores (tcgen05, tensor memory)",
            matrix_instruction="tcgen05",
            wgmma=False,
            tma=True,
            async_copy=True,
            fp16=True,
            bf16=True,
            source=f"{_CUDA_GUIDE} (compute capability 10.0: 228 KB per SM, 227 KB per block); NVIDIA Blackwell "
            "Tuning Guide (wgmma is sm_90a-only; Blackwell's MMA is tcgen05)",
            notes="148 SMs is the count the CUDA runtime commonly reports for B200; the datasheet gives none",
        ),
        TargetSpec(
            key="v100",
            name="NVIDIA V100",
            vendor="nvidia",
            kind="cuda",
            arch="sm_70",
            tilelang_target={"kind": "cuda", "arch": "sm_70"},
            smem_per_block=96 * KB,
            smem_per_sm=96 * KB,
            regs_per_sm=65536,
            regs_per_block=65536,
            max_threads_per_block=1024,
            warp_size=32,
            sm_count=80,
            matrix_cores="1st-gen tensor cores (fp16)",
            matrix_instruction="mma.sync",
            wgmma=False,
            tma=False,
            async_copy=False,
            fp16=True,
            bf16=False,
            source=f"{_CUDA_GUIDE} (compute capability 7.0: 96 KB per SM and per block opt-in); NVIDIA Tesla V100 "
            "GPU Architecture whitepaper (80 SMs; tensor cores take fp16)",
        ),
        TargetSpec(
            key="t4",
            name="NVIDIA T4",
            vendor="nvidia",
            kind="cuda",
            arch="sm_75",
            tilelang_target={"kind": "cuda", "arch": "sm_75"},
            smem_per_block=64 * KB,
            smem_per_sm=64 * KB,
            regs_per_sm=65536,
            regs_per_block=65536,
            max_threads_per_block=1024,
            warp_size=32,
            sm_count=40,
            matrix_cores="2nd-gen tensor cores (fp16, int8, int4)",
            matrix_instruction="mma.sync",
            wgmma=False,
            tma=False,
            async_copy=False,
            fp16=True,
            bf16=False,
            source=f"{_CUDA_GUIDE} (compute capability 7.5: 64 KB per SM and per block); NVIDIA Turing GPU "
            "Architecture whitepaper and T4 datasheet (40 SMs; tensor cores take fp16, int8, int4)",
        ),
        TargetSpec(
            key="mi250x",
            name="AMD Instinct MI250X",
            vendor="amd",
            kind="hip",
            arch="gfx90a",
            tilelang_target={"kind": "hip", "mcpu": "gfx90a"},
            smem_per_block=64 * KB,
            smem_per_sm=64 * KB,
            regs_per_sm=131072,
            regs_per_block=131072,
            max_threads_per_block=1024,
            warp_size=64,
            sm_count=110,
            matrix_cores="CDNA2 matrix cores",
            matrix_instruction="mfma",
            wgmma=False,
            tma=False,
            async_copy=False,
            fp16=True,
            bf16=True,
            source=f"AMD Instinct MI200 (CDNA2) ISA Reference Guide and CDNA2 whitepaper (220 CUs in two GCDs, "
            f"512 KB of VGPRs per CU, wave64); {_CDNA_LDS}",
            notes="each of the two GCDs is a separate device (110 CUs) to HIP and PyTorch",
        ),
        TargetSpec(
            key="mi300x",
            name="AMD Instinct MI300X",
            vendor="amd",
            kind="hip",
            arch="gfx942",
            tilelang_target={"kind": "hip", "mcpu": "gfx942"},
            smem_per_block=64 * KB,
            smem_per_sm=64 * KB,
            regs_per_sm=131072,
            regs_per_block=131072,
            max_threads_per_block=1024,
            warp_size=64,
            sm_count=304,
            matrix_cores="CDNA3 matrix cores",
            matrix_instruction="mfma",
            wgmma=False,
            tma=False,
            async_copy=False,
            fp16=True,
            bf16=True,
            source=f"AMD Instinct MI300 (CDNA3) ISA Reference Guide and CDNA3 whitepaper (304 CUs, 512 KB of "
            f"VGPRs per CU, wave64); {_CDNA_LDS}",
        ),
        TargetSpec(
            key="c500",
            name="MetaX C500",
            vendor="metax",
            kind="maca",
            arch="maca",
            tilelang_target={"kind": "maca"},
            # Per-block limits are not in MetaX's public product brief; MetaX's MACA
            # programming guide has them. 0 = unknown, never guessed.
            smem_per_block=0,
            smem_per_sm=0,
            regs_per_sm=0,
            regs_per_block=0,
            max_threads_per_block=0,
            warp_size=0,
            sm_count=0,
            matrix_cores="MetaX matrix units (fp16/bf16, 280 TFLOP/s dense)",
            matrix_instruction="",
            wgmma=False,
            tma=False,
            async_copy=False,
            fp16=True,
            bf16=True,
            source="MetaX C500 product brief (64 GB HBM2e, 1.8 TB/s, 280 TFLOP/s fp16/bf16); shared memory, "
            "register, warp and CU limits are in MetaX's MACA programming guide, not the public brief "
            "(recorded as unknown)",
            backend="MetaX's TileLang fork for MACA",
        ),
    )
}

# What `evaluate` checks when no --targets is given: the current NVIDIA generations, the
# AMD part a team would most likely evaluate, and the MetaX part the PEAKS table knows,
# plus this machine's GPU when it has one.
DEFAULT_TARGETS: tuple[str, ...] = ("a100", "h100", "mi300x", "c500")


@functools.lru_cache(maxsize=1)
def available_kinds() -> tuple[str, ...]:
    """TVM target kinds the installed TileLang can create (cuda, hip, ...); asked once per
    process, as the installed TileLang does not change under a running check."""
    try:
        import tilelang  # noqa: F401  (puts its bundled tvm on the path)
        from tvm.target import Target

        return tuple(str(k) for k in Target.list_kinds())
    except Exception:  # no usable TileLang: every target has a backend gap
        return ()


def kind_gap(kind: str, backend: str = "") -> str:
    """Why the installed TileLang cannot lower anything for target kind `kind` ("" when
    it can); `backend` names the build that provides the kind (default: the table's)."""
    if kind in available_kinds():
        return ""
    version = _tilelang_version()
    backend = backend or next((s.backend for s in TARGETS.values() if s.kind == kind and s.backend), "")
    what = backend or f"a TileLang build with the '{kind}' target"
    return (
        f"no TileLang backend installed for {kind.upper()}: TileLang {version} here has no "
        f"'{kind}' target kind ({what} provides it)"
    )


def backend_gap(spec: TargetSpec) -> str:
    """Why the installed TileLang cannot lower anything for `spec` ("" when it can)."""
    return kind_gap(spec.kind, spec.backend)


def _tilelang_version() -> str:
    try:
        import tilelang

        return str(getattr(tilelang, "__version__", "?"))
    except Exception:
        return "(unusable)"


def local_spec() -> TargetSpec | None:
    """This machine's GPU as a target (limits read from torch), or None without one."""
    try:
        import torch
    except Exception:
        return None
    if not torch.cuda.is_available():
        return None
    p = torch.cuda.get_device_properties(torch.cuda.current_device())
    hip = bool(getattr(torch.version, "hip", None))
    if hip:
        arch = A.gfx_arch(getattr(p, "gcnArchName", "")) or "gfx"
        kind, vendor, target = "hip", "amd", {"kind": "hip", "mcpu": arch}
    else:
        # wgmma and tcgen05 exist only in the arch-specific ("a") variants.
        arch = A.cuda_arch(p.major, p.minor)
        kind, vendor, target = "cuda", "nvidia", {"kind": "cuda", "arch": arch}
    smem_block = int(getattr(p, "shared_memory_per_block_optin", 0) or getattr(p, "shared_memory_per_block", 0))
    known = next((s for s in TARGETS.values() if s.arch == arch and s.key in p.name.lower()), None)
    return TargetSpec(
        key="local",
        name=p.name,
        vendor=vendor,
        kind=kind,
        arch=arch,
        tilelang_target=target,
        smem_per_block=smem_block,
        smem_per_sm=int(getattr(p, "shared_memory_per_multiprocessor", 0) or 0),
        regs_per_sm=int(getattr(p, "regs_per_multiprocessor", 0) or 0),
        regs_per_block=int(getattr(p, "regs_per_block", 0) or 0) or int(getattr(p, "regs_per_multiprocessor", 0) or 0),
        max_threads_per_block=int(getattr(p, "max_threads_per_block", 1024) or 1024),
        warp_size=int(getattr(p, "warp_size", 64 if hip else 32) or (64 if hip else 32)),
        sm_count=int(p.multi_processor_count),
        matrix_cores=known.matrix_cores if known else "",
        matrix_instruction=known.matrix_instruction if known else "",
        wgmma="wgmma" in A.Target(kind, arch).features(),
        tma=not hip and p.major >= 9,
        async_copy=not hip and p.major >= 8,
        fp16=True,
        bf16=hip or p.major >= 8,
        source="torch.cuda.get_device_properties on this machine",
    )


def resolve(names: Iterable[str | TargetSpec] | str | None = None) -> list[TargetSpec]:
    """Target specs for keys (a list, or one comma-separated string; "all" = the whole
    table; None = the default set plus this machine's GPU). Unknown keys: ConfigError."""
    if names is None:
        specs = [TARGETS[k] for k in DEFAULT_TARGETS]
        local = local_spec()
        return specs + ([local] if local is not None else [])
    if isinstance(names, str):
        names = [n for n in names.split(",")]
    out: list[TargetSpec] = []
    for n in names:
        if isinstance(n, TargetSpec):
            spec = n
        else:
            key = str(n).strip().lower()
            if not key:
                continue
            if key == "all":
                out += [s for s in TARGETS.values() if s.key not in {o.key for o in out}]
                continue
            if key == "local":
                spec = local_spec()
                if spec is None:
                    raise ConfigError(
                        "target 'local' asks for this machine's GPU, but torch sees none; "
                        f"name one of: {', '.join(TARGETS)}"
                    )
            elif key in TARGETS:
                spec = TARGETS[key]
            else:
                raise ConfigError(f"unknown target '{n}'; known targets: {', '.join(TARGETS)}, local, all")
        if spec.key not in {o.key for o in out}:
            out.append(spec)
    if not out:
        raise ConfigError(f"no targets given; known targets: {', '.join(TARGETS)}, local, all")
    return out


def with_limits(spec: TargetSpec, **changes) -> TargetSpec:
    """A copy with some limits changed (what-if checks: 'a part with 48 KB per block')."""
    return dataclasses.replace(spec, **changes)
