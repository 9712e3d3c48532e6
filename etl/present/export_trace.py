"""`etl export-trace RUN`: a run's timeline as Chrome trace JSON (Perfetto UI, chrome://tracing).

One trace source (rank), chosen with --source or the run's only one, is written as the
PyTorch profiler writes it, so that `etl ingest` reads it back to the same kernels and the
same gpu_utilization (a run of several ranks: one trace, a process per rank's host and per
rank's GPU, `write_merged`; `split_merged` gives back the per-rank files). `export_folder`
writes a run folder instead, one such file per rank and the run's run.toml, that `etl
ingest` reads back as the same run's ranks. Each file holds:
- host events (complete events, `ph: X`) with their pid, tid, External id and correlation,
  as in the source, and their category, or the Kineto category that plays its part for a
  source of another format (HOST_CATEGORY: an xplane launch is a cuda_runtime call);
- GPU activities on pid = device, tid = stream, with device, stream, correlation, grid,
  block, registers, shared memory and bytes; a kernel matched to Nsight Compute carries
  its levels in `args` ("ncu smsp_active_util", ...);
- counter tracks (`ph: C`, which readers of this tool skip): gpu_util of each iteration on
  its device, from the window's start to the next;
- metadata names for the GPU processes and streams;
- a `ProfilerStep#N` user_annotation per iteration of a source read from another format
  (nsys NVTX ranges, TensorFlow steps), whose own markers Kineto does not read as steps.
A TensorFlow or JAX (xplane) run comes back with the same kernels and gpu_utilization,
its launch calls linked to its kernels by correlation (no flow arrows are written: the
Kineto reader links by correlation), though not always to the same op and layer: xplane
takes them from the kernel's own annotation, Kineto from the ops around the launch.
Times are written in µs with three decimals, exactly the stored integer ns, and the
source's baseTimeNanoseconds (iterations.utc_offset_ns of a base_time clock) in the header,
so the times map to the same wall clock. What the warehouse does not keep (flow arrows,
other args) is not written. Monitor samples are not in the warehouse yet and so not exported.
"""
from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from etl.core.errors import EtlError
from etl.load.runfolder import RUN_TOML

if TYPE_CHECKING:
    import duckdb

LEVELS = ("smsp_active_util", "issue_slot_util", "tc_active_util", "tc_issue_util",
          "tc_inst_share", "tc_active_share")
KINETO_CATEGORY = {"kernel": "kernel", "memcpy": "gpu_memcpy", "memset": "gpu_memset"}
# Host categories of other formats (schemas/host_events.toml) → the Kineto category that
# plays their part, so that the Kineto reader links and reads them as the source's reader
# did: a launch call carries the correlation of its GPU activities (xplane launch), an op
# is a cpu_op (xplane tf_op), an annotation a user_annotation (xplane trace_me and step,
# nsys nvtx), an allocator event an instant event (xplane memory). Written as stored, a
# category Kineto's field map lacks is an unknown_category anomaly per event and a launch
# no launch: a JAX run came back with 3 650 anomalies where it had 4.
HOST_CATEGORY = {"launch": "cuda_runtime", "tf_op": "cpu_op", "trace_me": "user_annotation",
                 "step": "user_annotation", "nvtx": "user_annotation",
                 "memory": "cpu_instant_event"}
BATCH = 10_000


def micros(ns: int) -> str:
    """Integer ns as decimal µs with three decimals, exactly."""
    sign = "-" if ns < 0 else ""
    return f"{sign}{abs(ns) // 1000}.{abs(ns) % 1000:03d}"


def _event(fields: dict[str, Any], ts_ns: int | None, dur_ns: int | None) -> str:
    """One event as JSON text, with exact decimal ts and dur first."""
    timing = "".join(f'"{key}":{micros(v)},' for key, v in (("ts", ts_ns), ("dur", dur_ns))
                     if v is not None)
    return "{" + timing + json.dumps(fields, separators=(",", ":"))[1:]


def _pid(value: str | None) -> int | str | None:
    return int(value) if value is not None and value.lstrip("-").isdigit() else value


def _filter(iteration: int | None, alias: str) -> str:
    return "" if iteration is None else f" AND {alias}.iteration = {int(iteration)}"


Place = Callable[[str, Any], Any]  # ("host" | "gpu", original pid or device) -> pid written


def _same(_kind: str, value: Any) -> Any:
    return value


def _host_events(con: duckdb.DuckDBPyConnection, run_id: str, source: int,
                 iteration: int | None, place: Place = _same) -> Iterator[str]:
    cursor = con.execute(
        "SELECT category, name, ts_ns, dur_ns, pid, tid, correlation_id, external_id "
        f"FROM host_events AS h WHERE run_id = ? AND source_id = ?{_filter(iteration, 'h')} "
        "ORDER BY ts_ns, event_id", [run_id, source])
    while batch := cursor.fetchmany(BATCH):
        for category, name, ts, dur, pid, tid, correlation, external in batch:
            args: dict[str, Any] = {}
            if external is not None:
                args["External id"] = external
            if correlation is not None:
                args["correlation"] = correlation
            fields = {"ph": "X", "cat": HOST_CATEGORY.get(category, category), "name": name,
                      "pid": place("host", _pid(pid)), "tid": _pid(tid), "args": args}
            yield _event(fields, ts, dur if dur is not None else 0)


def _step_markers(con: duckdb.DuckDBPyConnection, run_id: str, source: int,
                  iteration: int | None, place: Place = _same) -> Iterator[str]:
    """A `ProfilerStep#N` user_annotation over each iteration whose marker the Kineto
    reader would not find among the host events: a source read from another format
    (an nsys NVTX range, a TensorFlow step) would otherwise come back as one whole-trace
    window. Placed on the source's busiest host thread; a Kineto source gets none."""
    from etl.extract.fields import field_map

    categories = field_map("kineto")["steps"]["categories"]
    missing = con.execute(
        "SELECT i.iteration, i.start_ns, i.end_ns FROM iterations AS i WHERE i.run_id = ? "
        f"AND i.source_id = ? AND i.boundary <> 'whole_trace'{_filter(iteration, 'i')} "
        "AND NOT EXISTS (SELECT 1 FROM host_events AS h WHERE h.run_id = i.run_id AND "
        "h.source_id = i.source_id AND list_contains(?, h.category) AND h.name = "
        "'ProfilerStep#' || i.iteration) ORDER BY i.start_ns",
        [run_id, source, _written_as(categories)]).fetchall()
    if not missing:
        return
    (pid, tid), = con.execute(
        "SELECT pid, tid FROM host_events WHERE run_id = ? AND source_id = ? GROUP BY ALL "
        "ORDER BY count(*) DESC, pid, tid LIMIT 1", [run_id, source]).fetchall() or [(0, 0)]
    for number, start, end in missing:
        fields = {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{number}",
                  "pid": place("host", _pid(pid)), "tid": _pid(tid),
                  "args": {"etl": "iteration window of the source"}}
        yield _event(fields, start, end - start)


def _written_as(categories: list[str]) -> list[str]:
    """The stored host categories that are written as one of `categories`."""
    return ([c for c in categories if c not in HOST_CATEGORY]
            + [stored for stored, written in HOST_CATEGORY.items() if written in categories])


def _gpu_events(con: duckdb.DuckDBPyConnection, run_id: str, source: int,
                iteration: int | None, place: Place = _same) -> Iterator[str]:
    levels = ", ".join(f"u.{x}" for x in LEVELS)
    cursor = con.execute(
        "WITH u AS (SELECT * FROM kernel_utilization WHERE run_id = ? AND source_id = ? "
        "QUALIFY row_number() OVER (PARTITION BY kernel_id ORDER BY ncu_source_id) = 1) "
        "SELECT k.kind, k.category, k.name, k.ts_ns, k.dur_ns, k.device_id, k.stream_id, "
        "k.correlation_id, k.external_id, k.grid_x, k.grid_y, k.grid_z, k.block_x, k.block_y, "
        "k.block_z, k.registers_per_thread, k.shared_memory_bytes, k.bytes, u.ncu_id, "
        f"{levels} FROM kernels AS k LEFT JOIN u ON u.kernel_id = k.kernel_id "
        f"WHERE k.run_id = ? AND k.source_id = ?{_filter(iteration, 'k')} "
        "ORDER BY k.ts_ns, k.kernel_id", [run_id, source, run_id, source])
    while batch := cursor.fetchmany(BATCH):
        for row in batch:
            yield _gpu_event(row, place)


def _gpu_event(row: tuple[Any, ...], place: Place) -> str:
    (kind, category, name, ts, dur, device, stream, correlation, external, gx, gy, gz,
     bx, by, bz, registers, shared, size, ncu_id, *levels) = row
    args: dict[str, Any] = {"device": device, "stream": stream, "correlation": correlation}
    if external is not None:
        args["External id"] = external
    if gx is not None:
        args["grid"] = [gx, gy, gz]
        args["block"] = [bx, by, bz]
    for key, value in (("registers per thread", registers), ("shared memory", shared),
                       ("bytes", size)):
        if value is not None:
            args[key] = value
    if ncu_id is not None:
        args["ncu id"] = ncu_id
        args.update({f"ncu {x}": v for x, v in zip(LEVELS, levels) if v is not None})
    fields = {"ph": "X", "cat": _gpu_category(category, kind), "name": name,
              "pid": place("gpu", device), "tid": stream, "args": args}
    return _event(fields, ts, dur)


def _gpu_category(category: str | None, kind: str) -> str:
    """The source's category when Kineto's field map reads it as this kind of GPU
    activity, else Kineto's category of the kind (nsys writes memcpy, xplane none)."""
    from etl.extract.fields import field_map

    known = field_map("kineto")["categories"].get(category or "", {})
    if known.get("table") == "gpu" and known.get("kind") == kind:
        return str(category)
    return KINETO_CATEGORY.get(kind, category or kind)


def _counters(con: duckdb.DuckDBPyConnection, run_name: str, source: int,
              iteration: int | None, place: Place = _same) -> Iterator[str]:
    """gpu_util of each iteration from its window's start; 0 after the last window."""
    rows = con.execute(
        "SELECT device_id, iteration, window_start_ns, window_ns, gpu_util FROM "
        f"gpu_utilization AS g WHERE run_name = ? AND source_id = ?{_filter(iteration, 'g')} "
        "ORDER BY device_id, window_start_ns", [run_name, source]).fetchall()
    for i, (device, _it, start, window, util) in enumerate(rows):
        yield _event({"ph": "C", "name": "gpu_util", "pid": place("gpu", device),
                      "args": {"gpu_util": util if util is not None else 0}}, start, None)
        last = i + 1 == len(rows) or rows[i + 1][0] != device
        if last:
            yield _event({"ph": "C", "name": "gpu_util", "pid": place("gpu", device),
                          "args": {"gpu_util": 0}}, start + window, None)


def _metadata(con: duckdb.DuckDBPyConnection, run_id: str, source: int, place: Place = _same,
              prefix: str = "") -> Iterator[str]:
    for device, stream in con.execute(
            "SELECT DISTINCT device_id, stream_id FROM kernels WHERE run_id = ? AND "
            "source_id = ? AND device_id IS NOT NULL ORDER BY ALL", [run_id, source]
            ).fetchall():
        pid = place("gpu", device)
        yield json.dumps({"ph": "M", "name": "process_name", "pid": pid,
                          "args": {"name": f"{prefix}GPU {device}"}})
        yield json.dumps({"ph": "M", "name": "thread_name", "pid": pid, "tid": stream,
                          "args": {"name": f"stream {stream}"}})


def _header(con: duckdb.DuckDBPyConnection, run_id: str, source: int) -> dict[str, Any]:
    devices = con.execute(
        "SELECT device_id, name, compute_capability, sm_count, memory_bytes FROM devices "
        "WHERE run_id = ? AND source_id = ? AND properties_source = 'deviceProperties' "
        "ORDER BY device_id", [run_id, source]).fetchall()
    properties = []
    for device, name, cc, sms, memory in devices:
        entry: dict[str, Any] = {"id": device, "name": name}
        if cc and "." in cc:
            major, minor = cc.split(".", 1)
            entry.update(computeMajor=int(major), computeMinor=int(minor))
        if sms is not None:
            entry["numSms"] = sms
        if memory is not None:
            entry["totalGlobalMem"] = memory
        properties.append(entry)
    (rank,) = con.execute("SELECT any_value(rank) FROM kernels WHERE run_id = ? AND "
                          "source_id = ?", [run_id, source]).fetchone() or (None,)
    header: dict[str, Any] = {"schemaVersion": 1, "displayTimeUnit": "ns"}
    if properties:
        header["deviceProperties"] = properties
    if rank is not None:
        header["distributedInfo"] = {"rank": rank}
    (base_time,) = con.execute(
        "SELECT any_value(utc_offset_ns) FROM iterations WHERE run_id = ? AND source_id = ? "
        "AND clock = 'base_time'", [run_id, source]).fetchone() or (None,)
    if base_time is not None:  # else ts are µs since 1970 (clock epoch), or unmapped
        header["baseTimeNanoseconds"] = base_time
    return header


def _sources(con: duckdb.DuckDBPyConnection, run: str, source: int | None
             ) -> tuple[str, list[int]]:
    """The run's id and the trace sources to write: the chosen one, or all of them."""
    found = con.execute("SELECT run_id, [s.source_id FOR s IN sources IF s.role = 'trace'] "
                        "FROM runs WHERE run_name = ?", [run]).fetchone()
    if found is None:
        raise EtlError(f"no run named {run} in the warehouse; `etl runs` lists them")
    run_id, traces = found
    if not traces:
        raise EtlError(f"run {run} has no trace source to export")
    if source is not None and source not in traces:
        raise EtlError(f"run {run} has no trace source {source}; its sources: "
                       f"{', '.join(map(str, sorted(traces)))}")
    return run_id, sorted(traces) if source is None else [source]


def _check_iteration(con: duckdb.DuckDBPyConnection, run: str, run_id: str,
                     sources: list[int], iteration: int | None) -> None:
    if iteration is not None and not con.execute(
            "SELECT 1 FROM iterations WHERE run_id = ? AND list_contains(?, source_id) AND "
            "iteration = ?", [run_id, sources, iteration]).fetchall():
        raise EtlError(f"run {run} has no iteration {iteration}")


def write_trace(con: duckdb.DuckDBPyConnection, run: str, out: IO[str],
                iteration: int | None = None, source: int | None = None) -> int:
    """Write the run's trace to `out`; the number of events written. One trace source
    (chosen, or the only one) is written as the profiler wrote it; several go into one
    trace with a process per rank's host and per rank's GPU (`write_merged`)."""
    run_id, sources = _sources(con, run, source)
    _check_iteration(con, run, run_id, sources, iteration)
    if len(sources) > 1:
        return write_merged(con, run, run_id, sources, out, iteration)
    return _write_source(con, run, run_id, sources[0], out, iteration)


def _write_source(con: duckdb.DuckDBPyConnection, run: str, run_id: str, source: int,
                  out: IO[str], iteration: int | None) -> int:
    """One trace source as the profiler wrote it; the number of events."""
    header = json.dumps(_header(con, run_id, source))
    out.write(header[:-1] + ', "traceEvents": [\n')
    count = 0
    for part in (_metadata(con, run_id, source),
                 _step_markers(con, run_id, source, iteration),
                 _host_events(con, run_id, source, iteration),
                 _gpu_events(con, run_id, source, iteration),
                 _counters(con, run, source, iteration)):
        for text in part:
            out.write(("," if count else "") + text + "\n")
            count += 1
    out.write("]}\n")
    return count


@dataclass
class Placement:
    """The processes of a merged trace: each source's host pids and devices get their own
    pid, numbered from 1 in order of first use, so that rank 0's GPU 0 and rank 1's GPU 0
    are two processes."""
    pids: dict[tuple[int, str, Any], int] = field(default_factory=dict)

    def of(self, source: int) -> Place:
        def place(kind: str, value: Any) -> int:
            return self.pids.setdefault((source, kind, value), len(self.pids) + 1)
        return place

    def processes(self, source: int) -> dict[str, list[Any]]:
        return {str(pid): [kind, value] for (s, kind, value), pid in self.pids.items()
                if s == source}


def _who(header: dict[str, Any], source: int) -> str:
    rank = header.get("distributedInfo", {}).get("rank")
    return f"rank {rank}" if rank is not None else f"source {source}"


def write_merged(con: duckdb.DuckDBPyConnection, run: str, run_id: str, sources: list[int],
                 out: IO[str], iteration: int | None = None) -> int:
    """Every trace source of the run in one Chrome trace: a process per rank's host pid
    ("rank 1 host pid 4242") and per rank's GPU ("rank 1 GPU 0"), ordered by rank. Each
    source's own header and its pid map are kept in `etlSources`, so `split_merged` gives
    back the per-rank files (that `etl ingest` reads, one file per rank)."""
    placement = Placement()
    headers = {s: _header(con, run_id, s) for s in sources}
    out.write('{"schemaVersion": 1, "displayTimeUnit": "ns", "traceEvents": [\n')
    count = 0
    for s in sources:
        place, who = placement.of(s), _who(headers[s], s)
        for part in (_metadata(con, run_id, s, place, f"{who} "),
                     _step_markers(con, run_id, s, iteration, place),
                     _host_events(con, run_id, s, iteration, place),
                     _gpu_events(con, run_id, s, iteration, place),
                     _counters(con, run, s, iteration, place)):
            for text in part:
                out.write(("," if count else "") + text + "\n")
                count += 1
    for (s, kind, value), pid in placement.pids.items():
        name = f"{_who(headers[s], s)} host pid {value}" if kind == "host" else None
        for meta in ([{"name": "process_name", "args": {"name": name}}] if name else []) + [
                {"name": "process_sort_index", "args": {"sort_index": pid}}]:
            out.write("," + json.dumps({"ph": "M", "pid": pid, **meta}) + "\n")
            count += 1
    described = [{"source_id": s, "header": headers[s], "processes": placement.processes(s)}
                 for s in sources]
    out.write('], "etlSources": ' + json.dumps(described) + "}\n")
    return count


def split_merged(text: str) -> dict[int, str]:
    """The per-source Chrome traces of a merged export (JSON text of each, by source_id):
    each event back on its source's own pid; the merged trace's process names dropped.
    Times stay exact decimals."""
    from decimal import Decimal

    doc = json.loads(text, parse_float=Decimal)
    owner = {int(pid): (entry["source_id"], value) for entry in doc["etlSources"]
             for pid, (_, value) in entry["processes"].items()}
    events: dict[int, list[str]] = {e["source_id"]: [] for e in doc["etlSources"]}
    for event in doc["traceEvents"]:
        if event.get("ph") == "M" and event.get("name") != "thread_name":
            continue
        source, pid = owner[event["pid"]]
        events[source].append(_json({**event, "pid": pid}))
    return {e["source_id"]: _json(e["header"])[:-1] + ', "traceEvents": [\n'
            + ",\n".join(events[e["source_id"]]) + "]}\n" for e in doc["etlSources"]}


def _json(value: Any) -> str:
    """JSON text with Decimal numbers written as they were read."""
    from decimal import Decimal

    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(k)}:{_json(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_json(v) for v in value) + "]"
    return json.dumps(value)


def export_trace(warehouse: str | os.PathLike[str], run: str, path: Path,
                 iteration: int | None = None, source: int | None = None) -> int:
    """Write the run's Chrome trace to `path` (atomically); the number of events."""
    from etl.api import connect

    con = connect(warehouse)
    try:
        return _write_atomic(path, lambda out: write_trace(con, run, out, iteration, source))
    finally:
        con.close()


def export_folder(warehouse: str | os.PathLike[str], run: str, folder: Path,
                  iteration: int | None = None, source: int | None = None
                  ) -> dict[Path, int]:
    """Write the run as a run folder that `etl ingest FOLDER` reads back: one Kineto file
    per trace source (rank) and the run's run.toml verbatim, so the ingested run has the
    same ranks, kernels, gpu_utilization and dimensions. The events written, by file."""
    from etl.api import connect

    con = connect(warehouse)
    try:
        run_id, sources = _sources(con, run, source)
        _check_iteration(con, run, run_id, sources, iteration)
        names = _file_names({s: _header(con, run_id, s) for s in sources})
        (run_toml,) = con.execute("SELECT run_toml FROM runs WHERE run_id = ?",
                                  [run_id]).fetchone() or (None,)
        _check_folder(folder, [*names.values(), RUN_TOML])
        folder.mkdir(parents=True, exist_ok=True)
        written = {folder / name: _write_atomic(folder / name, _source_writer(
            con, run, run_id, s, iteration)) for s, name in names.items()}
    finally:
        con.close()
    if run_toml is not None:
        _write_atomic(folder / RUN_TOML, lambda out: out.write(run_toml))
    return written



def _source_writer(con: duckdb.DuckDBPyConnection, run: str, run_id: str, source: int,
                   iteration: int | None) -> Callable[[IO[str]], int]:
    return lambda out: _write_source(con, run, run_id, source, out, iteration)


def _file_names(headers: dict[int, dict[str, Any]]) -> dict[int, str]:
    """`rank<R>.pt.trace.json` when every source has its own rank (as torch names them),
    else `source<N>.pt.trace.json`: two files must never share a name."""
    ranks = {s: h.get("distributedInfo", {}).get("rank") for s, h in headers.items()}
    known = None not in ranks.values() and len(set(ranks.values())) == len(ranks)
    return {s: f"rank{ranks[s]}.pt.trace.json" if known else f"source{s}.pt.trace.json"
            for s in headers}


def _check_folder(folder: Path, names: list[str]) -> None:
    """Refuse a folder whose other files `etl ingest` would read as part of the run."""
    if folder.exists() and not folder.is_dir():
        raise EtlError(f"{folder}: not a folder; name a new or empty folder (DIR/) or a "
                       ".json file")
    others = sorted(p.name for p in folder.iterdir() if p.name not in names) \
        if folder.is_dir() else []
    if others:
        shown = ", ".join(others[:3]) + (", ..." if len(others) > 3 else "")
        raise EtlError(f"{folder}: holds other files ({shown}) that `etl ingest` would read "
                       "as part of the run; export into a new or empty folder")


def _write_atomic(path: Path, write: Callable[[IO[str]], int]) -> int:
    """`write` into a temporary file beside `path`, then rename it to `path`."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        with tmp.open("w", encoding="utf-8") as out:
            count = write(out)
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)
    return count
