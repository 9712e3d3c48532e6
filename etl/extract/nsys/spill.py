"""Pass 1 of the nsys reader: the export's tables, batch by batch, spilled.

Host rows (runtime and driver calls, then NVTX ranges) and GPU activities (kernels,
copies, sets) are numbered in that order, as the export lists them, and written to the
spill folder with their names as codes: host rows to Parquet (DuckDB sorts them), GPU
rows straight into the join's partitions by correlation id (Arrow IPC, parts/<k>/), so
pass 3 never reads them back to split them. What must be known of the whole source
before linking stays in memory and is small: the step ranges, the span, the device ids.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from etl.extract.nsys.launch_join import CALL_COLUMNS, CALL_PART, PROCESS, join_launches
from etl.extract.nsys.decode import Export
from etl.extract.fields import field_map
from etl.extract.step_names import StepNames

if TYPE_CHECKING:
    import pyarrow as pa

CATEGORIES = ("cuda_runtime", "cuda_driver", "nvtx")
GPU_KINDS = ("kernel", "memcpy", "memset")   # kernels.kind (and category), by code
HOST_FILE, NVTX_FILE, PARTS = "host.parquet", "nvtx.parquet", "parts"
CALLS_IN_ORDER = "calls-{}-{:03d}.arrow"   # a run in start order of a call table (CallSpill)
MAX_RUNS = 64     # runs pass 2 merges (a buffered batch each); more: they are sorted
NVTX_IN_MEMORY = 1 << 20     # NVTX ranges pass 2 may hold to merge in (~80 bytes each)
GPU_PART, LAYER_PART = "gpu.arrow", "layer.arrow"   # in PARTS/<k>/
SCATTER_ROWS = 1 << 19    # rows split into partitions at once (~80 MB of GPU rows)
_CALLS = (("CUPTI_ACTIVITY_KIND_RUNTIME", 0), ("CUPTI_ACTIVITY_KIND_DRIVER", 1))
_ACTIVITIES = (("CUPTI_ACTIVITY_KIND_KERNEL", "kernel"), ("CUPTI_ACTIVITY_KIND_MEMCPY", "memcpy"),
               ("CUPTI_ACTIVITY_KIND_MEMSET", "memset"))
# CUDA graphs traced whole (nsys --cuda-graph-trace=graph, its default where available):
# one row per graph execution on its stream, none for the kernels inside. Each becomes a
# kernels row named GRAPH_NAME over the execution's span, linked to its cudaGraphLaunch by
# correlation id (read.py flags them: cuda_graph_traced_whole).
GRAPH_TABLE, GRAPH_NAME = "CUPTI_ACTIVITY_KIND_GRAPH_TRACE", "[CUDA graph]"
_GPU_TABLES = (*(table for table, _ in _ACTIVITIES), GRAPH_TABLE)
SPILLED_TABLES = (*(table for table, _ in _CALLS), *_GPU_TABLES)   # the tables pass 1 reads
PID_SHIFT, PID_MASK = 24, 0xFFFFFF   # nsys's serialized globalTid / globalPid: pid in bits 24-47
_ACTIVITY_KEYS = ("start", "end", "device", "stream", "correlation", "name", "grid_x", "grid_y",
                  "grid_z", "block_x", "block_y", "block_z", "registers", "static_shared",
                  "dynamic_shared", "bytes", "copy_kind", "process")


def gpu_texts() -> list[str]:
    """The names nsys leaves to the reader: copies by kind, sets."""
    kinds = [*field_map("nsys")["copy_kinds"].values(), "Unknown"]
    return [*(f"[CUDA memcpy {kind}]" for kind in kinds), "[CUDA memset]", GRAPH_NAME]


class Names:
    """Host event names as codes into one string array: StringIds values first, then the
    names of copies and sets (gpu_texts), then the distinct NVTX texts in order of
    appearance (few: a text per kind of range)."""

    def __init__(self, strings: dict[int, str]) -> None:
        import pyarrow as pa

        self.strings = strings  # StringIds as read
        self.ids = pa.array(list(strings), pa.int64())
        self.values = list(strings.values())
        self.extra: dict[str, int] = {}
        self._array: pa.Array | None = None   # self.values as Arrow, while no text is added
        for text in gpu_texts():  # coded alike in every process that reads the export
            self._code(text)

    def of_ids(self, ids: pa.Array) -> pa.Array:
        """Codes of StringIds ids (NULL for an id StringIds lacks)."""
        import pyarrow.compute as pc

        return pc.index_in(ids, value_set=self.ids).cast("int64")

    def of_texts(self, texts: pa.Array) -> pa.Array:
        import pyarrow.compute as pc

        distinct = pc.unique(texts).drop_null()
        codes = [self._code(t) for t in distinct.to_pylist()]
        import pyarrow as pa

        return pc.take(pa.array(codes, pa.int64()), pc.index_in(texts, value_set=distinct))

    def _code(self, text: str) -> int:
        if text not in self.extra:
            self.extra[text] = len(self.values)
            self.values.append(text)
            self._array = None
        return self.extra[text]

    def codes_of(self, text: str, n: int) -> pa.Array:
        """`n` codes of one text."""
        import pyarrow as pa

        return pa.repeat(pa.scalar(self._code(text), pa.int64()), n)

    def text(self, codes: pa.Array) -> pa.Array:
        import pyarrow as pa
        import pyarrow.compute as pc

        if self._array is None:
            self._array = pa.array(self.values, pa.string())
        return pc.take(self._array, codes)

    def lookup(self, ids: pa.Array) -> pa.Array:
        """StringIds values of `ids`."""
        return self.text(self.of_ids(ids))


@dataclass
class StepRanges:
    """NVTX ranges whose name matches a step pattern: group 1 is the iteration number."""

    patterns: StepNames
    rows: list[np.ndarray] = field(default_factory=list)
    numbers: list[np.ndarray] = field(default_factory=list)
    start: list[np.ndarray] = field(default_factory=list)
    end: list[np.ndarray] = field(default_factory=list)
    has_end: list[np.ndarray] = field(default_factory=list)
    threads: list[np.ndarray] = field(default_factory=list)   # globalTid (pid in it)

    def find(self, ids: np.ndarray, names: pa.Array, start: np.ndarray, end: pa.Array,
             thread: np.ndarray) -> None:
        """Keep the batch's step ranges; the patterns run once per distinct name."""
        import pyarrow.compute as pc

        distinct = pc.unique(names).drop_null()
        numbers = [self._number(name) for name in distinct.to_pylist()]
        at = pc.index_in(names, value_set=distinct).fill_null(-1).to_numpy()
        lookup = np.array(numbers + [-1], np.int64)  # -1: no match (position -1 → last)
        number = lookup[at]
        hit = np.flatnonzero(number >= 0)
        self.rows.append(ids[hit])
        self.numbers.append(number[hit])
        self.start.append(start[hit])
        self.end.append(end.fill_null(-1).to_numpy()[hit])
        self.has_end.append(end.is_valid().to_numpy(zero_copy_only=False)[hit])
        self.threads.append(thread[hit])

    def _number(self, name: str) -> int:
        number = self.patterns.number(name)
        return -1 if number is None else number


@dataclass
class GpuSpilled:
    """What the GPU half of pass 1 knows of the GPU rows (numbered from 0 among them)."""

    rows: int = 0
    start: int | None = None        # min start of the GPU rows
    end: int | None = None          # max end
    devices: set[int] = field(default_factory=set)
    processes: set[int] = field(default_factory=set)   # globalPid of the GPU rows
    graphs: int = 0                 # rows of GRAPH_TABLE (CUDA graphs traced whole)
    by_process: bool = False        # the rows carry their pid (names_processes)
    parts: Partitioning | None = None   # the partitioning used (a worker finds its own)


@dataclass
class Spilled:
    """What pass 1 knows of the whole source. The GPU half may still be under way in a
    worker process: `gpu` waits for it; `close` (always) stops the worker."""

    host_rows: int = 0
    nvtx_rows: int = 0
    host_start: int | None = None   # min start (NULL as 0) of host rows
    host_end: int | None = None     # max end (NULL as -1)
    # each call table is a few runs in start order (nsys writes a thread's calls in start
    # order, one thread's after another's): pass 2 then merges the runs (in_order.py)
    # instead of sorting the rows
    calls_in_runs: bool = True
    call_runs: int = 0
    _last_call_start: dict[int, int] = field(default_factory=dict)  # by category
    has_activity_tables: bool = False
    by_process: bool = False        # launches joined per process (names_processes)
    parts: Partitioning = field(default_factory=lambda: Partitioning(1))
    _gpu: GpuSpilled | Future[GpuSpilled] = field(default_factory=GpuSpilled)
    _joined: Future[None] | None = None
    _pool: Executor | None = None

    def run_starts(self, start: pa.ChunkedArray, category: int) -> np.ndarray | None:
        """Where runs in start order begin in one more batch of a call table (a row that
        starts before the row above it, the table's first row); None once the tables
        hold more than MAX_RUNS runs (NULL starts are 0 by then)."""
        if not self.calls_in_runs:
            return None
        values = np.asarray(start.to_numpy(), np.int64)
        breaks = np.flatnonzero(values[1:] < values[:-1]) + 1
        last = self._last_call_start.get(category)
        if len(values) and (last is None or values[0] < last):
            breaks = np.r_[0, breaks]
        if len(values):
            self._last_call_start[category] = int(values[-1])
        self.call_runs += len(breaks)
        self.calls_in_runs = self.call_runs <= MAX_RUNS
        return breaks if self.calls_in_runs else None

    @property
    def in_start_order(self) -> bool:
        """Pass 2 merges the rows as written: the call tables in at most MAX_RUNS runs in
        start order (CALLS_IN_ORDER) and few enough NVTX ranges to hold."""
        return self.calls_in_runs and self.nvtx_rows <= NVTX_IN_MEMORY

    @property
    def gpu(self) -> GpuSpilled:
        if isinstance(self._gpu, Future):
            self._gpu = self._gpu.result()
            if self._gpu.parts != self.parts:
                raise RuntimeError(f"the GPU worker partitioned by {self._gpu.parts}, "
                                   f"this process by {self.parts}")
        return self._gpu

    def wait_for_gpu(self) -> None:
        """Pass 1's GPU half done: the partitions' gpu.arrow are complete."""
        _ = self.gpu

    def wait_for_join(self) -> None:
        """Pass 3a (launch_join.py) done: the partitions' joined.arrow are complete."""
        if self._joined is not None:
            self._joined.result()
            self._joined = None

    def aside(self, task: Callable[..., None], *args: Any) -> Future[None] | None:
        """`task(*args)` in the worker once its pass 1 and 3a are done; None without a
        worker (the caller does it itself)."""
        return None if self._pool is None else self._pool.submit(task, *args)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None


def spill_export(export: Export, names: Names, steps: StepRanges, folder: Path,
                 offset: int, workers: int = 1) -> Spilled:
    """Pass 1: host rows to host.parquet / nvtx.parquet, GPU rows to parts/<k>/gpu.arrow,
    calls with a correlation id to parts/<k>/call.arrow; then pass 3a, which needs only
    these (launch_join.py). With `workers` > 1 the GPU tables are read at the same time in
    a process of their own (the partitioning is chosen before either is read), which then
    does pass 3a while the host rows are sorted and linked here."""
    from etl.extract.kineto import kernel_join

    found = Spilled(has_activity_tables=any(t.startswith("CUPTI_ACTIVITY_KIND_")
                                            for t in export.tables),
                    by_process=names_processes(export))
    if workers > 1 and found.has_activity_tables:
        from etl.extract.worker_pool import worker_pool

        found._pool = worker_pool(1)
        found._gpu = found._pool.submit(spill_gpu_file, export.path, folder, offset,
                                        kernel_join.PART_ROWS)
        try:
            found.parts = partitioning(export, kernel_join.PART_ROWS)  # as the worker
            _spill_host(export, names, steps, folder, found)
            found._joined = found._pool.submit(join_launches, folder / PARTS,
                                               found.parts.parts, GPU_PART)
        except BaseException:
            found.close()
            raise
    else:
        found.parts = partitioning(export, kernel_join.PART_ROWS)
        _spill_host(export, names, steps, folder, found)
        found._gpu = spill_gpu(export, names, folder, found.parts, offset)
        join_launches(folder / PARTS, found.parts.parts, GPU_PART)
    return found


def _spill_host(export: Export, names: Names, steps: StepRanges, folder: Path,
                found: Spilled) -> None:
    with CallSpill(folder) as host:   # its Parquet file is complete once the block ends
        _spill_calls(export, names, folder, found, host)
        _spill_nvtx(export, names, steps, folder, found)
        if not found.in_start_order:
            host.to_parquet()


def _spill_calls(export: Export, names: Names, folder: Path, found: Spilled,
                 host: CallSpill) -> None:
    with PartitionWriter(folder / PARTS, found.parts, CALL_PART) as calls:
        for table, category in _CALLS:
            for batch in export.batches(table, "calls", _types("start", "end", "thread",
                                                               "correlation", "name")):
                rows = _host_batch(batch, names.of_ids(batch["name"]), category, found)
                host.write(rows, category, found.run_starts(rows["start"], category))
                calls.write(_with_correlation(rows, found.by_process))


def _spill_nvtx(export: Export, names: Names, steps: StepRanges, folder: Path,
                found: Spilled) -> None:
    with SpillWriter(folder / NVTX_FILE) as nvtx:
        for batch in _nvtx_batches(export):
            codes = names.of_texts(_nvtx_names(batch, names))
            rows = _host_batch(batch, codes, 2, found)
            steps.find(rows["event_id"].to_numpy(), names.text(codes),
                       rows["start"].to_numpy(), rows["end"], rows["thread"].to_numpy())
            nvtx.write(rows)
            found.nvtx_rows += rows.num_rows


def _with_correlation(rows: pa.Table, by_process: bool) -> pa.Table:
    """Calls that may launch GPU work (launch_join.py's input), with their process's id
    when the launches are joined per process."""
    import pyarrow.compute as pc

    calls = rows.filter(pc.is_valid(rows["corr"]))
    table = calls.select(["event_id", "corr", "start"]).rename_columns(CALL_COLUMNS)
    return table.append_column(PROCESS, pid_of(calls["thread"])) if by_process else table


def names_processes(export: Export) -> bool:
    """Whether every GPU table of the export names the process of its rows (globalPid,
    from nsys 2022.1 on at least): the launches are then joined per process."""
    spellings = field_map("nsys")["activity"]["process"]
    present = [t for t in _GPU_TABLES if t in export.tables]
    return bool(present) and all(set(spellings) & set(export.columns(t)) for t in present)


def pid_of(global_id: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    """The process id in nsys's serialized globalTid / globalPid."""
    import pyarrow.compute as pc

    return pc.bit_wise_and(pc.shift_right(global_id, PID_SHIFT), PID_MASK)


def spill_gpu_file(path: Path, folder: Path, offset: int, part_rows: int) -> GpuSpilled:
    """spill_gpu in a worker process: the export opened again, its names read again (the
    codes are the same: StringIds', then gpu_texts; NVTX texts are never coded here), its
    partitioning found again (while the caller finds it: the worker starts at once)."""
    from etl.extract.heap import keep_freed_heap

    keep_freed_heap()
    export = Export(path)
    try:
        return spill_gpu(export, Names(export.strings()), folder,
                         partitioning(export, part_rows), offset)
    finally:
        export.close()


def spill_gpu(export: Export, names: Names, folder: Path, parts: Partitioning, offset: int
              ) -> GpuSpilled:
    """The activity tables into the join's partitions; their rows are numbered from 0
    (pass 3 adds the host rows' count: event ids follow the host rows)."""
    found = GpuSpilled(parts=parts, by_process=names_processes(export))
    with PartitionWriter(folder / PARTS, parts, GPU_PART) as gpu:
        for table, kind in _ACTIVITIES:
            for batch in export.batches(table, "activity", _types(*_ACTIVITY_KEYS)):
                gpu.write(_gpu_batch(batch, GPU_KINDS.index(kind), names, found, offset))
        for batch in export.batches(GRAPH_TABLE, "activity", _types(*_ACTIVITY_KEYS)):
            gpu.write(_gpu_batch(batch, GPU_KINDS.index("kernel"), names, found, offset,
                                 graph=True))
            found.graphs += len(batch["start"])
    return found


def partitioning(export: Export, part_rows: int) -> Partitioning:
    """Partitions for pass 3, so that one holds about `part_rows` GPU and launch
    rows (the tables counted by SQLite: their b-trees' cell counts, ~0.15 s for 6 M
    rows), over the range of correlation ids of the first and last rows of the call and
    activity tables (ids count up as calls are made; an id outside the range goes to the
    first or last partition)."""
    calls = sum(export.count(table) for table, _ in _CALLS)
    activities = sum(export.count(table) for table in _GPU_TABLES)
    ends = [end for table, section in ((t, "calls") for t, _ in _CALLS)
            for end in export.correlation_ends(table, section)]
    ends += [end for table in _GPU_TABLES for end in export.correlation_ends(table, "activity")]
    parts = 1 + (activities + calls) // part_rows
    if not ends:
        return Partitioning(parts)
    return Partitioning(parts, min(ends), max(ends))


def _types(*keys: str) -> dict[str, Any]:
    import pyarrow as pa

    return {k: pa.int64() for k in keys}


def _nvtx_batches(export: Export) -> Any:
    """NVTX_EVENTS rows that are ranges (fields.toml [nvtx_ranges])."""
    import pyarrow as pa

    ranges = field_map("nsys")["nvtx_ranges"]["types"]
    types = {**_types("start", "end", "event_type", "text_id", "thread"), "text": pa.string()}
    for batch in export.batches("NVTX_EVENTS", "nvtx", types):
        keep = pa.array(np.isin(batch["event_type"].fill_null(-1).to_numpy(), ranges))
        batch = {k: v.filter(keep) for k, v in batch.items()}
        batch["correlation"] = pa.nulls(len(keep.filter(keep)), pa.int64())
        yield batch


def _nvtx_names(batch: dict[str, pa.Array], names: Names) -> pa.Array:
    import pyarrow.compute as pc

    return pc.coalesce(batch["text"], names.lookup(batch["text_id"]))


def _host_batch(cols: dict[str, pa.Array], codes: pa.Array, category: int, found: Spilled
                ) -> pa.Table:
    import pyarrow as pa

    n = len(codes)
    start = cols["start"].fill_null(0)
    table = pa.table({
        "event_id": pa.array(np.arange(found.host_rows, found.host_rows + n, dtype=np.int64)),
        "category": pa.repeat(pa.scalar(category, pa.int8()), n),
        "name_code": codes, "start": start, "end": cols["end"],
        "thread": cols["thread"].fill_null(0), "corr": cols["correlation"]})
    found.host_rows += n
    if n:
        found.host_start = _least(found.host_start, start.to_numpy().min())
        found.host_end = _most(found.host_end, cols["end"].fill_null(-1).to_numpy().max())
    return table


def _gpu_batch(cols: dict[str, pa.Array], kind: int, names: Names, found: GpuSpilled,
               offset: int, graph: bool = False) -> pa.Table:
    """GPU rows with their kind (GPU_KINDS) and name as codes: strings are only made when
    the joined rows are written (the spill, partitioning and join move integers).
    `graph`: rows of GRAPH_TABLE, named GRAPH_NAME."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(cols["start"])
    first = found.rows
    found.rows += n
    found.devices.update(cols["device"].drop_null().to_numpy().tolist())
    found.processes.update(pc.unique(cols["process"].drop_null()).to_pylist())
    for key, keep in (("start", _least), ("end", _most)):
        value = (pc.min if key == "start" else pc.max)(cols[key]).as_py()
        if value is not None:
            setattr(found, key, keep(getattr(found, key), value))
    return pa.table({
        "event_id": pa.array(np.arange(first, first + n, dtype=np.int64)),
        "kind": pa.repeat(pa.scalar(kind, pa.int8()), n),
        "device_id": cols["device"].cast(pa.int32()), "stream_id": cols["stream"],
        "name": (names.codes_of(GRAPH_NAME, n) if graph
                 else _activity_names(cols, GPU_KINDS[kind], names)),
        "ts_ns": pc.add(cols["start"], offset),
        "dur_ns": pc.subtract(cols["end"], cols["start"]),
        "correlation_id": cols["correlation"], "external_id": pa.nulls(n, pa.int64()),
        **{k: cols[k] for k in ("grid_x", "grid_y", "grid_z", "block_x", "block_y",
                                "block_z")},
        "registers_per_thread": cols["registers"],
        "shared_memory_bytes": pc.add(cols["static_shared"], cols["dynamic_shared"]),
        "bytes": cols["bytes"], "end": cols["end"],
        **({PROCESS: pid_of(cols["process"])} if found.by_process else {})})


def _activity_names(cols: dict[str, pa.Array], kind: str, names: Names) -> pa.Array:
    import pyarrow as pa
    import pyarrow.compute as pc

    if kind == "kernel":
        return names.of_ids(cols["name"])
    if kind == "memset":
        return names.codes_of("[CUDA memset]", len(cols["name"]))
    copy_kinds = field_map("nsys")["copy_kinds"]
    ids = pa.array([int(k) for k in copy_kinds], pa.int64())
    codes = pa.array([names.codes_of(f"[CUDA memcpy {v}]", 1)[0].as_py()
                      for v in copy_kinds.values()], pa.int64())
    unknown = names.codes_of("[CUDA memcpy Unknown]", 1)[0]
    return pc.fill_null(pc.take(codes, pc.index_in(cols["copy_kind"], value_set=ids)),
                        unknown)


def _least(a: int | None, b: Any) -> int:
    return int(b) if a is None else min(a, int(b))


def _most(a: int | None, b: Any) -> int:
    return int(b) if a is None else max(a, int(b))


class SpillWriter:
    """A Parquet file written batch by batch (created even when no batch comes)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.writer: Any = None

    def write(self, table: pa.Table) -> None:
        import pyarrow.parquet as pq

        if self.writer is None:
            # plain and uncompressed: the file is read once, soon, from the page cache;
            # lz4 and dictionaries cost 3x the write and 8x the read (bench/nsys_bench.py)
            self.writer = pq.ParquetWriter(self.path, table.schema, compression="none",
                                           use_dictionary=False)
        if table.num_rows:
            self.writer.write_table(table)

    def __enter__(self) -> SpillWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.writer is not None:
            self.writer.close()


class CallSpill:
    """The calls' spill: a file per run in start order of each call table (CALLS_IN_ORDER,
    Arrow IPC: cheap to write and read back) while the runs are few, else Parquet
    (HOST_FILE, for DuckDB's sort) from the first batch past MAX_RUNS on, the batches
    written until then moved over."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.runs: list[Path] = []
        self.writer: Any = None
        self.parquet = SpillWriter(folder / HOST_FILE)

    def write(self, table: pa.Table, category: int, run_starts: np.ndarray | None) -> None:
        """`run_starts`: where in `table` runs begin (Spilled.run_starts); None: sorted."""
        if run_starts is None:
            self.to_parquet()
            self.parquet.write(table)
            return
        starts = set(run_starts.tolist())
        cuts = sorted(starts | {0, table.num_rows})
        for first, end in zip(cuts[:-1], cuts[1:]):
            if first in starts or self.writer is None:
                self._new_run(category, table.schema)
            self.writer.write_table(table.slice(first, end - first))

    def _new_run(self, category: int, schema: pa.Schema) -> None:
        import pyarrow as pa

        self._close_run()
        path = self.folder / CALLS_IN_ORDER.format(category, len(self.runs))
        self.runs.append(path)
        self.writer = pa.ipc.new_file(str(path), schema)

    def to_parquet(self) -> None:
        """The batches written as IPC into the Parquet file (the IPC files removed)."""
        self._close_run()
        for path in self.runs:
            for batch in ipc_batches(path):
                self.parquet.write(batch_table(batch))
            path.unlink()
        self.runs = []

    def _close_run(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None

    def __enter__(self) -> CallSpill:
        return self

    def __exit__(self, *exc: object) -> None:
        self._close_run()
        self.parquet.__exit__(*exc)


def calls_in_order_files(folder: Path) -> list[Path]:
    """CallSpill's run files, in event id order (by table, then run)."""
    return sorted(folder.glob("calls-*-*.arrow"))


def ipc_batches(path: Path) -> Iterator[pa.RecordBatch]:
    """An Arrow IPC file's batches, each read into memory (no memory map: a process's
    resident memory stays that of the batches it holds)."""
    import pyarrow as pa

    with pa.OSFile(str(path)) as handle:
        reader = pa.ipc.open_file(handle)
        for k in range(reader.num_record_batches):
            yield reader.get_batch(k)


def batch_table(batch: pa.RecordBatch) -> pa.Table:
    import pyarrow as pa

    return pa.Table.from_batches([batch])


@dataclass(frozen=True)
class Partitioning:
    """Which join partition a correlation id is in: ranges of equal width over the calls'
    ids (ids count up as calls are made, so a batch in time order falls into a run of
    partitions in order and is split by slicing, without reordering); without calls,
    the id modulo `parts`. NULL ids are in partition 0."""

    parts: int
    low: int | None = None
    high: int | None = None

    def of(self, corr: pa.ChunkedArray | pa.Array) -> np.ndarray:
        import pyarrow.compute as pc

        ids = np.asarray(pc.fill_null(corr, 0).to_numpy(), np.int64)
        if self.low is None or self.high is None:
            return ids % self.parts
        width = (self.high - self.low) // self.parts + 1
        return np.clip((ids - self.low) // width, 0, self.parts - 1)


class PartitionWriter:
    """Rows written by correlation id (Partitioning) into folder/<k>/<name> (Arrow IPC:
    cheap to write, memory-mapped when read), each partition keeping the rows' order.
    Rows are gathered to SCATTER_ROWS before they are split, so that a partition gets
    few, large batches; rows already in partition order are split by slices."""

    def __init__(self, folder: Path, parts: Partitioning, name: str) -> None:
        self.parts = parts
        self.paths = [folder / str(k) / name for k in range(parts.parts)]
        self.writers: list[Any] = [None] * parts.parts
        self.pending: list[pa.Table] = []
        self.pending_rows = 0

    def write(self, table: pa.Table) -> None:
        if len(self.paths) == 1:
            self._write(0, table)
            return
        self.pending.append(table)
        self.pending_rows += table.num_rows
        if self.pending_rows >= SCATTER_ROWS:
            self._scatter()

    def _scatter(self) -> None:
        import pyarrow as pa

        if not self.pending_rows:
            return
        table = pa.concat_tables(self.pending)
        self.pending, self.pending_rows = [], 0
        part = self.parts.of(table["correlation_id"])
        if len(part) > 1 and bool((part[1:] < part[:-1]).any()):
            order = np.argsort(part, kind="stable")
            part = part[order]
            table = table.take(pa.array(order))
        bounds = np.searchsorted(part, np.arange(len(self.paths) + 1))
        for k in np.flatnonzero(np.diff(bounds)):
            self._write(int(k), table.slice(bounds[k], bounds[k + 1] - bounds[k]))

    def _write(self, k: int, table: pa.Table) -> None:
        import pyarrow as pa

        if self.writers[k] is None:
            self.paths[k].parent.mkdir(parents=True, exist_ok=True)
            self.writers[k] = pa.ipc.new_file(str(self.paths[k]), table.schema)
        self.writers[k].write_table(table)

    def __enter__(self) -> PartitionWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            if exc[0] is None:
                self._scatter()
        finally:
            for writer in self.writers:
                if writer is not None:
                    writer.close()
