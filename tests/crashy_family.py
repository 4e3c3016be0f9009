"""A tiny real kernel family whose configs misbehave on purpose, for the isolation tests.

In: shape (n,), dtype float32, config {"crash": 0..4}. Out: y = 2 * x from a real TileLang
CPU kernel — one compile serves every config, because the crash is in the Python
wrapper, not in the kernel: 1 kills its own process with SIGSEGV, 2 raises the error
text CUDA gives after an illegal memory access, 3 hangs, 4 exits with code 7.
The destructive configs only misbehave inside a child process (the isolation worker);
run in the test process itself they raise instead, so a broken isolation fails the
test rather than killing pytest.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time

import torch

from evaluator.kernels import common as C
from evaluator.kernels.base import KernelFamily, Schedule

ILLEGAL_ADDRESS = "CUDA error: an illegal memory access was encountered"


def _program(shape, dtype, cfg):
    import tilelang.cpu.language as T

    (n,) = shape

    @T.prim_func
    def double(X: T.Tensor((n,), dtype), Y: T.Tensor((n,), dtype)):
        with T.Kernel(1) as _:
            for i in T.serial(n):
                Y[i] = X[i] * T.cast(2, dtype)

    return double


class CrashyFamily(KernelFamily):
    name = "crashy"
    title = "Test family that crashes on purpose"
    shape_names = ("n",)
    # The program ignores `crash`: it is read by the wrapper `build` puts around the kernel.
    cpu_schedule = Schedule({"crash": 0}, _program)

    def __init__(self, space: list[dict] | None = None):
        self.space = space or [{"crash": 1}, {"crash": 2}, {"crash": 0}]

    def standard_shapes(self, device):
        return [(64,), (256,), (1000,)]

    def make_inputs(self, shape, dtype, device, seed):
        return (C.randn(shape, "float32", device, C.generator(seed)),)

    def reference(self, x):
        return x * 2

    def search_space(self, shape, dtype, hardware):
        return [dict(c) for c in self.space]

    def flops(self, shape):
        return float(shape[0])

    def bytes(self, shape, dtype):
        return 8.0 * shape[0]

    def tolerance(self, dtype, shape=None):
        return (1e-6, 1e-6)

    def input_shapes(self, shape):
        return [tuple(shape)]

    def build(self, shape, dtype, config, target):
        crash = int(self.resolve(shape, dtype, config, target).config["crash"])
        inner = super().build(shape, "float32", {}, target)  # one compile serves every config

        def run(x: torch.Tensor) -> torch.Tensor:
            if crash and multiprocessing.parent_process() is None:
                raise RuntimeError(f"crash={crash} ran outside the isolation worker")
            if crash == 1:
                os.kill(os.getpid(), signal.SIGSEGV)
            if crash == 2:
                raise RuntimeError(ILLEGAL_ADDRESS)
            if crash == 3:
                time.sleep(3600)
            if crash == 4:
                os._exit(7)
            return inner(x)

        return run


FAMILY = CrashyFamily()
HANGS = CrashyFamily([{"crash": 3}, {"crash": 4}, {"crash": 0}])
GOOD = CrashyFamily([{"crash": 0}])
