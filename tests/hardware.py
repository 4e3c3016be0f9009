"""The hardware the kernel tests plan for without the device: a 2-core CPU (TileLang's C
backend), and the H100 and H200 as their Hopper limits describe them (132 SMs, 227 KB of
shared memory a block, sm_90). Search spaces, limits and lowering depend on these fields
only, so one constant each serves every test."""

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
H100 = Hardware(
    target="cuda",
    device="cuda",
    name="NVIDIA H100 80GB HBM3",
    platform="h100",
    cores=132,
    smem_per_block=232448,
    compute_capability="9.0",
)
