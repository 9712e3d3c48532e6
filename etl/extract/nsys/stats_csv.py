"""`nsys stats --report cuda_gpu_trace --format csv` → kernels (and devices, iterations).

The report lists kernels, copies and sets with start (ns since the session start),
duration, correlation id, grid/block, registers, shared memory (MB), bytes (MB), device
("NAME (index)") and stream; it has no runtime calls, NVTX ranges or session start. So:
no launches (launch_event_id NULL, one anomaly for the source), one whole-trace
iteration row, and times on the session clock (anomaly clock_unaligned). Columns are
found by name; `:base` (short names) and full names read alike.
"""
from __future__ import annotations

import csv
import io
import re
from pathlib import Path
from typing import Any

from etl.core.errors import InputError
from etl.extract.nsys.read import _anomaly_table
from etl.extract.trace_role import SourceInfo, TraceResult

_DEVICE = re.compile(r"^(?P<name>.*?)\s*\((?P<index>\d+)\)\s*$")
INT_COLUMNS = {"CorrId": "correlation_id", "GrdX": "grid_x", "GrdY": "grid_y",
               "GrdZ": "grid_z", "BlkX": "block_x", "BlkY": "block_y", "BlkZ": "block_z",
               "Reg/Trd": "registers_per_thread", "Strm": "stream_id"}
MB = 1 << 20  # nsys stats prints MiB as "MB"


def read(path: Path, source_id: int, gpu_override: str | None, spill: Path,
                     sinks: Any, options: Any) -> TraceResult:
    import pyarrow as pa

    text = path.read_bytes().decode("utf-8-sig", errors="replace")
    rows = list(csv.DictReader(io.StringIO(text.replace("\0", ""))))
    header = set(rows[0].keys()) if rows else set()
    if not {"Start (ns)", "Duration (ns)", "Name"} <= header:
        raise InputError(path, "no cuda_gpu_trace rows (the header is there, rows are not)",
                         "line 2", "re-run nsys stats --report cuda_gpu_trace --format csv")
    kept, torn = [], 0
    for i, row in enumerate(rows):
        parsed = _row(row, i)
        if parsed is None:
            torn += 1
        else:
            kept.append(parsed)
    if not kept:
        raise InputError(path, "no cuda_gpu_trace row could be read", "line 2",
                         "re-run nsys stats --report cuda_gpu_trace --format csv")
    table = _kernels(kept, source_id)
    sinks.kernels(table)
    found: list[tuple[str, int | None, str]] = [
        ("kernel_without_launch", None, "nsys stats cuda_gpu_trace has no runtime calls: "
         "no kernel has a launch (ingest the SQLite export for launches and iterations)"),
        ("clock_unaligned", None, "nsys stats cuda_gpu_trace has no session start: times "
         "are ns since the session start, not wall clock")]
    if torn:
        found.append(("torn_rows", None, f"{torn} row(s) without a start, duration or name "
                      "skipped"))
    sinks.anomalies(_anomaly_table(found, source_id))
    starts = [r["ts_ns"] for r in kept]
    ends = [r["ts_ns"] + r["dur_ns"] for r in kept]
    iterations = pa.table({"source_id": pa.array([source_id], pa.int32()),
                           "rank": pa.nulls(1, pa.int32()), "iteration": pa.nulls(1, pa.int64()),
                           "start_ns": pa.array([min(starts)], pa.int64()),
                           "end_ns": pa.array([max(ends)], pa.int64()),
                           "boundary": pa.array(["whole_trace"]),
                           "event_id": pa.nulls(1, pa.int64())})
    devices = _devices(kept, source_id, gpu_override)
    names = [n for n in devices.column("name").to_pylist() if n]
    return TraceResult(SourceInfo(len(kept)), iterations, devices, None, names, len(kept),
                      len(found))


def _row(row: dict[str, Any], i: int) -> dict[str, Any] | None:
    start, dur = _int(row.get("Start (ns)")), _int(row.get("Duration (ns)"))
    name = row.get("Name")
    if start is None or dur is None or not name:
        return None
    kind = ("memcpy" if name.startswith("[CUDA memcpy") else
            "memset" if name.startswith("[CUDA memset") else "kernel")
    device = _DEVICE.match(row.get("Device") or "")
    shared = [_float(row.get(c)) for c in ("StcSMem (MB)", "DymSMem (MB)")]
    moved = _float(row.get("Bytes (MB)"))
    return {"kernel_id": i, "kind": kind, "name": name, "ts_ns": start, "dur_ns": dur,
            "device_id": int(device.group("index")) if device else None,
            "device_name": device.group("name") if device else None,
            **{col: _int(row.get(src)) for src, col in INT_COLUMNS.items()},
            "shared_memory_bytes": (round(sum(s for s in shared if s is not None) * MB)
                                    if kind == "kernel" and any(s is not None for s in shared)
                                    else None),
            "bytes": round(moved * MB) if moved is not None and kind != "kernel" else None}


def _int(text: Any) -> int | None:
    try:
        return int(str(text).strip())
    except (TypeError, ValueError):
        return None


def _float(text: Any) -> float | None:
    try:
        return float(str(text).strip())
    except (TypeError, ValueError):
        return None


def _kernels(rows: list[dict[str, Any]], source_id: int) -> Any:
    import pyarrow as pa

    from etl.extract.layer_columns import with_layer_columns

    n = len(rows)

    def col(name: str, type_: pa.DataType) -> pa.Array:
        return pa.array([r.get(name) for r in rows], type_)

    i64 = pa.int64()
    table = pa.table({
        "source_id": pa.repeat(pa.scalar(source_id, pa.int32()), n),
        "rank": pa.nulls(n, pa.int32()), "kernel_id": col("kernel_id", i64),
        "kind": col("kind", pa.string()), "category": col("kind", pa.string()),
        "device_id": col("device_id", pa.int32()), "stream_id": col("stream_id", i64),
        "name": col("name", pa.string()), "ts_ns": col("ts_ns", i64), "dur_ns": col("dur_ns", i64),
        "correlation_id": col("correlation_id", i64), "external_id": pa.nulls(n, i64),
        **{k: col(k, i64) for k in ("grid_x", "grid_y", "grid_z", "block_x", "block_y",
                                    "block_z", "registers_per_thread", "shared_memory_bytes",
                                    "bytes")},
        "launch_event_id": pa.nulls(n, i64), "op_event_id": pa.nulls(n, i64),
        "op_name": pa.nulls(n, pa.string()), "layer": pa.nulls(n, pa.string()),
        "iteration": pa.nulls(n, i64)})
    return with_layer_columns(table, "nvtx", None)


def _devices(rows: list[dict[str, Any]], source_id: int, gpu_override: str | None) -> Any:
    import pyarrow as pa

    seen: dict[int, str | None] = {}
    for r in rows:
        if r["device_id"] is not None:
            seen.setdefault(r["device_id"], r["device_name"] or gpu_override)
    ids = sorted(seen)
    n = len(ids)
    return pa.table({
        "source_id": pa.repeat(pa.scalar(source_id, pa.int32()), n),
        "rank": pa.nulls(n, pa.int32()), "device_id": pa.array(ids, pa.int32()),
        "name": pa.array([seen[i] for i in ids], pa.string()),
        "compute_capability": pa.nulls(n, pa.string()), "sm_count": pa.nulls(n, pa.int32()),
        "memory_bytes": pa.nulls(n, pa.int64()),
        "properties_source": pa.array(["cuda_gpu_trace" if seen[i] else None for i in ids],
                                      pa.string())})
