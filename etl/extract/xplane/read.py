"""The trace-role reader of xplane.pb files: decode (decode.py), collect (rows.py), link
(etl/extract/link.py) and write the run's rows through the sinks.

The file is read whole (a 100 MB XSpace: 100 MB of bytes plus ~100 bytes a row of typed
arrays); rows are written in chunks.
"""
from __future__ import annotations

import re
from array import array
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from etl.extract import link
from etl.core.errors import InputError
from etl.extract.layer_columns import with_layer_columns
from etl.extract.trace_role import (PipelineOptions, Sinks, SourceInfo, no_gpu_activity,
                                     no_gpu_activity_remark)
from etl.extract.trace_role import TraceResult as SourceResult
from etl.extract.fields import field_map
from etl.extract.xplane.decode import (Space, Stats, plane_kind, read_events, read_line,
                                       read_space)
from etl.extract.xplane.rows import DETAILS, NONE, Anomaly, Collector
from etl.extract.xplane.wire import WireError

REMEDY = ("re-export the profile (tf.profiler / jax.profiler write plugins/profile/<session>/"
          "<host>.xplane.pb), or move the file out of the run folder")


def read(path: Path, source_id: int, gpu_override: str | None, spill: Path,
                  sinks: Sinks, options: PipelineOptions) -> SourceResult:
    buf = _read(path)
    collector = Collector()
    try:
        space = read_space(buf)
        if not space.planes:
            raise InputError(path, "no XPlane in the file: not an XSpace protobuf, or empty",
                             None, REMEDY)
        _collect(buf, space, collector)
    except WireError as exc:
        raise InputError(path, f"not a readable XSpace protobuf ({exc.problem}); the file "
                         "is truncated or not an xplane.pb", f"byte {exc.offset}",
                         REMEDY) from None
    del buf
    return _write(space, collector, source_id, gpu_override, sinks, options)


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise InputError(path, f"cannot read the file ({exc.strerror})") from None


def _collect(buf: bytes, space: Space, collector: Collector) -> None:
    stream_re = re.compile(field_map("xplane")["lines"]["stream"])
    steps_line = field_map("xplane")["lines"]["steps"]
    for plane in space.planes:
        kind, device = plane_kind(plane.name)
        if kind == "other":
            collector.anomalies.append(("xplane_plane_not_read", None, (
                f"plane {plane.name!r} ({len(plane.lines)} lines) is neither the host plane "
                "nor a /device:GPU:N plane; its events are not read")))
            continue
        for start, end in plane.lines:
            line_id, name, timestamp, count = read_line(buf, start, end)
            if kind == "host":
                thread = collector.strings.of(name or str(line_id))
                read_events(buf, start, end, timestamp, plane, space,
                            partial(collector.host_event, plane, thread))
                continue
            stream = stream_re.match(name)
            if stream is not None:
                number = int(stream.group(1))
                number = number if number < 1 << 63 else NONE
                read_events(buf, start, end, timestamp, plane, space,
                            partial(collector.gpu_event, plane, device or 0, number))
            elif name == steps_line:
                read_events(buf, start, end, timestamp, plane, space,
                            partial(_step_group, collector))
            else:
                collector.derived_lines[name] += count


def _step_group(collector: Collector, _metadata_id: int, _ts: int, _dur: int,
                stats: Stats) -> None:
    group = stats.get("group_id")
    if isinstance(group, int):
        collector.steps_line_groups.add(group)


# ---- linking and writing --------------------------------------------------------------

def _write(space: Space, c: Collector, source_id: int, gpu_override: str | None,
           sinks: Sinks, options: PipelineOptions) -> SourceResult:
    host, gpu = c.host, c.gpu
    ts, dur = host.numpy("ts_ns"), host.numpy("dur_ns")
    steps = _steps(c)
    host_iter = link.assign_iterations(steps.start, steps.end, steps.number, ts,
                                       np.ones(len(ts), dtype=bool))
    is_op = host.numpy("category") == c.strings.of("tf_op")
    links = _link_host(host.numpy("tid"), ts, ts + dur, dur >= 0, is_op, options.chunk_rows)
    for row in links.overlaps:
        c.anomalies.append(("overlapping_events", int(ts.size and host.numpy("event_id")[row]),
                            "starts inside an enclosing event on its thread but ends after it"))
    launch = _launches(c)
    iterations = _iterations(c, steps, source_id)
    _write_host(c, links.parent, host_iter, source_id, sinks, options.chunk_rows)
    sinks.end_of_host_events()
    for column in ("ts_ns", "dur_ns", "tid", "category", "group_id", "step_num"):
        c.host.data[column] = array("q")  # written: only ids and names are read again
    del ts, dur, is_op
    links.parent = np.zeros(0, np.int64)
    pa.default_memory_pool().release_unused()
    _write_kernels(c, launch, links.layer, host_iter, source_id, sinks, options.chunk_rows)
    _write_memory(c, source_id, sinks)
    anomalies = _anomaly_table(_source_anomalies(space, c, steps), source_id)
    sinks.anomalies(anomalies)
    devices = _devices(space, gpu_override, source_id)
    cause = _no_gpu_activity(space, c)
    return SourceResult(SourceInfo(len(host) + len(gpu)), iterations,
                        devices, None, [n for n in devices["name"].to_pylist() if n],
                        kernels=len(gpu), anomalies=anomalies.num_rows,
                        remarks=[] if cause is None else [no_gpu_activity_remark(cause)])


def _link_host(thread: np.ndarray, start: np.ndarray, end: np.ndarray, timed: np.ndarray,
               is_op: np.ndarray, chunk_rows: int) -> link.HostLinks:
    """link.link_host in chunks of the sorted rows with the open events carried (as the
    Kineto pipeline links): its working set is a chunk's, not the source's. The innermost
    TF op enclosing an event is linked as its `layer` (is_layer = is_op), as TF ops nest
    (a function call op around the ops it runs) and a launch belongs to the innermost."""
    n = len(start)
    order = np.lexsort((np.arange(n), -end, start, thread))
    order = order[(timed & (end >= start))[order]]
    parent = np.full(n, NONE, dtype=np.int64)
    innermost = np.full(n, NONE, dtype=np.int64)
    overlaps: list[int] = []
    carry = link.Carry.empty()
    for at in range(0, len(order), max(chunk_rows, 1)):
        rows = order[at:at + chunk_rows].astype(np.int64)
        found, carry = link.link_sorted(link.SortedEvents(
            thread[rows], start[rows], end[rows], rows, is_op[rows], is_op[rows]), carry)
        parent[rows], innermost[rows] = found.parent, found.layer
        overlaps += rows[found.overlap].tolist()
    return link.HostLinks(parent, np.full(0, NONE), innermost, overlaps)


class Steps:
    """Iteration boundaries (schemas/iterations.toml, xplane_pb), in one of three ways."""

    def __init__(self, start: np.ndarray, end: np.ndarray, number: np.ndarray,
                 event_id: np.ndarray, boundary: str) -> None:
        self.start, self.end, self.number, self.event_id = start, end, number, event_id
        self.boundary = boundary


def _steps(c: Collector) -> Steps:
    host = c.host
    ts, dur = host.numpy("ts_ns"), host.numpy("dur_ns")
    step_num = host.numpy("step_num")
    marked = np.flatnonzero((step_num != NONE) & (dur >= 0))
    if len(marked):
        return Steps(ts[marked], ts[marked] + dur[marked], step_num[marked],
                     host.numpy("event_id")[marked], "step_num events")
    group = host.numpy("group_id")
    wanted = sorted(c.steps_line_groups) or sorted(set(group[group != NONE].tolist()))
    spans = [(g, rows) for g in wanted
             if len(rows := np.flatnonzero((group == g) & (dur >= 0)))]
    if spans:
        start = np.array([ts[rows].min() for _, rows in spans], dtype=np.int64)
        end = np.array([(ts[rows] + dur[rows]).max() for _, rows in spans], dtype=np.int64)
        number = np.array([g for g, _ in spans], dtype=np.int64)
        return Steps(start, end, number, np.full(len(spans), NONE, np.int64),
                     "step groups (group_id)")
    empty = np.zeros(0, np.int64)
    return Steps(empty, empty, empty, empty, "whole_trace")


def _iterations(c: Collector, steps: Steps, source_id: int) -> pa.Table:
    if steps.boundary == "whole_trace":
        span = _whole_span(c)
        rows = [span] if span else []
        table = pa.table({"iteration": pa.nulls(len(rows), pa.int64()),
                          "start_ns": pa.array([r[0] for r in rows], pa.int64()),
                          "end_ns": pa.array([r[1] for r in rows], pa.int64()),
                          "boundary": pa.array(["whole_trace"] * len(rows), pa.string()),
                          "event_id": pa.nulls(len(rows), pa.int64())})
    else:
        order = np.argsort(steps.start, kind="stable")
        table = pa.table({"iteration": pa.array(steps.number[order], pa.int64()),
                          "start_ns": pa.array(steps.start[order], pa.int64()),
                          "end_ns": pa.array(steps.end[order], pa.int64()),
                          # the step-marker kind the views key on, whatever the source
                          "boundary": pa.array(["ProfilerStep"] * len(order), pa.string()),
                          "event_id": _optional(steps.event_id[order])})
    return _context(table, source_id)


def _whole_span(c: Collector) -> tuple[int, int] | None:
    starts, ends = [], []
    for cols in (c.host, c.gpu):
        ts, dur = cols.numpy("ts_ns"), cols.numpy("dur_ns")
        ok = dur >= 0
        if ok.any():
            starts.append(int(ts[ok].min()))
            ends.append(int((ts[ok] + dur[ok]).max()))
    return (min(starts), max(ends)) if starts else None


def _launches(c: Collector) -> np.ndarray:
    host_corr = c.host.numpy("correlation_id")
    rows = np.flatnonzero(host_corr != NONE)
    gpu_corr = c.gpu.numpy("correlation_id")
    launch, duplicates = link.link_launches(host_corr[rows], rows, gpu_corr,
                                            gpu_corr != NONE)
    ids = c.host.numpy("event_id")
    for row in duplicates:
        c.anomalies.append(("duplicate_correlation", int(ids[row]), "a second launch call "
                            "with the same correlation id; the first is used"))
    return launch


def _optional(values: np.ndarray) -> pa.Array:
    return pa.array(values, pa.int64(), mask=values == NONE)


def _at(values: np.ndarray, rows: np.ndarray) -> np.ndarray:
    if len(values) == 0:
        return np.full(len(rows), NONE, dtype=np.int64)
    return np.where(rows != NONE, values[np.maximum(rows, 0)], NONE)


def _context(table: pa.Table, source_id: int) -> pa.Table:
    n = table.num_rows
    table = table.add_column(0, "rank", pa.nulls(n, pa.int32()))
    return table.add_column(0, "source_id", pa.repeat(pa.scalar(source_id, pa.int32()), n))


def _chunks(n: int, size: int) -> list[slice]:
    return [slice(i, min(i + size, n)) for i in range(0, n, max(size, 1))]


def _write_host(c: Collector, parent: np.ndarray, iteration: np.ndarray, source_id: int,
                sinks: Sinks, chunk_rows: int) -> None:
    host = c.host
    ids = host.numpy("event_id")
    parent_id = _at(ids, parent)
    for part in _chunks(len(host), chunk_rows):
        codes = {n: host.data[n][part] for n in ("name", "tid", "category")}
        table = pa.table({
            "event_id": pa.array(ids[part], pa.int64()),
            "category": c.strings.column(codes["category"]),
            "name": c.strings.column(codes["name"]),
            "ts_ns": pa.array(host.numpy("ts_ns")[part], pa.int64()),
            "dur_ns": pa.array(host.numpy("dur_ns")[part], pa.int64()),
            "pid": pa.repeat(pa.scalar("/host:CPU"), part.stop - part.start),
            "tid": c.strings.column(codes["tid"]),
            "correlation_id": _optional(host.numpy("correlation_id")[part]),
            "external_id": pa.nulls(part.stop - part.start, pa.int64()),
            "parent_event_id": _optional(parent_id[part]),
            "iteration": _optional(iteration[part])})
        sinks.host_events(_context(table, source_id))


def _write_kernels(c: Collector, launch: np.ndarray, innermost_op: np.ndarray,
                   host_iter: np.ndarray, source_id: int, sinks: Sinks, chunk_rows: int) -> None:
    gpu, host = c.gpu, c.host
    host_ids = host.numpy("event_id")
    op_row = _at(innermost_op, launch)
    op_name, layer = _names_from_ops(c, op_row)
    kinds = gpu.numpy("kind")
    orphan = (launch == NONE) & (kinds == c.strings.of("kernel"))
    for kernel_id in gpu.numpy("event_id")[orphan].tolist():
        c.anomalies.append(("kernel_without_launch", kernel_id, "no host event with this "
                            "correlation_id in the xplane; the kernel counts toward busy time "
                            "but belongs to no iteration"))
    launch_id, op_id, iteration = _at(host_ids, launch), _at(host_ids, op_row), _at(
        host_iter, launch)
    known: list[tuple[int, ...]] = list(c.details) or [(NONE,) * len(DETAILS)]
    table_of_details = np.array(known, dtype=np.int64)
    for part in _chunks(len(gpu), chunk_rows):
        columns: dict[str, pa.Array] = {
            "kernel_id": pa.array(gpu.numpy("event_id")[part], pa.int64()),
            "kind": c.strings.column(gpu.data["kind"][part]),
            "category": c.strings.column(gpu.data["kind"][part]),
            "device_id": pa.array(gpu.numpy("device_id")[part], pa.int32()),
            "stream_id": pa.array(gpu.numpy("stream_id")[part], pa.int64()),
            "name": c.strings.column(gpu.data["name"][part]),
            "ts_ns": pa.array(gpu.numpy("ts_ns")[part], pa.int64()),
            "dur_ns": pa.array(gpu.numpy("dur_ns")[part], pa.int64()),
            "correlation_id": _optional(gpu.numpy("correlation_id")[part]),
            "external_id": pa.nulls(part.stop - part.start, pa.int64())}
        details = table_of_details[gpu.numpy("details")[part]]
        for k, name in enumerate(DETAILS):
            columns[name] = _optional(details[:, k])
        columns |= {"launch_event_id": _optional(launch_id[part]),
                    "op_event_id": _optional(op_id[part]),
                    "op_name": c.strings.column(op_name[part]),
                    "layer": c.strings.column(layer[part]),
                    "iteration": _optional(iteration[part])}
        sinks.kernels(_context(with_layer_columns(pa.table(columns), "name_scope",
                                                  field_map("xplane")["passes"]), source_id))


def _names_from_ops(c: Collector, op_row: np.ndarray) -> tuple[Any, Any]:
    """op_name and layer codes: the GPU event's own op stat, else its launch's op."""
    from etl.extract.xplane.rows import split_op

    op_name, layer = c.gpu.data["op_name"], c.gpu.data["layer"]
    names = c.host.numpy("name")
    for row in np.flatnonzero((c.gpu.numpy("op_name") == NONE) & (op_row != NONE)).tolist():
        split = split_op(c.strings.values[int(names[op_row[row]])])
        if split is not None:
            op_name[row], layer[row] = c.strings.of(split[0]), c.strings.of(split[1])
    return op_name, layer


def _write_memory(c: Collector, source_id: int, sinks: Sinks) -> None:
    mem = c.memory
    if not len(mem):
        return
    device = mem.numpy("device_id")
    table = pa.table({
        "source_id": pa.repeat(pa.scalar(source_id, pa.int32()), len(mem)),
        "device_id": pa.array(device, pa.int32(), mask=device == NONE),
        "device_type": pa.array(np.where(device == NONE, "CPU", "GPU"), pa.string()),
        "allocator": c.strings.column(mem.data["allocator"]),
        "ts_ns": pa.array(mem.numpy("ts_ns"), pa.int64()),
        "allocated_bytes": _optional(mem.numpy("allocated")),
        "reserved_bytes": _optional(mem.numpy("reserved")),
        "delta_bytes": pa.array(mem.numpy("delta"), pa.int64(),
                                mask=mem.numpy("delta") == NONE),
        "event_id": pa.array(mem.numpy("event_id"), pa.int64())})
    sinks.table("memory_events", table)


def _devices(space: Space, gpu_override: str | None, source_id: int) -> pa.Table:
    rows = []
    for plane in space.planes:
        kind, device = plane_kind(plane.name)
        if kind != "gpu":
            continue
        s = plane.stats
        major, minor = s.get("compute_cap_major"), s.get("compute_cap_minor")
        amd = "amd" in str(s.get("device_vendor", "")).lower()
        cc = f"{major}.{minor}" if isinstance(major, int) and isinstance(minor, int) \
            and not amd else None
        # XLA's CUPTI and ROCm collectors write the model as gpu_device_name (cuDeviceGetName;
        # the agent name, e.g. gfx942, on ROCm); older profilers device_name or gpu_model
        name = s.get("gpu_device_name") or s.get("device_name") or s.get("gpu_model")
        described = bool(s)
        rows.append({"device_id": device,
                     "name": str(name) if name else gpu_override,
                     "compute_capability": cc,
                     "sm_count": _whole(s.get("core_count")),
                     "memory_bytes": _whole(s.get("memory_size")),
                     "properties_source": "xplane" if described else (
                         "run.toml" if gpu_override else None)})
    schema = pa.schema([("device_id", pa.int32()), ("name", pa.string()),
                        ("compute_capability", pa.string()), ("sm_count", pa.int32()),
                        ("memory_bytes", pa.int64()), ("properties_source", pa.string())])
    return _context(pa.Table.from_pylist(rows, schema=schema), source_id)


def _whole(value: object) -> int | None:
    return value if isinstance(value, int) and value > 0 else None


def _source_anomalies(space: Space, c: Collector, steps: Steps) -> list[Anomaly]:
    found = list(c.anomalies)
    cause = _no_gpu_activity(space, c)
    if cause is not None:
        found.append(no_gpu_activity(cause))
    if space.not_stored:
        listed = ", ".join(f"{n} ({k})" for n, k in sorted(space.not_stored.items()))
        found.append(("xplane_stats_not_stored", None, f"{sum(space.not_stored.values())} "
                      f"event stats have no column and are counted here by name: {listed}"))
    if c.derived_lines:
        listed = ", ".join(f"{n} ({k})" for n, k in sorted(c.derived_lines.items()))
        found.append(("xplane_lines_not_read", None, "device-plane lines derived by the "
                      f"profiler from the streams, not read (events): {listed}"))
    if steps.boundary not in ("step_num events", "whole_trace"):  # whole: no_step_markers
        found.append(("xplane_steps", None, f"iterations from {steps.boundary}: the xplane "
                      "has no host event with a step_num stat (Keras and "
                      "tf.profiler.experimental.Trace(step_num=...) write one)"))
    if space.aggregated:
        found.append(("xplane_aggregated_events", None, f"{space.aggregated} aggregated "
                      "events (num_occurrences, no start time) are not read"))
    found += [("xplane_profiler_error", None, e) for e in space.errors]
    found += [("xplane_profiler_warning", None, w) for w in space.warnings]
    return found


def _no_gpu_activity(space: Space, c: Collector) -> str | None:
    """What a profile without one GPU activity holds instead; None when it has some."""
    if len(c.gpu):
        return None
    kinds = [plane_kind(p.name)[0] for p in space.planes]
    if "gpu" in kinds:
        return "its /device:GPU:N planes hold no kernel, copy or set on a stream line"
    names = ", ".join(p.name for p in space.planes)
    return (f"the XSpace has no /device:GPU:N plane (planes: {names}): a CPU- or TPU-only "
            "profile, or one taken without the GPU tracer; only its host side was read")


def _anomaly_table(anomalies: list[Anomaly], source_id: int) -> pa.Table:
    n = len(anomalies)
    return pa.table({
        "source_id": pa.repeat(pa.scalar(source_id, pa.int32()), n),
        "kind": pa.array([a[0] for a in anomalies], pa.string()),
        "event_id": pa.array([a[1] for a in anomalies], pa.int64()),
        "detail": pa.array([a[2] for a in anomalies], pa.string()),
        "ncu_source_id": pa.nulls(n, pa.int32()),
        "ncu_id": pa.nulls(n, pa.int64())})
