"""GEMM's experimental `cluster` config (2-block clusters along N sharing A by TMA
multicast) on CPU: it lowers for sm_90a with the multicast load and the cluster syncs,
config_error refuses what the program cannot run with a one-line reason, the family's
search space leaves it off, and the sweep's grid offers it on the mid-size shapes.

In: shapes and configs. Out: pass/fail. Nothing runs a kernel (tests/gpu does).
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
from pathlib import Path

import pytest

from evaluator.errors import KernelError
from evaluator.kernels import common as C
from evaluator.kernels import get
from tests.hardware import H200

FAM = get("gemm")
SM90 = "cuda -arch=sm_90a"
PAIR = {"cluster": 2, "swizzle": False}
TILE_64 = {**PAIR, "block_M": 64, "block_N": 128, "block_K": 128, "num_stages": 3, "threads": 128}
TILE_128 = {**PAIR, "block_M": 128, "block_N": 128, "block_K": 64, "num_stages": 4, "threads": 256, "policy": "fullrow"}
# Tails in M, N and K (no tile divides them), with TMA-legal rows (K % 8 == 0) and an
# even number of 128-wide column tiles (8).
AWKWARD = (1000, 1000, 3000)


def _lower(shape, dtype, cfg, family=FAM):
    return C.lower_source(family.program(shape, dtype, cfg, SM90), SM90)


@pytest.mark.slow
@pytest.mark.parametrize(
    "shape,dtype,cfg",
    [
        ((512, 2048, 2048), "float16", TILE_64),
        ((512, 2048, 2048), "bfloat16", TILE_128),
        (AWKWARD, "float16", TILE_64),
        (AWKWARD, "bfloat16", TILE_128),
    ],
)
def test_cluster_lowers_to_a_multicast_load_for_sm90(shape, dtype, cfg):
    src = _lower(shape, dtype, cfg)
    # Rank 0 multicasts A to both blocks (mask 0b11); W stays a per-block TMA load.
    assert "tma_load_multicast" in src and "(uint16_t)(3)" in src
    assert "block_rank_in_cluster() == 0" in src
    # Cluster syncs before any multicast (barriers initialized) and before exit.
    assert src.count("cluster_sync()") >= 2
    assert [line.strip() for line in src.rstrip().splitlines()][-2] == "tl::cluster_sync();"
    # Each consumer releases a stage on both blocks' `empty` barriers.
    assert "empty[" in src and ".arrive(r)" in src
    assert "wgmma" in src


def test_cluster_variant_of_a_fused_family_keeps_its_epilogue():
    src = _lower((512, 2048, 2048), "float16", TILE_64, family=get("gemm_gelu"))
    assert "tma_load_multicast" in src and "__expf(" in src  # GELU: act_macro's A&S erfc


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_cluster_source_compiles_to_multicast_ptx(tmp_path):
    import tilelang

    src = _lower((512, 2048, 2048), "float16", TILE_64)
    cu, ptx = tmp_path / "k.cu", tmp_path / "k.ptx"
    cu.write_text(src)
    root = Path(tilelang.__file__).parent
    subprocess.run(
        [
            "nvcc",
            "-std=c++17",
            "-arch=sm_90a",
            "-ptx",
            "-O3",
            "-w",
            f"-I{root / 'src'}",
            f"-I{root / '3rdparty/cutlass/include'}",
            str(cu),
            "-o",
            str(ptx),
        ],
        check=True,
        timeout=300,
    )
    text = ptx.read_text()
    assert "multicast::cluster" in text and "barrier.cluster.wait" in text and "mapa.shared::cluster" in text


@pytest.mark.parametrize(
    "change,target,reason",
    [
        ({"cluster": 4}, SM90, "cluster must be 0 (off) or 2"),
        ({}, "cuda -arch=sm_80", "needs CUDA sm_90 or newer; the target is cuda:sm_80"),
        ({}, "hip", "needs CUDA sm_90 or newer; the target is hip"),
        ({"split_k": 2}, SM90, "not with split_k, persistent or pingpong"),
        ({"persistent": 132}, SM90, "not with split_k, persistent or pingpong"),
        ({"swizzle": True}, SM90, "needs swizzle off"),
        ({"block_N": 320}, SM90, "must divide the grid's 7 column tiles"),
        ({"block_M": 32, "policy": "fullcol"}, SM90, "block_M >= 64"),
    ],
)
def test_config_error_names_what_a_cluster_config_cannot_run(change, target, reason):
    cfg = {**TILE_64, **change}
    with pytest.raises(KernelError, match="gemm: ") as err:
        FAM.resolve((512, 2048, 2048), "float16", cfg, target)
    assert reason in str(err.value) and "\n" not in str(err.value)


def test_cluster_refuses_rows_tma_cannot_address():
    # The family's awkward shapes move K off multiples of 8 (2048 -> 2055): rows of 4110
    # bytes, which TMA cannot address, so no multicast.
    assert FAM.awkward_shape((512, 2048, 2048))[2] % 8
    why = FAM.reject_reason((512, 2048, 2055), "float16", TILE_64, H200)
    assert why and "K a multiple of 8" in why


def test_cluster_is_refused_on_cpu_and_for_fp32():
    with pytest.raises(KernelError, match="unknown config keys"):
        FAM.resolve((256, 512, 128), "float32", {"cluster": 2}, "c")
    with pytest.raises(KernelError, match="unknown config keys"):
        FAM.resolve((512, 2048, 2048), "float32", {"cluster": 2}, SM90)


def test_search_space_leaves_cluster_off():
    for shape in ((512, 2048, 2048), (512, 2048, 5632), (1024, 768, 3072), (16, 4096, 4096), (8192, 8192, 8192)):
        space = FAM.search_space(shape, "float16", H200)
        assert space and all(c["cluster"] == 0 for c in space)
    assert FAM.schedule((512, 2048, 2048), "float16", "cuda").defaults["cluster"] == 0


def _kernel_sweep():
    path = Path(__file__).parents[2] / "benchmarks/kernel_sweep.py"
    spec = importlib.util.spec_from_file_location("kernel_sweep", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_sweep_grid_offers_cluster_pairs_on_mid_size_shapes_only():
    ks = _kernel_sweep()
    for shape in ks.GEMM_LLAMA:
        pairs = [c for c in ks.gemm_grid(shape) if c["cluster"]]
        assert {(c["block_M"], c["block_N"]) for c in pairs} == {(64, 128), (128, 128)}
        assert all(FAM.reject_reason(shape, "float16", c, H200) is None for c in pairs)
    assert not [c for c in ks.gemm_grid((8192, 8192, 8192)) if c["cluster"]]
