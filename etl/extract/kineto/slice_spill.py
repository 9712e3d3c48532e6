"""One slice of a trace → classified Arrow rows spilled to Parquet, plus a small summary.

This is the per-slice half of the streaming pipeline (read.py); it runs in the
ingesting process or in a worker process, so it takes and returns only picklable values.
Host rows get the flags the linker needs (computed in bulk here, not per event later);
GPU rows get their kind; B/E events are set aside unpaired (read.py pairs them
once every slice is spilled). Everything that must be known about the whole source before
linking (steps, the span of complete events, device ids, anomalies) is returned, not written.
"""
from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from etl.extract.kineto.decode import (COLLECTIVE_INT_COLUMNS, MEMORY_COLUMNS, SYNC_COLUMNS,
                                       Anomaly, FirstId, SliceText,
                                       decode_slice,
                                       field_map)
from etl.extract.kineto import launch_geometry, layers
from etl.extract.kineto.event_ids import IdChain
from etl.extract.rawio import read_slice
from etl.extract.kineto.rows import (HOST_ARG_COLUMNS, HOST_COLUMNS, Step, StepMarkers,
                                      _classify, _flag_times, complete_span,
                                      gpu_work_activities, split_begin_end)

SPILL_COMPRESSION = "lz4"  # spill files live seconds: cheap to write beats small


@dataclass
class SliceSummary:
    index: int
    with_phase: int
    events: int = 0                       # all of the slice's events, kept or not
    host_rows: int = 0
    gpu_rows: int = 0
    anomalies: list[Anomaly] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    span: tuple[int, int] | None = None   # min start, max end of its complete events
    devices: list[int] = field(default_factory=list)
    begin_end_rows: int = 0               # B and E events spilled unpaired (be-<index>)
    gpu_work_activities: int = 0          # kernels, copies and fills
    host_args: list[str] = field(default_factory=list)  # HOST_ARG_COLUMNS with a value


def spill_range(path: Path, offset: int, length: int, checksum: int,
                first_id: int | IdChain, folder: Path, index: int,
                markers: StepMarkers) -> SliceSummary:
    """Read one slice of a plain file and spill it (the worker entry point for plain
    files: the ingesting process sends where the slice is, not its 16 MiB)."""
    with _failure_passed_on(first_id, index):
        text = read_slice(path, offset, length, checksum)
    return spill_text(path, text, first_id, offset, folder, index, markers)


def spill_text(path: Path, text: SliceText, first_id: int | IdChain, offset: int,
               folder: Path, index: int, markers: StepMarkers) -> SliceSummary:
    """Decode one slice and spill it (the worker entry point for gzip files).
    `first_id`: the slice's, or the chain that numbers slices cut unchecked (trusted
    cuts: a decoding error then means a bad cut or bad input, and the file is read again
    with every cut checked)."""
    with _failure_passed_on(first_id, index), gc_paused():
        decoded = decode_slice(path, text, _first_id(first_id, index), offset)
    summary = spill_table(decoded.table, decoded.anomalies, decoded.with_phase, folder,
                          index, markers)
    summary.events = decoded.events
    return summary


@contextmanager
def _failure_passed_on(first_id: int | IdChain, index: int) -> Iterator[None]:
    """A slice that fails before its events are numbered tells the slices after it, which
    wait for its count (event_ids.py)."""
    try:
        yield
    except BaseException:
        if isinstance(first_id, IdChain):
            first_id.fail(index)
        raise


def _first_id(first_id: int | IdChain, index: int) -> FirstId:
    if isinstance(first_id, int):
        return first_id
    return lambda events: first_id.first_id(index, events)


def spill_table(base: pa.Table, anomalies: list[Anomaly], with_phase: int, folder: Path,
                index: int, markers: StepMarkers, paired: bool = False) -> SliceSummary:
    """Classify decoded events and write host-<index> / gpu-<index>.parquet in `folder`;
    B and E events go unpaired to be-<index>.parquet (their E may be slices away).
    `paired`: the events are B/E pairs, whose times were flagged when they were paired."""
    summary = SliceSummary(index, with_phase, anomalies=list(anomalies))
    base, begin_end = split_begin_end(base)
    base = _spill_memory(base, folder, index)
    base = _spill_syncs(base, folder, index)
    base = _spill_collectives(base, folder, index)
    if begin_end is not None:
        _write(begin_end, folder / f"be-{index:06d}.parquet")
        summary.begin_end_rows = begin_end.num_rows
    is_host, is_gpu, kinds = _classify(base, summary.anomalies)
    if not paired:
        _flag_times(base, summary.anomalies)
    host = base.select(HOST_COLUMNS).take(pa.array(np.flatnonzero(is_host)))
    launch_geometry.spill(launch_geometry.of_host_rows(base, is_host), folder, index)
    step_numbers, not_scopes = markers.of(host["name"])
    host = _with_link_flags(host, not_scopes)
    gpu = base.drop_columns(HOST_ARG_COLUMNS).take(pa.array(np.flatnonzero(is_gpu))).append_column(
        "kind", pa.array(kinds, pa.string()))
    summary.steps = _steps(host, step_numbers)
    summary.span = complete_span(base)
    summary.devices = [d for d in pc.unique(gpu["device_id"]).to_pylist() if d is not None]
    summary.host_rows, summary.gpu_rows = host.num_rows, gpu.num_rows
    summary.host_args = [c for c in HOST_ARG_COLUMNS if host[c].null_count < host.num_rows]
    summary.gpu_work_activities = gpu_work_activities(gpu)
    _write(host, folder / f"host-{index:06d}.parquet")
    _write(gpu, folder / f"gpu-{index:06d}.parquet")
    return summary


def _spill_memory(base: pa.Table, folder: Path, index: int) -> pa.Table:
    """The allocator args of [memory] events to mem-<index>.parquet (read.py writes them
    to memory_events); the rows go on without those columns."""
    columns = [c for c in MEMORY_COLUMNS if c in base.column_names]
    if not columns:
        return base
    mask = pc.fill_null(pc.equal(base["name"], field_map("kineto")["memory"]["name"]), False)
    if pc.any(mask).as_py():
        _write(base.filter(mask).select(["event_id", "ts_ns", *columns]),
               folder / f"mem-{index:06d}.parquet")
    return base.drop_columns(columns)


SYNC_ROW = ["event_id", "name", "ts_ns", "dur_ns", "device_id", "stream_id", "correlation_id"]
COLLECTIVE_TEXT_COLUMNS = ("collective_name", "collective_dtype", "in_split_size",
                           "out_split_size", "process_group_name", "process_group_desc",
                           "process_group_ranks", "comms_id")


def _spill_collectives(base: pa.Table, folder: Path, index: int) -> pa.Table:
    """The collective args of c10d's record_param_comms ops to coll-<index>.parquet (read.py
    writes them to collective_ops); every event goes on without those columns (Kineto's
    copies on the NCCL kernels are the same values)."""
    columns = [c for c in (*COLLECTIVE_INT_COLUMNS, *COLLECTIVE_TEXT_COLUMNS)
               if c in base.column_names]
    if not columns:
        return base
    names = field_map("kineto")["collectives"]["op_names"]
    mask = pc.fill_null(pc.is_in(base["name"], pa.array(names, pa.string())), False)
    if pc.any(mask).as_py():
        _write(base.filter(mask).select(["event_id", "ts_ns", "dur_ns", *columns]),
               folder / f"coll-{index:06d}.parquet")
    return base.drop_columns(columns)


def _spill_syncs(base: pa.Table, folder: Path, index: int) -> pa.Table:
    """The synchronization events (categories with sync = true in fields.toml) with their
    wait args to sync-<index>.parquet (read.py writes them to syncs); the events go on as
    GPU rows of kind other, without those columns."""
    columns = [c for c in SYNC_COLUMNS if c in base.column_names]
    if not columns:
        return base
    categories = [c for c, spec in field_map("kineto")["categories"].items() if spec.get("sync")]
    mask = pc.fill_null(pc.is_in(base["category"], pa.array(categories, pa.string())), False)
    if pc.any(mask).as_py():
        _write(base.filter(mask).select([*SYNC_ROW, *columns]),
               folder / f"sync-{index:06d}.parquet")
    return base.drop_columns(columns)


@contextmanager
def gc_paused() -> Iterator[None]:
    """The decoder makes ~10 acyclic objects per event; the cyclic GC would only rescan
    them (it costs several times the decoding)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _write(table: pa.Table, path: Path) -> None:
    # Without dictionary pages the write takes half the time and the files are smaller
    # (names repeat, but lz4 finds them); reading them back costs the same. Without
    # statistics it takes a tenth less: spill files are read whole, never pruned.
    if table.num_rows:
        pq.write_table(table, path, compression=SPILL_COMPRESSION, use_dictionary=False,
                       write_statistics=False)


def _with_link_flags(host: pa.Table, not_scopes: pa.Array) -> pa.Table:
    """Add is_op, is_wrapper_op, is_layer, is_launch, linkable, scope_kind and is_mark (see
    etl/extract/link.py and layers.py for the rules); `not_scopes`: the step markers' rows
    (StepMarkers.of)."""
    cats = host["category"]
    is_op = pc.and_(pc.is_in(cats, pa.array(["cpu_op", "Operator"])), pc.invert(not_scopes))
    kinds = layers.scope_kinds(host, not_scopes)
    launch_cats = [c for c, e in field_map("kineto")["categories"].items() if e.get("launch")]
    linkable = pc.and_(pc.and_(pc.equal(host["ph"], "X"), pc.is_valid(host["ts_ns"])),
                       pc.greater_equal(host["dur_ns"], 0))
    flags = {"is_op": is_op, "is_wrapper_op": layers.is_wrapper_op(host, is_op),
             "is_layer": pc.is_valid(kinds),
             "is_launch": pc.is_in(cats, pa.array(launch_cats)), "linkable": linkable,
             "is_mark": layers.is_mark(kinds)}
    for column, values in flags.items():
        host = host.append_column(column, pc.fill_null(values, False))
    return host.append_column("scope_kind", kinds)


def _steps(host: pa.Table, numbers: pa.Array) -> list[Step]:
    """(event_id, N, start, end) of the step markers (N in `numbers`, StepMarkers.of) with
    ts and dur, in order."""
    mask = pc.and_(pc.and_(pc.is_in(host["category"],
                                    pa.array(field_map("kineto")["steps"]["categories"])),
                           pc.is_valid(numbers)),
                   pc.and_(pc.equal(host["ph"], "X"), pc.and_(
                       pc.is_valid(host["ts_ns"]), pc.is_valid(host["dur_ns"]))))
    rows = host.append_column("step", numbers).filter(pc.fill_null(mask, False))
    return [(event_id, number, ts, ts + dur) for event_id, number, ts, dur in zip(
        *(rows[c].to_pylist() for c in ("event_id", "step", "ts_ns", "dur_ns")))]


def merge_span(a: tuple[int, int] | None, b: tuple[int, int] | None) -> tuple[int, int] | None:
    if a is None or b is None:
        return a or b
    return (min(a[0], b[0]), max(a[1], b[1]))

