"""What the graph is built from: one run's calls, GPU activities, synchronizations, step
markers and thread extents, read from its tables as numpy columns.

The same queries serve a run's staged Parquet files at ingest and the warehouse at query
time: the caller's DuckDB connection has relations named host_events, kernels, syncs and
iterations (etl/replay/stage.py registers the staged files under those names).
"""
from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import duckdb

NONE = np.iinfo(np.int64).min  # a missing integer in the numpy columns
_SUFFIX = re.compile(r"_v\d+$")


@cache
def call_roles() -> dict[str, Any]:
    """calls.toml: which calls synchronize, copy synchronously or make a stream wait; its
    call categories with Kineto's launch categories added (fields.toml launch = true)."""
    from etl.extract.fields import field_map

    with open(Path(__file__).with_name("calls.toml"), "rb") as fh:
        roles = tomllib.load(fh)
    launches = [c for c, spec in field_map("kineto")["categories"].items() if spec.get("launch")]
    roles["categories"] = list(dict.fromkeys([*roles["categories"], *launches]))
    return roles


def role_of(name: str) -> str | None:
    """device_sync, stream_sync, event_sync, blocking_copy, stream_wait or None."""
    bare = _SUFFIX.sub("", name)
    roles = call_roles()
    for role in ("device_sync", "stream_sync", "event_sync", "blocking_copy", "stream_wait"):
        if bare in roles[role]:
            return role
    return None


@dataclass
class Columns:
    """A query's result as numpy arrays: integers with NONE for NULL; text as objects (each
    distinct value one shared str), with its dictionary codes kept for grouping by it."""

    data: dict[str, np.ndarray]
    codes: dict[str, tuple[np.ndarray, list[str | None]]] = field(default_factory=dict)

    def __getitem__(self, name: str) -> np.ndarray:
        return self.data[name]

    def __len__(self) -> int:
        return len(next(iter(self.data.values()))) if self.data else 0

    def coded(self, name: str) -> tuple[np.ndarray, list[str | None]]:
        """(code per row, the distinct values) of a text column."""
        return self.codes[name]


@dataclass
class RunEvents:
    calls: Columns      # host calls: source_id, event_id, thread, ts_ns, end_ns, name, ...
    gpu: Columns        # GPU activities (kernel, memcpy, memset) placed on a stream
    syncs: Columns      # synchronization records
    markers: Columns    # iteration step markers on their thread
    threads: Columns    # per (source, thread): first start, last end of any host event
    iterations: Columns  # every iteration row (boundary, start, end)
    scopes: Columns     # ops and annotations (not step markers): what host time is spent in


# a thread of a source: its pid and tid (a NULL one read as '', as the links read it)
THREAD = ("h.source_id::VARCHAR || chr(30) || coalesce(h.pid, '') || chr(31) || "
          "coalesce(h.tid, '')")
CALLS = """
WITH calls AS (
    SELECT h.source_id, h.event_id, h.rank, """ + THREAD + """ AS thread_name, h.ts_ns,
           h.ts_ns + h.dur_ns AS end_ns, h.dur_ns, h.name, h.correlation_id
    FROM host_events AS h
    WHERE h.run_id = $run AND h.ts_ns IS NOT NULL AND h.dur_ns >= 0
      AND (h.category IN ({categories})
           OR (h.source_id, h.event_id) IN (SELECT source_id, launch_event_id FROM kernels
                                           WHERE run_id = $run
                                             AND launch_event_id IS NOT NULL))
),
ops AS (
    SELECT """ + THREAD + """ AS thread_name, h.ts_ns, h.ts_ns + h.dur_ns AS end_ns, h.name,
           max(h.ts_ns + h.dur_ns) OVER (PARTITION BY thread_name ORDER BY h.ts_ns,
               h.dur_ns DESC ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS reach
    FROM host_events AS h
    WHERE h.run_id = $run AND h.category IN ({op_categories}) AND h.ts_ns IS NOT NULL
      AND h.dur_ns >= 0
      AND (h.source_id, h.event_id) NOT IN (  -- a step marker is no op (ProfilerStep#N)
          SELECT source_id, event_id FROM iterations
          WHERE run_id = $run AND event_id IS NOT NULL)
),
outermost AS (SELECT * FROM ops WHERE reach IS NULL OR ts_ns >= reach)
SELECT c.source_id, c.event_id, c.rank, c.thread_name, c.ts_ns, c.end_ns, c.name,
       c.correlation_id, CASE WHEN o.end_ns >= c.end_ns THEN o.name END AS op_name
FROM calls AS c
ASOF LEFT JOIN outermost AS o ON o.thread_name = c.thread_name AND o.ts_ns <= c.ts_ns
ORDER BY c.thread_name, c.ts_ns, c.dur_ns DESC, c.event_id
"""
# collective_instance and clock_shift_ns: collectives_v1's pairing of one collective across
# the run's ranks (only where it kept the pairing: its wait is known) and what moves the
# source's times onto the run's common clock, so the replay and the views pair alike
GPU = """
SELECT k.source_id, k.kernel_id, k.rank, k.device_id, k.stream_id, k.ts_ns,
       k.ts_ns + k.dur_ns AS end_ns, k.kind, k.kernel_type, k.name, k.op_name, k.layer,
       k.launch_event_id, k.correlation_id, k.iteration,
       c.instance AS collective_instance,
       coalesce(max(c.aligned_start_ns - c.start_ns) OVER (PARTITION BY k.source_id), 0)
           AS clock_shift_ns
FROM kernels AS k
LEFT JOIN (SELECT source_id, kernel_id, instance, start_ns, aligned_start_ns
           FROM collectives_v1
           WHERE run_id = $run AND wait_ns IS NOT NULL) AS c
  ON c.source_id = k.source_id AND c.kernel_id = k.kernel_id
WHERE k.run_id = $run AND k.kind IN ('kernel', 'memcpy', 'memset') AND k.ts_ns IS NOT NULL
  AND k.dur_ns >= 0 AND k.device_id IS NOT NULL AND k.stream_id IS NOT NULL
ORDER BY k.source_id, k.kernel_id
"""
SYNCS = """
SELECT source_id, sync_id, kind, device_id, stream_id, ts_ns, ts_ns + dur_ns AS end_ns,
       correlation_id, wait_stream_id, wait_record_correlation_id
FROM syncs
WHERE run_id = $run AND ts_ns IS NOT NULL AND dur_ns >= 0
ORDER BY source_id, sync_id
"""
MARKERS = """
SELECT i.source_id, i.iteration, """ + THREAD + """ AS thread_name, i.start_ns, i.end_ns,
       (h.dur_ns IS NULL OR h.ts_ns + h.dur_ns <> i.end_ns)::INT AS end_inferred
FROM iterations AS i
JOIN host_events AS h
  ON h.run_id = i.run_id AND h.source_id = i.source_id AND h.event_id = i.event_id
WHERE i.run_id = $run AND i.boundary <> 'whole_trace' AND i.start_ns IS NOT NULL
  AND i.end_ns IS NOT NULL
ORDER BY i.source_id, i.iteration
"""
THREADS = """
SELECT h.source_id, """ + THREAD + """ AS thread_name, min(h.ts_ns) AS start_ns,
       max(h.ts_ns + h.dur_ns) AS end_ns
FROM host_events AS h
WHERE h.run_id = $run AND h.ts_ns IS NOT NULL AND h.dur_ns >= 0
GROUP BY ALL
ORDER BY thread_name
"""
SCOPES = """
SELECT """ + THREAD + """ AS thread_name, h.ts_ns, h.ts_ns + h.dur_ns AS end_ns, h.name
FROM host_events AS h
WHERE h.run_id = $run AND h.category IN ({scope_categories}) AND h.ts_ns IS NOT NULL
  AND h.dur_ns >= 0
  AND (h.source_id, h.event_id) NOT IN (
      SELECT source_id, event_id FROM iterations WHERE run_id = $run AND event_id IS NOT NULL)
ORDER BY thread_name, h.ts_ns, h.dur_ns DESC
"""
ITERATIONS = """
SELECT source_id, rank, iteration, boundary, start_ns, end_ns
FROM iterations
WHERE run_id = $run
ORDER BY source_id, iteration
"""


def read_run(con: duckdb.DuckDBPyConnection, run_id: str) -> RunEvents:
    """One run's events, from relations the connection names as the warehouse tables."""
    params = {"run": run_id}
    return RunEvents(
        calls=_columns(con, CALLS.format(categories=_listed("categories"),
                                         op_categories=_listed("op_categories")), params),
        gpu=_columns(con, GPU, params), syncs=_columns(con, SYNCS, params),
        markers=_columns(con, MARKERS, params), threads=_columns(con, THREADS, params),
        iterations=_columns(con, ITERATIONS, params),
        scopes=_columns(con, SCOPES.format(scope_categories=_listed("scope_categories")),
                        params))


def _listed(role: str) -> str:
    """A calls.toml list as SQL string literals."""
    return ", ".join("'" + c.replace("'", "''") + "'" for c in call_roles()[role])


def _columns(con: duckdb.DuckDBPyConnection, sql: str, params: dict[str, Any]) -> Columns:
    import pyarrow as pa
    import pyarrow.compute as pc

    table = con.execute(sql, params).to_arrow_table()
    data: dict[str, np.ndarray] = {}
    codes: dict[str, tuple[np.ndarray, list[str | None]]] = {}
    for name in table.column_names:
        column = table[name]
        if pa.types.is_integer(column.type):
            data[name] = np.asarray(pc.fill_null(column.cast(pa.int64()), NONE)
                                    .to_numpy(zero_copy_only=False), dtype=np.int64)
            continue
        encoded = pc.dictionary_encode(column).combine_chunks()
        values = encoded.dictionary.to_pylist() + [None]
        index = np.asarray(encoded.indices.fill_null(len(values) - 1)
                           .to_numpy(zero_copy_only=False), dtype=np.int64)
        data[name] = np.array(values, dtype=object)[index]
        codes[name] = (index, values)
    return Columns(data, codes)


query_columns = _columns  # a query's result as Columns, for the analyses that read more
