"""The warehouse on disk: immutable run folders of Parquet, a manifest, a view-only DuckDB.

Layout (everything under one root, default ./warehouse):
    data/<run_id>/<table>.parquet   one folder per run, written once, never modified
    data/_schema/<table>.parquet    zero-row files so every view works on an empty warehouse
    catalog/runs.parquet            the manifest: the `runs` table; a run is visible iff here
    staging/                        runs being written (renamed into data/ when complete)
    warehouse.duckdb                views only (tables are views over the Parquet files)

Why this shape: a reader (the DuckDB shell, `etl query`) may hold warehouse.duckdb open
while `etl ingest` runs. Publishing a run therefore never touches the database file: the
run folder is renamed into data/ (atomic), then the manifest is replaced by rename (atomic),
under an exclusive lock on `.publish.lock` that serialises writers. Every table view keeps
only rows whose run_id is in the manifest, so a run appears whole at the next query, and a
process killed at any point leaves the previous manifest in force. Superseded run folders
are deleted only after a grace period, so a query that listed them still finds them.
"""
from __future__ import annotations

import fcntl
import os
import shutil
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from etl.errors import WarehouseError
from etl.schema import TABLES, conform, table_schema

if TYPE_CHECKING:
    import pyarrow as pa

RUN_TABLES = tuple(t for t in TABLES if t != "runs")
GRACE_SECONDS = 600
ROW_GROUP_ROWS = 1 << 20


@dataclass(frozen=True)
class Warehouse:
    root: Path

    @classmethod
    def at(cls, root: Path | str) -> Warehouse:
        return cls(Path(root).expanduser().resolve())

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def manifest(self) -> Path:
        return self.root / "catalog" / "runs.parquet"

    @property
    def database(self) -> Path:
        return self.root / "warehouse.duckdb"

    @property
    def staging(self) -> Path:
        return self.root / "staging"

    def init(self) -> None:
        """Create the layout and zero-row schema files (idempotent, safe to race)."""
        if self.root.exists() and not self.root.is_dir():
            raise WarehouseError(f"{self.root}: exists and is not a folder; choose another "
                                 "--warehouse")
        for folder in (self.data, self.manifest.parent, self.staging):
            folder.mkdir(parents=True, exist_ok=True)
        schema_dir = self.data / "_schema"
        if not all((schema_dir / f"{t}.parquet").exists() for t in RUN_TABLES):
            self._write_schema_files(schema_dir)
        if not self.manifest.exists():
            with self.publish_lock():
                if not self.manifest.exists():
                    _atomic_write_parquet(empty_table("runs"), self.manifest)

    def _write_schema_files(self, schema_dir: Path) -> None:
        staged = self.staging / f"schema-{uuid.uuid4().hex}"
        staged.mkdir(parents=True)
        for table in RUN_TABLES:
            _write_parquet(empty_table(table), staged / f"{table}.parquet")
        try:
            os.rename(staged, schema_dir)
        except OSError:  # another process won the race, or an older layout: replace
            shutil.rmtree(schema_dir, ignore_errors=True)
            os.rename(staged, schema_dir)

    @contextmanager
    def publish_lock(self) -> Iterator[None]:
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / ".publish.lock", "a+") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def read_runs(self) -> pa.Table:
        import pyarrow.parquet as pq

        if not self.manifest.exists():
            return empty_table("runs")
        return pq.read_table(self.manifest)

    def stage(self, run_id: str, tables: dict[str, pa.Table]) -> Path:
        """Write a run's tables into a private staging folder; nothing is visible yet."""
        folder = self.staging / f"{run_id}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        folder.mkdir(parents=True)
        for table in RUN_TABLES:
            _write_parquet(conform(table, tables[table]), folder / f"{table}.parquet")
        _fsync_dir(folder)
        return folder

    def publish(self, staged: Path, run_id: str, runs_row: pa.Table) -> None:
        """Make a staged run visible, replacing any run of the same name, atomically."""
        import pyarrow as pa
        import pyarrow.compute as pc

        target = self.data / run_id
        with self.publish_lock():
            if target.exists():
                shutil.rmtree(staged)  # identical content is already there
                os.utime(target)
            else:
                os.rename(staged, target)
                _fsync_dir(self.data)
            runs = self.read_runs()
            name = runs_row["run_name"][0].as_py()
            keep = runs.filter(pc.invert(pc.equal(runs["run_name"], name)))
            new = pa.concat_tables([conform("runs", keep), conform("runs", runs_row)])
            _atomic_write_parquet(new.sort_by("run_name"), self.manifest)
            self._collect_garbage(set(new["run_id"].to_pylist()), runs)

    def _collect_garbage(self, live: set[str], before: pa.Table) -> None:
        """Drop run folders out of the manifest for longer than the grace period."""
        now = time.time()
        for old in set(before["run_id"].to_pylist()) - live:
            folder = self.data / old
            if folder.exists():
                os.utime(folder)  # superseded now: the grace period starts
        for folder in self.data.iterdir():
            if folder.name.startswith("_") or folder.name in live:
                continue
            if now - folder.stat().st_mtime > GRACE_SECONDS:
                shutil.rmtree(folder, ignore_errors=True)
        self._clean_staging(now)

    def _clean_staging(self, now: float) -> None:
        for folder in self.staging.iterdir():
            pid = _staging_pid(folder.name)
            if (pid is None or not _alive(pid)) and now - folder.stat().st_mtime > 60:
                shutil.rmtree(folder, ignore_errors=True)


def _staging_pid(name: str) -> int | None:
    parts = name.split("-")
    return int(parts[1]) if len(parts) >= 3 and parts[1].isdigit() else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def empty_table(table: str) -> pa.Table:
    return table_schema(table).arrow().empty_table()


def _write_parquet(table: pa.Table, path: Path) -> None:
    import pyarrow.parquet as pq

    with open(path, "wb") as fh:
        pq.write_table(table, fh, compression="zstd", row_group_size=ROW_GROUP_ROWS)
        fh.flush()
        os.fsync(fh.fileno())


def _atomic_write_parquet(table: pa.Table, path: Path) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    _write_parquet(table, tmp)
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
