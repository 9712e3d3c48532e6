"""The memory level carried into a window, worked by hand: of several events at the
instant before it, the last one written (the allocator's order), and GPU memory of ROCm
traces (Device Type 6, HIP) read as GPU memory, with a device mismatch said as such."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import etl
from tests.conftest import kernel, launch, step, write_trace
from tests.extract.kineto.test_memory_events import MIB, memory


def ingest(tmp_path: Path, name: str, events: list[dict[str, Any]]) -> Path:
    write_trace(tmp_path / "runs" / name / "trace.json", events)
    [result] = etl.ingest([tmp_path / "runs" / name], tmp_path / "wh")
    assert result.status == "ingested", result.error
    return tmp_path / "wh"


def peaks(warehouse: Path, view: str, iteration: str = "iteration") -> list[tuple[Any, ...]]:
    con = etl.connect(warehouse)
    try:
        return con.execute(f"SELECT device_id, {iteration}, peak_allocated_bytes, "
                           f"peak_reserved_bytes, memory_status FROM {view} "
                           f"ORDER BY device_id, {iteration}").fetchall()
    finally:
        con.close()


def test_the_last_event_written_at_an_instant_is_carried_in(tmp_path: Path) -> None:
    """At 5 µs the allocator frees 3 MiB (written first: 4 -> 1 MiB allocated, 8 MiB
    reserved) then returns 2 MiB of its reserve (written second: 1 MiB, 6 MiB reserved).
    Step 1 [10 µs, 100 µs] has no event: its peak is the level after 5 µs, 1 MiB and 6 MiB
    (v2 took the largest: 1 MiB, 8 MiB); step 2's event at 150 µs is 3 MiB, 6 MiB."""
    events = [memory(1_000, 4 * MIB, 4 * MIB, reserved=8 * MIB),
              memory(5_000, 1 * MIB, -3 * MIB, reserved=8 * MIB),
              memory(5_000, 1 * MIB, 0, reserved=6 * MIB),
              step(1, 10_000, 90_000), launch(1, 11_000), kernel(1, 20_000, 30_000),
              step(2, 100_000, 100_000), launch(2, 110_000), kernel(2, 120_000, 30_000),
              memory(150_000, 3 * MIB, 2 * MIB, reserved=6 * MIB)]
    warehouse = ingest(tmp_path, "carry", events)
    assert peaks(warehouse, "gpu_utilization_v5") == [
        (0, 1, MIB, 6 * MIB, "device_memory_unknown"),
        (0, 2, 3 * MIB, 6 * MIB, "device_memory_unknown")]
    assert peaks(warehouse, "gpu_utilization_v4")[0][2:4] == (MIB, 8 * MIB)  # the largest
    assert peaks(warehouse, "run_summary_v5", "selected_iteration") == [
        (0, 1, MIB, 6 * MIB, "device_memory_unknown")]


def rocm(device: int) -> list[dict[str, Any]]:
    """A step on GPU 2, as the corpus MI250 trace numbers its kernels, with GPU memory
    events of Device Type 6 (HIP) on `device`."""
    return [step(1, 0, 100_000), launch(1, 1_000), kernel(1, 10_000, 30_000, device=2),
            memory(5_000, 2 * MIB, 2 * MIB, device_type=6, device=device),
            memory(50_000, 3 * MIB, MIB, device_type=6, device=device)]


def test_rocm_memory_is_gpu_memory(tmp_path: Path) -> None:
    warehouse = ingest(tmp_path, "rocm", rocm(device=2))
    con = etl.connect(warehouse)
    try:
        types = con.execute("SELECT DISTINCT device_type, device_id FROM memory_events"
                            ).fetchall()
    finally:
        con.close()
    assert types == [("GPU", 2)]
    assert peaks(warehouse, "gpu_utilization_v5") == [
        (2, 1, 3 * MIB, 4 * MIB, "device_memory_unknown")]


def test_rocm_memory_of_another_device_says_so(tmp_path: Path) -> None:
    """PyTorch numbers memory by its device index (0), the trace its kernels by the
    runtime's id (2): no peak for device 2, and the reason is not 'no memory events'."""
    warehouse = ingest(tmp_path, "rocm0", rocm(device=0))
    con = etl.connect(warehouse)
    try:
        [(kind, detail)] = con.execute("SELECT kind, detail FROM anomalies").fetchall()
    finally:
        con.close()
    assert kind == "memory_device_unmatched"
    assert detail.startswith("GPU memory events of device(s) 0 (2 events), on which no GPU "
                             "activity of this source ran (its activities ran on device(s) 2)")
    assert peaks(warehouse, "gpu_utilization_v5") == [
        (2, 1, None, None, "memory_events_of_other_devices")]
    assert peaks(warehouse, "gpu_utilization_v4")[0][4] == "no_memory_events"  # false
