"""Why a gemm config with one of the hand-written Hopper pipelines cannot run.

In: the problem shape (M, N, K) and a full gemm config (defaults filled in). Out: None
when the program can be built, else one line saying what it needs; and the hardware
features each pipeline uses (`PINGPONG_NEEDS`, `CLUSTER_NEEDS`), which the family's
`needs` names and `device.arch.unsupported` checks against the target. The two pipelines
are written out with TMA loads and mbarriers instead of TileLang's automatic pipelining,
so they need what those instructions need: sm_90 (wgmma: sm_90a alone), rows TMA can
address, and the tile shapes a warpgroup's wgmma covers.
"""

from __future__ import annotations

from typing import Any

from ...results import Shape
from .. import common as C
from . import pingpong as PP

PINGPONG_NEEDS = PP.NEEDS
# Blocks launched as clusters, their shared A tile loaded once by TMA multicast.
CLUSTER_NEEDS = ("cluster", "tma")


def stream_k_error(cfg: dict[str, Any]) -> str | None:
    """`stream_k` splits the persistent ping-pong schedule's last wave: only with pingpong."""
    if cfg.get("stream_k", 0) not in (0, 1, True, False):
        return f"stream_k must be 0 (off) or 1 (the last partial wave split by K), got {cfg['stream_k']!r}"
    if cfg.get("stream_k") and not cfg["pingpong"]:
        return "stream_k splits the ping-pong schedule's last wave by K: set pingpong = 1"
    return None


def cluster_error(shape: Shape, cfg: dict[str, Any]) -> str | None:
    """The `cluster` program is whole-K tiles in pairs along N that share A by TMA multicast."""
    if cfg["cluster"] != 2:
        return f"cluster must be 0 (off) or 2 (block pairs along N sharing A), got {cfg['cluster']}"
    if cfg["split_k"] > 1 or cfg["persistent"] or cfg["pingpong"]:
        return "cluster runs whole-K tiles, one per block: not with split_k, persistent or pingpong"
    if cfg["swizzle"]:
        return "cluster needs swizzle off: rasterization would remap the blocks of a pair to different A tiles"
    if C.ceildiv(shape[1], cfg["block_N"]) % cfg["cluster"]:
        return f"cluster {cfg['cluster']} must divide the grid's {C.ceildiv(shape[1], cfg['block_N'])} column tiles"
    if shape[2] % 8 or cfg["block_M"] < 64:
        return "cluster needs K a multiple of 8 (TMA rows 16-byte aligned) and block_M >= 64 (wgmma)"
    return None


def pingpong_error(shape: Shape, cfg: dict[str, Any]) -> str | None:
    """The `pingpong` program: persistent blocks, a producer warpgroup and two consumer
    warpgroups taking the block's tiles in turn (see gemm/pingpong)."""
    if cfg["pingpong"] not in (0, 1, True, False):
        return f"pingpong must be 0 (off) or 1 (two consumer warpgroups in turn), got {cfg['pingpong']!r}"
    for key, what in (("swap_ab", "y's transpose, tokens as wgmma's N"), ("direct", "stored from registers")):
        if cfg.get(key, 0) not in (0, 1, True, False):
            return f"{key} must be 0 (off) or 1 ({what}), got {cfg[key]!r}"
    if cfg.get("swap_ab") and cfg.get("stream_k"):
        return "stream_k is built for y's own tiles: not with swap_ab"
    if cfg["split_k"] > 1 or cfg["cluster"]:
        return "pingpong runs whole-K tiles: not with split_k or cluster"
    if cfg["persistent"] < 1:
        return "pingpong is a persistent schedule: set persistent to the block count (one per SM)"
    if cfg["threads"] != 128:
        return (
            f"pingpong gives each tile one consumer warpgroup: threads must be 128 "
            f"(the block runs {PP.threads_of(cfg)}), got {cfg['threads']}"
        )
    if cfg["block_M"] not in (64, 128):
        return f"pingpong's block_M must be 64 or 128 (one or two wgmma rows of a warpgroup), got {cfg['block_M']}"
    regs = cfg["block_M"] * cfg["block_N"] // 128
    if cfg["block_N"] > 256 or regs > PP.MAX_ACCUM_REGS:
        return (
            f"pingpong's {cfg['block_M']}x{cfg['block_N']} accumulator needs {regs} fp32 registers a thread; "
            f"at most {PP.MAX_ACCUM_REGS} fit beside the epilogue under the {PP.CONSUMER_REGS}-register cap"
        )
    if shape[1] % 8 or shape[2] % 8:
        return "pingpong needs N and K multiples of 8 (TMA rows 16-byte aligned)"
    return None
