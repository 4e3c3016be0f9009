"""Device identity, the TileLang target built for it, published peaks and measured ceilings.

In: a device request ("auto", "cpu", "cuda") and optionally `--target` ("cuda:sm_80",
"hip:gfx942", "maca", "c"). Out: a `Hardware` record (name, limits that decide which
kernel configs can launch, driver and runtime versions, the platform slug used in baseline
paths, the vendor's published peaks for the device's architecture when the table has
them) and the TileLang target the kernels are built for, with its architecture: from
what PyTorch reports, CUDA with the device's compute capability (sm_80, sm_89, sm_90a),
HIP with its `gcnArchName` (gfx90a, gfx942) on a ROCm build, MetaX's MACA where the
installed TileLang has that kind, TileLang's C backend on the CPU; `--target` overrides
it within what the device can run. `measure_ceilings` adds the ceilings the roofline
uses, measured on this device in this dtype (a large matmul through PyTorch and a large
device-to-device copy; cached per device, driver, torch and dtype), because published
peaks are leads, not limits, and a device the table lacks has none.
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import re
import subprocess
from pathlib import Path
from typing import Any

import torch

from ..errors import ConfigError, DeviceError
from ..results import Hardware
from . import arch as A

# The published peaks per architecture live in arch.PEAKS_BY_ARCH; PEAKS is the same
# numbers by part.
PEAKS = A.PEAKS
published_peaks = A.published_peaks


def resolve_device(request: str) -> str:
    if request not in ("auto", "cpu", "cuda"):
        raise DeviceError(f"unknown device '{request}'; use auto, cpu or cuda")
    if request == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if request == "cuda" and not torch.cuda.is_available():
        raise DeviceError("--device cuda was asked for but torch sees no CUDA device; use --device cpu or auto")
    return request


# Vendor target kinds that reach PyTorch as CUDA devices (MetaX's PyTorch for MACA), by a
# word of the device's name; each is TileLang's only where the installed build has the kind.
VENDOR_KINDS: dict[str, str] = {"metax": "maca"}


def device_target(props: Any) -> A.Target:
    """The target a GPU's own kernels are built for, from torch's properties of it: HIP
    with its gfx arch on a ROCm build, a vendor kind by the device's name, else CUDA with
    its compute capability. A vendor device whose kind the installed TileLang lacks is a
    DeviceError naming the build that has it."""
    if getattr(torch.version, "hip", None):
        return A.Target("hip", A.gfx_arch(getattr(props, "gcnArchName", "")))
    low = str(getattr(props, "name", "")).lower()
    for word, kind in VENDOR_KINDS.items():
        if word in low:
            from . import targets

            gap = targets.kind_gap(kind)
            if gap:
                raise DeviceError(f"{props.name}: {gap}")
            return A.Target(kind)
    return A.Target("cuda", A.cuda_arch(int(props.major), int(props.minor)))


def own_target(device: str) -> A.Target:
    """The target this machine's `device` ("cpu" or "cuda", resolved) builds for by default."""
    if device != "cuda":
        return A.Target("c")
    return device_target(torch.cuda.get_device_properties(torch.cuda.current_device()))


def choose_target(device: str, flag: str | None) -> A.Target:
    """The target a run builds for: `--target` (checked: one the device can run) or, not
    given, the device's own. A target the device cannot run is a ConfigError, one line."""
    want, own = A.parse_flag(flag), own_target(device)
    if want is None or want == own:
        return own
    where = "this run is on the CPU" if own.is_cpu else f"this device builds for {own.flag}"
    if want.is_cpu or own.is_cpu:
        fix = "--device cpu" if want.is_cpu else "--device cuda on a GPU, or --target c"
        raise ConfigError(f"--target {want.flag} cannot run here: {where}; use {fix}")
    if want.kind != own.kind:
        raise ConfigError(f"--target {want.flag} cannot run here: {where}; a {own.kind} target is {A.FORMS}")
    if want.kind == "cuda":
        w, o = re.fullmatch(r"sm_(\d+)([af]?)", want.arch), re.fullmatch(r"sm_(\d+)([af]?)", own.arch)
        # Code for an older arch runs on a newer one once its PTX is compiled for the
        # device too; arch-specific code (sm_90a: wgmma, setmaxnreg) only on its own.
        if w and o and (int(w.group(1)) > int(o.group(1)) or (w.group(2) and want.arch != own.arch)):
            raise ConfigError(
                f"--target {want.flag} cannot run here: {where}; use an arch up to {own.arch} "
                f"(cuda:sm_80, or {own.flag} itself)"
            )
        if w and o and int(w.group(1)) // 10 < int(o.group(1)) // 10:
            # A cubin loads only on its own major version (an sm_80 cubin on an H200 is
            # CUDA_ERROR_NO_BINARY_FOR_GPU): build the device's machine code from the
            # target's PTX beside the target's own.
            return A.Target("cuda", want.arch, (want.arch, f"sm_{o.group(1)}"))
        return want
    # A gfx code object runs only on its own ISA; a vendor kind has one arch here.
    raise ConfigError(f"--target {want.flag} cannot run here: {where}; use --target {own.flag} or leave it out")


def tilelang_target(device: str, flag: str | None = None) -> str:
    """The target string the kernel families build for on `device` (see choose_target)."""
    return choose_target(device, flag).build


def _slug(name: str) -> str:
    low = name.lower()
    for key in PEAKS:
        if key in low:
            return key
    return re.sub(r"[^a-z0-9]+", "-", low).strip("-")[:40] or "unknown"


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _mem_gb() -> float:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal"):
                    return round(int(line.split()[1]) / 1024**2, 1)
    except OSError:
        pass
    return 0.0


def _nvidia_driver() -> str:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
        )
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else ""
    except (OSError, subprocess.SubprocessError):
        return ""


def _amd_driver() -> str:
    """The amdgpu kernel driver's version where the DKMS module publishes it."""
    try:
        return Path("/sys/module/amdgpu/version").read_text().strip()
    except OSError:
        return ""


def _platform(name: str, chosen: A.Target, own: A.Target) -> str:
    """The baseline path's platform: the device's slug, with the target's arch where
    --target chose another than the device's own ("h200-sm_80"), so kernels built for an
    older arch never share a history with the device's own."""
    base = _slug(name)
    return base if chosen == own else f"{base}-{chosen.arch or chosen.kind}"


def _smem_per_block(props: Any, arch: str) -> int:
    """Bytes a block may allocate: torch's opt-in maximum where it reports one, else its
    static per-block figure, else the published limit of a part with this arch (targets.py)."""
    got = int(getattr(props, "shared_memory_per_block_optin", 0) or getattr(props, "shared_memory_per_block", 0) or 0)
    if got:
        return got
    from . import targets

    return next((s.smem_per_block for s in targets.TARGETS.values() if s.arch == arch), 0)


def detect(device: str, target: str | None = None) -> Hardware:
    """Describe the device (already resolved to "cpu" or "cuda") and the target its
    kernels are built for (`target`: --target as typed; None: the device's own)."""
    chosen = choose_target(device, target)
    if device == "cuda":
        idx = torch.cuda.current_device()
        p = torch.cuda.get_device_properties(idx)
        own = device_target(p)
        # The roof is the device's own, whatever arch its kernels are built for.
        peak = published_peaks(p.name, own.arch or own.kind)
        hip = own.kind == "hip"
        return Hardware(
            target=chosen.build,
            arch=chosen.arch,
            device="cuda",
            name=p.name,
            platform=_platform(p.name, chosen, own),
            cores=p.multi_processor_count,
            memory_gb=round(p.total_memory / 1024**3, 1),
            smem_per_block=_smem_per_block(p, own.arch),
            smem_per_sm=int(getattr(p, "shared_memory_per_multiprocessor", 0) or 0),
            regs_per_block=int(getattr(p, "regs_per_block", 65536) or 65536),
            regs_per_sm=int(getattr(p, "regs_per_multiprocessor", 65536) or 65536),
            # A CUDA device's major.minor; elsewhere the arch (ROCm reports gfx942 as 9.4,
            # which would read as Hopper).
            compute_capability=f"{p.major}.{p.minor}" if own.kind == "cuda" else own.arch or own.kind,
            driver=_amd_driver() if hip else _nvidia_driver(),
            cuda=f"HIP {torch.version.hip}" if hip else torch.version.cuda or "",
            peak_tflops=peak[0] if peak else None,
            peak_gbps=peak[1] if peak else None,
            peak_source=peak[2] if peak else "",
        )
    name = _cpu_name()
    return Hardware(
        target=chosen.build,
        device="cpu",
        name=name,
        platform=f"cpu-{platform.machine().lower()}",
        cores=os.cpu_count() or 1,
        memory_gb=_mem_gb(),
    )


# TileLang's C backend runs a kernel on one thread, so on a CPU both sides of every
# comparison run on one: the same work per side, and PyTorch's intra-op threads no longer
# wait on a sibling thread that a busy machine has descheduled (a 0.03 ms linear then read
# 4-7 ms). On CUDA the host's threads only launch work and are left as they are.
CPU_THREADS = 1


def pin_threads(device: str) -> int | None:
    """Set PyTorch's intra-op threads for timing on this device: CPU_THREADS on a CPU, the
    same count TileLang's side runs on; None (unchanged) on a GPU. Returns the count set."""
    if device != "cpu":
        return None
    torch.set_num_threads(CPU_THREADS)
    return CPU_THREADS


CEILINGS_CACHE = Path.home() / ".cache" / "evaluator" / "ceilings.json"


def _median_s(fn, device: str, reps: int) -> float:
    """Seconds per call: the median on a GPU; the fastest on a CPU, whose other jobs can only
    slow a call down, and a ceiling is what the machine reaches when nothing does."""
    import statistics
    import time

    fn()
    ts = []
    for _ in range(reps):
        if device == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        if device == "cuda":
            torch.cuda.synchronize()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts) if device == "cuda" else min(ts)


def measure_ceilings(hw: Hardware, dtype: str = "float16", *, cache: Path | None = CEILINGS_CACHE) -> Hardware:
    """The attainable roof as PyTorch reaches it on this device: copy GB/s and matmul TFLOP/s.

    Measured once per (device, driver, torch, dtype) and cached, because a 1 GiB copy and
    an 8192^3 matmul take a few seconds and do not change between runs on one box.
    """
    key = "|".join((hw.name, hw.driver, torch.__version__, dtype))
    if hw.device != "cuda":
        cache = None  # half a second to measure, and a shared CPU's one bad moment must not stick
    if cache is not None and cache.is_file():
        try:
            entry = json.loads(cache.read_text()).get(key)
            if entry:
                return dataclasses.replace(hw, **entry)
        except (OSError, ValueError):
            pass
    gpu = hw.device == "cuda"
    tdt = {"float16": torch.float16, "bfloat16": torch.bfloat16}.get(dtype, torch.float32)
    nbytes = (1 << 30) if gpu else (1 << 27)
    src = torch.empty(nbytes // 4, dtype=torch.float32, device=hw.device).fill_(1.0)
    dst = torch.empty_like(src)
    gbps = 2 * nbytes / _median_s(lambda: dst.copy_(src), hw.device, 10) / 1e9
    # A CPU's fastest matmul is one whose operands stay in its caches (512^2 ran 1.6x
    # faster per FLOP than 1024^2 on one core here): the best of three sizes is its roof.
    tflops = 0.0
    for n in (8192,) if gpu else (256, 512, 1024):
        a = torch.randn(n, n, device=hw.device).to(tdt if gpu else torch.float32)
        b = torch.randn(n, n, device=hw.device).to(a.dtype)
        tflops = max(tflops, 2 * n**3 / _median_s(lambda: a @ b, hw.device, 10 if gpu else 5) / 1e12)
    entry = {
        "measured_tflops": round(tflops, 3),
        "measured_gbps": round(gbps, 1),
        "ceilings_note": f"torch {torch.__version__}: copy of {nbytes >> 20} MiB, "
        f"{'8192^3 matmul' if gpu else 'best of 256^3, 512^3 and 1024^3 matmuls'} in "
        f"{a.dtype}".replace("torch.", ""),
    }
    if cache is not None:
        try:
            cache.parent.mkdir(parents=True, exist_ok=True)
            data = json.loads(cache.read_text()) if cache.is_file() else {}
            data[key] = entry
            cache.write_text(json.dumps(data, indent=1))
        except (OSError, ValueError):
            pass  # a read-only home only costs a re-measurement next time
    return dataclasses.replace(hw, **entry)
