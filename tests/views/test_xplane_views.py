"""Peak memory (gpu_utilization, run_summary) and batch_scaling (v1 and v2) on small
xplanes whose numbers are worked out by hand."""
from __future__ import annotations

from pathlib import Path

import pytest

import etl
from etl.load.ingest import ingest_all
from etl.warehouse.store import Warehouse
from tests.extract.xplane.test_xplane import run_folder
from tests.extract.xplane.xspace_writer import V100, profile_bytes

GIB, MIB = 1 << 30, 1 << 20
MEMORY = V100["memory_size"]


def test_peak_memory_within_each_iteration(tmp_path: Path) -> None:
    folder = run_folder(tmp_path / "runs", {"h": profile_bytes(steps=3, memory_steps=2)})
    ingest_all([folder], Warehouse.at(tmp_path / "wh"))
    with etl.connect(tmp_path / "wh") as con:
        rows = con.execute(
            "SELECT iteration, peak_allocated_bytes, peak_reserved_bytes, peak_memory_share, "
            "memory_status FROM gpu_utilization ORDER BY iteration").fetchall()
        summary = con.execute("SELECT selected_iteration, peak_allocated_bytes, memory_status "
                              "FROM run_summary").fetchall()
    # step s allocates up to 1 GiB + (s + 1) * 64 MiB and frees back to 1 GiB inside its
    # window; step 2 has no allocator event: the level carried in (1 GiB) is its peak
    peaks = [GIB + 64 * MIB, GIB + 128 * MIB, GIB]
    assert rows == [(s, peaks[s], 2 * GIB, pytest.approx(peaks[s] / MEMORY), "measured")
                    for s in range(3)]
    assert summary == [(0, GIB + 64 * MIB, "measured")]


def test_no_memory_events_is_null_with_a_reason(tmp_path: Path) -> None:
    folder = run_folder(tmp_path / "runs", {"h": profile_bytes(steps=2, memory=False)})
    ingest_all([folder], Warehouse.at(tmp_path / "wh"))
    with etl.connect(tmp_path / "wh") as con:
        rows = con.execute("SELECT peak_allocated_bytes, peak_memory_share, memory_status "
                           "FROM gpu_utilization").fetchall()
    assert rows == [(None, None, "no_memory_events")] * 2


def _run(root: Path, name: str, exec_mode: str, precision: str, batch: int,
         step_ns: int) -> Path:
    folder = run_folder(root, {"h": profile_bytes(steps=3, step_ns=step_ns)}, name=name)
    (folder / "run.toml").write_text(
        f'model = "bert"\nframework = "tensorflow"\nexec_mode = "{exec_mode}"\n'
        f'precision = "{precision}"\nbatch_size = {batch}\ngpu = "V100"\n', encoding="utf-8")
    return folder


@pytest.mark.parametrize("view", ["batch_scaling_v1", "batch_scaling_v2"])
def test_batch_scaling_by_hand(tmp_path: Path, view: str) -> None:
    root = tmp_path / "runs"
    # window = step_ns - 2 µs (the host span of a step); throughput = batch * 1e9 / window
    folders = [_run(root, "e8", "eager", "fp32", 8, 1_002_000),
               _run(root, "e16", "eager", "fp32", 16, 1_002_000),
               _run(root, "e32", "eager", "fp32", 32, 2_002_000),
               _run(root, "x8", "xla", "fp32", 8, 502_000)]
    results = ingest_all(folders, Warehouse.at(tmp_path / "wh"))
    assert {r.status for r in results} == {"ingested"}
    with etl.connect(tmp_path / "wh") as con:
        rows = con.execute(
            "SELECT exec_mode, batch_size, throughput_samples_per_s, smaller_batch_size, "
            "throughput_gain_ratio, eager_fp32_ratio, peak_memory_share, tc_active_util "
            f"FROM {view} ORDER BY exec_mode, batch_size").fetchall()
    e8, e16, e32, x8 = 8e9 / 1e6, 16e9 / 1e6, 32e9 / 2e6, 8e9 / 5e5
    # the representative iteration (run_summary: the first steady one, step 0) holds 1 GiB
    # + 64 MiB at its peak
    share = pytest.approx((GIB + 64 * MIB) / MEMORY)
    assert rows == [
        ("eager", 8, pytest.approx(e8), None, None, 1.0, share, None),
        ("eager", 16, pytest.approx(e16), 8, pytest.approx(2.0), 1.0, share, None),
        ("eager", 32, pytest.approx(e32), 16, pytest.approx(1.0), 1.0, share, None),
        ("xla", 8, pytest.approx(x8), None, None, pytest.approx(2.0), share, None)]
