"""Every family's whole search space lowered for hip:gfx942 on a machine without ROCm:
each distinct config once, at the first standard shape that offers it.

In: each registered family, its standard GPU shapes, the space it offers under the
MI300X's limits (64 KiB of LDS, 304 CUs), and the installed TileLang's HIP code generator,
which needs no hipcc or device to emit source. Out: pass when every config lowers and
every lowered T.gemm issues MFMA; otherwise the failing configs with TileLang's line.
Skips, saying why, only where this TileLang cannot emit HIP source at all. The same
function prints the table (`python3 benchmarks/lowering_table.py --target hip:gfx942`).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from evaluator import kernels

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from lowering_table import lower_spaces, main, spec_for  # noqa: E402  (the benchmark's function, one place)

tilelang = pytest.importorskip("tilelang")


def _hip_gap() -> str:
    """Why this TileLang cannot lower to HIP source here ("" when it can): a one-line
    program (a copy) lowered for gfx942 with TileLang's own API."""
    import tilelang.language as T
    from tvm.target import Target

    from evaluator.portability.lowering import without_rocm_warning

    @T.prim_func
    def copy(a: T.Tensor((64,), "float16"), b: T.Tensor((64,), "float16")):
        with T.Kernel(1, threads=64):
            for i in T.Parallel(64):
                b[i] = a[i]

    try:
        with without_rocm_warning(True):
            target = Target({"kind": "hip", "mcpu": "gfx942"})
            with target:
                source = tilelang.lower(copy, target=target).kernel_source
    except Exception as exc:  # the exact reason goes into the skip
        return f"TileLang {tilelang.__version__} cannot lower to HIP here: {type(exc).__name__}: {exc}"
    return "" if "__global__" in source else f"TileLang {tilelang.__version__} emitted no HIP kernel for gfx942"


@pytest.fixture(scope="module")
def hip():
    gap = _hip_gap()
    if gap:
        pytest.skip(gap.splitlines()[0])


@pytest.mark.slow
@pytest.mark.parametrize("family", sorted(kernels.REGISTRY))
def test_every_config_of_the_family_lowers_for_gfx942(family, hip):
    [row] = lower_spaces("hip:gfx942", "float16", [family], distinct=True)
    assert row.configs > 0, f"{family} offers no config under the MI300X's limits"
    failed = "\n".join(f"{shape} {config}: {error}" for shape, config, error in row.failures)
    assert not row.failures, f"{len(row.failures)} of {row.configs} {family} configs fail to lower:\n{failed}"
    # The GEMM-shaped programs run on the matrix cores, not as scalar loops.
    assert row.matrix == row.gemm, f"{row.gemm - row.matrix} of {family}'s T.gemm configs lower without mfma"


def test_the_table_takes_a_target_the_target_table_has():
    assert spec_for("hip:gfx942").key == "mi300x" and spec_for("cuda:sm_80").key == "a100"


def test_a_target_the_table_lacks_is_one_line_exit_2(capsys):
    assert main(["--target", "hip:gfx1100"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "no part in the target table builds for it; use one of" in err and "hip:gfx942" in err
