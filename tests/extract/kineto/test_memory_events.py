"""PyTorch [memory] instant events → memory_events, and their peaks in gpu_utilization."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import etl
from etl.load.ingest import ingest_all
from etl.warehouse.store import Warehouse
from tests.conftest import event, kernel, launch, step, write_trace

MIB = 1 << 20


def memory(ts: int, allocated: int, delta: int, device_type: int = 1, device: int = 0,
           reserved: int = 4 * MIB) -> dict[str, Any]:
    return event(ph="i", cat="cpu_instant_event", name="[memory]", ts=ts, dur=None, **{
        "Total Allocated": allocated, "Total Reserved": reserved, "Bytes": delta,
        "Addr": 140000000 + ts, "Device Id": device, "Device Type": device_type})


EVENTS = [
    step(1, 0, 100_000), launch(1, 3_000), kernel(1, 10_000, 30_000),
    memory(5_000, 1 * MIB, 1 * MIB), memory(50_000, MIB // 2, -(MIB // 2)),
    memory(60_000, 7, 7, device_type=0, device=-1),       # host memory: not device 0's
    step(2, 100_000, 100_000), launch(2, 110_000), kernel(2, 120_000, 30_000),
    memory(150_000, 4 * MIB, 3 * MIB + MIB // 2, reserved=8 * MIB),
]
PROPERTIES = [{"id": 0, "name": "A100", "totalGlobalMem": 64 * MIB, "computeMajor": 8,
               "computeMinor": 0, "numSms": 108}]


def test_memory_events_and_their_peaks(tmp_path: Path) -> None:
    write_trace(tmp_path / "runs" / "mem" / "trace.json", EVENTS, deviceProperties=PROPERTIES)
    [result] = ingest_all([tmp_path / "runs" / "mem"], Warehouse.at(tmp_path / "wh"))
    assert result.status == "ingested", result.error
    with etl.connect(tmp_path / "wh") as con:
        rows = con.execute("SELECT device_id, device_type, ts_ns, allocated_bytes, "
                           "reserved_bytes, delta_bytes, event_id IS NOT NULL "
                           "FROM memory_events ORDER BY ts_ns").fetchall()
        peaks = con.execute("SELECT iteration, peak_allocated_bytes, peak_reserved_bytes, "
                            "peak_memory_share, memory_status FROM gpu_utilization "
                            "ORDER BY iteration").fetchall()
    assert rows == [(0, "GPU", 5_000, MIB, 4 * MIB, MIB, True),
                    (0, "GPU", 50_000, MIB // 2, 4 * MIB, -(MIB // 2), True),
                    (None, "CPU", 60_000, 7, 4 * MIB, 7, True),
                    (0, "GPU", 150_000, 4 * MIB, 8 * MIB, 3 * MIB + MIB // 2, True)]
    # step 1: 1 MiB at 5 µs; step 2: 0.5 MiB carried in, then 4 MiB at 150 µs
    assert peaks == [(1, MIB, 4 * MIB, 1 / 64, "measured"),
                     (2, 4 * MIB, 8 * MIB, 4 / 64, "measured")]


def test_real_trace_memory_events_match_a_naive_reading(tmp_path: Path) -> None:
    import decimal
    import gzip
    import json
    import shutil

    from tests.conftest import corpus_path

    source = corpus_path("other", "tracelens", "h100",
                         "gaunernst_bert-small-uncased__1016001.json.gz")
    with gzip.open(source, "rt", encoding="utf-8") as fh:
        doc = json.load(fh, parse_float=decimal.Decimal)
    expected = sorted(
        (int(e["ts"] * 1000), e["args"]["Device Id"] if e["args"]["Device Type"] == 1 else None,
         e["args"]["Total Allocated"], e["args"]["Total Reserved"], e["args"]["Bytes"], i)
        for i, e in enumerate(doc["traceEvents"]) if e.get("name") == "[memory]")
    folder = tmp_path / "runs" / "bert"
    folder.mkdir(parents=True)
    shutil.copyfile(source, folder / source.name)
    [result] = ingest_all([folder], Warehouse.at(tmp_path / "wh"))
    assert result.status == "ingested", result.error
    with etl.connect(tmp_path / "wh") as con:
        got = con.execute("SELECT ts_ns, device_id, allocated_bytes, reserved_bytes, "
                          "delta_bytes, event_id FROM memory_events ORDER BY ALL").fetchall()
    assert len(expected) == 236 and got == expected


def test_the_carried_level_at_a_shared_instant_is_the_largest(tmp_path: Path) -> None:
    """Two events at 50 µs, before step 2 and none inside it: the level carried into step 2
    is the larger of the two (gpu_utilization_v4's definition; v3 took either)."""
    events = [step(1, 0, 40_000), launch(1, 3_000), kernel(1, 10_000, 20_000),
              memory(50_000, 3 * MIB, 3 * MIB), memory(50_000, 2 * MIB, -MIB, reserved=6 * MIB),
              step(2, 100_000, 100_000), launch(2, 110_000), kernel(2, 120_000, 30_000)]
    write_trace(tmp_path / "runs" / "mem" / "trace.json", events, deviceProperties=PROPERTIES)
    [result] = ingest_all([tmp_path / "runs" / "mem"], Warehouse.at(tmp_path / "wh"))
    assert result.status == "ingested", result.error
    with etl.connect(tmp_path / "wh") as con:
        peaks = con.execute("SELECT iteration, peak_allocated_bytes, peak_reserved_bytes "
                            "FROM gpu_utilization_v4 ORDER BY iteration").fetchall()
    assert peaks == [(1, None, None), (2, 3 * MIB, 6 * MIB)]
