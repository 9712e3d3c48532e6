"""One Kineto source → Arrow tables (host_events, kernels, iterations, devices, anomalies),
in memory.

This is the plain reading of a trace: the reference the streaming pipeline
(read.py, what `etl ingest` runs) is tested against, and the home of the
classification rules both share (_classify, _flag_times, and the pairing of B/E events
into complete events).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from etl.extract import link, trace_role
from etl.extract.kineto import launch_geometry, layers
from etl.extract.kineto.completeness import RecordEnd, RecordOrder, window_ends
from etl.extract.kineto.decode import KinetoTrace
from etl.extract.fields import field_map
from etl.extract.step_names import StepNames

Anomaly = tuple[str, int | None, str]
# arguments only operators / only kernels carry (fields.toml [args])
HOST_ARG_COLUMNS = ["input_dims", "input_types", "flops", "call_stack", "module_hierarchy"]
KERNEL_ARG_COLUMNS = ["est_achieved_occupancy_share", "blocks_per_sm", "warps_per_sm"]
HOST_COLUMNS = ["event_id", "ph", "category", "name", "ts_ns", "dur_ns", "pid", "tid",
                "correlation_id", "external_id", "sequence_number", "fwd_thread_id",
                *HOST_ARG_COLUMNS]


@dataclass(frozen=True)
class StepMarkers:
    """Which host events mark steps (fields.toml [steps], etl/extract/step_names.py).

    `iterations`: the markers that are iterations, run.toml's step_pattern alone when set,
    else ProfilerStep#N. `not_scopes`: the names that are neither ops nor layer scopes,
    those markers and ProfilerStep#N whatever step_pattern says (the profiler's own
    marker never names a layer). Pattern strings only: sent to slice workers.
    """

    iterations: StepNames
    not_scopes: StepNames

    @staticmethod
    def of_pattern(step_pattern: str | None) -> StepMarkers:
        default = field_map("kineto")["steps"]["pattern"]
        custom = () if step_pattern is None else (step_pattern,)
        return StepMarkers(StepNames.of(step_pattern, [default]),
                           StepNames(tuple(dict.fromkeys((*custom, default)))))

    def of(self, names: Any) -> tuple[Any, Any]:
        """N of each name that marks an iteration (NULL for others), and which names are
        not scopes (boolean), for an Arrow string array."""
        numbers = self.iterations.numbers(names)
        if self.not_scopes == self.iterations:
            return numbers, pc.is_valid(numbers)
        return numbers, self.not_scopes.matches(names)


@dataclass
class SourceTables:
    host_events: pa.Table
    kernels: pa.Table
    iterations: pa.Table
    devices: pa.Table
    anomalies: pa.Table
    rank: int | None
    gpu_names: list[str]


def build(trace: KinetoTrace, source_id: int, gpu_override: str | None,
          step_pattern: str | None = None) -> SourceTables:
    rank = _rank(trace)
    plain, begin_end = split_begin_end(trace.events.combine_chunks())
    base = plain if begin_end is None else pa.concat_tables(
        [plain, pair_begin_end(begin_end, trace.anomalies)]).sort_by("event_id")
    base = base.combine_chunks()  # one chunk: filters below copy each column once
    is_host, is_gpu, kinds = _classify(base, trace.anomalies)
    _flag_times(plain, trace.anomalies)  # pairs were flagged when they were paired
    # take() with indices is ~3x faster than filter() with a mask on string columns
    host = base.select(HOST_COLUMNS).take(pa.array(np.flatnonzero(is_host)))
    gpu = base.take(pa.array(np.flatnonzero(is_gpu))).append_column(
        "kind", pa.array(kinds, pa.string()))
    times = base.select(["ph", "ts_ns", "dur_ns"])  # every category: the whole-trace span
    order = RecordOrder.of_events(plain) if trace.truncated else None  # in file order
    host_t, kern_t, iters = _link(host, gpu, trace.anomalies, times, order,
                                  StepMarkers.of_pattern(step_pattern))
    geometry = launch_geometry.of_host_rows(base, is_host)
    kern_t = launch_geometry.filled(
        kern_t, None if geometry is None else geometry.sort_by("event_id"))
    context = {"source_id": source_id, "rank": rank}
    return SourceTables(
        host_events=_with_context(host_t, context),
        kernels=_with_context(kern_t, context),
        iterations=_with_context(iters, context),
        devices=_devices(trace, kern_t, context, gpu_override),
        anomalies=_anomaly_table(trace.anomalies, source_id),
        rank=rank,
        gpu_names=[str(p["name"]) for p in trace.device_properties if p.get("name")],
    )


def _rank(trace: KinetoTrace) -> int | None:
    info = trace.distributed_info or {}
    rank = info.get("rank")
    return rank if isinstance(rank, int) and not isinstance(rank, bool) else None


def _classify(base: pa.Table, anomalies: list[Anomaly]) -> tuple[np.ndarray, np.ndarray, list]:
    """(is_host, is_gpu, kind of each GPU row) from the category field map, vectorised.

    Unknown categories are kept as host events and flagged; uncategorised instant events
    follow the field map's [uncategorised] rule (the profiler's own markers).
    """
    categories = field_map("kineto")["categories"]
    known = list(categories)
    position = np.asarray(pc.fill_null(pc.index_in(base["category"], value_set=pa.array(
        known, pa.string())), len(known)).to_numpy(zero_copy_only=False))
    tables = np.array([categories[c]["table"] for c in known] + ["host"], dtype=object)
    kinds = np.array([categories[c].get("kind") for c in known] + [None], dtype=object)
    table_of = tables[position]
    uncategorised = np.asarray(base["category"].is_null().to_numpy(zero_copy_only=False))
    instant = np.asarray(pc.not_equal(base["ph"], "X").to_numpy(zero_copy_only=False))
    table_of[uncategorised & instant] = field_map("kineto")["uncategorised"]["instant"]
    _flag_unknown(base, (position == len(known)) & (table_of == "host"), anomalies)
    is_gpu = table_of == "gpu"
    return table_of == "host", is_gpu, kinds[position][is_gpu].tolist()


def _flag_unknown(base: pa.Table, unknown: np.ndarray, anomalies: list[Anomaly]) -> None:
    rows = np.flatnonzero(unknown)
    if len(rows) == 0:
        return
    cats = base["category"].take(pa.array(rows)).to_pylist()
    ids = base["event_id"].take(pa.array(rows)).to_pylist()
    for event_id, cat in zip(ids, cats):
        anomalies.append(("unknown_category", event_id,
                          f"category {cat!r} is not in the field map; kept as a host event"))


def _flag_times(base: pa.Table, anomalies: list[Anomaly]) -> None:
    complete = pc.equal(base["ph"], "X")
    ids = base["event_id"]
    for column, kind, what in (("ts_ns", "missing_ts", "ts"), ("dur_ns", "missing_dur", "dur")):
        missing = pc.and_(complete, pc.is_null(base[column]))
        for event_id in ids.filter(missing).to_pylist():
            anomalies.append((kind, event_id, f"complete event without a numeric {what}; "
                              f"{what} stored as NULL"))
    negative = pc.fill_null(pc.less(base["dur_ns"], 0), False)
    for event_id in ids.filter(negative).to_pylist():
        anomalies.append(("negative_duration", event_id,
                          "dur < 0; kept as written, excluded from links and busy time"))


# ---- begin/end pairs: B ... E on one thread is the complete event X it describes ---------

BEGIN_END = pa.array(["B", "E"], pa.string())
# the range timeconv accepts for a written ts or dur (beyond 2^62 ns a value is garbage)
_DUR_LIMIT = 1 << 62
_NOT_ARGS = frozenset(("event_id", "ph", "category", "name", "ts_ns", "dur_ns", "pid", "tid"))


def split_begin_end(base: pa.Table) -> tuple[pa.Table, pa.Table | None]:
    """(the events that are not B or E, the B and E events or None when there are none)."""
    mask = pc.fill_null(pc.is_in(base["ph"], value_set=BEGIN_END), False)
    if not pc.any(mask).as_py():
        return base, None
    return base.filter(pc.invert(mask)), base.filter(mask)


def thread_keys(events: pa.Table) -> Any:
    """pid and tid as one comparable key (NULL read as '', as in the links)."""
    return pc.binary_join_element_wise(pc.fill_null(events["pid"], ""),
                                       pc.fill_null(events["tid"], ""), "\x1f")


def pair_begin_end(events: pa.Table, anomalies: list[Anomaly]) -> pa.Table:
    """All B and E events of a source → one complete event per B (the in-memory sweep)."""
    thread = np.asarray(pc.dictionary_encode(thread_keys(events)).combine_chunks().indices,
                        dtype=np.int64)
    order = np.lexsort((np.asarray(events["event_id"].combine_chunks()), thread))
    sweep = BeginEndSweep(events.schema)
    paired = sweep.feed(events.take(pa.array(order)), thread[order], anomalies)
    return pa.concat_tables([paired, sweep.finish(anomalies)])


class BeginEndSweep:
    """Pairs B/E rows fed in chunks sorted by (thread, event id), carrying the open B rows
    from chunk to chunk (the nesting depth of one thread, plus B's never closed)."""

    def __init__(self, schema: pa.Schema) -> None:
        self.still_open = link.OpenBegins.empty()
        self.open_rows = schema.empty_table()

    def feed(self, chunk: pa.Table, thread: np.ndarray, anomalies: list[Anomaly]
             ) -> pa.Table:
        """The complete events of the pairs this chunk closes (and of the B's left open on
        threads it ends)."""
        rows = pa.concat_tables([self.open_rows, chunk])
        is_begin = pc.equal(chunk["ph"], "B").to_numpy(zero_copy_only=False)
        pairs, self.still_open = link.match_begin_end(
            thread, np.asarray(chunk["event_id"].combine_chunks()), np.asarray(is_begin),
            self.still_open)
        anomalies += unmatched_ends(pairs.unmatched_end)
        self.open_rows = rows_by_id(rows, np.array(self.still_open.ids, dtype=np.int64))
        return paired_events(rows_by_id(rows, pairs.begin), rows_by_id(rows, pairs.end),
                             anomalies)

    def finish(self, anomalies: list[Anomaly]) -> pa.Table:
        """The B's still open after the last chunk, never closed."""
        unclosed = link.never_closed(self.still_open)
        return paired_events(rows_by_id(self.open_rows, unclosed.begin),
                             rows_by_id(self.open_rows, unclosed.end), anomalies)


def rows_by_id(rows: pa.Table, wanted: np.ndarray) -> pa.Table:
    """Rows by event id, in the order wanted; a null row for NONE."""
    ids = np.asarray(rows["event_id"].combine_chunks(), dtype=np.int64)
    order = np.argsort(ids, kind="stable")
    at = np.searchsorted(ids[order], wanted)
    at = order[np.minimum(at, len(ids) - 1)] if len(ids) else np.zeros(len(wanted), np.int64)
    return rows.take(pa.array(at, pa.int64(), mask=wanted == link.NONE))


def unmatched_ends(event_ids: list[int]) -> list[Anomaly]:
    return [("unmatched_end", event_id, "end event (ph E) with no open begin event (ph B) on "
             "its thread; nothing to close, not read") for event_id in event_ids]


def paired_events(begin: pa.Table, end: pa.Table, anomalies: list[Anomaly]) -> pa.Table:
    """B rows and the E rows that close them (aligned; a null E row: never closed) as
    complete events: the B's id, thread, start, name and category (the E's when the B has
    none), dur = E.ts − B.ts, and the B's args merged with the E's (the E's win, as in
    Chrome's trace viewer)."""
    _flag_pairs(begin, end, anomalies)
    columns: dict[str, Any] = {}
    for column in begin.column_names:
        if column in _NOT_ARGS:
            columns[column] = begin[column]
        else:
            columns[column] = pc.coalesce(end[column], begin[column])
    columns["ph"] = pa.array(["X"] * begin.num_rows, pa.string())
    columns["category"] = pc.coalesce(begin["category"], end["category"])
    columns["name"] = pc.coalesce(begin["name"], end["name"])
    columns["dur_ns"] = _duration(begin, end, anomalies)
    return pa.table(columns)


def _duration(begin: pa.Table, end: pa.Table, anomalies: list[Anomaly]) -> pa.Array:
    """E.ts − B.ts, NULL when either is missing or the difference is beyond the range a
    written dur may have (flagged as such a dur is)."""
    start, start_ok = _np(begin["ts_ns"])
    stop, stop_ok = _np(end["ts_ns"])
    with np.errstate(over="ignore"):
        dur = stop - start  # |ts| ≤ 2^62, so only ±2^63 wraps, and it is out of range
    out_of_range = start_ok & stop_ok & ((dur > _DUR_LIMIT) | (dur < -_DUR_LIMIT))
    ids = np.asarray(begin["event_id"].combine_chunks())
    for event_id in ids[out_of_range].tolist():
        anomalies.append(("bad_dur", event_id, "its end event's ts minus its ts is out of "
                          "range; dur stored as NULL"))
    return pa.array(dur, pa.int64(), mask=~(start_ok & stop_ok) | out_of_range)


def _flag_pairs(begin: pa.Table, end: pa.Table, anomalies: list[Anomaly]) -> None:
    """One anomaly per odd pair: never closed, untimed, ending before it begins; and
    E events whose name or args contradict their B's."""
    b_id = begin["event_id"].to_pylist()
    e_id = end["event_id"].to_pylist()
    b_ts, e_ts = begin["ts_ns"].to_pylist(), end["ts_ns"].to_pylist()
    for b, e, start, stop in zip(b_id, e_id, b_ts, e_ts):
        if e is None:
            anomalies.append(("unclosed_begin", b, "begin event (ph B) that no end event "
                              "(ph E) closes on its thread; kept with dur NULL"))
        if start is None:
            anomalies.append(("missing_ts", b, "begin event (ph B) without a numeric ts; ts "
                              "and dur stored as NULL"))
        elif e is not None and stop is None:
            anomalies.append(("missing_dur", b, f"its end event {e} has no numeric ts; dur "
                              "stored as NULL"))
        elif stop is not None and -_DUR_LIMIT <= stop - start < 0:  # else bad_dur
            anomalies.append(("end_before_begin", b, f"its end event {e} is earlier than its "
                              "start; dur < 0 kept as written, excluded from links and busy "
                              "time"))
    _flag_contradictions(begin, end, anomalies)


def _comparable(column: Any) -> Any:
    """A column Arrow can compare: a list of strings (input_types) joined into one."""
    if pa.types.is_list(column.type):
        return pc.binary_join(column, "\x1f")
    return column


def _flag_contradictions(begin: pa.Table, end: pa.Table, anomalies: list[Anomaly]) -> None:
    differs: dict[int, list[str]] = {}
    for column in ["name", *(c for c in begin.column_names if c not in _NOT_ARGS)]:
        both = pc.and_(pc.is_valid(begin[column]), pc.is_valid(end[column]))
        unequal = pc.and_(both, pc.not_equal(_comparable(begin[column]),
                                             _comparable(end[column])))
        for event_id in end["event_id"].filter(unequal).to_pylist():
            differs.setdefault(event_id, []).append(column)
    for event_id, columns in sorted(differs.items()):
        what = "name" if columns == ["name"] else ", ".join(columns)
        anomalies.append(("end_contradicts_begin", event_id, f"end event (ph E) whose {what} "
                          "differs from its begin event's; the begin's name and the end's args "
                          "are used, as in Chrome's trace viewer"))


def _np(column: Any, fill: int = 0) -> tuple[np.ndarray, np.ndarray]:
    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    valid = ~np.asarray(arr.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    values = np.asarray(pc.fill_null(arr, fill).to_numpy(zero_copy_only=False))
    return values, valid


def _link(host: pa.Table, gpu: pa.Table, anomalies: list[Anomaly], base: pa.Table,
          order: RecordOrder | None, markers: StepMarkers
          ) -> tuple[pa.Table, pa.Table, pa.Table]:
    """`order`: of a truncated source's records (None for a whole source)."""
    h_ts, h_ts_ok = _np(host["ts_ns"])
    h_dur, h_dur_ok = _np(host["dur_ns"])
    timed = h_ts_ok & h_dur_ok & (host["ph"].to_numpy(zero_copy_only=False) == "X")
    numbers, not_scopes = markers.of(host["name"])
    steps = _steps(host, numbers, h_ts, h_dur, timed)
    host_iter = link.assign_iterations(steps[0], steps[1], steps[2], h_ts, h_ts_ok)
    kinds = layers.scope_kinds(host, not_scopes)
    is_op = _is_op(host, not_scopes)
    links = _host_links(host, h_ts, h_ts + np.where(h_dur_ok, h_dur, 0), timed, kinds, is_op)
    for row in links.overlaps:
        anomalies.append(("overlapping_events", int(host["event_id"][row].as_py()),
                          "starts inside an enclosing event on its thread but ends after it"))
    own = _np_bools(pc.is_valid(kinds)) | is_op
    inside = own | (links.op != link.NONE) | (links.layer != link.NONE)
    pass_ = layers.passes(_mark_kinds(kinds, links.mark), pa.array(inside))
    host_t = _host_table(host, links, host_iter, pass_)
    kern_t = _kernel_table(host, gpu, links, host_iter, anomalies, kinds, pass_,
                           timed & (h_dur >= 0))
    record = None if order is None else _record_end(order, host, gpu)
    iters = _iteration_table(host, steps, base, record, kern_t)
    calls = host["name"].take(pa.array(_launch_rows(host)))
    anomalies += no_gpu_activity(gpu_work_calls(calls), gpu_work_activities(gpu))
    return host_t, kern_t, iters


def _steps(host: pa.Table, numbers: Any, ts: np.ndarray, dur: np.ndarray,
           timed: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(start, end, number, row) of the step markers (N in `numbers`, StepMarkers.of)."""
    marker = _np_bools(pc.and_(pc.is_in(host["category"],
                                        pa.array(field_map("kineto")["steps"]["categories"])),
                               pc.is_valid(numbers)))
    idx = np.flatnonzero(marker & timed).astype(np.int64)
    number = _np(numbers)[0][idx].astype(np.int64)
    return ts[idx], ts[idx] + dur[idx], number, idx


def _host_links(host: pa.Table, start: np.ndarray, end: np.ndarray,
                timed: np.ndarray, kinds: Any, is_op: np.ndarray) -> link.HostLinks:
    thread = np.asarray(pc.dictionary_encode(thread_keys(host)).combine_chunks().indices)
    return link.link_host(thread, start, end, timed, is_op, _np_bools(pc.is_valid(kinds)),
                          _np_bools(layers.is_mark(kinds)),
                          _np_bools(layers.is_wrapper_op(host, pa.array(is_op))))


def _is_op(host: pa.Table, not_scopes: Any) -> np.ndarray:
    """cpu_ops but step markers (cpu_ops in older traces: iterations, never a kernel's op)."""
    return _np_bools(pc.and_(pc.is_in(host["category"], pa.array(["cpu_op", "Operator"])),
                             pc.invert(not_scopes)))


def _np_bools(values: Any) -> np.ndarray:
    values = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    return np.asarray(pc.fill_null(values, False).to_numpy(zero_copy_only=False), dtype=bool)


def _opt(values: np.ndarray) -> pa.Array:
    """Index-space array → nullable int64 (NONE → NULL)."""
    return pa.array(values, pa.int64(), mask=values == link.NONE)


def _host_table(host: pa.Table, links: link.HostLinks, iteration: np.ndarray,
                pass_: pa.Array) -> pa.Table:
    ids = np.asarray(host["event_id"].combine_chunks())
    parent = np.where(links.parent == link.NONE, link.NONE, ids[np.maximum(links.parent, 0)])
    return pa.table({
        "event_id": host["event_id"], "category": host["category"], "name": host["name"],
        "ts_ns": host["ts_ns"], "dur_ns": host["dur_ns"], "pid": host["pid"],
        "tid": host["tid"], "correlation_id": host["correlation_id"],
        "external_id": host["external_id"], "parent_event_id": _opt(parent),
        "iteration": _opt(iteration), **{c: host[c] for c in HOST_ARG_COLUMNS},
        "sequence_number": host["sequence_number"],
        "fwd_thread_id": host["fwd_thread_id"],
        "pass": pass_,
    })


def _mark_kinds(kinds: Any, mark: np.ndarray) -> Any:
    """Scope kind of each row's innermost mark; a marked row is its own, linked or not."""
    kinds = kinds.combine_chunks() if isinstance(kinds, pa.ChunkedArray) else kinds
    of_mark = kinds.take(pa.array(np.maximum(mark, 0), pa.int64(), mask=mark == link.NONE))
    return layers.with_own_mark(of_mark, kinds)


def _kernel_table(host: pa.Table, gpu: pa.Table, links: link.HostLinks, host_iter: np.ndarray,
                  anomalies: list[Anomaly], kinds: Any, pass_: pa.Array,
                  linkable: np.ndarray) -> pa.Table:
    launch_rows = _launch_rows(host)
    h_corr, h_corr_ok = _np(host["correlation_id"])
    g_corr, g_corr_ok = _np(gpu["correlation_id"])
    sel = launch_rows[h_corr_ok[launch_rows]]
    launch, duplicates = link.link_launches(h_corr[sel], sel, g_corr, g_corr_ok)
    ids = np.asarray(host["event_id"].combine_chunks())
    for row in duplicates:
        anomalies.append(("duplicate_correlation", int(ids[row]),
                          "a second launch call with the same correlation id; the first is used"))
    _flag_orphans(gpu, launch, anomalies)
    op_row = _at(links.op, launch)
    names = host["name"].combine_chunks()
    resolved = _launch_layers(host, links, kinds, pass_, sel, linkable).take(
        pa.array(_position_in(sel, launch), pa.int64(), mask=launch == link.NONE))
    return pa.table({
        "kernel_id": gpu["event_id"], "kind": gpu["kind"], "category": gpu["category"],
        "device_id": pc.cast(gpu["device_id"], pa.int32()), "stream_id": gpu["stream_id"],
        "name": gpu["name"], "ts_ns": gpu["ts_ns"], "dur_ns": gpu["dur_ns"],
        "correlation_id": gpu["correlation_id"], "external_id": gpu["external_id"],
        **{c: gpu[c] for c in ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z",
                               "registers_per_thread", "shared_memory_bytes", "bytes",
                               *KERNEL_ARG_COLUMNS)},
        "launch_event_id": _opt(_at(ids, launch)),
        "op_event_id": _opt(_at(ids, op_row)),
        "op_name": _take_names(names, op_row),
        "layer": resolved["layer"],
        "iteration": _opt(_at(host_iter, launch)),
        "layer_kind": resolved["layer_kind"], "pass": resolved["pass"],
        "layer_status": pc.fill_null(resolved["layer_status"], "no_launch"),
    })


def _position_in(rows: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """Position in `rows` (sorted) of each wanted row (0 where absent)."""
    return np.minimum(np.searchsorted(rows, wanted), max(len(rows) - 1, 0))


def _scope_columns(host: pa.Table, kinds: Any, rows: np.ndarray) -> pa.Table:
    """name, scope_kind, sequence_number and pid of the host rows `rows` (NULL for NONE)."""
    columns = pa.table({"name": host["name"], "scope_kind": kinds,
                        "sequence_number": host["sequence_number"], "pid": host["pid"]})
    return columns.take(pa.array(np.maximum(rows, 0), pa.int64(), mask=rows == link.NONE))


def _launch_layers(host: pa.Table, links: link.HostLinks, kinds: Any, pass_: pa.Array,
                   rows: np.ndarray, linkable: np.ndarray) -> pa.Table:
    """layer, layer_kind, pass and layer_status of the launch calls `rows` (in that order),
    by layers.RESOLVE over the launches and forward ops, as the pipeline resolves them."""
    import duckdb

    scope = _scope_columns(host, kinds, links.layer)
    launches = pa.table({"event_id": host["event_id"],
                         **layers.launch_columns(scope, pass_),
                         "row": np.arange(host.num_rows)}).take(pa.array(rows, pa.int64()))
    keep = pc.and_(pa.array(linkable), layers.is_forward_op(host, kinds))
    forward = layers.forward_ops(host.filter(keep), scope.filter(keep))
    con = duckdb.connect()
    try:
        con.register("launches", launches)
        con.register("forward", forward)
        found = layers.resolve_layers(con, "launches", "forward").to_arrow_table()
    finally:
        con.close()
    return found.sort_by("row")


def _at(values: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """values[rows] where rows != NONE, else NONE (also when there are no host events)."""
    if len(values) == 0:
        return np.full(len(rows), link.NONE, dtype=np.int64)
    return np.where(rows != link.NONE, values[np.maximum(rows, 0)], link.NONE)


def _launch_rows(host: pa.Table) -> np.ndarray:
    categories = field_map("kineto")["categories"]
    launch_cats = [c for c, e in categories.items() if e.get("launch")]
    mask = pc.fill_null(pc.is_in(host["category"], pa.array(launch_cats)), False)
    return np.flatnonzero(np.asarray(mask.combine_chunks() if isinstance(mask, pa.ChunkedArray)
                                     else mask))


def gpu_work_calls(calls: Any) -> int:
    """How many of the launch calls named `calls` start GPU work (fields.toml [gpu_work])."""
    names = pc.value_counts(calls)  # a few distinct names: the pattern is matched on those
    pattern = field_map("kineto")["gpu_work"]["pattern"]
    work = pc.match_substring_regex(names.field("values"), pattern)
    return int(pc.sum(names.field("counts").filter(pc.fill_null(work, False))).as_py() or 0)


def gpu_work_activities(gpu: pa.Table) -> int:
    """GPU activities such calls start (kernels, copies, fills; not annotations, profiler
    ranges or waits) among GPU rows with their kind."""
    work = pc.is_in(gpu["kind"], pa.array(["kernel", "memcpy", "memset"], pa.string()))
    return int(pc.sum(pc.fill_null(work, False).cast(pa.int64())).as_py() or 0)


def no_gpu_activity(calls: int, activities: int) -> list[Anomaly]:
    """The anomaly of a source without one GPU activity that launch calls start (kernel,
    copy, fill): trace_role.no_gpu_activity, saying how many such calls it has."""
    cause = no_gpu_activity_cause(calls, activities)
    return [] if cause is None else [trace_role.no_gpu_activity(cause)]


def no_gpu_activity_cause(calls: int, activities: int) -> str | None:
    """What a source without GPU activity holds instead; None when it has some."""
    if activities:
        return None
    if calls:
        return (f"{calls} launch calls that start GPU work: it was probably recorded without "
                "CUDA activities (torch.profiler without ProfilerActivity.CUDA)")
    return ("no launch call either: a CPU-only profile (torch.profiler with "
            "ProfilerActivity.CPU alone, or a program that ran nothing on the GPU)")


def _take_names(names: pa.Array, rows: np.ndarray) -> pa.Array:
    if len(names) == 0:
        return pa.nulls(len(rows), pa.string())
    taken = names.take(pa.array(np.maximum(rows, 0)))
    return pc.if_else(pa.array(rows == link.NONE), pa.scalar(None, pa.string()), taken)


def _flag_orphans(gpu: pa.Table, launch: np.ndarray, anomalies: list[Anomaly]) -> None:
    kinds = gpu["kind"].to_pylist()
    ids = gpu["event_id"].to_pylist()
    for row in np.flatnonzero(launch == link.NONE).tolist():
        if kinds[row] == "kernel":
            anomalies.append(("kernel_without_launch", ids[row],
                              "no runtime/driver call with this correlation id in the source; "
                              "the kernel counts toward busy time but belongs to no iteration"))


def _iteration_table(host: pa.Table, steps: tuple[np.ndarray, ...], base: pa.Table,
                     record: RecordEnd | None, kernels: pa.Table) -> pa.Table:
    start, end, number, rows = steps
    ids = np.asarray(host["event_id"].combine_chunks())[rows] if len(rows) else rows
    marks = list(zip(ids.tolist(), number.tolist(), start.tolist(), end.tolist()))
    ends = window_ends(kernels) if record is not None else None
    return iterations_table(marks, None if marks else complete_span(base), record, ends)


def _record_end(order: RecordOrder, host: pa.Table, gpu: pa.Table) -> RecordEnd:
    launches = host.take(pa.array(_launch_rows(host)))
    return RecordEnd.of(order, launches["correlation_id"], launches["ts_ns"],
                        gpu["correlation_id"])


Step = tuple[int, int, int, int]  # event_id, N, start, end of a ProfilerStep#N marker


def iterations_table(steps: list[Step], span: tuple[int, int] | None,
                     record: RecordEnd | None = None,
                     window_ends: dict[int, int] | None = None) -> pa.Table:
    """ProfilerStep rows in trace order; without markers, one whole-trace row over `span`.

    `record`: how far a truncated source's record reaches (None: the source is whole), with
    `window_ends`, the latest end of the activities launched in each iteration; an iteration
    the cut may have reached is not `complete`, and `cut` says why (completeness.py).
    """
    if steps:
        return pa.table({"iteration": pa.array([s[1] for s in steps], pa.int64()),
                         "start_ns": pa.array([s[2] for s in steps], pa.int64()),
                         "end_ns": pa.array([s[3] for s in steps], pa.int64()),
                         "boundary": pa.array(["ProfilerStep"] * len(steps), pa.string()),
                         "event_id": pa.array([s[0] for s in steps], pa.int64()),
                         **_completeness(_step_cuts(steps, record, window_ends or {}))})
    rows = [span] if span else []
    return pa.table({"iteration": pa.nulls(len(rows), pa.int64()),
                     "start_ns": pa.array([r[0] for r in rows], pa.int64()),
                     "end_ns": pa.array([r[1] for r in rows], pa.int64()),
                     "boundary": pa.array(["whole_trace"] * len(rows), pa.string()),
                     "event_id": pa.nulls(len(rows), pa.int64()),
                     # a cut trace's span is the span of what was read, never the whole
                     **_completeness([None if record is None else "trace_cut"] * len(rows))})


def _step_cuts(steps: list[Step], record: RecordEnd | None, window_ends: dict[int, int]
               ) -> list[str | None]:
    if record is None:
        return [None] * len(steps)
    first = min(range(len(steps)), key=lambda i: steps[i][2])
    return [record.cut(start, end, max(end, window_ends.get(n, end)), i == first)
            for i, (_, n, start, end) in enumerate(steps)]


def _completeness(cuts: list[str | None]) -> dict[str, pa.Array]:
    return {"complete": pa.array([c is None for c in cuts], pa.bool_()),
            "cut": pa.array(cuts, pa.string())}


def complete_span(events: pa.Table) -> tuple[int, int] | None:
    """Earliest start and latest end of the complete events with ts and dur >= 0, whatever
    their category: the whole-trace iteration when there are no step markers. The span of
    all complete events includes the profiler's own session span (`Trace`, which is no
    event of the job: it is in no table)."""
    ts, dur = events["ts_ns"], events["dur_ns"]
    ok = pc.fill_null(pc.and_(pc.and_(pc.equal(events["ph"], "X"), pc.is_valid(ts)),
                              pc.greater_equal(dur, 0)), False)
    start = pc.min(pc.filter(ts, ok)).as_py()  # only the two columns: names are not copied
    if start is None:
        return None
    return start, pc.max(pc.filter(pc.add(ts, dur), ok)).as_py()


def _with_context(table: pa.Table, context: dict[str, Any]) -> pa.Table:
    n = table.num_rows
    table = table.add_column(0, "rank", pa.array([context["rank"]] * n, pa.int32()))
    return table.add_column(0, "source_id", pa.array([context["source_id"]] * n, pa.int32()))


def _devices(trace: KinetoTrace, kernels: pa.Table, context: dict[str, Any],
             gpu_override: str | None) -> pa.Table:
    ids = [d for d in pc.unique(kernels["device_id"]).to_pylist() if d is not None]
    return _with_context(_devices_table(trace.device_properties, ids, gpu_override), context)


def _devices_table(device_properties: list[dict[str, Any]], kernel_devices: list[int],
                   gpu_override: str | None) -> pa.Table:
    """One row per device: deviceProperties entries, plus devices only kernels name."""
    rows: dict[int, dict[str, Any]] = {}
    for p in device_properties:
        if isinstance(p.get("id"), int):
            rows[p["id"]] = _device_row(p)
    for dev in kernel_devices:
        if dev not in rows:
            rows[dev] = {"name": gpu_override, "compute_capability": None, "sm_count": None,
                         "memory_bytes": None,
                         "properties_source": "run.toml" if gpu_override else None}
    ids = sorted(rows)
    data = {k: [rows[i][k] for i in ids] for k in
            ("name", "compute_capability", "sm_count", "memory_bytes", "properties_source")}
    return pa.table({"device_id": pa.array(ids, pa.int32()),
                     "name": pa.array(data["name"], pa.string()),
                     "compute_capability": pa.array(data["compute_capability"], pa.string()),
                     "sm_count": pa.array(data["sm_count"], pa.int32()),
                     "memory_bytes": pa.array(data["memory_bytes"], pa.int64()),
                     "properties_source": pa.array(data["properties_source"], pa.string())})


def _device_row(p: dict[str, Any]) -> dict[str, Any]:
    major, minor = p.get("computeMajor"), p.get("computeMinor")
    cc = f"{major}.{minor}" if isinstance(major, int) and isinstance(minor, int) else None
    if p.get("gcnArchName") or str(p.get("name", "")).startswith("AMD"):
        cc = None  # AMD reports gfx architectures; a CUDA compute capability would be a guess
    sms = p.get("numSms")
    mem = p.get("totalGlobalMem")
    return {"name": p.get("name"), "compute_capability": cc,
            "sm_count": sms if isinstance(sms, int) else None,
            "memory_bytes": mem if isinstance(mem, int) else None,
            "properties_source": "deviceProperties"}


def _anomaly_table(anomalies: list[Anomaly], source_id: int) -> pa.Table:
    return pa.table({
        "source_id": pa.array([source_id] * len(anomalies), pa.int32()),
        "kind": pa.array([a[0] for a in anomalies], pa.string()),
        "event_id": pa.array([a[1] for a in anomalies], pa.int64()),
        "detail": pa.array([a[2] for a in anomalies], pa.string()),
        "ncu_source_id": pa.nulls(len(anomalies), pa.int32()),
        "ncu_id": pa.nulls(len(anomalies), pa.int64()),
    })
