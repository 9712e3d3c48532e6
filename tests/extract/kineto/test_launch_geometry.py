"""Launch geometry written on the launch call (ROCm) reaches the kernel it launched.

By hand: a hipLaunchKernel with grid [3,1,1], block [128,1,1] and 256 bytes of shared
memory whose kernel event has none; a CUDA kernel with its own grid whose launch writes
another (the kernel's wins); a kernel without a launch. Then the corpus MI250 trace,
against each kernel's launch call read naively from the raw file.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import corpus_path, event, kernel, write_trace
from tests.extract.kineto.test_pipeline import assert_same_as_in_memory, run_pipeline
from tests.oracle.naive_kineto import load_trace

GEOMETRY = ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z",
            "shared_memory_bytes")


def hip_launch(corr: int, ts: int, **args: Any) -> dict[str, Any]:
    return event(cat="cuda_runtime", name="hipLaunchKernel", ts=ts, dur=1_000,
                 correlation=corr, **args)


def geometry_events() -> list[dict[str, Any]]:
    own = kernel(2, 30_000, 1_000, name="cuda_k")
    own["args"].update({"grid": [7, 1, 1], "block": [64, 2, 1], "shared memory": 0})
    # hipExtModuleLaunchKernel's "grid" is HIP's global work size, in threads: 512 x 8
    # threads in blocks of 256 x 1 are 2 x 8 blocks, and 300 threads 2 blocks of 256
    ext = hip_launch(4, 3_000, grid=[512, 8, 1], block=[256, 1, 1], **{"shared memory": 0})
    ext_odd = hip_launch(5, 4_000, grid=[300, 1, 1], block=[256, 1, 1])
    for call in (ext, ext_odd):
        call["name"] = "hipExtModuleLaunchKernel"
    return [hip_launch(1, 1_000, grid=[3, 1, 1], block=[128, 1, 1], **{"shared memory": 256}),
            hip_launch(2, 2_000, grid=[9, 9, 9], block=[1, 1, 1], **{"shared memory": 9}),
            ext, ext_odd,
            kernel(1, 20_000, 1_000, name="hip_k"), own,
            kernel(3, 40_000, 1_000, name="orphan_k"),
            kernel(4, 50_000, 1_000, name="tensile_k"), kernel(5, 60_000, 1_000, name="odd_k")]


@pytest.mark.parametrize("slice_bytes", [128, 1 << 20])
def test_a_kernel_takes_its_launch_calls_geometry(tmp_path: Path, slice_bytes: int) -> None:
    path = write_trace(tmp_path / "t.json", geometry_events())
    _, got = run_pipeline(path, tmp_path / "spill", slice_bytes=slice_bytes)
    rows = {k["name"]: tuple(k[c] for c in GEOMETRY) for k in got["kernels"].to_pylist()}
    assert rows == {"hip_k": (3, 1, 1, 128, 1, 1, 256), "cuda_k": (7, 1, 1, 64, 2, 1, 0),
                    "orphan_k": (None,) * 7, "tensile_k": (2, 8, 1, 256, 1, 1, 0),
                    "odd_k": (2, 1, 1, 256, 1, 1, None)}
    assert_same_as_in_memory(path, tmp_path / "again", slice_bytes=slice_bytes)


def test_rocm_kernels_have_the_geometry_of_their_launch(tmp_path: Path) -> None:
    """mi250_minitoy: every kernel's grid, block and shared memory are its launch call's
    (the first call of its correlation id), as written in the file; the grid of its two
    hipExtModuleLaunchKernel GEMMs (512 and 512 x 8 threads of 256) in blocks."""
    path = corpus_path("hta", "amd_trace", "mi250_minitoy_train_ROCm6_2_kineto.json.gz")
    events = load_trace(path)["traceEvents"]
    launches: dict[Any, dict[str, Any]] = {}
    for e in events:
        if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {}):
            launches.setdefault(e["args"]["correlation"], {**e["args"], "_call": e["name"]})
    want = {}
    for i, e in enumerate(events):
        if e.get("cat") == "kernel" and e["args"].get("correlation") in launches:
            a = launches[e["args"]["correlation"]]
            grid = a["grid"]
            if a.get("_call") == "hipExtModuleLaunchKernel":  # threads: in blocks, rounded up
                grid = [-(-g // b) for g, b in zip(grid, a["block"])]
            want[i] = (*grid, *a["block"], a["shared memory"])
    _, got = run_pipeline(path, tmp_path / "spill")
    ours = {k["kernel_id"]: tuple(k[c] for c in GEOMETRY)
            for k in got["kernels"].to_pylist() if k["kind"] == "kernel"}
    assert want and ours == want
    gemms = sorted(g[:3] for i, g in ours.items() if events[i]["name"].startswith("Cijk_"))
    assert gemms == [(2, 1, 1), (2, 8, 1)]
