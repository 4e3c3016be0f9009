"""Frozen dataclasses passed between the stages, and their (de)serialisation.

In: values produced by the stages. Out: immutable records that turn into plain JSON
dicts (`to_dict`) and back (`from_dict`, validated by pydantic), so a run folder or a
baseline can be reloaded and re-rendered without rerunning anything.

Shapes are tuples of ints; configs are flat dicts of str -> int/str/bool; times are
milliseconds; shares are fractions in [0, 1]; speedup = torch time / TileLang time
(> 1 means TileLang is faster).

The modules, from the run's inputs to the whole run:
  codec.py        to_dict / from_dict / to_json, shape text, Shape, KernelConfig, SCHEMA_VERSION
  environment.py  the model, the device and the versions (ModelSpec, Hardware, Environment)
  measurement.py  one time, one paired ratio, the torch.compile side (Timing, Ratio, Compiled)
  kernels.py      per kernel: tuning, verification, op benchmark, launch overhead, portability
  model.py        the whole model: hot ops, end to end, soak
  upstream.py     upstream health from git and its typed parts
  run.py          RunResult, the verdict, the baseline it was stored as, comparison and trend
  upgrade.py      an upgrade rehearsal: each kernel under the current TileLang and a candidate
Callers use the names re-exported here (`from evaluator.results import RunResult`).
"""

from __future__ import annotations

from .codec import SCHEMA_VERSION, KernelConfig, Shape, from_dict, parse_shape, shape_str, to_dict, to_json
from .environment import LAYOUTS, Environment, Hardware, ModelSpec
from .kernels import (
    Candidate,
    LaunchOverhead,
    OpBench,
    PortCell,
    Portability,
    TunedKernel,
    VerifyCase,
    VerifyResult,
)
from .measurement import Compiled, Ratio, Timing, geomean
from .model import (
    CallCount,
    FUSED_INTO,
    E2EBench,
    E2EView,
    FamilyCalls,
    FamilyTime,
    Fusion,
    HotOp,
    HotOps,
    KeptFamilies,
    Soak,
    family_calls,
)
from .run import BaselineRef, Change, Comparison, Outcome, RunResult, TrendPoint, Verdict
from .upgrade import Toolchain, UpgradeKernel, UpgradeResult, UpgradeSide, UpgradeVerdict
from .upstream import (
    AuthorCommits,
    ForkDrift,
    PathActivity,
    RecentCommit,
    Release,
    ScoreInputs,
    UpstreamActivity,
    UpstreamAuthors,
    UpstreamCaveats,
    UpstreamHealth,
    UpstreamReleases,
)

__all__ = [
    "SCHEMA_VERSION",
    "KernelConfig",
    "Shape",
    "from_dict",
    "parse_shape",
    "shape_str",
    "to_dict",
    "to_json",
    "Environment",
    "Hardware",
    "LAYOUTS",
    "ModelSpec",
    "Candidate",
    "LaunchOverhead",
    "OpBench",
    "PortCell",
    "Portability",
    "TunedKernel",
    "VerifyCase",
    "VerifyResult",
    "Compiled",
    "Ratio",
    "Timing",
    "geomean",
    "CallCount",
    "FUSED_INTO",
    "E2EBench",
    "E2EView",
    "FamilyCalls",
    "FamilyTime",
    "Fusion",
    "HotOp",
    "HotOps",
    "KeptFamilies",
    "Soak",
    "family_calls",
    "BaselineRef",
    "Change",
    "Comparison",
    "Outcome",
    "RunResult",
    "TrendPoint",
    "Verdict",
    "Toolchain",
    "UpgradeKernel",
    "UpgradeResult",
    "UpgradeSide",
    "UpgradeVerdict",
    "AuthorCommits",
    "ForkDrift",
    "PathActivity",
    "RecentCommit",
    "Release",
    "ScoreInputs",
    "UpstreamActivity",
    "UpstreamAuthors",
    "UpstreamCaveats",
    "UpstreamHealth",
    "UpstreamReleases",
]
