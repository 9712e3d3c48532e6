"""CUPTI_ACTIVITY_KIND_SYNCHRONIZATION → syncs rows: where the host or a stream waited.

The kind comes from the call that synchronized (the runtime or driver call with the same
correlation id whose span holds the wait), not from syncType: before nsys 2025.1 the
stored syncType does not follow the export's own ENUM_CUPTI_SYNC_TYPE (2024.6 labels every
cudaStreamSynchronize "Stream wait sync"; 2022.1 gives stream syncs and stream waits the
same value). syncType is read only where the export also writes deprecatedSyncType.

An event sync or stream wait names a CUDA event (eventId); the record that set it is the
CUPTI_ACTIVITY_KIND_CUDA_EVENT row of the same context and event id with the largest
correlation id below the wait's (Kineto's rule), or the row eventSyncId names (2025.1+).
Its stream is the stream whose work the wait awaits.
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import numpy as np

from etl.extract.fields import field_map

if TYPE_CHECKING:
    import pyarrow as pa

    from etl.extract.nsys.decode import Export

SYNC_TABLE = "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"
EVENT_TABLE = "CUPTI_ACTIVITY_KIND_CUDA_EVENT"
CALL_TABLES = ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_DRIVER")
NOT_APPLICABLE = 0xFFFFFFFF  # CUPTI_SYNCHRONIZATION_INVALID_VALUE
_VERSION_SUFFIX = re.compile(r"_v\d+$")


def read_syncs(export: Export, strings: dict[int, str], source_id: int, first_id: int,
               offset: int) -> pa.Table | None:
    """The export's synchronizations as syncs rows (times + `offset`, ids from
    `first_id`); None when it has none."""
    import pyarrow as pa

    rows = _read(export, SYNC_TABLE, "sync")
    if rows is None or len(rows["start"]) == 0:
        return None
    n = len(rows["start"])
    calls = _call_names(export, strings, rows)
    kinds = [_kind(call, sync_type, "trusted_type" in rows)
             for call, sync_type in zip(calls, rows["sync_type"].tolist())]
    wait_stream, record = _records(export, rows)
    return pa.table({
        "source_id": pa.repeat(pa.scalar(source_id, pa.int32()), n),
        "rank": pa.nulls(n, pa.int32()),  # an nsys export does not say
        "sync_id": pa.array(np.arange(first_id, first_id + n), pa.int64()),
        "kind": pa.array(kinds, pa.string()),
        "name": pa.array(calls, pa.string()),
        "device_id": pa.array(rows["device"], pa.int32()),
        "stream_id": _valid(rows["stream"]),
        "ts_ns": pa.array(rows["start"] + offset, pa.int64()),
        "dur_ns": pa.array(rows["end"] - rows["start"], pa.int64()),
        "correlation_id": pa.array(rows["correlation"], pa.int64()),
        "wait_stream_id": wait_stream, "wait_record_correlation_id": record,
        "cuda_event_id": _valid(rows["event"])})


def _read(export: Export, table: str, section: str) -> dict[str, np.ndarray] | None:
    """The section's columns of a small table as int64 arrays (absent columns left out)."""
    present = set(export.columns(table))
    if not present:
        return None
    chosen = {key: next((c for c in spellings if c in present), None)
              for key, spellings in field_map("nsys")[section].items()}
    chosen = {key: column for key, column in chosen.items() if column is not None}
    listed = ", ".join(f'"{c}"' for c in chosen.values())
    fetched = export.con.execute(f'SELECT {listed} FROM "{table}" ORDER BY rowid').fetchall()
    columns = list(zip(*fetched)) if fetched else [()] * len(chosen)
    return {key: np.array([np.iinfo(np.int64).min if v is None else v for v in values],
                          dtype=np.int64) for key, values in zip(chosen, columns)}


def _call_names(export: Export, strings: dict[int, str], rows: dict[str, np.ndarray]
                ) -> list[str | None]:
    """Per wait, the name of the call with its correlation id whose span holds it."""
    wanted = set(rows["correlation"].tolist())
    spans: dict[int, list[tuple[int, int, str]]] = {}
    for table in CALL_TABLES:
        for start, end, correlation, name in _calls_of(export, table, wanted):
            text = _VERSION_SUFFIX.sub("", strings.get(name, ""))
            spans.setdefault(correlation, []).append((start, end, text))
    names: list[str | None] = []
    for correlation, start, end in zip(rows["correlation"], rows["start"], rows["end"]):
        candidates = spans.get(int(correlation), [])
        inside = [n for s, e, n in candidates if s <= start and end <= e]
        anywhere = [n for _, _, n in candidates]
        names.append(inside[0] if inside else anywhere[0] if anywhere else None)
    return names


def _calls_of(export: Export, table: str, wanted: set[int]) -> list[tuple[int, int, int, int]]:
    present = set(export.columns(table))
    if not {"start", "end", "correlationId", "nameId"} <= present or not wanted:
        return []
    found: list[tuple[int, int, int, int]] = []
    ids = sorted(wanted)
    for i in range(0, len(ids), 500):  # SQLite's limit on bound parameters
        part = ids[i:i + 500]
        found += export.con.execute(
            f'SELECT start, "end", correlationId, nameId FROM "{table}" WHERE correlationId '
            f"IN ({', '.join('?' * len(part))})", part).fetchall()
    return found


def _kind(call: str | None, sync_type: int, trusted: bool) -> str:
    by_call = field_map("nsys")["sync_calls"]
    if call in by_call:
        return str(by_call[call])
    if trusted:
        return str(field_map("nsys")["sync_types"].get(str(sync_type), "unknown"))
    return "unknown"


def _records(export: Export, rows: dict[str, np.ndarray]) -> tuple[pa.Array, pa.Array]:
    """(recorded stream, record correlation id) per wait, from the event records."""
    import pyarrow as pa

    events = _read(export, EVENT_TABLE, "cuda_event")
    n = len(rows["start"])
    streams: list[int | None] = [None] * n
    records: list[int | None] = [None] * n
    if events is None or len(events["event"]) == 0:
        return pa.array(streams, pa.int64()), pa.array(records, pa.int64())
    for i in range(n):
        found = _record_of(events, rows, i)
        if found is not None:
            streams[i] = int(events["stream"][found])
            records[i] = int(events["correlation"][found])
    return pa.array(streams, pa.int64()), pa.array(records, pa.int64())


def _record_of(events: dict[str, np.ndarray], rows: dict[str, np.ndarray], i: int
               ) -> int | None:
    """The event record a wait awaits: by eventSyncId where both sides write one, else the
    same context and event id with the largest correlation id below the wait's."""
    if "event_sync" in rows and "event_sync" in events and _id(rows["event_sync"][i]):
        same = np.flatnonzero(events["event_sync"] == rows["event_sync"][i])
        if len(same):
            return int(same[0])
    if not _id(rows["event"][i]):
        return None
    same = np.flatnonzero((events["event"] == rows["event"][i])
                          & (events["context"] == rows["context"][i])
                          & (events["correlation"] < rows["correlation"][i]))
    if not len(same):
        return None
    return int(same[np.argmax(events["correlation"][same])])


def _id(value: Any) -> bool:
    return bool(0 <= int(value) < NOT_APPLICABLE)


def _valid(values: np.ndarray) -> pa.Array:
    """Ids with CUPTI's 'not applicable' (and missing values) as NULL."""
    import pyarrow as pa

    mask = (values < 0) | (values >= NOT_APPLICABLE)
    return pa.array(values, pa.int64(), mask=mask)
