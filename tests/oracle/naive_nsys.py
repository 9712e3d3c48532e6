"""A naive reading of an nsys SQLite export with plain sqlite3 SQL: the reference for the
streaming reader (etl/extract/nsys/). Row numbering as the reader's (runtime calls, driver
calls, NVTX ranges, then kernels, copies, sets, each in rowid order); launches are the
first call with the activity's correlation id. No linking beyond that.
"""
from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

NVTX_RANGES = (59, 60, 70, 71)


def host_rows(path: Path) -> list[tuple[Any, ...]]:
    """(event_id, category, name, start, dur, thread, correlation) per host row."""
    con = _open(path)
    rows = []
    for table, category in (("CUPTI_ACTIVITY_KIND_RUNTIME", "cuda_runtime"),
                            ("CUPTI_ACTIVITY_KIND_DRIVER", "cuda_driver")):
        if _has(con, table):
            rows += [(category, *r) for r in con.execute(
                f"SELECT s.value, c.start, c.end - c.start, c.globalTid, c.correlationId "
                f"FROM {table} c LEFT JOIN StringIds s ON s.id = c.nameId ORDER BY c.rowid")]
    if _has(con, "NVTX_EVENTS"):
        rows += [("nvtx", *r) for r in con.execute(
            "SELECT coalesce(n.text, s.value), n.start, n.end - n.start, n.globalTid, NULL "
            "FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId "
            f"WHERE n.eventType IN {NVTX_RANGES} ORDER BY n.rowid")]
    return [(i, *r) for i, r in enumerate(rows)]


def gpu_rows(path: Path) -> list[tuple[Any, ...]]:
    """(kernel_id, kind, name, start, dur, device, correlation, grid x, block x,
    shared bytes, launch event id) per kernel, copy and set."""
    con = _open(path)
    hosts = host_rows(path)
    first_launch: dict[int, int] = {}
    for event_id, category, _, _, _, _, corr in hosts:
        if category != "nvtx" and corr is not None:
            first_launch.setdefault(corr, event_id)
    queries = {
        "kernel": "SELECT s.value, k.start, k.end - k.start, k.deviceId, k.correlationId, "
                  "k.gridX, k.blockX, k.staticSharedMemory + k.dynamicSharedMemory "
                  "FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                  "LEFT JOIN StringIds s ON s.id = k.demangledName ORDER BY k.rowid",
        "memcpy": "SELECT '[CUDA memcpy ' || CASE copyKind WHEN 1 THEN 'HtoD' WHEN 2 THEN "
                  "'DtoH' WHEN 8 THEN 'DtoD' WHEN 10 THEN 'PtoP' ELSE 'other' END || ']', "
                  "start, end - start, deviceId, correlationId, NULL, NULL, NULL "
                  "FROM CUPTI_ACTIVITY_KIND_MEMCPY ORDER BY rowid",
        "memset": "SELECT '[CUDA memset]', start, end - start, deviceId, correlationId, "
                  "NULL, NULL, NULL FROM CUPTI_ACTIVITY_KIND_MEMSET ORDER BY rowid"}
    rows = []
    for kind, sql in queries.items():
        if _has(con, f"CUPTI_ACTIVITY_KIND_{kind.upper()}"):
            rows += [(kind, *r) for r in con.execute(sql)]
    first = len(hosts)
    return [(first + i, *r, first_launch.get(r[5])) for i, r in enumerate(rows)]


def _open(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True)


def _has(con: sqlite3.Connection, table: str) -> bool:
    found = con.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (table,)).fetchone()
    return found is not None


def gpu_samples(path: Path, metric_map: dict[str, str]) -> list[tuple[Any, ...]]:
    """(sample_index, device_index, clock_ts_ns, metric, value, unit, reported_unit) per
    GPU_METRICS row, a Python loop over sqlite3's rows: names from
    TARGET_INFO_GPU_METRICS ("Name [Unit]"), % values divided by 100."""
    con = _open(path)
    names = {(t, m): n for t, m, n in con.execute(
        "SELECT typeId, metricId, metricName FROM TARGET_INFO_GPU_METRICS")}
    rows = []
    for i, (ts, type_id, metric_id, value) in enumerate(con.execute(
            "SELECT timestamp, typeId, metricId, value FROM GPU_METRICS ORDER BY rowid")):
        base, _, unit = (names.get((type_id, metric_id)) or f"metric {metric_id}"
                         ).partition(" [")
        percent = "%" in unit
        rows.append((i, None if type_id is None else type_id & 0xFF, ts,
                     metric_map.get(base, base),
                     value / 100 if percent and value is not None else value,
                     "ratio" if percent else None, unit.rstrip("]") or None))
    return rows
