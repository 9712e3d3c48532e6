"""The critical path of every iteration window, computed when asked and kept.

A replay is not one SELECT, and a run's graph holds all of its events, so the critical path
is not written at ingest (ingest keeps its memory bounded whatever the trace's size): it is
computed for a run when asked (`etl critical-path`, and `etl query` or `etl report` when
they read it), and kept as the derived table critical_path_segments, one file per run
publish (derived/<publish_id>/), which the views critical_path and critical_path_summary
read. A run ingested again is a new publish: its critical path is computed again when
asked, and the old one goes with the old publish.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from etl.replay import critical_path, engine, graph, inputs, windows

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

    from etl.warehouse.store import Warehouse

TABLE = "critical_path_segments"
UNLINKED_WHAT = {
    "stream_sync": "stream synchronizations that do not say which stream they waited for",
    "event_sync": "event synchronizations that do not say which event record they waited for",
    "stream_wait_event": "stream waits whose event record or streams are not in the trace",
    "collective_unpaired": ("collective kernels the view collectives could not pair across "
                            "ranks (their ends disagree, or no other rank has them)"),
}
UNLINKED_REMEDY = ("their waits are kept as measured in replays; profile with CUDA "
                   "synchronization events (torch.profiler _ExperimentalConfig("
                   "enable_cuda_sync_events=True), or nsys) to link them")


@dataclass
class Computed:
    runs: list[str] = field(default_factory=list)       # computed now
    kept: list[str] = field(default_factory=list)       # computed before
    unlinked: dict[str, Counter[str]] = field(default_factory=dict)  # per run computed

    def notes(self) -> list[str]:
        return [f"{run}: {count} {UNLINKED_WHAT.get(what, what)}: {UNLINKED_REMEDY}"
                for run, counts in sorted(self.unlinked.items())
                for what, count in sorted(counts.items())]


def missing(con: duckdb.DuckDBPyConnection, warehouse: Warehouse, run_names: list[str],
            table: str = TABLE) -> list[str]:
    """The runs named whose current publish (in `con`'s snapshot) has no rows of the
    derived `table` (the critical path by default) yet: a look at their files, where
    ensure() would open a snapshot of its own."""
    found = con.execute("SELECT run_name, publish_id FROM runs WHERE list_contains(?, run_name)",
                        [run_names]).fetchall()
    return sorted(name for name, publish_id in found
                  if not warehouse.derived_file(table, publish_id).exists())


def ensure(warehouse: Warehouse, run_names: list[str] | None = None) -> Computed:
    """Compute and keep the critical path of each current run (those named) lacking one."""
    from etl.views.database import ensure_views
    from etl.views.query import open_snapshot

    ensure_views(warehouse)  # False (another process holds it) still leaves current views
    con = open_snapshot(warehouse)
    try:
        runs = con.execute("SELECT run_name, run_id, publish_id FROM runs ORDER BY run_name"
                           ).fetchall()
        done = Computed()
        for name, run_id, publish_id in runs:
            if run_names is not None and name not in run_names:
                continue
            if warehouse.derived_file(TABLE, publish_id).exists():
                done.kept.append(name)
                continue
            rows, unlinked = measured_path(con, run_id)
            warehouse.write_derived(TABLE, publish_id, _stamped(rows, run_id, publish_id))
            done.runs.append(name)
            if unlinked:
                done.unlinked[name] = unlinked
        return done
    finally:
        con.close()


def measured_path(con: duckdb.DuckDBPyConnection, run_id: str
                  ) -> tuple[pa.Table, Counter[str]]:
    """The critical path rows of every window of the run, and what the graph could not
    link."""
    built = graph.build(inputs.read_run(con, run_id))
    result = engine.measured(built, engine.order(built))
    rows: dict[str, list[Any]] = {k: [] for k in ("source_id", "rank", "device_id",
                                                  "iteration", "seq", "segment_kind",
                                                  "start_ns", "dur_ns")}
    segments: list[critical_path.Segment] = []
    for window in windows.windows(built, result.time):
        path = critical_path.walk(built, result, window)
        segments += path
        for seq, segment in enumerate(path):
            for key, value in (("source_id", window.source_id), ("rank", window.rank),
                               ("device_id", window.device_id),
                               ("iteration", window.iteration), ("seq", seq),
                               ("segment_kind", segment.kind),
                               ("start_ns", segment.start_ns), ("dur_ns", segment.dur_ns)):
                rows[key].append(value)
    rows.update(critical_path.describe_all(built, segments))
    return _table(rows), built.unlinked


def _table(rows: dict[str, list[Any]]) -> pa.Table:
    import pyarrow as pa

    from etl.core.schema import table_schema

    schema = table_schema(TABLE).arrow()
    fields = [f for f in schema if f.name not in ("run_id", "publish_id")]
    return pa.table({f.name: pa.array(rows[f.name], f.type) for f in fields},
                    schema=pa.schema(fields))


def _stamped(rows: pa.Table, run_id: str, publish_id: str) -> pa.Table:
    import pyarrow as pa

    n = rows.num_rows
    return rows.append_column("run_id", pa.repeat(pa.scalar(run_id), n)).append_column(
        "publish_id", pa.repeat(pa.scalar(publish_id), n))
