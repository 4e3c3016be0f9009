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

from evaluator.kernels import _common as C

ILLEGAL_ADDRESS = "CUDA error: an illegal memory access was encountered"


def _program(n: int, dtype: str):
    import tilelang.cpu.language as T

    @T.prim_func
    def double(X: T.Tensor((n,), dtype), Y: T.Tensor((n,), dtype)):
        with T.Kernel(1) as _:
            for i in T.serial(n):
                Y[i] = X[i] * T.cast(2, dtype)

    return double


class CrashyFamily:
    name = "crashy"
    title = "Test family that crashes on purpose"
    aten_ops = frozenset()
    shape_names = ("n",)

    def __init__(self, space: list[dict] | None = None):
        self.space = space or [{"crash": 1}, {"crash": 2}, {"crash": 0}]

    def make_inputs(self, shape, dtype, device, seed):
        return (C.randn(shape, "float32", device, C.generator(seed)),)

    def reference(self, x):
        return x * 2

    def tolerance(self, dtype, shape=None):
        return (1e-6, 1e-6)

    def search_space(self, shape, dtype, hardware):
        return [dict(c) for c in self.space]

    def build(self, shape, dtype, config, target):
        (n,) = C.check_shape(shape, self.shape_names, self.name)
        inner = C.build_cached(self.name, (n,), "float32", {}, target, lambda: _program(n, "float32"),
                               out_idx=[1], input_shapes=[(n,)])
        crash = int(config.get("crash", 0))

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
