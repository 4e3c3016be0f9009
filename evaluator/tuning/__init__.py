"""Tuning and verifying kernels: from a family's search space to a checked config.

`search` (coarse grid, then finer around the best, within a budget), `cache` (tuned
configs keyed by family, shape, dtype, device and toolchain), `isolation` (candidates in
worker processes), `gpus` (which GPUs time candidates) and `verify` (a tuned kernel
against PyTorch on several seeds and an awkward shape).
"""
