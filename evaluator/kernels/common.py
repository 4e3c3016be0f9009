"""Helpers shared by the kernel families: dtype names, target parsing, compiling, an
in-process kernel cache, the launcher that hides TileLang's calling convention.

In: a family's TileLang program factory plus (family, shape, dtype, config, target).
Out: a `Launcher` — a callable that takes the same torch tensors as the family's
PyTorch reference and returns the output tensor — compiled once per process and key.
Nothing here times anything; the bench and tuning stages do that. This module imports
no other part of the evaluator, so `base` (the family base class) can build on it.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any, Callable, Iterable, Sequence

import torch

from ..dtypes import DTYPE_ALIASES, DTYPE_BYTES, TORCH_DTYPES, torch_dtype  # noqa: F401  (the kernels' own)
from ..errors import KernelError

# dtype names used throughout (TileLang spells them the same way)

# Compile flags for TileLang's C backend: without them the generated C is built at -O0
# and runs ~10x slower, which would make every CPU measurement meaningless.
CPU_COMPILE_FLAGS = ["-O3", "-march=native", "-ffast-math"]

# TileLang 0.1.15's C code generator has no C type for bfloat16 ("Cannot convert type
# bfloat16 to C type"); float16 works through half.hpp. Say so before compiling.
CPU_DTYPES = ("float32", "float16")


# ---------------------------------------------------------------- small utilities


def is_cpu_target(target: str) -> bool:
    return target.split()[0] in ("c", "llvm")


def targets_cpu(hardware: Any) -> bool:
    """Whether kernels for `hardware` are built for a CPU backend (no target recorded: C)."""
    return is_cpu_target(hardware.target or "c")


def canonical_dtype(dtype: str) -> str:
    name = DTYPE_ALIASES.get(str(dtype).replace("torch.", ""), None)
    if name is None or name not in TORCH_DTYPES:
        raise KernelError(f"unsupported dtype '{dtype}'; use one of {', '.join(TORCH_DTYPES)}")
    return name


def check_shape(shape: Sequence[int], names: Sequence[str], family: str) -> tuple[int, ...]:
    shape = tuple(int(s) for s in shape)
    if len(shape) != len(names) or any(s <= 0 for s in shape):
        raise KernelError(f"{family}: shape must be {len(names)} positive ints ({', '.join(names)}), got {shape}")
    return shape


def ceildiv(a: int, b: int) -> int:
    return -(-a // b)


def round_up(a: int, b: int) -> int:
    return ceildiv(a, b) * b


def next_pow2(n: int) -> int:
    return 1 << max(0, int(n) - 1).bit_length()


def awkward(n: int, minimum: int = 17) -> int:
    """A size near `n` that is not a multiple of 16 (so not a multiple of any
    power-of-two tile either): verification must exercise tails, not avoid them."""
    m = max(int(n) + 7, int(minimum))
    while m % 16 == 0:
        m += 1
    return m


def awkward_below(n: int, near: int) -> int:
    """A size at most `near` (and at least 1) below `n` that is not a multiple of 16, or
    `n` itself where none is: the tails an upper-bounded dim can still have."""
    m = max(1, min(int(near), int(n) - 1))
    while m > 1 and m % 16 == 0:
        m -= 1
    return m if m < n else int(n)


def generator(seed: int) -> torch.Generator:
    # Always a CPU generator: the same seed then gives the same numbers on every
    # device, so a CPU verification and a GPU verification see identical inputs.
    g = torch.Generator(device="cpu")
    g.manual_seed(int(seed))
    return g


def randn(
    shape: Sequence[int], dtype: str, device: str, g: torch.Generator, scale: float = 1.0, shift: float = 0.0
) -> torch.Tensor:
    t = torch.randn(*shape, generator=g, dtype=torch.float32) * scale + shift
    return t.to(device=device, dtype=TORCH_DTYPES[dtype]).contiguous()


def merge_config(defaults: dict[str, Any], config: dict[str, Any] | None, family: str) -> dict[str, Any]:
    """Fill a (possibly partial) config from the defaults; unknown keys are an error
    because a typo would otherwise silently tune nothing."""
    config = dict(config or {})
    unknown = sorted(set(config) - set(defaults))
    if unknown:
        raise KernelError(f"{family}: unknown config keys {unknown}; known: {sorted(defaults)}")
    merged = {**defaults, **config}
    for key, value in merged.items():
        if isinstance(defaults[key], bool):
            merged[key] = bool(value)
        elif isinstance(defaults[key], int):
            merged[key] = int(value)
            if merged[key] < 0:
                raise KernelError(f"{family}: config '{key}' must be >= 0, got {value}")
    return merged


def dedupe(configs: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    seen, out = set(), []
    for c in configs:
        key = tuple(sorted(c.items()))
        if key not in seen:
            seen.add(key)
            out.append(dict(c))
    return out


# ---------------------------------------------------------------- targets and compiling


def normalize_target(target: str) -> str | dict[str, Any]:
    """TileLang 0.1.15 no longer parses CLI-style target strings ("cuda -arch=sm_90a");
    it wants a dict. Accept both spellings, plus a JSON dict, and keep plain kinds plain."""
    text = str(target).strip()
    if not text:
        raise KernelError("empty TileLang target; use 'c' on CPU or 'cuda' on NVIDIA")
    if text.startswith("{"):
        return json.loads(text)
    parts = text.split()
    if len(parts) == 1:
        return parts[0]
    spec: dict[str, Any] = {"kind": parts[0]}
    for opt in parts[1:]:
        key, _, value = opt.lstrip("-").partition("=")
        spec[key.replace("-", "_")] = value if value else True
    if isinstance(spec.get("code"), str):  # "-code=sm_80,sm_90": the list TileLang's nvcc call takes
        spec["code"] = spec["code"].split(",")
    return spec


def check_dtype_for_target(family: str, dtype: str, target: str) -> None:
    if is_cpu_target(target) and dtype not in CPU_DTYPES:
        raise KernelError(
            f"{family}: dtype {dtype} is not supported on TileLang's CPU backend (target '{target}'): "
            f"tilelang's C code generator has no C type for bfloat16; use float32 or float16 on CPU"
        )


def compile_program(program: Any, out_idx: list[int] | None, target: str, execution_backend: str | None = None) -> Any:
    """tilelang.compile with the right backend and flags for `target`; any failure is
    re-raised as KernelError (with the original chained) so the tuning stage can record it.
    `execution_backend` overrides TileLang's launcher choice (benchmarks/launch_backends.py)."""
    import tilelang

    tl_target = normalize_target(target)
    kwargs: dict[str, Any] = {"out_idx": out_idx, "target": tl_target}
    if is_cpu_target(target):
        # Without -O3 the generated C is built at -O0 (about 10x slower).
        kwargs["compile_flags"] = list(CPU_COMPILE_FLAGS)
        if target.split()[0] == "c":
            kwargs["execution_backend"] = "cython"
    if execution_backend is not None:
        kwargs["execution_backend"] = execution_backend
    try:
        return tilelang.compile(program, **kwargs)
    except KernelError:
        raise
    except Exception as exc:  # TVM raises its own error types; normalise them
        first = str(exc).strip().splitlines()
        msg = first[-1] if first else type(exc).__name__
        raise KernelError(f"TileLang compile failed for target '{target}': {type(exc).__name__}: {msg}") from exc


def with_fast_math(program: Any, on: bool) -> Any:
    """`program` built, on CUDA, with nvcc --use_fast_math (TileLang's tl.enable_fast_math,
    carried by the PrimFunc so every build path and cache key sees it): exp2f and division
    become single MUFU instructions, flushing denormals, instead of guarded sequences."""
    return program.with_attr("tilelang_pass_configs", {"tl.enable_fast_math": True}) if on else program


def lower_source(program: Any, target: str) -> str:
    """Lower a program for `target` without building it (no nvcc/gcc, no device):
    runs TileLang's whole pass pipeline, layout inference included, and returns the
    generated kernel source. Failures become KernelError like compile failures."""
    import tilelang
    from tvm.target import Target

    try:
        tvm_target = Target(normalize_target(target))
        # tilelang.lower, unlike tilelang.compile, does not enter the target context
        # itself and the vectorize planner then fails with "Target context required".
        with tvm_target:
            return tilelang.lower(program, target=tvm_target).kernel_source
    except Exception as exc:
        first = str(exc).strip().splitlines()
        msg = first[-1] if first else type(exc).__name__
        raise KernelError(f"TileLang lowering failed for target '{target}': {type(exc).__name__}: {msg}") from exc


# ---------------------------------------------------------------- compiled kernels


class Launcher:
    """A compiled kernel behind the family's reference calling convention."""

    def __init__(
        self,
        family: str,
        shape: tuple[int, ...],
        dtype: str,
        config: dict[str, Any],
        target: str,
        kernel: Any,
        input_shapes: Sequence[tuple[int, ...]],
        compile_s: float,
    ):
        self.family = family
        self.shape = shape
        self.dtype = dtype
        self.config = dict(config)
        self.target = target
        self.kernel = kernel
        self.input_shapes = tuple(tuple(s) for s in input_shapes)
        self.compile_s = compile_s
        self._torch_dtype = TORCH_DTYPES[dtype]

    @property
    def source(self) -> str:
        return self.kernel.get_kernel_source()

    def check_inputs(self, inputs: Sequence[torch.Tensor], keep_strides: Sequence[bool] = ()) -> list[torch.Tensor]:
        """The inputs as the compiled kernel needs them, or KernelError saying what differs.
        Inputs flagged in `keep_strides` go as they are (the kernel declared their strides)."""
        if len(inputs) != len(self.input_shapes):
            raise KernelError(f"{self.family}: expected {len(self.input_shapes)} inputs, got {len(inputs)}")
        args = []
        for i, (t, want) in enumerate(zip(inputs, self.input_shapes)):
            if tuple(t.shape) != want:
                raise KernelError(f"{self.family}: input {i} has shape {tuple(t.shape)}, kernel was built for {want}")
            if t.dtype != self._torch_dtype:
                raise KernelError(f"{self.family}: input {i} is {t.dtype}, kernel was built for {self.dtype}")
            # TileLang reads raw row-major memory and refuses tensors that need grad.
            keep = i < len(keep_strides) and keep_strides[i]
            args.append(t.detach() if keep else t.detach().contiguous())
        return args

    def __call__(self, *inputs: torch.Tensor) -> torch.Tensor:
        return self.kernel(*self.check_inputs(inputs))


class LauncherWrapper:
    """A kernel that wraps one compiled launcher with work of its own around the call
    (split-K's reduction, a layout change): it reports the launcher's config, dtype,
    compile time and source as the tuner and the report read them from any kernel."""

    def __init__(self, launcher: Launcher):
        self.launcher = launcher
        self.config = launcher.config
        self.dtype = launcher.dtype
        self.compile_s = launcher.compile_s

    @property
    def source(self) -> str:
        return self.launcher.source


class OnceCache:
    """key -> value, made once per process: concurrent callers of one key wait for the
    first instead of making it twice (a compile or a lowering takes seconds). Failures
    are not cached (the caller may retry after fixing the environment) and propagate."""

    def __init__(self) -> None:
        self._values: dict[tuple, Any] = {}
        self._keys: dict[tuple, threading.Lock] = {}
        self._lock = threading.Lock()

    def get(self, key: tuple, make: Callable[[], Any]) -> Any:
        with self._lock:
            if key in self._values:
                return self._values[key]
            key_lock = self._keys.setdefault(key, threading.Lock())
        with key_lock:
            with self._lock:
                if key in self._values:
                    return self._values[key]
            value = make()
            with self._lock:
                self._values[key] = value
            return value

    def clear(self) -> None:
        with self._lock:
            self._values.clear()
            self._keys.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._values)


_LAUNCHERS = OnceCache()


def cache_key(family: str, shape: Sequence[int], dtype: str, config: dict[str, Any], target: str) -> tuple:
    return (family, tuple(int(s) for s in shape), dtype, tuple(sorted(config.items())), str(target))


def cached_launcher(key: tuple, make: Callable[[], Launcher]) -> Launcher:
    """One compile per key per process (see OnceCache)."""
    return _LAUNCHERS.get(key, make)


def build_cached(
    family: str,
    shape: tuple[int, ...],
    dtype: str,
    config: dict[str, Any],
    target: str,
    program: Callable[[], Any],
    out_idx: list[int] | None,
    input_shapes: Sequence[tuple[int, ...]],
) -> Launcher:
    """Compile `program()` for `target` once per (family, shape, dtype, config, target)."""

    def make() -> Launcher:
        t0 = time.perf_counter()
        try:
            prim = program()
        except KernelError:
            raise
        except Exception as exc:  # the TileLang parser rejects the program itself
            raise KernelError(f"{family}: building the TileLang program failed: {type(exc).__name__}: {exc}") from exc
        kernel = compile_program(prim, out_idx, target)
        return Launcher(family, shape, dtype, config, target, kernel, input_shapes, time.perf_counter() - t0)

    return cached_launcher(cache_key(family, shape, dtype, config, target), make)


# ---------------------------------------------------------------- unrolled accumulation

# An accumulation loop unrolled 4 times or 16 can differ by 20-30% where registers allow
# (instruction-level parallelism), so the register-tile programs take the factor as the
# config key `unroll`. On CUDA the first config of their search space is tried at these
# factors beside the full unroll. On the CPU, where the K loop is split by hand, every
# tile runs at CPU_UNROLL: 8 ran 1.14-1.22x the plain loop on a 512x768x768 GEMM in three
# runs (benchmarks/unroll.py), where 16 and 32 swung from 0.84x to 1.28x. The fine rounds
# double and halve the factor from there.
UNROLL_FACTORS = (4, 8)
CPU_UNROLL = 8


def accumulation_loop(T: Any, extent: int, unroll: int) -> Any:
    """The K loop of a register-tile (SIMT) program: fully unrolled for unroll 0 (or one
    that covers the loop), else `#pragma unroll N`. Only CUDA's code generator emits the
    factor, which is why the factors are searched on CUDA alone."""
    if 0 < unroll < extent:
        return T.unroll(extent, unroll_factor=unroll)
    return T.unroll(extent)


def cpu_tile_product(T: Any, bM: int, bN: int, bK: int, unroll: int) -> Any:
    """The CPU programs' tile product C_l += A_l @ B_l (fp32 local tiles, B_l K-major), in
    i-k-j order so the j loop is unit-stride for gcc to vectorize, the k loop unrolled
    `unroll` times by hand (the C backend has no unroll pragma; `unroll` divides bK)."""

    @T.macro
    def product(A_l, B_l, C_l):
        for i, ko in T.grid(bM, bK // unroll):
            for ku in T.unroll(unroll):
                for j in T.serial(bN):
                    C_l[i, j] += A_l[i, ko * unroll + ku] * B_l[ko * unroll + ku, j]

    return product


def unroll_variants(first: dict[str, Any], hardware: Any) -> list[dict[str, Any]]:
    """`first` at each of UNROLL_FACTORS shorter than its block_K, on a CUDA target; none
    elsewhere (the factor would lower to the same code as the full unroll)."""
    if not str(getattr(hardware, "target", "") or "").startswith("cuda"):
        return []
    return [{**first, "unroll": u} for u in UNROLL_FACTORS if u < first["block_K"]]


def cpu_unroll(block_k: int) -> int:
    """The CPU tiles' factor: CPU_UNROLL where it divides block_K, else 1 (the loop as written)."""
    return CPU_UNROLL if block_k % CPU_UNROLL == 0 else 1


def warpgroup_tile_error(cfg: dict[str, Any]) -> str | None:
    """Why a tensor-core tile (`block_M`, `block_N`, `block_K`, `threads`) cannot build on
    whole warpgroups: 128 or 256 threads, 64-row multiples of block_M, 16-multiples of
    block_N and block_K, and enough of the tile for every thread's fragment."""
    threads = cfg["threads"]
    if threads % 128 or not 128 <= threads <= 256:
        return f"tensor-core tiles need 128 or 256 threads (whole warpgroups), got {threads}"
    if cfg["block_M"] % 64 or cfg["block_N"] % 16 or cfg["block_K"] % 16:
        return "tensor-core tiles need block_M a multiple of 64 (a warpgroup's rows), block_N and block_K of 16"
    if cfg["block_M"] * cfg["block_N"] < 64 * 16 * threads // 32:
        return f"a {cfg['block_M']}x{cfg['block_N']} tile is too small for {threads} threads"
    return None


def unroll_error(cfg: dict[str, Any], cpu: bool) -> str | None:
    """Why `cfg`'s unroll factor cannot build: on the CPU the K loop is split by hand, so
    the factor must divide block_K; on a GPU 0 (full) or any positive factor."""
    u = cfg.get("unroll", 1 if cpu else 0)
    if cpu and (u < 1 or cfg["block_K"] % u):
        return f"unroll must be a positive divisor of block_K ({cfg['block_K']}) on the CPU, got {u}"
    if u < 0:
        return f"unroll must be 0 (full) or a positive factor, got {u}"
    return None


# ---------------------------------------------------------------- sizing helpers


def smem_fits(smem_bytes: int, hardware: Any) -> bool:
    limit = int(getattr(hardware, "smem_per_block", 0) or 0)
    return limit <= 0 or smem_bytes <= limit


def dtype_bytes(dtype: str) -> int:
    return DTYPE_BYTES[dtype]
