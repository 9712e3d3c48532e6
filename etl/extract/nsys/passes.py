"""Passes 2 and 3b of the nsys reader, over pass 1's spill files, in bounded memory.

2. Host rows in (thread, start, longer first, event id) order, linked chunk by chunk with
   the stack carried (etl/extract/link.py: parents, and the innermost NVTX range that is not a
   step as the layer) and written as they come; the launch calls that have a layer are
   kept with its name code in the join's partitions (parts/<k>/layer.arrow, by
   correlation id as pass 1's GPU rows). The order: each call table as written merged
   by start when each is in start order (in_order.py: how nsys writes them), else a sort
   by DuckDB (out of core).
3b. Partition by partition, the GPU rows joined to their first launch in pass 3a
   (launch_join.py, which needs nothing of pass 2) get the launch's layer and iteration.
Before them, steps never popped get their last one's end: the last end of the GPU
activities launched in it (two scans of the calls' spill and one of the GPU partitions'
correlation ids and ends, only for such exports).
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from etl.extract import link
from etl.extract.kineto.kernel_join import (EMIT_ROWS, first_of_each_id, read_ipc,
                                             with_launch_columns)
from etl.extract.nsys.in_order import rows_in_start_order
from etl.extract.nsys.launch_join import (CALL_COLUMNS, CALL_PART, JOINED_PART, PROCESS,
                                          linked_by_process)
from etl.extract.nsys.spill import (CATEGORIES, GPU_KINDS, GPU_PART, HOST_FILE, LAYER_PART,
                                    NVTX_FILE, PARTS, Names, PartitionWriter,
                                    Partitioning, calls_in_order_files)

if TYPE_CHECKING:
    import pyarrow as pa

    from etl.extract.trace_role import Writer

DUCKDB_MEMORY = "128MB"      # DuckDB spills to the spill folder beyond this


@dataclass
class Steps:
    rows: np.ndarray      # event ids of the step ranges, by start
    number: np.ndarray
    start: np.ndarray
    end: np.ndarray
    unpopped: bool = False     # ranges never popped (ended by the next one)
    # step ranges merged into one of `rows` (another process's ProfilerStep#N, a nested
    # marker of the same number): no layer either, linked by their own end
    merged_rows: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    merged_end: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))

    def markers(self, link_end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Event ids and link ends of every step range: the steps' (ending at `link_end`)
        and the merged ones'."""
        return (np.concatenate([self.rows, self.merged_rows]),
                np.concatenate([link_end, self.merged_end]))

    def iteration(self, ts: np.ndarray) -> np.ndarray:
        return link.assign_iterations(self.start, self.end, self.number, ts,
                                      np.ones(len(ts), bool))


def pass_2_files(spill: Path) -> list[Path]:
    """The spill read by pass 2 and by nothing after it."""
    return [*calls_in_order_files(spill), spill / HOST_FILE, spill / NVTX_FILE,
            spill / "duckdb"]


def duckdb_for(spill: Path, threads: int) -> Any:
    import duckdb

    (spill / "duckdb").mkdir(exist_ok=True)
    return duckdb.connect(config={"memory_limit": DUCKDB_MEMORY, "threads": threads,
                                  "temp_directory": str(spill / "duckdb"),
                                  "preserve_insertion_order": False})


def _parquet(spill: Path, name: str) -> str | None:
    path = spill / name
    return "read_parquet('" + str(path).replace("'", "''") + "')" if path.exists() else None


# ---- the last step of ranges never popped ------------------------------------------

def close_last_step(steps: Steps, spill: Path, parts: Partitioning) -> None:
    """The last step ends with the last GPU activity launched in it (its iteration: the
    steps as linked, the last one up to its recorded end), not at the capture's end.
    A GPU row's launch is the first call (lowest event id) with its correlation id (in its
    process, launch_join.py): each partition's calls (pass 1's call.arrow) and GPU rows are
    joined as in pass 3a, only for the first calls that start in the last step's window."""
    last = steps.number[-1]
    window = (int(steps.start[-1]), int(steps.end[-1]))  # the last range, not its number's
    ends = [_ends_launched_in(spill / PARTS / str(k), window, steps, last)
            for k in range(parts.parts)]
    found = np.concatenate(ends) if ends else np.zeros(0, np.int64)
    if len(found):
        steps.end[-1] = max(int(found.max()), int(steps.start[-1]))


def _ends_launched_in(folder: Path, window: tuple[int, int], steps: Steps, last: int
                      ) -> np.ndarray:
    """Ends (NULL as 0) of one partition's GPU rows whose launch starts in `window` and
    in iteration `last`."""
    import pyarrow.compute as pc

    calls, gpu = read_ipc(folder / CALL_PART), read_ipc(folder / GPU_PART)
    if calls is None or gpu is None:
        return np.zeros(0, np.int64)
    gpu, calls = linked_by_process(gpu.select(
        [c for c in ("correlation_id", "end", PROCESS) if c in gpu.column_names]), calls)
    first, _ = first_of_each_id(calls.select(CALL_COLUMNS))
    start = first["ts_ns"]
    first = first.filter(pc.and_(pc.greater_equal(start, window[0]),
                                 pc.less_equal(start, window[1])))
    joined = with_launch_columns(gpu, first)
    joined = joined.filter(pc.is_valid(joined["ts_ns"]))
    in_last = steps.iteration(_numpy(joined["ts_ns"])) == last
    return _numpy(joined["end"].fill_null(0))[in_last]


# ---- pass 2 ------------------------------------------------------------------------

_SORTED_HOST = """
SELECT event_id, category, name_code, start, "end", thread, corr, is_layer, link_end,
       coalesce(timed AND link_end >= start, false) AS linkable
FROM ({rows})
ORDER BY NOT linkable, thread, start, link_end DESC, event_id
"""
_CALL_ROWS = """
SELECT *, false AS is_layer, "end" AS link_end, "end" IS NOT NULL AS timed FROM {host}"""
_NVTX_ROWS = """
SELECT nvtx.*, step.event_id IS NULL AS is_layer,
       coalesce(step.link_end, nvtx."end") AS link_end,
       nvtx."end" IS NOT NULL OR step.event_id IS NOT NULL AS timed
FROM {nvtx} AS nvtx LEFT JOIN step_ends AS step USING (event_id)"""


def link_host(spill: Path, names: Names, steps: Steps, link_end: np.ndarray,
              context: Context, write: Writer, options: LinkOptions,
              steps_final: Callable[[], None] = lambda: None) -> None:
    """Pass 2: host rows linked and written; launch calls kept in the join's partitions.
    `link_end` is the steps' end as linked (before closing). `steps_final` may change the
    last step's end (pass 1's GPU half may still be under way): it is called once, before
    a row that starts in the last step is written (with the rows sorted by thread, once
    they are sorted), and at the latest at the end."""
    final = _Once(steps_final)
    state = _LinkState(names, options.in_start_order)
    with PartitionWriter(spill / PARTS, options.parts, LAYER_PART) as out:
        for table in _linkable_order(spill, steps, link_end, options, final):
            if table.num_rows:
                if _reaches_last_step(table, steps):
                    final()
                layer = state.link(table)
                write(context.host_rows(table, state.parent, steps, names))
                out.write(_launch_layers(table, layer))
    final()


class _Once:
    def __init__(self, call: Callable[[], None]) -> None:
        self.call: Callable[[], None] | None = call

    def __call__(self) -> None:
        if self.call is not None:
            call, self.call = self.call, None
            call()


def _reaches_last_step(table: pa.Table, steps: Steps) -> bool:
    """Does a row start where closing the last step may change its iteration?"""
    import pyarrow.compute as pc

    latest = pc.max(table["start"]).as_py()
    return bool(len(steps.start)) and latest is not None and latest >= steps.start[-1]


@dataclass(frozen=True)
class LinkOptions:
    parts: Partitioning
    chunk_rows: int
    threads: int                # DuckDB's, for the sort
    in_start_order: bool        # the calls need no sort (in_order.py)


def _linkable_order(spill: Path, steps: Steps, link_end: np.ndarray, options: LinkOptions,
                    sorted_: Callable[[], None]) -> Iterator[pa.Table]:
    """The host rows in chunks, each thread's in (start, link_end descending, event id)
    order: as pass 1 wrote them when the calls are in start order, else sorted by DuckDB
    (then `sorted_` is called once they are: the sort overlaps pass 1's GPU half)."""
    if options.in_start_order:
        yield from rows_in_start_order(spill, *steps.markers(link_end), options.chunk_rows)
    else:
        yield from _sorted_rows(spill, steps, link_end, options, sorted_)


def _sorted_rows(spill: Path, steps: Steps, link_end: np.ndarray, options: LinkOptions,
                 sorted_: Callable[[], None]) -> Iterator[pa.Table]:
    """The host rows sorted by DuckDB, out of core."""
    import pyarrow as pa

    sources = [sql.format(host=h, nvtx=h) for sql, h in (
        (_CALL_ROWS, _parquet(spill, HOST_FILE)), (_NVTX_ROWS, _parquet(spill, NVTX_FILE)))
        if h is not None]
    if not sources:
        sorted_()
        return
    con = duckdb_for(spill, options.threads)
    try:
        rows, ends = steps.markers(link_end)
        con.register("step_ends", pa.table({"event_id": pa.array(rows, pa.int64()),
                                            "link_end": pa.array(ends, pa.int64())}))
        reader = con.execute(_SORTED_HOST.format(rows=" UNION ALL ".join(sources))
                             ).to_arrow_reader(options.chunk_rows)
        sorted_()
        for batch in reader:
            yield pa.Table.from_batches([batch])
    finally:
        con.close()


class _LinkState:
    """The carried stack, with the name codes of its events, across chunks."""

    def __init__(self, names: Names, every_thread: bool) -> None:
        self.every_thread = every_thread   # threads come again in later chunks
        self.carry = link.Carry.empty()
        self.carry_codes = np.zeros(0, np.int64)
        self.parent = np.zeros(0, np.int64)

    def link(self, batch: pa.Table) -> np.ndarray:
        """Parents (self.parent) and layer name codes (returned; -1 none) of a chunk."""
        n = batch.num_rows
        self.parent = np.full(n, link.NONE, np.int64)
        layer = np.full(n, link.NONE, np.int64)
        rows = np.flatnonzero(_numpy(batch["linkable"], bool))
        if len(rows) == 0:
            return layer
        part = batch.take(rows) if len(rows) < n else batch
        chunk = link.SortedEvents(
            _numpy(part["thread"]), _numpy(part["start"]), _numpy(part["link_end"]),
            _numpy(part["event_id"]), np.zeros(len(rows), bool), _numpy(part["is_layer"], bool))
        codes = np.concatenate([self.carry_codes, _numpy(part["name_code"].fill_null(-1))])
        idents = np.concatenate([self.carry.ident, chunk.ident])
        found, self.carry = link.link_sorted(chunk, self.carry,
                                               every_thread=self.every_thread)
        self.carry_codes = _codes_of(self.carry.ident, idents, codes)
        self.parent[rows] = found.parent
        layer[rows] = _codes_of(found.layer, idents, codes)
        return layer


def _codes_of(ids: np.ndarray, idents: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """Name codes of events by id, among the chunk's and the carried events (an event's
    layer is one of its ancestors: in the chunk or still open); -1 for NONE."""
    order = np.argsort(idents, kind="stable")
    at = np.searchsorted(idents[order], ids)
    at = order[np.minimum(at, max(len(order) - 1, 0))] if len(order) else at
    found = ids != link.NONE
    return np.where(found, codes[at] if len(order) else link.NONE, link.NONE)


def _numpy(column: Any, dtype: Any = np.int64) -> np.ndarray:
    return np.asarray(column.to_numpy(zero_copy_only=False), dtype=dtype)


def _launch_layers(batch: pa.Table, layer: np.ndarray) -> pa.Table:
    """Calls with a correlation id and a layer: event_id, correlation_id, layer (the
    layer's name code; a string in pass 3b). Launches without one are not kept: pass 3a
    joined every launch already."""
    import pyarrow as pa
    import pyarrow.compute as pc

    keep = pc.and_(pc.and_(pc.less(batch["category"], 2), pc.is_valid(batch["corr"])),
                   pa.array(layer >= 0))
    return pa.table({"event_id": batch["event_id"], "correlation_id": batch["corr"],
                     "layer": pa.array(layer, pa.int64())}).filter(keep)


@dataclass
class Context:
    """The source's columns and clock."""

    source_id: int
    offset: int          # session start, ns since 1970 (0: times stay session-relative)
    first_gpu_id: int = 0   # GPU rows are numbered after the host rows (pass 1 from 0)

    def host_rows(self, batch: pa.Table, parent: np.ndarray, steps: Steps, names: Names
                  ) -> pa.Table:
        import pyarrow as pa
        import pyarrow.compute as pc

        n = batch.num_rows
        thread = _numpy(batch["thread"])
        start = _numpy(batch["start"])
        iteration = steps.iteration(start)
        return pa.table({
            "source_id": pa.repeat(pa.scalar(self.source_id, pa.int32()), n),
            "rank": pa.nulls(n, pa.int32()),
            "event_id": batch["event_id"],
            "category": pc.take(pa.array(CATEGORIES), batch["category"]),
            "name": names.text(batch["name_code"]),
            "ts_ns": pa.array(start + np.int64(self.offset)),
            "dur_ns": pc.subtract(batch["end"], batch["start"]),
            "pid": _decimal_text((thread >> 24) & 0xFFFFFF),
            "tid": _decimal_text(thread & 0xFFFFFF),
            "correlation_id": batch["corr"],
            "external_id": pa.nulls(n, pa.int64()),
            "parent_event_id": pa.array(parent, pa.int64(), mask=parent == link.NONE),
            "iteration": pa.array(iteration, pa.int64(), mask=iteration == link.NONE)})


def _decimal_text(values: np.ndarray) -> pa.Array:
    """Integers as decimal strings, each distinct value formatted once (few threads)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    encoded = pc.dictionary_encode(pa.array(values))
    return pc.take(encoded.dictionary.cast(pa.string()), encoded.indices)


# ---- pass 3 ------------------------------------------------------------------------

# kernels' columns after stream_id and name that are pass 1's spilled values as they are
GPU_COLUMNS = ["ts_ns", "dur_ns", "correlation_id", "external_id", "grid_x", "grid_y",
               "grid_z", "block_x", "block_y", "block_z", "registers_per_thread",
               "shared_memory_bytes", "bytes"]


def join_gpu(spill: Path, parts: Partitioning, steps: Steps, context: Context,
             names: Names, write: Writer, pass_3a_done: Callable[[], None],
             done_with: Callable[[Path], None] = lambda _: None) -> list[int]:
    """Pass 3b: the joined GPU rows of pass 3a (launch_join.py) with their layer and
    iteration, written; returns the ids of kernels without a launch call, in order.
    Several launches with one correlation id: the first is used (not flagged).
    `pass_3a_done` returns once pass 3a is (it may run in a worker process);
    `done_with` is given each partition's folder once it is read."""
    pass_3a_done()
    orphans: list[int] = []
    for k in range(parts.parts):
        folder = spill / PARTS / str(k)
        joined = read_ipc(folder / JOINED_PART)
        if joined is None:
            continue
        layers = _Layers.read(folder / LAYER_PART)
        for start in range(0, joined.num_rows, EMIT_ROWS):
            table = _kernel_rows(joined.slice(start, EMIT_ROWS), layers, steps, context,
                                 names)
            orphans.extend(_orphans(table))
            write(table)
        del joined, layers
        done_with(folder)
    return sorted(orphans)


@dataclass
class _Layers:
    """The layer name code of the launches that have one (pass 2's layer.arrow), by id."""

    event_id: np.ndarray     # sorted
    code: np.ndarray

    @classmethod
    def read(cls, path: Path) -> _Layers:
        table = read_ipc(path)
        if table is None:
            return cls(np.zeros(0, np.int64), np.zeros(0, np.int64))
        event, code = _numpy(table["event_id"]), _numpy(table["layer"])
        order = np.argsort(event, kind="stable")
        return cls(event[order], code[order])

    def of(self, launch: np.ndarray) -> np.ndarray:
        """Codes of the launches' layers, -1 for none."""
        if len(self.event_id) == 0:
            return np.full(len(launch), -1, np.int64)
        at = np.minimum(np.searchsorted(self.event_id, launch), len(self.event_id) - 1)
        return np.where(self.event_id[at] == launch, self.code[at], -1)


def _kernel_rows(joined: pa.Table, layers: _Layers, steps: Steps, context: Context,
                 names: Names) -> pa.Table:
    import pyarrow as pa
    import pyarrow.compute as pc

    n = joined.num_rows
    launched = _numpy(joined["launch_event_id"].is_valid(), bool)
    launch_ts = _numpy(joined["launch_ts_ns"].fill_null(0))
    iteration = np.where(launched, steps.iteration(launch_ts), link.NONE)
    layer = np.where(launched, layers.of(_numpy(joined["launch_event_id"].fill_null(-1))), -1)
    has_layer = pa.array(layer >= 0)
    kind = pc.take(pa.array(GPU_KINDS), joined["kind"])
    # NVTX ranges are layers; they tell no passes (etl/extract/layer_columns.py's rule)
    status = np.where(layer >= 0, 2, np.where(launched, 1, 0))
    return pa.table({
        "source_id": pa.repeat(pa.scalar(context.source_id, pa.int32()), n),
        "rank": pa.nulls(n, pa.int32()),
        "kernel_id": pc.add(joined["event_id"], context.first_gpu_id),
        "kind": kind, "category": kind, "device_id": joined["device_id"],
        "stream_id": joined["stream_id"], "name": names.text(joined["name"]),
        **{c: joined[c] for c in GPU_COLUMNS},
        "launch_event_id": joined["launch_event_id"],
        "op_event_id": pa.nulls(n, pa.int64()), "op_name": pa.nulls(n, pa.string()),
        "layer": names.text(pa.array(layer, pa.int64(), mask=layer < 0)),
        "iteration": pa.array(iteration, pa.int64(), mask=iteration == link.NONE),
        "layer_kind": pc.if_else(has_layer, "nvtx", pa.scalar(None, pa.string())),
        "pass": pa.nulls(n, pa.string()),
        "layer_status": pc.take(pa.array(["no_launch", "no_scope", "enclosing_scope"]),
                                pa.array(status))})


def _orphans(table: pa.Table) -> list[int]:
    """Kernels (not copies or sets) without a launch call."""
    import pyarrow.compute as pc

    orphan = pc.and_(pc.equal(table["kind"], "kernel"), pc.is_null(table["launch_event_id"]))
    return list(table["kernel_id"].filter(orphan).to_pylist())
