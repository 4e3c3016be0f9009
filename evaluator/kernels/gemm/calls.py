"""The gemm family's launchers with work around the kernel: the compiled split-K and
stream-K kernels behind nn.Linear's calling convention (x, w, b) -> y.

In: a compiled `Launcher` of a split-K program (`gemm/programs`) or of the ping-pong
program with `stream_k` (`gemm/pingpong`), the problem shape or workspace size and, for
the plain split-K, the epilogue's activation. Out: callables the tuner, the benchmark
and the router use like any kernel: the one-kernel split-K and stream-K with their fp32
partials and per-tile counters owned here, or the atomic split-K followed by the bias,
activation and rounding in PyTorch.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ...results import Shape
from .. import common as C
from . import programs as P

# nn modules whose output a fused family computes (nn.GELU only in its exact erf form).
TORCH_ACTS = {
    "none": lambda y: y,
    "relu": F.relu,
    "gelu": F.gelu,
    "silu": F.silu,
    "gelu_tanh": lambda y: F.gelu(y, approximate="tanh"),
}


class _WorkspaceLinear(C.LauncherWrapper):
    """A kernel that owns fp32 partials and per-tile counters, allocated once per device;
    the counters start at zero and the kernel leaves them at zero, so a call (or a
    CUDA-graph replay of many) needs nothing else. Calls must not overlap on two streams
    at once."""

    def __init__(self, launcher: C.Launcher, ws_shape: tuple[int, int, int], tiles: int):
        super().__init__(launcher)
        self.ws_shape, self.tiles = ws_shape, tiles
        self._buffers: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}

    def __call__(self, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        x, w, b = self.launcher.check_inputs((x, w, b))
        key = str(x.device)
        if key not in self._buffers:
            self._buffers[key] = (
                torch.empty(self.ws_shape, dtype=torch.float32, device=x.device),
                torch.zeros((self.tiles,), dtype=torch.int32, device=x.device),
            )
        ws, cnt = self._buffers[key]
        return self.launcher.kernel(x, w, b, ws, cnt)


class FusedSplitKLinear(_WorkspaceLinear):
    """Calls the one-kernel split-K (see `gemm/programs._splitk_fused_program`)."""

    def __init__(self, launcher: C.Launcher, shape: Shape):
        super().__init__(launcher, *P.splitk_workspace(shape, launcher.config))
        self.shape = shape


class StreamKLinear(_WorkspaceLinear):
    """Calls the ping-pong program with `stream_k` (see `gemm/pingpong`): its partials
    are a slot per contributor of each tail tile, its counters one per tail tile."""


class SplitKLinear(C.LauncherWrapper):
    """Calls a compiled split-K kernel with nn.Linear's convention: zeroes the fp32
    output, runs the kernel, then adds the bias, applies the activation and rounds in
    PyTorch (two small elementwise kernels; the price of splitting K)."""

    def __init__(self, launcher: C.Launcher, shape: Shape, act: str):
        super().__init__(launcher)
        self.shape = shape
        self.act = act

    def __call__(self, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        M, N, _ = self.shape
        self.launcher.check_inputs((x, w))
        y32 = torch.zeros((M, N), dtype=torch.float32, device=x.device)
        self.launcher.kernel(x.detach().contiguous(), w.detach().contiguous(), y32)
        return TORCH_ACTS[self.act](y32.add_(b.detach())).to(x.dtype)
