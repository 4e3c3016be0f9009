"""Every family's whole search space lowered for one target, without its hardware.

    python3 benchmarks/lowering_table.py --target hip:gfx942 [--dtype float16] [--only gemm,softmax] [--json]

For each registered kernel family and each of its standard GPU shapes, the search space
the family offers for the target (sized by the target's limits from device/targets.py:
shared memory or LDS per block, registers, compute units; its features from device/arch.py)
is lowered config by config through TileLang's whole pass pipeline and code generator (no
nvcc, hipcc or device: what the portability matrix does per cell). One row per family says
how many configs lowered and how many failed; each failure follows with its shape, config
and TileLang's first line. tests/test_lowering_table.py runs the same function for
hip:gfx942 and fails on any config that does not lower.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evaluator import kernels  # noqa: E402
from evaluator.device import arch as A  # noqa: E402
from evaluator.device import targets as T  # noqa: E402
from evaluator.errors import ConfigError  # noqa: E402
from evaluator.portability import lowering as L  # noqa: E402


@dataclass
class FamilyRow:
    family: str
    shapes: int = 0
    configs: int = 0
    lowered: int = 0
    # Lowered configs whose program has a T.gemm, and of those, the ones whose source
    # issues the target's matrix-core instruction (mfma on gfx9, wgmma or mma on CUDA).
    gemm: int = 0
    matrix: int = 0
    failures: list[tuple[tuple[int, ...], dict, str]] = field(default_factory=list)
    seconds: float = 0.0


def spec_for(flag: str) -> T.TargetSpec:
    """The target table's part for a --target spelling ("hip:gfx942" -> the MI300X): its
    limits size the search spaces. A target no part of the table has is a ConfigError."""
    want = A.parse_flag(flag)
    for spec in T.TARGETS.values():
        if spec.target == want:
            return spec
    known = ", ".join(sorted({s.target.flag for s in T.TARGETS.values()}))
    raise ConfigError(f"--target {flag}: no part in the target table builds for it; use one of {known}")


def lower_spaces(
    flag: str, dtype: str = "float16", only: list[str] | None = None, distinct: bool = False
) -> list[FamilyRow]:
    """Each family's search space on its standard GPU shapes, lowered for `flag`; with
    `distinct`, each distinct config once, at the first shape that offers it (what a
    config needs of the target does not change with the shape: 265 lowerings instead of
    657 for gfx942)."""
    spec = spec_for(flag)
    hw = spec.hardware()
    rows = []
    with L.quiet_builder(), L.without_rocm_warning(spec.kind == "hip"):
        for name, fam in kernels.REGISTRY.items():
            if only and name not in only:
                continue
            rows.append(_lower_family(fam, spec, hw, dtype, distinct))
    return rows


def _lower_family(fam, spec: T.TargetSpec, hw, dtype: str, distinct: bool = False) -> FamilyRow:
    row = FamilyRow(fam.name)
    t0 = time.perf_counter()
    seen: set[str] = set()
    for shape in fam.standard_shapes("cuda"):
        row.shapes += 1
        for config in fam.search_space(shape, dtype, hw):
            key = json.dumps(dict(config), sort_keys=True, default=str)
            if distinct and key in seen:
                continue
            seen.add(key)
            row.configs += 1
            got = L.lower_cached(fam, shape, dtype, config, spec)
            if got.ok:
                row.lowered += 1
                row.gemm += got.uses_gemm
                want = spec.matrix_instruction  # "" where the table names none: any matrix instruction
                row.matrix += got.uses_gemm and bool(got.instruction) and got.instruction == (want or got.instruction)
            else:
                row.failures.append((tuple(shape), dict(config), got.error))
    row.seconds = time.perf_counter() - t0
    return row


def table(rows: list[FamilyRow], flag: str, dtype: str) -> str:
    spec = spec_for(flag)
    word = spec.matrix_instruction or "matrix"
    lines = [
        f"search spaces lowered for {flag} ({spec.name} limits), {dtype}",
        f"{'family':<20} {'shapes':>6} {'configs':>7} {'lowered':>7} {'failed':>6} {word + ' (of T.gemm)':>18}"
        f" {'seconds':>8}",
    ]

    def line(name: str, shapes: int, configs: int, lowered: int, gemm: int, matrix: int, seconds: str) -> str:
        share = f"{matrix}/{gemm}" if gemm else "-"
        return f"{name:<20} {shapes:>6} {configs:>7} {lowered:>7} {configs - lowered:>6} {share:>18} {seconds:>8}"

    for r in rows:
        lines.append(line(r.family, r.shapes, r.configs, r.lowered, r.gemm, r.matrix, f"{r.seconds:.1f}"))
    sums = [sum(getattr(r, k) for r in rows) for k in ("shapes", "configs", "lowered", "gemm", "matrix")]
    lines.append(line("all", *sums, f"{sum(r.seconds for r in rows):.1f}"))
    for r in rows:
        for shape, config, error in r.failures:
            lines.append(f"FAILED {r.family} {shape} {json.dumps(config, sort_keys=True)}: {error}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="hip:gfx942", help="cuda:sm_XY, hip:gfxNNN or maca")
    ap.add_argument("--dtype", default="float16")
    ap.add_argument("--only", default="", help="comma-separated families (default: all)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--distinct", action="store_true", help="each distinct config once (what CI lowers)")
    args = ap.parse_args(argv)
    only = [f for f in args.only.split(",") if f] or None
    try:
        rows = lower_spaces(args.target, args.dtype, only, args.distinct)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps([r.__dict__ for r in rows], indent=1, default=list))
    else:
        print(table(rows, args.target, args.dtype))
    return 1 if any(r.failures for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
