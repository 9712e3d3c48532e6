"""The GPU catalog (etl/core/gpus.py, gpus.toml): rows, name resolution and refusal, and
CUDA's occupancy rule worked out by hand."""
from __future__ import annotations

import copy

import pytest

from etl.core import gpus
from etl.core.gpus import GpuNameError, blocks_per_sm, by_key, resolve, trace_name_row

# every GPU the issue names, as the catalog keys them
REQUIRED = ("V100-PCIE-16GB", "V100-PCIE-32GB", "V100-SXM2-16GB", "V100-SXM2-32GB", "T4",
            "P100-PCIE-16GB", "P4", "L4", "A10", "A100-PCIE-40GB", "A100-PCIE-80GB",
            "A100-SXM4-40GB", "A100-SXM4-80GB", "H100-PCIE", "H100-SXM5-80GB", "H200", "B200",
            "RTX-3090", "RTX-4090", "RTX-5090", "MI100", "MI210", "MI250", "MI300X")


def test_every_required_gpu_has_a_row_with_a_source_and_a_peak() -> None:
    keys = {g.key for g in gpus.gpus()}
    assert set(REQUIRED) <= keys
    assert gpus.problems(gpus.raw_catalog()) == []
    for key in REQUIRED:
        row = by_key(key)
        assert row.source.strip() and row.peak_tflops.get("fp32", 0) > 0 and row.names


def test_like_rows_inherit_and_override() -> None:
    a80 = by_key("A100-PCIE-80GB")  # like A100-PCIE-40GB, its own memory and bandwidth
    assert (a80.sm_count, a80.memory_gb, a80.mem_bw_gbs, a80.peak_tflops["bf16"]) == (
        108, 80, 1935, 312.0)
    h200 = by_key("H200")
    assert (h200.sm_count, h200.memory_gb, h200.mem_bw_gbs) == (132, 141, 4800)


def test_a_missing_field_is_none_with_the_reason() -> None:
    b200 = by_key("B200")
    assert b200.sm_count is None and "not in a datasheet" in b200.why_missing("sm_count")
    assert by_key("V100-PCIE-32GB").peak_tflops.get("bf16") is None


@pytest.mark.parametrize(("name", "key"), [
    ("NVIDIA H100 80GB HBM3", "H100-SXM5-80GB"),  # as traces write it
    ("h100 sxm", "H100-SXM5-80GB"),
    ("H100-PCIE", "H100-PCIE"),
    ("Tesla V100-PCIE-32GB", "V100-PCIE-32GB"),
    ("l4", "L4"),
    ("4090", "RTX-4090"),
    ("AMD Instinct MI250", "MI250"),
    ("mi250x", "MI250X"),
])
def test_names_resolve_to_one_row(name: str, key: str) -> None:
    assert resolve(name).key == key


@pytest.mark.parametrize(("name", "candidates"), [
    ("H100", "H100-PCIE, H100-SXM5-80GB"),
    ("A100 80GB", "A100-PCIE-80GB, A100-SXM4-80GB"),
    ("AMD Instinct MI250X / MI250", "MI250, MI250X"),
])
def test_an_ambiguous_name_is_refused_with_its_candidates(name: str, candidates: str) -> None:
    with pytest.raises(GpuNameError, match="ambiguous") as caught:
        resolve(name, "--gpu")
    assert candidates in str(caught.value) and "\n" not in str(caught.value)


def test_an_unknown_name_is_refused() -> None:
    with pytest.raises(GpuNameError, match="not in the GPU catalog"):
        resolve("GTX 1080")
    assert trace_name_row("AMD Radeon Graphics") is None


def test_a_broken_row_is_named() -> None:
    doc = copy.deepcopy(gpus.raw_catalog())
    doc["gpu"][0]["sm_count"] = -1
    doc["gpu"][1]["like"] = "nothing"
    found = gpus.problems(doc)
    assert any("sm_count = -1" in p for p in found)
    assert any("like 'nothing'" in p for p in found)


def test_occupancy_by_hand() -> None:
    a100 = gpus.arch_limits("sm_80")
    # 256 threads (8 warps), 64 registers, 48 KiB shared memory: warps 64/8 = 8; registers
    # 64*32 = 2048 per warp, (65536/4)/2048 = 8 warps per sub-partition, 32/8 = 4 blocks;
    # shared memory (49152 + 1024 reserved) rounded to 128 B: 167936 // 50176 = 3
    assert blocks_per_sm(a100, 256, 64, 48 * 1024) == 3
    # 128 threads, 255 registers: 255*32 = 8160 → 8192 per warp, 2 warps per sub-partition,
    # 8 per SM, 4 warps a block: 2 blocks
    assert blocks_per_sm(a100, 128, 255, 0) == 2
    # 33 registers: 1056 per warp rounds up to 1280, 16384 // 1280 = 12 warps per
    # sub-partition, 48 per SM, 256-thread blocks: 6 (7 without the rounding)
    assert blocks_per_sm(a100, 256, 33, 0) == 6
    t4 = gpus.arch_limits("sm_75")
    assert blocks_per_sm(t4, 256, 32, 0) == 4      # 32 warps per SM / 8
    v100 = gpus.arch_limits("sm_70")
    assert blocks_per_sm(v100, 128, 32, 0) == 16   # 64 warps / 4
    assert blocks_per_sm(gpus.arch_limits("sm_86"), 64, 16, 0) == 16  # the block cap
    assert blocks_per_sm(a100, 256, 64, 200 * 1024) == 0   # more than a block may have
    assert blocks_per_sm(a100, 256, None, 0) is None        # registers not reported
    assert blocks_per_sm(gpus.arch_limits("gfx90a"), 256, 64, 0) is None  # limits unknown
