"""The rewritten kernels, one (family, shape, dtype) at a time: tuned, verified, timed,
and lowered for other accelerators.

In: what tuning.py, verify.py, bench.py and portability/ measure. Out: `TunedKernel`
with its `Candidate`s (the config that won, and why each other one lost), `VerifyResult`
with its `VerifyCase`s, `OpBench` (the kernel against PyTorch, and torch.compile as a
third side), `LaunchOverhead` (host cost of one call), and `Portability`, the kernel x
target matrix of `PortCell`s. Every record here is keyed by family and shape; what the
kernels do to the whole model is in model.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Imported at run time, not only for type checkers: pydantic resolves the annotations
# below in this module's namespace (codec.from_dict).
from .codec import KernelConfig, Shape
from .measurement import Compiled, Ratio, Timing

# ---------------------------------------------------------------- tuning


@dataclass(frozen=True)
class Candidate:
    """One tuning candidate: compiled and timed, or the reason it was not."""

    config: KernelConfig
    # "ok" | "rejected" (before compiling) | "compile_error" | "runtime_error" | "wrong"
    # | "crashed" (killed the isolated worker, or hung past the timeout) | "skipped" (budget spent)
    status: str
    latency_ms: float | None = None
    compile_s: float | None = None
    error: str = ""
    phase: str = "coarse"  # "coarse" (the family's grid) or "fine-<round>" (neighbours of the best)
    device: str | None = None  # the device that timed it ("cuda:1") when tuning used several GPUs


@dataclass(frozen=True)
class TunedKernel:
    family: str
    shape: Shape
    dtype: str
    target: str
    config: KernelConfig | None  # None when no candidate worked
    candidates: tuple[Candidate, ...]
    cached: bool = False  # reused from the tuning cache
    tuning_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.config is not None


# ---------------------------------------------------------------- verification


@dataclass(frozen=True)
class VerifyCase:
    family: str
    shape: Shape
    dtype: str
    seed: int
    max_abs_err: float | None
    max_rel_err: float | None
    atol: float
    rtol: float
    passed: bool
    reason: str = ""  # why it failed ("NaN in output", "all zeros", "mismatch", ...)


@dataclass(frozen=True)
class VerifyResult:
    family: str
    cases: tuple[VerifyCase, ...]

    @property
    def passed(self) -> bool:
        # No case at all is not a pass: a family that could not be checked is not correct.
        return bool(self.cases) and all(c.passed for c in self.cases)


# ---------------------------------------------------------------- timing


@dataclass(frozen=True)
class OpBench:
    family: str
    shape: Shape
    dtype: str
    source: str  # "model" (a shape the model uses) | "standard"
    tilelang: Timing | None
    torch: Timing
    speedup: float | None  # torch median / TileLang median
    flops: float
    bytes: float
    tilelang_tflops: float | None = None
    tilelang_gbps: float | None = None
    torch_tflops: float | None = None
    torch_gbps: float | None = None
    tilelang_roof_pct: float | None = None  # achieved / attainable (roofline at this intensity)
    torch_roof_pct: float | None = None
    config: KernelConfig | None = None
    error: str = ""
    verified: bool = True  # the kernel passed verification before it was timed
    ratio: Ratio | None = None  # speedup with its interval (interleaved rounds)
    # Kernel time per call from torch.profiler (CUPTI) for each side, the cross-check of
    # the graph-replay timer; `timer_note` says where the two disagree beyond noise.
    tilelang_kernel_ms: float | None = None
    torch_kernel_ms: float | None = None
    timer_note: str = ""
    flags: tuple[str, ...] = ()  # "unstable", "faster than the roofline allows", ...
    compiled: Compiled | None = None  # torch.compile of the reference, the third side


@dataclass(frozen=True)
class LaunchOverhead:
    """Host cost of one call at a tiny shape, where the device work is negligible."""

    family: str
    shape: Shape
    tilelang_us: float
    torch_us: float

    @property
    def extra_us(self) -> float:
        return self.tilelang_us - self.torch_us


# ---------------------------------------------------------------- portability


@dataclass(frozen=True)
class PortCell:
    """One kernel config lowered for one target that is not on the machine (evaluator/portability/)."""

    family: str
    shape: Shape
    dtype: str
    config_kind: str  # "tuned" | "default"
    target: str  # TargetSpec.key
    status: str  # "lowers" | "needs_retuning" | "fails"
    failure_class: str = ""  # "" | "resources" | "codegen" | "feature" | "numerical"
    reason: str = ""  # one line: the limit broken, or the first meaningful line of the error
    config: KernelConfig | None = None  # what was lowered (None: the family offered no config)
    # A config of the target's own search space that fits and lowers, when `config` does not.
    fitting_config: KernelConfig | None = None
    instruction: str = ""  # matrix instruction in the lowered source: wgmma, mma.sync, tcgen05, mfma, ""
    smem_bytes: int | None = None  # shared memory (LDS) the lowered kernel requests, static + dynamic
    threads: int | None = None  # threads per block of the lowered kernel
    note: str = ""  # caveats that do not change the status (instruction below the target's best...)
    lower_s: float = 0.0  # seconds spent lowering for this cell (0 when every lowering was cached)


@dataclass(frozen=True)
class Portability:
    """The kernel x target matrix: lowered for each target, judged against its published
    limits, never run there."""

    targets: tuple[str, ...]  # keys, in the order asked
    kernels: tuple[str, ...]  # "gemm 4096x4096x4096 float16", in the order given
    cells: tuple[PortCell, ...]
    summary: tuple[str, ...]  # sentences for the report and the terminal
    target_names: dict[str, str] = field(default_factory=dict)  # key -> "AMD Instinct MI300X"
    target_limits: dict[str, str] = field(default_factory=dict)  # key -> TargetSpec.describe()
    target_sources: dict[str, str] = field(default_factory=dict)  # key -> where the limits come from
    tilelang: str = ""
    seconds: float = 0.0  # wall time of the whole check
    lowerings: int = 0  # lowerings actually run (not served from the cache)
