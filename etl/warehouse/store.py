"""The warehouse on disk: immutable publish folders of Parquet and a view-only DuckDB.

Layout (everything under one root, default ./warehouse):
    data/<publish_id>.v<µs>/<table>.parquet  one folder per publish of a run, written once;
                                       visible to queries that start at or after <µs>
    data/<publish_id>.v<µs>/runs.parquet  the run's `runs` row, with its publish sequence
    data/seg-<id>.v<µs>/                a segment: many runs' publishes in one folder
                                       (etl/warehouse/compact.py), a `runs` row for each
    data/_schema/<table>.parquet       zero-row files so every view works on an empty warehouse
    catalog/sequence                   the last publish sequence number
    staging/                           runs being written (renamed into data/ when complete)
    readers/<pid>.<id>.lease           one per running `etl query`, locked while it runs
    warehouse.duckdb                   views only (tables are views over the Parquet files)

Why this shape: a reader (the DuckDB shell, `etl query`) may hold warehouse.duckdb open
while `etl ingest` runs, so publishing never touches the database file, and no file is ever
modified after it is written (a reader that opens a file twice must read the same bytes).
Publishing a run is one rename of its complete folder into data/, under an exclusive lock
on `.publish.lock` that serialises writers and hands out the sequence number. A process
killed at any point leaves no folder in data/ that is half written.

Snapshots. DuckDB lists a table's files when it binds each reference to it, so two
references in one query list data/ at two moments. What a query sees must therefore not
depend on the moment of listing, only on a value fixed for the whole query: the start of
its transaction (`get_current_timestamp()`, taken before DuckDB binds the statement). The
folder name carries the time its publish becomes visible, chosen PUBLISH_MARGIN_SECONDS
after the rename: every listing that a query starting later makes already holds the
folder, and a query that started earlier ignores it in every reference. The `runs` view
keeps, per run name, the highest sequence visible at the query's start; every table view
keeps the rows of those publishes only. Superseded folders are deleted after a grace
period, so a query (or a transaction) that started before still finds them; a query of
`etl query` holds a reader lease, and no folder it may read is deleted while it runs, however
long. Folders named without a time (older warehouses) are visible from the start.
"""
from __future__ import annotations

import fcntl
import os
import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from etl.core.errors import WarehouseError
from etl.core.schema import DERIVED_TABLES, TABLES, conform, table_schema

if TYPE_CHECKING:
    import pyarrow as pa

RUN_TABLES = tuple(t for t in TABLES if t != "runs")
GRACE_SECONDS = 600
# Between choosing a publish's visible-from time and the end of its rename there is only
# the rename: ~10 µs on a local disk, a round trip (~1 ms) on NFS. 50 ms covers that 50
# times over and the skew of NTP-synchronised hosts sharing a warehouse; a publish that
# still overruns it says so (ingest.LATE_PUBLISH). Each `etl ingest` waits it out once at
# the end, which is why it is not larger: it is the one fixed cost of every small ingest
# that is a sleep (0.25 s until 2026-11-29).
PUBLISH_MARGIN_SECONDS = 0.05
# A staging folder whose writer is gone is removed this long after its last change
STAGING_GRACE_SECONDS = 60
VISIBLE_SUFFIX = ".v"
ROW_GROUP_ROWS = 1 << 20
# Streamed tables buffer one row group in memory (~250 B a row for host events): a quarter
# of the size of whole-table writes keeps an ingest under its memory bound, and row groups
# this large already compress about as well.
STREAM_ROW_GROUP_ROWS = 1 << 17
SCHEMA_DIR = "_schema"
DERIVED_DIR = "derived"  # tables computed after a publish: derived/<publish_id>/<table>.parquet


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
    def sequence(self) -> Path:
        return self.root / "catalog" / "sequence"

    @property
    def database(self) -> Path:
        return self.root / "warehouse.duckdb"

    @property
    def derived(self) -> Path:
        return self.root / DERIVED_DIR

    def derived_file(self, table: str, publish_id: str) -> Path:
        """Where a derived table's rows of one run publish lie (whether they exist yet)."""
        return self.derived / publish_id / f"{table}.parquet"

    def write_derived(self, table: str, publish_id: str, rows: pa.Table) -> Path:
        """A derived table's rows of one run publish, put in place whole (written aside,
        then renamed): a reader sees all of them or none."""
        path = self.derived_file(table, publish_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{table}.{uuid.uuid4().hex}.parquet")
        _write_parquet(table, conform(table, rows), tmp)
        os.replace(tmp, path)
        return path

    @property
    def staging(self) -> Path:
        return self.root / "staging"

    @property
    def readers(self) -> Path:
        return self.root / "readers"

    def exists(self) -> bool:
        return (self.data / SCHEMA_DIR).is_dir()

    def existing(self) -> Warehouse:
        """This warehouse, or the one error every command and API call gives for a folder
        that holds none."""
        if not self.exists():
            raise WarehouseError(f"{self.root}: no warehouse here; ingest runs into it first "
                                 f"(etl ingest RUNS --warehouse {self.root}, or "
                                 f"etl.ingest(RUNS, {str(self.root)!r}))")
        return self

    def init(self) -> None:
        """Create the layout and zero-row schema files (idempotent, safe to race)."""
        if self.root.exists() and not self.root.is_dir():
            raise WarehouseError(f"{self.root}: exists and is not a folder; choose another "
                                 "--warehouse")
        with self.publish_lock():
            for folder in (self.data, self.sequence.parent, self.staging, self.derived):
                folder.mkdir(parents=True, exist_ok=True)
            for schema_dir, tables in ((self.data / SCHEMA_DIR, TABLES),
                                       (self.derived / SCHEMA_DIR, DERIVED_TABLES)):
                if not self._schema_files_current(schema_dir, tables):
                    self._write_schema_files(schema_dir, tables)

    def _schema_files_current(self, schema_dir: Path, tables: tuple[str, ...]) -> bool:
        """Every table has its zero-row file, with the schema schemas/ declares now: a
        warehouse made before a table or a column existed gets them written again (the
        views bind over these files). A folder found current once in this process is
        known by its inode and mtime: it is only ever replaced whole (a rename)."""
        import pyarrow.parquet as pq

        try:
            stamp = _folder_stamp(schema_dir)
        except FileNotFoundError:
            return False
        if stamp in _CURRENT_SCHEMA_DIRS:
            return True
        for table in tables:
            path = schema_dir / f"{table}.parquet"
            if not path.exists() or not pq.read_schema(path).remove_metadata().equals(
                    table_schema(table).arrow()):
                return False
        _CURRENT_SCHEMA_DIRS.add(stamp)
        return True

    def _write_schema_files(self, schema_dir: Path, tables: tuple[str, ...]) -> None:
        staged = self.staging / f"schema-{uuid.uuid4().hex}"
        staged.mkdir(parents=True)
        paths = [staged / f"{table}.parquet" for table in tables]
        for table, path in zip(tables, paths):
            _write_parquet(table, empty_table(table), path, sync=False)
        _fsync_together(paths)
        shutil.rmtree(schema_dir, ignore_errors=True)  # an older layout (we hold the lock)
        os.rename(staged, schema_dir)
        _CURRENT_SCHEMA_DIRS.add(_folder_stamp(schema_dir))

    @contextmanager
    def publish_lock(self, wait: bool = True) -> Iterator[None]:
        """The writers' lock; BlockingIOError at once when `wait` is False and it is held."""
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / ".publish.lock", "a+") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    @contextmanager
    def reader_lease(self) -> Iterator[None]:
        """Keep every folder this reader may read until it is done (see live_lease_starts).

        The lease is a file locked for the reader's life: a lease left by a killed reader is
        unlocked and removed by the next garbage collection. A warehouse the reader may not
        write to gets no lease: the reader then has the grace period only.
        """
        # one name per lease (not per process: one process may hold several at once)
        stem = self.readers / f"{os.getpid()}-{uuid.uuid4().hex}"
        lease = stem.with_name(stem.name + ".lease")
        try:
            self.readers.mkdir(exist_ok=True)
            fh = open(stem.with_name(stem.name + ".tmp"), "w")
            # locked before it is named .lease: an unlocked lease is a dead reader's
            fcntl.flock(fh, fcntl.LOCK_EX)
            os.rename(fh.name, lease)
        except OSError:
            yield
            return
        try:
            yield
        finally:
            lease.unlink(missing_ok=True)
            fh.close()

    def live_lease_starts(self) -> list[float]:
        """Start times (mtime) of the leases of running readers; stale leases are removed."""
        if not self.readers.is_dir():
            return []
        for unnamed in self.readers.glob("*.tmp"):  # a reader killed while taking its lease
            try:
                if time.time() - unnamed.stat().st_mtime > 60:
                    unnamed.unlink(missing_ok=True)
            except FileNotFoundError:
                continue  # renamed to .lease (or removed) since it was listed
        starts = []
        for lease in self.readers.glob("*.lease"):
            try:
                with open(lease) as fh:
                    started = os.fstat(fh.fileno()).st_mtime
                    fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    lease.unlink(missing_ok=True)  # we could lock it: its reader is gone
            except BlockingIOError:
                starts.append(started)
            except FileNotFoundError:
                continue  # its reader finished meanwhile
        return starts

    def read_runs(self, columns: list[str] | None = None) -> pa.Table:
        """The latest `runs` rows as writers see them: the highest publish sequence of each
        run name, also when that publish is not visible to queries yet (its margin).

        One multi-threaded scan of every data/*/runs.parquet (only `columns`, plus the two
        the choice needs), with a `folder` column: the name of the folder holding the
        publish (a run's own, or a segment of many runs, etl/warehouse/compact.py). A folder
        garbage-collected during the scan makes it start over.
        """
        import pyarrow as pa

        for _ in range(5):
            try:
                table = self._scan_runs(columns)
                break
            except (FileNotFoundError, OSError):
                continue
        else:
            raise WarehouseError(f"{self.data}: publish folders keep disappearing; retry")
        if table.num_rows == 0:
            return table
        table = table.sort_by([("run_name", "ascending"), ("publish_seq", "descending")])
        names = table["run_name"].to_pylist()
        keep = [i for i, n in enumerate(names) if i == 0 or names[i - 1] != n]
        return table.take(pa.array(keep, pa.int64()))

    def _scan_runs(self, columns: list[str] | None) -> pa.Table:
        import pyarrow as pa

        schema = table_schema("runs").arrow()
        wanted = None if columns is None else sorted(set(columns) | {"run_name", "publish_seq"})
        files = [str(d / "runs.parquet") for d in self._publish_dirs()]
        if not files:  # a new warehouse: no scan (pyarrow.dataset alone imports in 60 ms)
            empty = schema.empty_table() if wanted is None else schema.empty_table().select(
                wanted)
            return empty.append_column("folder", pa.array([], pa.string()))
        import pyarrow.dataset as ds

        scanner = ds.dataset(files, schema=schema, format="parquet").scanner(columns=wanted)
        batches, folders = [], []
        for tagged in scanner.scan_batches():
            batches.append(tagged.record_batch)
            # typed: an untyped scalar tries to import dateutil, once a folder (~40 µs)
            folder = pa.scalar(Path(tagged.fragment.path).parent.name, pa.string())
            folders.append(pa.repeat(folder, tagged.record_batch.num_rows))
        out_schema = scanner.projected_schema
        table = pa.Table.from_batches(batches, out_schema)
        folder = pa.concat_arrays(folders) if folders else pa.array([], pa.string())
        return table.append_column("folder", folder)

    def _publish_dirs(self) -> list[Path]:
        if not self.data.is_dir():
            return []
        return [p for p in self.data.iterdir() if p.name != SCHEMA_DIR and p.is_dir()]

    def new_stage(self, publish_id: str) -> Path:
        """A private staging folder for one run; nothing in it is visible until publish.

        The name ends in our pid: the garbage collector removes folders of dead writers.
        """
        folder = self.staging / f"{publish_id}.{os.getpid()}"
        folder.mkdir(parents=True)
        return folder

    def publish(self, staged: Path, runs_row: pa.Table) -> Publication:
        """Make a staged run visible, replacing any run of the same name: one rename.

        The run is visible to queries that start at `visible_from_us` or later.
        """
        stem = runs_row["publish_id"][0].as_py()
        published = self._commit(staged, runs_row, stem, expected=None)
        assert published is not None
        return published

    def publish_rows(self, staged: Path, runs_rows: pa.Table, stem: str) -> Publication:
        """Make a staged folder of several `runs` rows visible at once (etl/warehouse/manage.py: a
        renamed run and its old name's tombstone), replacing the runs of those names."""
        published = self._commit(staged, runs_rows, stem, expected=None)
        assert published is not None
        return published

    def publish_segment(self, staged: Path, runs_rows: pa.Table, stem: str,
                        expected: dict[str, str]) -> Publication | None:
        """Make a staged segment of many runs visible (etl/warehouse/compact.py), for the runs whose
        current publish is still the one it was made from (`expected`: run name → publish
        id); a run republished meanwhile keeps its new publish. None if no run is left."""
        return self._commit(staged, runs_rows, stem, expected)

    def _commit(self, staged: Path, rows: pa.Table, stem: str,
                expected: dict[str, str] | None) -> Publication | None:
        import pyarrow as pa
        import pyarrow.compute as pc

        with self.publish_lock():
            previous = self.read_runs(["publish_id"])
            if expected is not None:
                rows = _still_current(rows, previous, expected)
                if rows.num_rows == 0:
                    shutil.rmtree(staged, ignore_errors=True)
                    return None
            names = set(rows["run_name"].to_pylist())
            highest = pc.max(previous["publish_seq"]).as_py() or 0  # None: no runs yet
            seq = pa.repeat(pa.scalar(self._next_sequence(highest), pa.int64()), rows.num_rows)
            rows = rows.set_column(rows.schema.get_field_index("publish_seq"), "publish_seq", seq)
            _write_parquet("runs", conform("runs", rows), staged / "runs.parquet", sync=False)
            _fsync_together([p for p in staged.iterdir() if p.is_file()])
            _fsync_path(staged)
            visible_from = _now_us() + int(PUBLISH_MARGIN_SECONDS * 1e6)
            folder = self.data / f"{stem}{VISIBLE_SUFFIX}{visible_from}"
            os.rename(staged, folder)
            late = _now_us() >= visible_from
            _fsync_path(self.data)
            self._supersede(previous, names)
            # the runs as they are now, without reading them again: the ones kept, and these
            live = {folder.name, *values_of_kept_runs(previous, names, "folder")}
            current = {*values_of_kept_runs(previous, names, "publish_id"),
                       *rows["publish_id"].to_pylist()}
            self._collect_garbage(live, current)
        return Publication(folder.name, visible_from, late)

    def _next_sequence(self, highest: int) -> int:
        """One above the sequence file and `highest` (the runs' highest publish_seq): the
        file is replaced without an fsync, so after a power loss it may be empty or lag the
        publishes it numbered, and a new publish must still be the newest of its run."""
        try:
            current = int(self.sequence.read_text())
        except (FileNotFoundError, ValueError):
            current = 0
        value = max(current, highest) + 1
        tmp = self.sequence.with_name(f".sequence.{os.getpid()}.tmp")
        tmp.write_text(str(value))
        os.replace(tmp, self.sequence)
        return value

    def _supersede(self, previous: pa.Table, names: set[str]) -> None:
        """Start the grace period of the folders whose publishes of `names` are replaced
        (a segment stays live while another of its runs is current: see _collect_garbage)."""
        for row in previous.select(["run_name", "folder"]).to_pylist():
            if row["run_name"] in names and (self.data / row["folder"]).is_dir():
                os.utime(self.data / row["folder"])

    def collect_garbage(self) -> None:
        """What a publish collects, also between publishes (superseded folders would else
        stay listed, and slow every query, until the next ingest); skipped when a writer
        holds the lock or the warehouse is read-only for us. Every query ends here: while
        no folder is older than its grace (a warehouse whose every publish, derived and
        staging folder was made or superseded in the last ten minutes) the runs are not
        read, nor dead readers' leases reaped; otherwise the runs are read once."""
        try:
            if not self._past_grace(time.time()):
                return
            with self.publish_lock(wait=False):
                runs = self.read_runs(["publish_id"])
                self._collect_garbage(values_of_kept_runs(runs, set(), "folder"),
                                      set(runs["publish_id"].to_pylist()))
        except OSError:  # BlockingIOError, PermissionError, a read-only file system
            return

    def _past_grace(self, now: float) -> bool:
        """Whether some publish, derived or staging folder is older than its grace: the
        condition of every removal in _collect_garbage (a folder gone meanwhile is not)."""
        for parent, grace in ((self.data, GRACE_SECONDS), (self.derived, GRACE_SECONDS),
                              (self.staging, STAGING_GRACE_SECONDS)):
            if not parent.is_dir():
                continue
            for folder in parent.iterdir():
                try:
                    if folder.name != SCHEMA_DIR and now - folder.stat().st_mtime > grace:
                        return True
                except FileNotFoundError:
                    continue
        return False

    def _collect_garbage(self, live: set[str], current: set[str] | None = None) -> None:
        """Delete folders that hold no current publish (`live`: folder names), were
        superseded over the grace ago, and no running reader may read (one that started
        before the superseding publish became visible). `current`: the publish ids of
        the current runs, when the caller has read them."""
        now = time.time()
        leases = self.live_lease_starts()
        for folder in self._publish_dirs():
            superseded = folder.stat().st_mtime
            needed = any(start <= superseded + PUBLISH_MARGIN_SECONDS + 1 for start in leases)
            if (folder.name not in live and not needed
                    and now - superseded > GRACE_SECONDS):
                shutil.rmtree(folder, ignore_errors=True)
        self._collect_derived(now, leases, current)
        for folder in self.staging.iterdir():
            pid = _staging_pid(folder.name)
            if ((pid is None or not _alive(pid))
                    and now - folder.stat().st_mtime > STAGING_GRACE_SECONDS):
                shutil.rmtree(folder, ignore_errors=True)


    def _collect_derived(self, now: float, leases: list[float],
                         current: set[str] | None) -> None:
        """Derived rows of publishes no longer current, under the same grace as theirs."""
        if not self.derived.is_dir():
            return
        if current is None:
            current = set(self.read_runs(["publish_id"])["publish_id"].to_pylist())
        for folder in self.derived.iterdir():
            made = folder.stat().st_mtime
            needed = any(start <= made + PUBLISH_MARGIN_SECONDS + 1 for start in leases)
            if (folder.name not in current and folder.name != SCHEMA_DIR and not needed
                    and now - made > GRACE_SECONDS):
                shutil.rmtree(folder, ignore_errors=True)


# schema folders this process found current: (path, device, inode, mtime in ns)
_CURRENT_SCHEMA_DIRS: set[tuple[str, int, int, int]] = set()


def _folder_stamp(folder: Path) -> tuple[str, int, int, int]:
    st = folder.stat()
    return str(folder.resolve()), st.st_dev, st.st_ino, st.st_mtime_ns


@dataclass(frozen=True)
class Publication:
    folder: str           # its folder's name in data/
    visible_from_us: int  # µs since the epoch: queries starting then or later see it
    late: bool            # the rename ended after that time (see publish)

    def wait_until_visible(self) -> None:
        time.sleep(max(0.0, self.visible_from_us / 1e6 - time.time()))


def _still_current(rows: pa.Table, current: pa.Table, expected: dict[str, str]) -> pa.Table:
    """The rows of `rows` whose run's current publish is the expected one."""
    import pyarrow as pa

    now = dict(zip(current["run_name"].to_pylist(), current["publish_id"].to_pylist()))
    keep = [i for i, name in enumerate(rows["run_name"].to_pylist())
            if name in expected and now.get(name) == expected[name]]
    return rows.take(pa.array(keep, pa.int64()))


def values_of_kept_runs(current: pa.Table, replaced: set[str], column: str) -> set[str]:
    """`column` (folder, publish_id) of the current publishes (a read_runs table) of the
    runs not being replaced."""
    return {row[column] for row in current.select(["run_name", column]).to_pylist()
            if row["run_name"] not in replaced}


def _now_us() -> int:
    return time.time_ns() // 1000


def _staging_pid(name: str) -> int | None:
    suffix = name.rsplit(".", 1)[-1]
    return int(suffix) if suffix.isdigit() else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class TableWriter:
    """One table of a staged run, written as batches arrive, in row groups of
    STREAM_ROW_GROUP_ROWS rows.

    A full group is encoded and compressed in a background thread (Arrow releases the GIL)
    while the next one is built: at most one group is being written and one buffered.

    `constants` (run_id, publish_id) are added to every batch: a dict, or a function
    called once, at the first batch (ingest computes the ids while the first pass runs).
    """

    def __init__(self, folder: Path, table: str,
                 constants: dict[str, str] | Callable[[], dict[str, str]]) -> None:
        import pyarrow.parquet as pq

        self.table, self.rows = table, 0
        self._constants = constants
        self.path = folder / f"{table}.parquet"
        self._buffer: list[pa.Table] = []
        self._buffered = 0
        self._pending: Future[None] | None = None
        schema = table_schema(table)
        self._writer = pq.ParquetWriter(self.path, schema.arrow(), compression="zstd",
                                        use_dictionary=schema.dictionary_columns())

    def write(self, data: pa.Table) -> None:
        import pyarrow as pa

        n = data.num_rows
        if callable(self._constants):
            self._constants = self._constants()
        for name, value in reversed(self._constants.items()):
            data = data.add_column(0, name, pa.repeat(pa.scalar(value, pa.string()), n))
        self._buffer.append(conform(self.table, data))
        self._buffered += n
        self.rows += n
        if self._buffered >= STREAM_ROW_GROUP_ROWS:
            self.flush()

    def flush(self) -> None:
        """Start writing what is buffered as a row group, once the previous group is
        written (also called at the end of a pass, so two tables' buffers are never full
        at once)."""
        import pyarrow as pa

        self._wait()
        if self._buffer:
            self._pending = _background_writes().submit(
                self._writer.write_table, pa.concat_tables(self._buffer),
                row_group_size=STREAM_ROW_GROUP_ROWS)
        self._buffer, self._buffered = [], 0

    def _wait(self) -> None:
        """Wait for the group being written; its error, if any, is raised here."""
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.result()

    def close(self) -> None:
        self.flush()
        self._wait()
        self._writer.close()  # not synced here: a publish syncs its folder's files together


_WRITER_THREAD: dict[int, ThreadPoolExecutor] = {}  # by process id


def _background_writes() -> ThreadPoolExecutor:
    """One thread for every table's row-group writes: a table's groups stay in order, and
    the writes of one process use at most one core besides the one building rows. Keyed
    by process: a forked child does not inherit the thread, only the executor object."""
    pid = os.getpid()
    if pid not in _WRITER_THREAD:
        _WRITER_THREAD[pid] = ThreadPoolExecutor(1, thread_name_prefix="parquet-write")
    return _WRITER_THREAD[pid]


def empty_table(table: str) -> pa.Table:
    return table_schema(table).arrow().empty_table()


def _write_parquet(name: str, table: pa.Table, path: Path, sync: bool = True) -> None:
    import pyarrow.parquet as pq

    with open(path, "wb") as fh:
        pq.write_table(table, fh, compression="zstd", row_group_size=ROW_GROUP_ROWS,
                       use_dictionary=table_schema(name).dictionary_columns())
        fh.flush()
        if sync:
            os.fsync(fh.fileno())


def _fsync_together(paths: list[Path]) -> None:
    """fsync many small files at once: the file system commits concurrent syncs in one
    journal transaction, where one after the other waited for a commit each (13 schema
    files took 0.3 s of a small trace's first ingest)."""
    with ThreadPoolExecutor(len(paths) or 1) as pool:
        list(pool.map(_fsync_path, paths))


def _fsync_path(path: Path) -> None:
    """fsync a file or a folder (a folder's entries: renames into it)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
