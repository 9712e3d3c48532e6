"""One Kineto trace → rows of the run's tables, in bounded memory, whatever the file size.

Three passes over a private spill folder (1b only for traces with B/E events):
1. slices (~16 MiB of JSON) are decoded, classified and spilled to Parquet, one worker
   process per core for big files (slice_spill.py); only small per-slice summaries return.
   A regular file's slices are cut where the text vouches for an event boundary and go
   out unchecked and uncounted; their decoders number the events (event_ids.py); when a
   slice fails to decode, the file is read again with each cut checked by a syntax scan
   here (_spilled_slices);
   B/E events (begin/end pairs, whose E may be slices away) are spilled unclassified, and
   1b. sorted by thread and event order by DuckDB and paired chunk by chunk with the open
   B's carried; the complete events they make are classified and spilled like a slice's;
2. host events are sorted by (thread, start, longer first, event id) by DuckDB (out of core)
   and linked chunk by chunk with a carried stack (etl/extract/link.py); the linked host rows are
   written as they come, with the launches and scope names kept aside in the spill folder;
3. GPU activities are joined to their first launch and its op/layer names in DuckDB.
The in-memory reading (trace_tables.build over read_trace) is the reference these tables
are tested against.
"""
from __future__ import annotations

import shutil
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from etl.extract import link
from etl.extract.kineto import launch_geometry, layers
from etl.extract.kineto.decode import Anomaly, TraceInfo, stream_trace
from etl.extract.collective_ops import collective_ops
from etl.extract.fields import field_map
from etl.core.errors import InputError
from etl.extract.step_names import STEP_NUMBER_REMEDY, StepNumberError
from etl.extract.trace_role import PipelineOptions, Sinks, Writer, no_gpu_activity_remark
from etl.extract.trace_role import TraceResult as SourceResult
from etl.extract.kineto.clock import kineto_clock
from etl.extract.kineto.event_ids import IdChain, SliceFailed
from etl.extract.jsonslice import CutNotTrusted
from etl.extract.registry import NotThisFormat
from etl.extract.kineto.kernel_join import join_kernels, release_memory
from etl.extract.prefetch import prefetched
from etl.extract.progress import FileProgress
from etl.extract.worker_pool import worker_pool
from etl.extract.progress import report as report_progress
from etl.extract.rawio import is_gzip, slice_checksum
from etl.extract.kineto.slice_spill import (SPILL_COMPRESSION, SliceSummary, gc_paused,
                                           merge_span, spill_range, spill_table, spill_text)
from etl.extract.kineto.completeness import (RecordEnd, RecordOrder, merge_window_ends,
                                            window_ends)
from etl.extract.kineto.rows import (HOST_ARG_COLUMNS, KERNEL_ARG_COLUMNS,
                                      BeginEndSweep, Step, StepMarkers, _anomaly_table,
                                      _devices_table, gpu_work_calls, iterations_table,
                                      no_gpu_activity, no_gpu_activity_cause,
                                      thread_keys)

DUCKDB_MEMORY = "128MB"      # DuckDB spills to the spill folder beyond this


def read(path: Path, source_id: int, gpu_override: str | None, spill: Path,
                 sinks: Sinks, options: PipelineOptions) -> SourceResult:
    """Stream one trace file into `sinks`; the spill folder is removed afterwards."""
    spill.mkdir(parents=True)
    try:
        info, summaries = _spilled_slices(path, spill, options)
        return _assemble(path, info, summaries, source_id, gpu_override, spill, sinks,
                         options)
    except StepNumberError as exc:
        raise InputError(path, exc.problem(), "run.toml step_pattern",
                         STEP_NUMBER_REMEDY) from None
    finally:
        shutil.rmtree(spill, ignore_errors=True)


def _spilled_slices(path: Path, spill: Path, options: PipelineOptions
                    ) -> tuple[TraceInfo, list[SliceSummary]]:
    """Pass 1. A regular file is first cut where the text vouches for event boundaries,
    its slices neither checked nor counted here (that costs this process a syntax scan of
    every byte, beside the workers' decoding). When a slice fails to decode (a cut inside
    an event, or bad input) or the text vouches for no boundary, it is read again with
    every cut checked, so that input errors, and where they are, are those of the checked
    reading. An error of this process's own reading (a cut file, a malformed end, a gzip
    bomb) stands once the slices handed out before it have decoded: the checked reading
    finds the same one, at the same byte."""
    if path.is_file():
        try:
            return _first_pass(path, spill, options, trusted=True)
        except (CutNotTrusted, UncheckedSliceFailed) as exc:
            _stage(path, f"reading again, every slice checked ({exc})")
            shutil.rmtree(spill)
            spill.mkdir()
    return _first_pass(path, spill, options, trusted=False)


class UncheckedSliceFailed(Exception):
    """A slice cut unchecked failed to decode (a cut inside an event, or bad input): the
    file is read again with every cut checked, which reports bad input as it should."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(f"a slice failed: {cause}")


def _first_pass(path: Path, spill: Path, options: PipelineOptions, trusted: bool
                ) -> tuple[TraceInfo, list[SliceSummary]]:
    chain = IdChain(spill / "event-ids") if trusted else None
    if chain is not None:
        chain.start()
    sink = SpillSink(path, spill, options.workers, _markers(options), chain)
    try:
        with gc_paused():
            info = stream_trace(path, sink, options.salvage, options.slice_bytes, trusted)
    except BaseException as exc:
        try:
            if trusted and isinstance(exc, (InputError, NotThisFormat)):
                # the checked reading would have met a failed slice before this error
                sink.settle()
        finally:
            sink.abort()  # the first error is the one to report, not a later slice's
        raise
    return info, sink.close()


def _markers(options: PipelineOptions) -> StepMarkers:
    return StepMarkers.of_pattern(options.step_pattern)


class SpillSink:
    """Receives validated slices in order; decodes and spills them here or in workers,
    keeping at most two slices per worker in flight (memory stays flat).

    Workers read the slices of a plain file from the file themselves (piping 16 MiB to a
    worker costs both processes more CPU than the worker's read from the page cache); the
    slices of a gzip file are sent. `chain` numbers the events of slices handed over
    uncounted (trusted cuts).
    """

    def __init__(self, path: Path, folder: Path, workers: int, markers: StepMarkers,
                 chain: IdChain | None = None) -> None:
        self.path, self.folder, self.markers, self.chain = path, folder, markers, chain
        self.summaries: list[SliceSummary] = []
        self.pending: deque[Future[SliceSummary]] = deque()
        self.pool = worker_pool(workers) if workers > 1 else None
        self.limit = 2 * workers
        self.size = path.stat().st_size if path.is_file() else None
        self.compressed = path.is_file() and is_gzip(path)
        # only regular files can be read again at an offset (not a FIFO, not a stream)
        self.read_in_worker = self.pool is not None and path.is_file() and not self.compressed

    def _progress(self, read_to: int) -> None:
        report_progress(FileProgress(self.path, "read", read_to, self.size, self.compressed))

    def text(self, text: bytes | memoryview, first_id: int | None, offset: int) -> None:
        self._progress(offset + len(text))
        index = len(self.summaries) + len(self.pending)
        first = self._first(first_id)
        if self.pool is None:
            self.summaries.append(self._unchecked_failure_told(
                lambda: spill_text(self.path, bytes(text), first, offset, self.folder, index,
                                   self.markers)))
            return
        if self.read_in_worker:
            task = self.pool.submit(spill_range, self.path, offset, len(text),
                                    slice_checksum(text), first, self.folder, index,
                                    self.markers)
        else:
            task = self.pool.submit(spill_text, self.path, bytes(text), first, offset,
                                    self.folder, index, self.markers)
        self.pending.append(task)
        while len(self.pending) >= self.limit:
            self._collect()

    def batch(self, table: pa.Table, anomalies: list[Anomaly], with_phase: int) -> None:
        self.settle()
        index = len(self.summaries)
        self.summaries.append(spill_table(table, anomalies, with_phase, self.folder, index,
                                          self.markers))

    def _first(self, first_id: int | None) -> int | IdChain:
        if first_id is not None:
            return first_id
        assert self.chain is not None, "slices handed over uncounted need a chain"
        return self.chain

    def with_phase(self) -> int:
        self.settle()
        return sum(s.with_phase for s in self.summaries)

    def events(self) -> int:
        self.settle()
        return sum(s.events for s in self.summaries)

    def settle(self) -> None:
        """Wait for the slices handed out (raises a failed one's error)."""
        while self.pending:
            self._collect()

    def _collect(self) -> None:
        task = self.pending.popleft()
        self.summaries.append(self._unchecked_failure_told(task.result))

    def _unchecked_failure_told(self, spilled: Callable[[], SliceSummary]) -> SliceSummary:
        """A slice's summary; a slice cut unchecked that fails raises UncheckedSliceFailed
        (input errors only: a bug of ours surfaces as itself)."""
        try:
            return spilled()
        except (InputError, SliceFailed) as exc:
            if self.chain is None:
                raise
            raise UncheckedSliceFailed(exc) from exc

    def reset(self) -> None:
        self.settle()
        for spilled in self.folder.glob("*-*.parquet"):
            spilled.unlink()
        self.summaries = []

    def abort(self) -> None:
        try:
            if self.chain is not None:
                self.chain.abort()  # workers waiting for an earlier slice's count stop
        finally:
            if self.pool is not None:
                self.pool.shutdown(cancel_futures=True)

    def close(self) -> list[SliceSummary]:
        try:
            self.settle()
        finally:
            if self.pool is not None:
                self.pool.shutdown(cancel_futures=True)
        return self.summaries


# ---- passes 2 and 3 ---------------------------------------------------------------

@dataclass
class _Source:
    source_id: int
    rank: int | None
    steps: tuple[np.ndarray, np.ndarray, np.ndarray]   # start, end, number
    anomalies: list[Anomaly] = field(default_factory=list)


def _assemble(path: Path, info: TraceInfo, summaries: list[SliceSummary], source_id: int,
              gpu_override: str | None, spill: Path, sinks: Sinks,
              options: PipelineOptions) -> SourceResult:
    rank = _rank(info)
    slices = len(summaries)  # the spills of the file's slices, in order (pairs follow)
    if any(s.begin_end_rows for s in summaries):
        _stage(path, "pairing begin/end events")
        summaries = summaries + _pair_begin_end(spill, len(summaries), options)
    # in trace order (pairs are spilled after the slices)
    steps = sorted(s for summary in summaries for s in summary.steps)
    source = _Source(source_id, rank, _step_arrays(steps))
    for summary in summaries:
        source.anomalies += summary.anomalies
    release_memory()  # pass 1's slices are gone: give their pages back before the sort
    launch_rows = 0
    if any(s.host_rows for s in summaries):
        _stage(path, "linking host events")
        host_args = {c for s in summaries for c in s.host_args}
        launch_rows = _link_host(spill, source, sinks.host_events, options,
                                 [c for c in HOST_ARG_COLUMNS if c in host_args])
        sinks.end_of_host_events()
        release_memory()
    gpu_rows = sum(s.gpu_rows for s in summaries)
    ends: dict[int, int] | None = {} if info.truncated else None
    _stage(path, "joining GPU activities")
    kernels = (_kernels(spill, gpu_rows, launch_rows, source, sinks.kernels, ends)
               if gpu_rows else 0)
    work_activities = sum(s.gpu_work_activities for s in summaries)
    work_calls = 0 if work_activities else _gpu_work_calls(spill)  # read back: rare
    source.anomalies += no_gpu_activity(work_calls, work_activities)
    source.anomalies += _memory_events(spill, source, sinks,
                                       {d for s in summaries for d in s.devices})
    _syncs(spill, source, sinks)
    _collective_ops(spill, source, sinks)
    source.anomalies += info.anomalies
    if info.truncated:
        source.anomalies.append(("truncated_input", None, "the file ends early; the complete "
                                 "events before the cut were kept (--salvage)"))
    span = None
    for summary in summaries:
        span = merge_span(span, summary.span)
    clock = kineto_clock(info.base_time_ns, span, info.truncated)
    devices = sorted({d for s in summaries for d in s.devices})
    source.anomalies += _undescribed_devices(info.device_properties, devices, gpu_override)
    anomalies = _anomaly_table(source.anomalies, source_id)
    sinks.anomalies(anomalies)
    record = _record_end(spill, slices) if info.truncated else None
    iterations = iterations_table(steps, span, record, ends)
    return SourceResult(
        info, _with_context(iterations, source), _with_context(
            _devices_table(info.device_properties, devices, gpu_override), source),
        rank, [str(p["name"]) for p in info.device_properties if p.get("name")],
        kernels=kernels, anomalies=anomalies.num_rows,
        remarks=_remarks(info, iterations, work_calls, work_activities), clock=clock)


def _undescribed_devices(properties: list[dict[str, Any]], devices: list[int],
                         gpu_override: str | None) -> list[Anomaly]:
    """GPU activities on devices deviceProperties does not list, when it lists some: their
    GPU is unnamed (unless run.toml names it)."""
    listed = sorted(p["id"] for p in properties if isinstance(p.get("id"), int))
    missing = [d for d in devices if d not in listed]
    if not listed or not missing or gpu_override:
        return []
    return [("device_not_in_properties", None, (
        f"GPU activities on device(s) {missing}, which deviceProperties does not describe "
        f"(it lists {listed}): their GPU name, SM count and memory are NULL (ROCm builds "
        "before kineto #926 numbered devices from 2, ROCm/roctracer#98); run.toml gpu "
        "names them"))]


def _stage(path: Path, stage: str) -> None:
    report_progress(FileProgress(path, stage, None, None))


def _remarks(info: TraceInfo, iterations: pa.Table, work_calls: int, work_activities: int
             ) -> list[tuple[str, str]]:
    """What the ingest's output says about a source beyond its counts."""
    remarks = []
    cause = no_gpu_activity_cause(work_calls, work_activities)
    if cause is not None:
        remarks.append(no_gpu_activity_remark(cause))
    if info.truncated:
        # sum of no rows is NULL: a trace cut before its first complete event has none
        cut = iterations.num_rows - (pc.sum(iterations["complete"].cast(pa.int64())).as_py()
                                     or 0)
        remarks.append((f"truncated, {cut} of {iterations.num_rows} iterations incomplete",
                        "truncated: the complete events before the cut were kept (--salvage); "
                        f"{cut} of {iterations.num_rows} iterations are incomplete "
                        "(iterations.complete = false, iterations.cut says why)"))
    return remarks


def _record_end(spill: Path, slices: int) -> RecordEnd:
    """How far a truncated source's record reaches, from the spill files read back (a cost
    only truncated sources pay): the launch calls kept by pass 2 and the GPU activities'
    correlation ids, and the order of the slices' records."""
    launch_file = spill / "launch.parquet"
    calls = (pq.read_table(launch_file, columns=["correlation_id", "ts_ns"])
             if launch_file.exists() else pa.table({"correlation_id": pa.array([], pa.int64()),
                                                    "ts_ns": pa.array([], pa.int64())}))
    gpu_ids = [pq.read_table(f, columns=["correlation_id"])["correlation_id"]
               for f in sorted(spill.glob("gpu-*.parquet"))]
    gpu_correlation = pa.chunked_array([c for g in gpu_ids for c in g.chunks], pa.int64())
    return RecordEnd.of(_spilled_order(spill, slices), calls["correlation_id"],
                        calls["ts_ns"], gpu_correlation)


def _spilled_order(spill: Path, slices: int) -> RecordOrder:
    """The order of the launch calls and GPU activities of the file's slices (spill files
    0 .. slices - 1, rows in file order; pairs of B/E events come after and do not count)."""
    order = RecordOrder()
    for index in range(slices):
        host = _spilled(spill / f"host-{index:06d}.parquet",
                        ["ph", "ts_ns", "dur_ns", "is_launch"])
        gpu = _spilled(spill / f"gpu-{index:06d}.parquet", ["ph", "ts_ns"])
        launches = None if host is None else host.filter(host["is_launch"])
        order = order.then(RecordOrder.of(launches, gpu))
    return order


def _spilled(path: Path, columns: list[str]) -> pa.Table | None:
    """Columns of a spill file; None when the slice had no such rows (no file)."""
    return pq.read_table(path, columns=columns) if path.exists() else None


def _gpu_work_calls(spill: Path) -> int:
    """Launch calls that start GPU work, from the spilled host rows (their names)."""
    names = [pq.read_table(f, columns=["name"], filters=[("is_launch", "=", True)])["name"]
             for f in sorted(spill.glob("host-*.parquet"))]
    return gpu_work_calls(pa.chunked_array([c for n in names for c in n.chunks], pa.string()))


def _duckdb(spill: Path, threads: int) -> Any:
    import duckdb

    (spill / "duckdb").mkdir(exist_ok=True)
    con = duckdb.connect(config={"memory_limit": DUCKDB_MEMORY, "threads": threads,
                                 "temp_directory": str(spill / "duckdb"),
                                 "preserve_insertion_order": False})
    return con


def _rank(info: TraceInfo) -> int | None:
    rank = (info.distributed_info or {}).get("rank")
    return rank if isinstance(rank, int) and not isinstance(rank, bool) else None


def _step_arrays(steps: list[Step]
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return (np.array([s[2] for s in steps], dtype=np.int64),
            np.array([s[3] for s in steps], dtype=np.int64),
            np.array([s[1] for s in steps], dtype=np.int64))


def _iteration_of(source: _Source, ts: pa.Array) -> pa.Array:
    values = np.asarray(pc.fill_null(ts, 0).to_numpy(zero_copy_only=False), dtype=np.int64)
    valid = np.asarray(ts.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    found = link.assign_iterations(*source.steps, values, valid)
    return pa.array(found, pa.int64(), mask=found == link.NONE)


def _quote(path: Path) -> str:
    return "'" + str(path).replace("'", "''") + "'"


def _files(spill: Path, kind: str) -> str:
    """A literal list of the spill files (no glob: the spill path may hold glob characters)."""
    return "[" + ", ".join(_quote(p) for p in sorted(spill.glob(f"{kind}-*.parquet"))) + "]"


# ---- pass 1b: begin/end pairs ------------------------------------------------------

# B/E events by thread, then event order: the order in which an E closes the most recent
# open B of its thread (the thread key as in the links: a NULL pid/tid reads as '')
_SORTED_BEGIN_END = """
SELECT *, coalesce(pid, '') || chr(31) || coalesce(tid, '') AS thread_key
FROM read_parquet({files})
ORDER BY thread_key, event_id
"""


def _pair_begin_end(spill: Path, first_index: int, options: PipelineOptions
                    ) -> list[SliceSummary]:
    """Pass 1b: the B and E events spilled by the slices (be-*), paired out of core.

    DuckDB sorts them by thread and event order; they are swept chunk by chunk with the
    open B rows carried, and the complete events of the pairs are classified and spilled
    like a slice's events. Returns the summaries of those spills.
    """
    schema = pq.read_schema(next(spill.glob("be-*.parquet")))
    sweep = BeginEndSweep(schema)
    threads = _ThreadCodes()
    summaries: list[SliceSummary] = []
    con = _duckdb(spill, options.threads)
    try:
        reader = con.execute(_SORTED_BEGIN_END.format(files=_files(spill, "be"))
                             ).to_arrow_reader(options.chunk_rows)
        with prefetched(_batches(reader)) as batches:  # DuckDB merges while pairs are made
            for batch in batches:
                found: list[Anomaly] = []
                paired = sweep.feed(batch.drop_columns(["thread_key"]).cast(schema),
                                    threads.codes(batch["thread_key"]), found)
                summaries.append(spill_table(paired, found, 0, spill,
                                             first_index + len(summaries), _markers(options),
                                             paired=True))
    finally:
        con.close()
    found = []
    paired = sweep.finish(found)
    summaries.append(spill_table(paired, found, 0, spill, first_index + len(summaries),
                                 _markers(options), paired=True))
    return summaries


# Only the columns needed downstream travel through the (out-of-core) sort: its payload
# is what DuckDB spills (an argument column no host row has a value of stays out; NULLs are
# added after it). A NULL pid/tid is the same thread as '' (as in trace_tables).
_SORTED_HOST = """
SELECT event_id, category, name, ts_ns, dur_ns, pid, tid, correlation_id, external_id,
       is_op, is_wrapper_op, is_layer, is_launch, linkable, sequence_number, fwd_thread_id,
       scope_kind, is_mark{host_args}
FROM read_parquet({files})
ORDER BY NOT linkable, coalesce(pid, ''), coalesce(tid, ''), ts_ns, ts_ns + dur_ns DESC,
         event_id
"""


def _link_host(spill: Path, source: _Source, write: Writer, options: PipelineOptions,
               host_args: list[str]) -> int:
    """Pass 2: link sorted host rows chunk by chunk; write them, and keep the launch calls
    with their op and layer (ids and names) for pass 3, the backward ones' layers taken
    from their forward ops (layers.py). `host_args`: the HOST_ARG_COLUMNS some host row
    has a value of (the others are NULL throughout). Returns the launch calls kept."""
    files = _files(spill, "host")
    con = _duckdb(spill, options.threads)
    try:
        reader = con.execute(_SORTED_HOST.format(
            files=files, host_args="".join(f", {c}" for c in host_args))
                             ).to_arrow_reader(options.chunk_rows)
        absent = _absent_columns(spill, [c for c in HOST_ARG_COLUMNS if c not in host_args])
        # DuckDB merges the next sorted batch while this one is linked (two cores)
        with prefetched(_with_nulls(reader, absent)) as batches:
            rows = _link_stream(batches, spill, source, write)
        if rows:
            _resolve_launch_layers(con, spill)
        return rows
    finally:
        con.close()


def _absent_columns(spill: Path, columns: list[str]) -> list[pa.Field]:
    """The fields of `columns` in the host spill files (one file's schema: all have the
    slices' schema)."""
    if not columns:
        return []
    schema = pq.read_schema(next(spill.glob("host-*.parquet")))
    return [schema.field(c) for c in columns]


def _with_nulls(reader: Any, absent: list[pa.Field]) -> Iterator[pa.RecordBatch]:
    """The batches of `reader` with a NULL column of each field of `absent` appended."""
    for batch in reader:
        for column in absent:
            batch = batch.append_column(column, pa.nulls(batch.num_rows, column.type))
        yield batch


def _link_stream(reader: Any, spill: Path, source: _Source, write: Writer) -> int:
    state = _LinkState()
    with (_SpillWriter(spill / "launch-unresolved.parquet") as launches,
          _SpillWriter(spill / "forward.parquet") as forward):
        for batch in _batches(reader):
            links = state.link(batch)
            pass_ = _passes(batch, links)
            write(_host_rows(batch, links, source, pass_))
            launches.write(_launches(batch, links, pass_))
            forward.write(_forward_ops(batch, links))
            source.anomalies += [("overlapping_events", event_id, "starts inside an enclosing "
                                  "event on its thread but ends after it")
                                 for event_id in links.overlaps]
    return launches.rows


def _resolve_launch_layers(con: Any, spill: Path) -> None:
    """launch.parquet: the launch calls with their layer, layer_kind and layer_status,
    written by DuckDB (its rows never pass through Python); none: no file."""
    launches, forward = (f"read_parquet({_quote(spill / name)})"
                         for name in ("launch-unresolved.parquet", "forward.parquet"))
    con.execute(f"COPY ({layers.resolve_sql(launches, forward)}) "
                f"TO {_quote(spill / 'launch.parquet')} "
                f"(FORMAT parquet, COMPRESSION {SPILL_COMPRESSION})")


def _batches(reader: Any) -> Iterator[pa.Table]:
    for batch in reader:
        if batch.num_rows:
            yield pa.Table.from_batches([batch])


@dataclass
class _Links:
    parent: np.ndarray
    op: np.ndarray
    layer: np.ndarray
    overlaps: list[int]
    scopes: _Scopes      # the ops' and layer scopes' columns (op_name, scope: of some rows)
    mark_kind: pa.Array  # scope_kind of the innermost mark (self included)

    def op_name(self, rows: np.ndarray) -> pa.Array:
        """The name of the op of each of `rows`."""
        return self.scopes.names(self.op[rows])

    def scope(self, rows: np.ndarray) -> pa.Table:
        """The innermost layer scope of each of `rows`: name, scope_kind, sequence_number,
        pid (only the launch calls and forward ops need them: a take of every row's
        names cost pass 2 a third of its linking)."""
        return self.scopes.of(self.layer[rows])


class _ThreadCodes:
    """Thread numbering of a stream sorted by thread, across chunks."""

    def __init__(self) -> None:
        self.last_key: str | None = None
        self.last_code = 0

    def codes(self, keys: pa.ChunkedArray) -> np.ndarray:
        """Codes that increase at each new thread key, continuing the previous chunk's."""
        values = keys.combine_chunks()
        change = np.ones(len(values), dtype=np.int64)
        if len(values) > 1:
            change[1:] = np.asarray(pc.not_equal(values[1:], values[:-1]).to_numpy(
                zero_copy_only=False), dtype=np.int64)
        change[0] = 0 if values[0].as_py() == self.last_key else 1
        codes = self.last_code + np.cumsum(change)
        self.last_key, self.last_code = values[-1].as_py(), int(codes[-1])
        return codes


SCOPE_COLUMNS = ["name", "scope_kind", "sequence_number", "pid"]


class _LinkState:
    """The carried stack (with its scope columns) and thread numbering across chunks."""

    def __init__(self) -> None:
        self.carry = link.Carry.empty()
        self.carry_scopes: pa.Table | None = None
        self.threads = _ThreadCodes()

    def link(self, batch: pa.Table) -> _Links:
        n = batch.num_rows
        none = np.full(n, link.NONE, dtype=np.int64)
        nothing = _Scopes(none[:0], batch.select(SCOPE_COLUMNS).slice(0, 0))
        out = _Links(none, none.copy(), none.copy(), [], nothing,
                     layers.with_own_mark(nothing.kinds(none), batch["scope_kind"]))
        rows = np.flatnonzero(np.asarray(batch["linkable"].to_numpy(zero_copy_only=False)))
        if len(rows) == 0:
            return out
        # linkable rows sort first: a chunk is all linkable but at the very end
        part = batch if len(rows) == n else batch.take(pa.array(rows))
        chunk = link.SortedEvents(
            self.threads.codes(thread_keys(part)), _int64(part["ts_ns"]),
            _int64(part["ts_ns"]) + _int64(part["dur_ns"]), _int64(part["event_id"]),
            _bools(part["is_op"]), _bools(part["is_layer"]), _bools(part["is_mark"]),
            _bools(part["is_wrapper_op"]))
        own = part.select(SCOPE_COLUMNS)
        scopes = _Scopes(np.concatenate([self.carry.ident, chunk.ident]), own if
                         self.carry_scopes is None else pa.concat_tables(
                             [self.carry_scopes, own]))
        found, self.carry = link.link_sorted(chunk, self.carry)
        self.carry_scopes = scopes.of(self.carry.ident)
        out.parent[rows], out.op[rows], out.layer[rows] = found.parent, found.op, found.layer
        mark = none.copy()
        mark[rows] = found.mark
        out.overlaps = chunk.ident[found.overlap].tolist()
        out.scopes = scopes
        out.mark_kind = layers.with_own_mark(scopes.kinds(mark), batch["scope_kind"])
        return out


class _Scopes:
    """Scope columns of the events of one chunk and its carry, by event id. An op or layer
    of an event is one of its ancestors, which are all in the chunk or still open
    (carried); its mark is one of those or itself."""

    def __init__(self, ident: np.ndarray, columns: pa.Table) -> None:
        self.order = np.argsort(ident, kind="stable")
        self.sorted = ident[self.order]
        self.columns = columns

    def of(self, ids: np.ndarray, columns: list[str] | None = None) -> pa.Table:
        """Rows of the events `ids` (a row of NULLs for NONE); `columns`: only those
        (a take of every scope column costs as much again per column)."""
        table = self.columns if columns is None else self.columns.select(columns)
        found = ids != link.NONE
        if len(self.sorted) == 0:
            return table.take(pa.nulls(len(ids), pa.int64()))
        at = np.minimum(np.searchsorted(self.sorted, ids), len(self.sorted) - 1)
        if not np.array_equal(self.sorted[at][found], ids[found]):
            raise AssertionError("an op or layer is not among the open events")
        return table.take(pa.array(self.order[at], pa.int64(), mask=~found))

    def names(self, ids: np.ndarray) -> pa.Array:
        return self.of(ids, ["name"])["name"].combine_chunks()

    def kinds(self, ids: np.ndarray) -> pa.ChunkedArray:
        return self.of(ids, ["scope_kind"])["scope_kind"]


def _int64(column: pa.ChunkedArray) -> np.ndarray:
    return np.asarray(column.to_numpy(), dtype=np.int64)


def _bools(column: pa.ChunkedArray) -> np.ndarray:
    return np.asarray(column.to_numpy(), dtype=bool)


def _opt(values: np.ndarray) -> pa.Array:
    return pa.array(values, pa.int64(), mask=values == link.NONE)


def _passes(batch: pa.Table, links: _Links) -> pa.Array:
    """Each row's pass: its innermost mark's kind, else forward when it is or lies inside
    an op or a layer scope (layers.py)."""
    inside = pc.or_(pc.or_(batch["is_op"], batch["is_layer"]),
                    pa.array((links.op != link.NONE) | (links.layer != link.NONE)))
    return layers.passes(links.mark_kind, inside)


def _host_rows(batch: pa.Table, links: _Links, source: _Source, pass_: pa.Array
               ) -> pa.Table:
    table = batch.select(["event_id", "category", "name", "ts_ns", "dur_ns", "pid", "tid",
                          "correlation_id", "external_id", *HOST_ARG_COLUMNS])
    table = table.append_column("parent_event_id", _opt(links.parent))
    table = table.append_column("iteration", _iteration_of(source, batch["ts_ns"]
                                                           .combine_chunks()))
    for column in ("sequence_number", "fwd_thread_id"):
        table = table.append_column(column, batch[column])
    table = table.append_column("pass", pass_)
    return _with_context(table, source)


def _launches(batch: pa.Table, links: _Links, pass_: pa.Array) -> pa.Table:
    """Launch calls with their op, scope and pass: the input of layers.RESOLVE."""
    rows = _rows(pc.and_(batch["is_launch"], pc.is_valid(batch["correlation_id"])))
    picked = pa.array(rows, pa.int64())
    table = batch.select(["event_id", "correlation_id", "ts_ns"]).take(picked)
    columns = {"op_event_id": _opt(links.op[rows]), "op_name": links.op_name(rows),
               **layers.launch_columns(links.scope(rows), pass_.take(picked))}
    for column, values in columns.items():
        table = table.append_column(column, values)
    return table


def _forward_ops(batch: pa.Table, links: _Links) -> pa.Table:
    """The linkable forward ops with their layer scope (layers.forward_ops)."""
    rows = _rows(pc.and_(batch["linkable"], layers.is_forward_op(batch, batch["scope_kind"])))
    return layers.forward_ops(batch.take(pa.array(rows, pa.int64())), links.scope(rows))


def _rows(mask: Any) -> np.ndarray:
    """Positions of the true rows of a boolean mask (NULL: false)."""
    return np.flatnonzero(np.asarray(pc.fill_null(mask, False).to_numpy(
        zero_copy_only=False), dtype=bool))


class _SpillWriter:
    """A Parquet file written batch by batch (created even when no batch comes)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.writer: pq.ParquetWriter | None = None
        self.rows = 0

    def write(self, table: pa.Table) -> None:
        if self.writer is None:
            self.writer = pq.ParquetWriter(self.path, table.schema, compression="lz4")
        if table.num_rows:
            self.writer.write_table(table)
            self.rows += table.num_rows

    def __enter__(self) -> _SpillWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.writer is not None:
            self.writer.close()


def _kernels(spill: Path, gpu_rows: int, launch_rows: int, source: _Source, write: Writer,
             ends: dict[int, int] | None) -> int:
    """Pass 3: GPU activities with their launch, op, layer and iteration. `ends`, when
    given, gets the latest end of the activities launched in each iteration."""
    count = 0
    geometry = launch_geometry.read_spilled(spill)

    def emit(joined: pa.Table) -> None:
        nonlocal count
        table = pa.table({
            "kernel_id": joined["event_id"], "kind": joined["kind"],
            "category": joined["category"],
            "device_id": pc.cast(joined["device_id"], pa.int32()),
            **{c: joined[c] for c in KERNEL_COLUMNS},
            "iteration": _iteration_of(source, joined["launch_ts_ns"].combine_chunks()),
            "layer_kind": joined["layer_kind"], "pass": joined["pass"],
            "layer_status": pc.fill_null(joined["layer_status"], "no_launch")})
        table = launch_geometry.filled(table, geometry)
        _flag_orphans(table, source)
        if ends is not None:
            merge_window_ends(ends, window_ends(table))
        write(_with_context(table, source))
        count += table.num_rows

    join_kernels(spill, gpu_rows, launch_rows, emit, source.anomalies)
    return count


KERNEL_COLUMNS = ["stream_id", "name", "ts_ns", "dur_ns", "correlation_id", "external_id",
                  "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z",
                  "registers_per_thread", "shared_memory_bytes", "bytes", "launch_event_id",
                  "op_event_id", "op_name", "layer", *KERNEL_ARG_COLUMNS]
# after iteration (and the columns other arguments add): the kernels' layer_kind, pass and
# layer_status (layers.py)


def _flag_orphans(batch: pa.Table, source: _Source) -> None:
    orphan = pc.and_(pc.equal(batch["kind"], "kernel"), pc.is_null(batch["launch_event_id"]))
    for kernel_id in batch["kernel_id"].filter(pc.fill_null(orphan, False)).to_pylist():
        source.anomalies.append(("kernel_without_launch", kernel_id, "no runtime/driver call "
                                 "with this correlation id in the source; the kernel counts "
                                 "toward busy time but belongs to no iteration"))


def _with_context(table: pa.Table, source: _Source) -> pa.Table:
    """Prefix source_id and rank."""
    n = table.num_rows
    table = table.add_column(0, "rank", _repeated(source.rank, n))
    return table.add_column(0, "source_id", _repeated(source.source_id, n))


def _repeated(value: int | None, n: int) -> pa.Array:
    """An int32 column of one value (NULL for None) without a Python list of n items; a
    value out of int32 fails in the scalar's conversion."""
    return pa.repeat(pa.scalar(value, pa.int32()), n)


def _collective_ops(spill: Path, source: _Source, sinks: Sinks) -> None:
    """The record_param_comms args spilled by the slices (coll-*) → collective_ops rows."""
    files = sorted(spill.glob("coll-*.parquet"))
    if not files:
        return
    rows = pa.concat_tables([pq.read_table(f) for f in files], promote_options="permissive"
                            ).sort_by("event_id")
    # the slices name two args apart from their columns: dtype and seq
    renamed = {"collective_dtype": "dtype", "comm_seq": "seq"}
    rows = rows.rename_columns([renamed.get(c, c) for c in rows.column_names])
    sinks.table("collective_ops", collective_ops(source.source_id, source.rank, rows))


def _syncs(spill: Path, source: _Source, sinks: Sinks) -> None:
    """The synchronization events spilled by the slices (sync-*) → syncs rows."""
    files = sorted(spill.glob("sync-*.parquet"))
    if not files:
        return
    rows = pa.concat_tables([pq.read_table(f) for f in files]).sort_by("event_id")
    kinds = field_map("kineto")["syncs"]["kinds"]
    kind = pc.fill_null(pc.cast(rows["name"], pa.string()), "")
    known = pa.array(list(kinds), pa.string())
    kind = pc.if_else(pc.is_in(kind, known), kind, "unknown")
    for name, value in kinds.items():
        kind = pc.if_else(pc.equal(kind, name), value, kind)
    sinks.table("syncs", pa.table({
        "source_id": _repeated(source.source_id, rows.num_rows),
        "rank": _repeated(source.rank, rows.num_rows),
        "sync_id": rows["event_id"], "kind": kind, "name": rows["name"],
        "device_id": pc.cast(rows["device_id"], pa.int32()),
        "stream_id": _stream_or_null(rows["stream_id"]), "ts_ns": rows["ts_ns"],
        "dur_ns": rows["dur_ns"], "correlation_id": rows["correlation_id"],
        "wait_stream_id": _stream_or_null(rows["wait_stream"]),
        "wait_record_correlation_id": _id_or_null(rows["wait_record_correlation"]),
        "cuda_event_id": _id_or_null(rows["wait_cuda_event"])}))


NO_STREAM = 0xFFFFFFFF  # CUPTI's "not applicable" (older Kineto wrote it; newer writes -1)


def _stream_or_null(values: pa.ChunkedArray) -> pa.ChunkedArray:
    """A stream id, NULL where CUPTI says none (-1, or 0xFFFFFFFF and above)."""
    valid = pc.and_(pc.greater_equal(values, 0), pc.less(values, NO_STREAM))
    return pc.if_else(valid, values, pa.scalar(None, pa.int64()))


def _id_or_null(values: pa.ChunkedArray) -> pa.ChunkedArray:
    return pc.if_else(pc.greater_equal(values, 0), values, pa.scalar(None, pa.int64()))


def _memory_events(spill: Path, source: _Source, sinks: Sinks, gpu_devices: set[int]
                   ) -> list[Anomaly]:
    """The [memory] events spilled by the slices (mem-*) → memory_events rows; an anomaly
    when their GPU devices are not those the GPU activities ran on."""
    files = sorted(spill.glob("mem-*.parquet"))
    if not files:
        return []
    rows = pa.concat_tables([pq.read_table(f) for f in files]).sort_by("event_id")
    rows = rows.filter(pc.is_valid(rows["ts_ns"]))
    kind = rows["memory_device_type"]
    names = {int(k): v for k, v in field_map("kineto")["memory"]["device_types"].items()}
    device_type = pc.fill_null(pc.cast(kind, pa.string()), "unknown")
    for number, name in names.items():
        device_type = pc.if_else(pc.fill_null(pc.equal(kind, number), False), name,
                                 device_type)
    on_gpu = pc.fill_null(pc.equal(device_type, "GPU"), False)
    device = pc.if_else(on_gpu, rows["memory_device_id"], pa.scalar(None, pa.int64()))
    sinks.table("memory_events", pa.table({
        "source_id": _repeated(source.source_id, rows.num_rows),
        "device_id": pc.cast(device, pa.int32()), "device_type": device_type,
        "allocator": pa.nulls(rows.num_rows, pa.string()), "ts_ns": rows["ts_ns"],
        "allocated_bytes": rows["memory_total_allocated"],
        "reserved_bytes": rows["memory_total_reserved"], "delta_bytes": rows["memory_bytes"],
        "event_id": rows["event_id"]}))
    return memory_devices_unmatched(pc.drop_null(device), gpu_devices)


def memory_devices_unmatched(memory_devices: pa.Array, gpu_devices: set[int]
                             ) -> list[Anomaly]:
    """GPU memory events of devices on which no GPU activity of the source ran: the
    memory views find no memory for the devices that ran (memory_status says so)."""
    counts = pc.value_counts(memory_devices).to_pylist()
    other = {c["values"]: c["counts"] for c in counts if c["values"] not in gpu_devices}
    if not other or not gpu_devices:
        return []
    listed = ", ".join(f"{d} ({n} events)" for d, n in sorted(other.items()))
    return [("memory_device_unmatched", None, (
        f"GPU memory events of device(s) {listed}, on which no GPU activity of this source "
        f"ran (its activities ran on device(s) {', '.join(map(str, sorted(gpu_devices)))}): "
        "the memory views give those devices' windows no peak (memory_status "
        "memory_events_of_other_devices). PyTorch numbers memory events by its own device "
        "index and the profiler numbers GPU activities by the runtime's device id, which "
        "can differ (ROCm)"))]
