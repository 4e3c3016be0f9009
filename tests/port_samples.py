"""A portability matrix as the pipeline records it, without lowering anything: gemm with
an H200-tuned config that is over MI300X's 64 KB of LDS (needs re-tuning, a fitting config
named), attention whose tuned config hits a TileLang code-generation gap on A100, and
MetaX C500 with no TileLang backend installed. For the tests of the stages that only read
a RunResult (checklist, report, CLI tables); real lowerings are in test_portability.py."""

from __future__ import annotations

from evaluator import portability as P
from evaluator.device import targets as T

H200_GEMM = {"block_M": 128, "block_N": 256, "block_K": 64, "num_stages": 3, "threads": 256}
FITS_MI300X = {"block_M": 128, "block_N": 128, "block_K": 32, "num_stages": 2, "threads": 256}
ATTENTION = {"block_M": 128, "block_N": 64, "num_stages": 2, "threads": 128}
UNPIPELINED = {**ATTENTION, "num_stages": 1}
NO_MACA = (
    "no TileLang backend installed for MACA: TileLang 0.1.15 here has no 'maca' target kind "
    "(MetaX's TileLang fork for MACA provides it)"
)
LDS = (
    "uses 208 KB of shared memory; MI300X allows 64 KB of LDS per workgroup (the lowered kernel itself requests 208 KB)"
)
DOWNCAST = "TypeError: Downcast from tirx.Sub to ir.IntImm failed."
INSTRUCTION = {
    "a100": "mma.sync",
    "h100": "wgmma",
    "h200": "wgmma",
    "b200": "mma.sync",
    "v100": "mma.sync",
    "t4": "mma.sync",
    "mi250x": "mfma",
    "mi300x": "mfma",
}


def sample_portability(targets: tuple[str, ...] = ("a100", "h100", "mi300x", "c500")) -> P.Portability:
    kernels = (
        ("gemm", (4096, 4096, 4096), "float16", H200_GEMM),
        ("attention", (1, 32, 512, 512, 128, 1), "float16", ATTENTION),
    )
    cells = []
    for fam, shape, dtype, tuned in kernels:
        for kind in ("tuned", "default"):
            for t in targets:
                base = dict(family=fam, shape=shape, dtype=dtype, config_kind=kind, target=t, config=tuned)
                if t == "c500":
                    cells.append(P.PortCell(**base, status="fails", failure_class="feature", reason=NO_MACA))
                elif (t, fam, kind) == ("mi300x", "gemm", "tuned"):
                    cells.append(
                        P.PortCell(
                            **base,
                            status="needs_retuning",
                            failure_class="resources",
                            reason=LDS,
                            fitting_config=FITS_MI300X,
                            smem_bytes=212992,
                            threads=256,
                        )
                    )
                elif (t, fam, kind) == ("a100", "attention", "tuned"):
                    cells.append(
                        P.PortCell(
                            **base, status="fails", failure_class="codegen", reason=DOWNCAST, fitting_config=UNPIPELINED
                        )
                    )
                else:
                    note = (
                        ("T.gemm lowered to mma.sync, not B200's tcgen05: speed measured elsewhere does not carry over")
                        if t == "b200"
                        else ""
                    )
                    cells.append(P.PortCell(**base, status="lowers", instruction=INSTRUCTION.get(t, ""), note=note))
    specs = [T.TARGETS[k] for k in targets]
    p = P.Portability(
        targets=tuple(targets),
        kernels=tuple(P.kernel_label(f, s, d) for f, s, d, _ in kernels),
        cells=tuple(cells),
        summary=(),
        target_names={s.key: s.name for s in specs},
        target_limits={s.key: s.describe() for s in specs},
        target_sources={s.key: s.source + (f"; {s.notes}" if s.notes else "") for s in specs},
        tilelang="0.1.15",
        seconds=7.4,
        lowerings=16,
    )
    return P.with_summary(p)
