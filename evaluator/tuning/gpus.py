"""Which GPUs a tune runs on: the `--gpus` option parsed against the GPUs this process
sees, one worker slot per GPU, and how many compile threads the host can feed.

In: the `--gpus` text (or device indices) and the `Hardware`. Out: torch device indices,
`_Slot`s (the isolation slot, the CUDA_VISIBLE_DEVICES entry its worker gets, the label
its candidates carry), or a one-line `ConfigError` saying what was expected.
tuning.py runs the search over these slots.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Sequence

from . import isolation
from ..errors import ConfigError
from ..results import Hardware

COMPILE_THREADS_PER_DEVICE = 16  # nvcc's memory and the H200 box's 16 cores per GPU


def visible_gpus() -> list[str]:
    """The GPUs this process can use, in torch's order (cuda:0 first), each as the entry
    that selects it in a child's CUDA_VISIBLE_DEVICES: the entries of this process's own
    CUDA_VISIBLE_DEVICES when it is set (indices, UUIDs or MIG ids, as given), else
    "0".."n-1". As many as torch.cuda.device_count(), which honours the variable."""
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    env = os.environ.get(isolation.GPU_ENV)
    if env is None:
        return [str(i) for i in range(count)]
    return [p.strip() for p in env.split(",") if p.strip()][:count]


def parse_gpus(spec: str, visible: Sequence[str] | int) -> list[int]:
    """`--gpus all|N|LIST` -> the torch device indices (cuda:i of this process) to tune on;
    the first re-times the final configs. `all`: every visible GPU; `N`: the first N;
    `LIST`: comma-separated indices, e.g. `0,2`, or `1,` for GPU 1 alone (a bare `1` is a
    count). `visible`: visible_gpus(), or how many there are. A bad spec is a one-line
    ConfigError saying what was expected."""
    names = [str(i) for i in range(visible)] if isinstance(visible, int) else [str(v) for v in visible]
    n, text = len(names), str(spec).strip().lower()
    expected = "give all, a count (2), or comma-separated GPU indices (0,1; or 1, for GPU 1 alone)"
    parts = [p.strip() for p in text.split(",")]
    digits = all(p.isascii() and p.isdigit() for p in parts if p)
    if not text or not digits and text != "all" or "," in text and ("" in parts[:-1] or not parts[0]):
        raise ConfigError(f"--gpus '{spec}' is not understood; {expected}")
    if n == 0:
        raise ConfigError(
            f"--gpus {spec}: no GPU is visible to this process (CUDA_VISIBLE_DEVICES="
            f"{os.environ.get(isolation.GPU_ENV, 'unset')}); run on a CUDA machine or leave --gpus out"
        )
    have = f"{n} GPU{'s are' if n != 1 else ' is'} visible ({', '.join(names)})"
    if text == "all":
        return list(range(n))
    if "," not in text:
        count = int(text)
        if not 1 <= count <= n:
            raise ConfigError(
                f"--gpus {spec} asks for {count} GPU{'s' if count != 1 else ''} but {have}; "
                f"give all, a count from 1 to {n}, or indices such as 0,1 (0, is GPU 0 alone)"
            )
        return list(range(count))
    out = [int(p) for p in parts if p]
    bad = [i for i in out if i >= n]
    if bad:
        raise ConfigError(f"--gpus {spec} names GPU {bad[0]} but {have}; give indices from 0 to {n - 1}")
    if len(set(out)) != len(out):
        raise ConfigError(f"--gpus {spec} names a GPU twice; give each index once")
    return out


def compile_workers(n: int, devices: int = 1) -> int:
    """Compile threads for a batch of n. nvcc needs a core and about a GiB each; a host
    comes with cores and memory in proportion to its GPUs (16 cores per H200), so the
    cap grows with the devices tuned on."""
    return max(1, min(n, os.cpu_count() or 1, COMPILE_THREADS_PER_DEVICE * max(1, devices)))


@dataclass(frozen=True)
class Slot:
    """One worker of a tune: the isolation slot, the CUDA_VISIBLE_DEVICES entry its
    worker gets (None: inherit this process's, as a single-device run and a CPU do) and
    the label its candidates are recorded with."""

    index: int
    gpu: str | None
    label: str | None


def gpu_slots(devices: Sequence[int] | None, hw: Hardware) -> list[Slot]:
    if devices is None:
        return [Slot(0, None, None)]  # exactly the single worker of old
    devices = [int(d) for d in devices]
    if not devices:
        raise ConfigError("devices is empty; give at least one device index, or None")
    if len(set(devices)) != len(devices):
        raise ConfigError(f"devices {devices} repeats a device; two workers on one GPU would time each other")
    gpus: list[str | None] = [None] * len(devices)
    if hw.device == "cuda":
        visible = visible_gpus()
        bad = [d for d in devices if not 0 <= d < len(visible)]
        if bad:
            raise ConfigError(f"device cuda:{bad[0]} is not visible ({len(visible)} GPUs are); see parse_gpus")
        gpus = [visible[d] for d in devices]
    if len(devices) == 1:  # one device: the single-worker search, pinned to that GPU
        return [Slot(0, gpus[0], None)]
    return [Slot(i, g, f"{hw.device}:{d}") for i, (d, g) in enumerate(zip(devices, gpus))]
