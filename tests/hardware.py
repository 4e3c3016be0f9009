"""The hardware the kernel tests plan for without the device: a 2-core CPU (TileLang's C
backend), the H100 and H200 as their Hopper limits describe them (132 SMs, 227 KB of
shared memory a block, sm_90), and an A100 (108 SMs, 163 KB, sm_80: no wgmma, TMA or
clusters). Search spaces, limits and lowering depend on these fields only, so one
constant each serves every test."""

import dataclasses

from evaluator.results import Hardware

CPU = Hardware(target="c", device="cpu", name="test cpu", platform="cpu-x86_64", cores=2)
H200 = Hardware(
    target="cuda",
    device="cuda",
    name="NVIDIA H200",
    platform="h200",
    cores=132,
    smem_per_block=232448,
    compute_capability="9.0",
)
H100 = dataclasses.replace(H200, name="NVIDIA H100 80GB HBM3", platform="h100")
A100 = Hardware(
    target="cuda",
    device="cuda",
    name="NVIDIA A100",
    platform="a100",
    cores=108,
    smem_per_block=166912,
    compute_capability="8.0",
)
