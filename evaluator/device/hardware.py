"""Device identity, published peak numbers and measured ceilings.

In: a device request ("auto", "cpu", "cuda"). Out: a `Hardware` record (name, limits
that decide which kernel configs can launch, driver/CUDA versions, the platform slug
used in baseline paths, the vendor's published peaks when the device is known) and the
TileLang target string for it; `measure_ceilings` adds the ceilings the roofline uses,
measured on this device in this dtype (a large matmul through PyTorch and a large
device-to-device copy; cached per device, driver, torch and dtype), because published
peaks are leads, not limits.
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import re
import subprocess
from pathlib import Path

import torch

from ..errors import DeviceError
from ..results import Hardware

# Published dense fp16/bf16 tensor TFLOP/s (no sparsity) and memory bandwidth in GB/s,
# from each vendor's datasheet. Keys are matched as lowercase substrings of the device name.
PEAKS: dict[str, tuple[float, float, str]] = {
    "h200": (989.0, 4800.0, "NVIDIA H200 datasheet (SXM)"),
    "h100": (989.0, 3350.0, "NVIDIA H100 datasheet (SXM)"),
    "a100": (312.0, 2039.0, "NVIDIA A100 datasheet (80GB SXM)"),
    "l40s": (362.0, 864.0, "NVIDIA L40S datasheet"),
    "mi300x": (1307.0, 5300.0, "AMD Instinct MI300X datasheet"),
    "c500": (280.0, 1800.0, "MetaX C500 product brief"),
}


def resolve_device(request: str) -> str:
    if request not in ("auto", "cpu", "cuda"):
        raise DeviceError(f"unknown device '{request}'; use auto, cpu or cuda")
    if request == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if request == "cuda" and not torch.cuda.is_available():
        raise DeviceError("--device cuda was asked for but torch sees no CUDA device; use --device cpu or auto")
    return request


def tilelang_target(device: str) -> str:
    return "cuda" if device == "cuda" else "c"


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


def detect(device: str) -> Hardware:
    """Describe the device (already resolved to "cpu" or "cuda")."""
    if device == "cuda":
        idx = torch.cuda.current_device()
        p = torch.cuda.get_device_properties(idx)
        peak = next((v for k, v in PEAKS.items() if k in p.name.lower()), None)
        return Hardware(
            target=tilelang_target(device),
            device="cuda",
            name=p.name,
            platform=_slug(p.name),
            cores=p.multi_processor_count,
            memory_gb=round(p.total_memory / 1024**3, 1),
            smem_per_block=int(
                getattr(p, "shared_memory_per_block_optin", 0) or getattr(p, "shared_memory_per_block", 0)
            ),
            smem_per_sm=int(getattr(p, "shared_memory_per_multiprocessor", 0)),
            regs_per_block=int(getattr(p, "regs_per_block", 65536) or 65536),
            regs_per_sm=int(getattr(p, "regs_per_multiprocessor", 65536) or 65536),
            compute_capability=f"{p.major}.{p.minor}",
            driver=_nvidia_driver(),
            cuda=torch.version.cuda or "",
            peak_tflops=peak[0] if peak else None,
            peak_gbps=peak[1] if peak else None,
        )
    name = _cpu_name()
    return Hardware(
        target=tilelang_target(device),
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


def peak_source(hw: Hardware) -> str:
    return next((v[2] for k, v in PEAKS.items() if k in hw.name.lower()), "")
