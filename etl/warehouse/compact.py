"""Compaction: the current publishes of many runs rewritten into one segment folder.

Why: DuckDB opens every file a table view lists, once per reference to the table in a
query, and a one-run query of gpu_utilization references the tables about a dozen times.
With one folder per run, 1 000 runs cost seconds of file opening whatever the filter; in
segments of SEGMENT_RUNS runs, each table file sorted by run_id, the same query opens ten
files and skips the other runs' row groups by their statistics.

A segment is a publish of many runs at once (Warehouse.publish_segment): its runs.parquet
holds one row per run with a new publish_id (so the run's rows in its old folder, kept
for the grace period, never join the new `runs` row) and a new publish_seq. A run
republished while the segment was being written keeps that newer publish; its rows in
the segment are never joined. Values are copied, never recomputed: every table of a run
reads the same before and after.

Which runs: those alone in their folder, and the live runs of segments where most runs
were republished since (SPARSE_SHARE). `etl ingest` compacts when AUTO_FOLDERS single-run
folders have piled up; `etl compact` does it at once. One compaction runs at a time (a
second one returns at once); it holds a reader lease, so nothing it reads is deleted under
it, and the publish lock only for its commit.
"""
from __future__ import annotations

import fcntl
import os
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from etl.warehouse.store import RUN_TABLES, Publication, TableWriter, Warehouse

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.parquet as pq

SEGMENT_RUNS = 100     # runs per segment: ten files per table scan at 1 000 runs
AUTO_FOLDERS = 64      # single-run folders that make `etl ingest` compact
SPARSE_SHARE = 0.5     # a segment with fewer live runs than this share is rewritten
SEGMENT_PREFIX = "seg-"
BATCH_ROWS = 1 << 16   # rows read at a time: memory holds a batch and one row group out


@dataclass(frozen=True)
class Member:
    """One run to copy into a segment: where its current publish is, and its new id."""
    run_name: str
    publish_id: str
    folder: str
    new_publish_id: str


@dataclass(frozen=True)
class CompactResult:
    segments: list[Publication]
    runs: int
    busy: bool = False  # another compaction was running


def needs_compaction(warehouse: Warehouse) -> bool:
    """Whether AUTO_FOLDERS (or $ETL_AUTO_COMPACT_FOLDERS) single-run folders hold current
    publishes."""
    threshold = int(os.environ.get("ETL_AUTO_COMPACT_FOLDERS", AUTO_FOLDERS))
    current = warehouse.read_runs(["publish_id"])
    return len(_single_run_folders(current)) >= threshold


def compact(warehouse: Warehouse) -> CompactResult:
    """Rewrite every single-run folder and sparse segment into segments."""
    with _compaction_lock(warehouse) as acquired:
        if not acquired:
            return CompactResult([], 0, busy=True)
        warehouse.collect_garbage()  # segments left by an earlier compaction, if due
        with warehouse.reader_lease():
            current = warehouse.read_runs()
            members = _members(warehouse, current)
            published = []
            for start in range(0, len(members), SEGMENT_RUNS):
                group = members[start:start + SEGMENT_RUNS]
                if (segment := _write_segment(warehouse, current, group)) is not None:
                    published.append(segment)
    if published:
        max(published, key=lambda p: p.visible_from_us).wait_until_visible()
    return CompactResult(published, len(members))


@contextmanager
def _compaction_lock(warehouse: Warehouse) -> Iterator[bool]:
    warehouse.root.mkdir(parents=True, exist_ok=True)
    with open(warehouse.root / ".compact.lock", "a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _single_run_folders(current: pa.Table) -> list[str]:
    return [f for f in current["folder"].to_pylist() if not f.startswith(SEGMENT_PREFIX)]


def _members(warehouse: Warehouse, current: pa.Table) -> list[Member]:
    """The runs to rewrite, sorted by run_id (the segment's row order); none if fewer
    than two (a segment of one run gains nothing)."""
    live = current["folder"].to_pylist()
    wanted = set(_single_run_folders(current)) | _sparse_segments(warehouse, live)
    rows = [r for r in current.select(["run_id", "run_name", "publish_id", "folder"])
            .to_pylist() if r["folder"] in wanted]
    rows.sort(key=lambda r: (r["run_id"], r["run_name"]))
    if len(rows) < 2:
        return []
    return [Member(r["run_name"], r["publish_id"], r["folder"],
                   f"{r['run_id']}-{uuid.uuid4().hex[:12]}") for r in rows]


def _sparse_segments(warehouse: Warehouse, live: list[str]) -> set[str]:
    """Segments whose live runs are fewer than SPARSE_SHARE of the runs they hold."""
    import pyarrow.parquet as pq

    sparse = set()
    for folder in {f for f in live if f.startswith(SEGMENT_PREFIX)}:
        held = pq.ParquetFile(warehouse.data / folder / "runs.parquet").metadata.num_rows
        if live.count(folder) < SPARSE_SHARE * held:
            sparse.add(folder)
    return sparse


def _write_segment(warehouse: Warehouse, current: pa.Table,
                   group: list[Member]) -> Publication | None:
    stem = f"{SEGMENT_PREFIX}{uuid.uuid4().hex[:16]}"
    staged = warehouse.new_stage(stem)
    try:
        for table in RUN_TABLES:
            writer = TableWriter(staged, table, {})
            for member in group:
                for batch in _rows_of(warehouse, table, member):
                    writer.write(batch)
            writer.close()
        expected = {m.run_name: m.publish_id for m in group}
        return warehouse.publish_segment(staged, _runs_rows(current, group), stem, expected)
    finally:
        if staged.exists():  # not published: an error, or every run republished meanwhile
            shutil.rmtree(staged, ignore_errors=True)


def _runs_rows(current: pa.Table, group: list[Member]) -> pa.Table:
    """The group's `runs` rows, in group order, with their new publish ids."""
    import pyarrow as pa

    index = {name: i for i, name in enumerate(current["run_name"].to_pylist())}
    rows = current.take(pa.array([index[m.run_name] for m in group], pa.int64()))
    rows = rows.drop_columns(["folder"])
    position = rows.schema.get_field_index("publish_id")
    return rows.set_column(position, "publish_id",
                           pa.array([m.new_publish_id for m in group], pa.string()))


def _rows_of(warehouse: Warehouse, table: str, member: Member) -> Iterator[pa.Table]:
    """The member's rows of `table`, a row group at a time, under its new publish id and
    in the current schema (a column added since the run was published is NULL)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    path = warehouse.data / member.folder / f"{table}.parquet"
    if not path.exists():
        return  # a publish that never had this table has no rows in it
    source = pq.ParquetFile(path)
    groups = [i for i in range(source.num_row_groups)
              if _may_hold(source, i, member.publish_id)]
    for batch in source.iter_batches(BATCH_ROWS, row_groups=groups):
        rows = pa.Table.from_batches([batch])
        rows = rows.filter(pc.equal(rows["publish_id"], member.publish_id))
        if rows.num_rows:
            yield _as_current(table, rows, member.new_publish_id)


def _may_hold(source: pq.ParquetFile, index: int, publish_id: str) -> bool:
    """False when the row group's publish_id statistics exclude `publish_id`."""
    group = source.metadata.row_group(index)
    column = source.schema_arrow.get_field_index("publish_id")
    stats = group.column(column).statistics
    if stats is None or not stats.has_min_max:
        return True
    return bool(stats.min <= publish_id <= stats.max)


def _as_current(table: str, rows: pa.Table, publish_id: str) -> pa.Table:
    import pyarrow as pa

    from etl.core.schema import table_schema

    schema = table_schema(table).arrow()
    for field in schema:
        if field.name not in rows.column_names:
            rows = rows.append_column(field.name, pa.nulls(rows.num_rows, field.type))
    rows = rows.select(schema.names)
    return rows.set_column(schema.get_field_index("publish_id"), "publish_id",
                           pa.repeat(pa.scalar(publish_id, pa.string()), rows.num_rows))
