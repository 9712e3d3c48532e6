"""At ingest: the run's graph replayed with its measured durations, and the critical path
of every iteration window written as critical_path_segments rows.

The staged tables are read through DuckDB under the warehouse's table names, so that the
graph is built by the same queries as at query time (etl/replay/inputs.py).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from etl.replay import critical_path, engine, graph, inputs, windows

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

UNLINKED_WHAT = {
    "stream_sync": "stream synchronizations that do not say which stream they waited for",
    "event_sync": "event synchronizations that do not say which event record they waited for",
    "stream_wait_event": "stream waits whose event record or streams are not in the trace",
    "collective_unpaired": "collective kernels whose ranks hold different counts of them",
}
UNLINKED_REMEDY = ("their waits are kept as measured in replays; profile with CUDA "
                   "synchronization events (torch.profiler _ExperimentalConfig("
                   "enable_cuda_sync_events=True), or nsys) to link them")


@dataclass
class Measured:
    segments: pa.Table          # critical_path_segments rows (without run_id, publish_id)
    anomalies: list[tuple[str, str]]  # (kind, detail)


def measured_critical_path(con: duckdb.DuckDBPyConnection, run_id: str) -> Measured:
    """The critical path of every window of the run (relations named as the tables)."""
    built = graph.build(inputs.read_run(con, run_id))
    result = engine.replay(built, engine.order(built), built.unit_factors())
    rows: list[dict[str, Any]] = []
    for window in windows.windows(built, result.time):
        for seq, segment in enumerate(critical_path.walk(built, result, window)):
            rows.append({"source_id": window.source_id, "rank": window.rank,
                         "device_id": window.device_id, "iteration": window.iteration,
                         "seq": seq, "segment_kind": segment.kind,
                         **critical_path.describe(built, segment),
                         "start_ns": segment.start_ns, "dur_ns": segment.dur_ns})
    return Measured(_table(rows), unlinked_anomalies(built))


def unlinked_anomalies(built: graph.Graph) -> list[tuple[str, str]]:
    """One dependency_unlinked anomaly per kind of link the trace lacks."""
    return [("dependency_unlinked", f"{count} {UNLINKED_WHAT.get(what, what)}: "
             f"{UNLINKED_REMEDY}") for what, count in sorted(built.unlinked.items())]


def _table(rows: list[dict[str, Any]]) -> pa.Table:
    import pyarrow as pa

    from etl.core.schema import table_schema

    schema = table_schema("critical_path_segments").arrow()
    fields = [f for f in schema if f.name not in ("run_id", "publish_id")]
    return pa.Table.from_pylist(rows, schema=pa.schema(fields))
