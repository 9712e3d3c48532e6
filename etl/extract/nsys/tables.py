"""An nsys SQLite export → host_events, kernels, iterations, devices (and gpu_samples).

Times: nsys writes ns since the session start; every ts_ns here is mapped to the wall
clock, ns since 1970 UTC = TARGET_INFO_SESSION_START_TIME.utcEpochNs + the export's
time, so that monitor samples (gpu_samples) fall into the iteration windows. An export
without a session start keeps the session clock, with an anomaly clock_unaligned.

Rows, numbered together (event_id / kernel_id): runtime and driver calls, then NVTX
ranges (host_events), then kernels, copies and sets (kernels). Links are etl/link.py's:
a GPU activity's launch is the call with its correlation id; its layer the innermost
NVTX range (not a step) enclosing the launch on the launching thread; iterations are NVTX
step ranges (columns.toml [steps]); a range never popped (the corpus ResNet-18 run's
"iterationN") ends where the next step starts, and the last such one with the last GPU
activity launched from it (not at the end of the capture).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import numpy as np

from etl import link
from etl.errors import InputError
from etl.extract.nsys import EXPORT_COMMAND
from etl.extract.nsys.sqlite_export import Export, column_map
from etl.extract.trace_role import SourceInfo, TraceResult

if TYPE_CHECKING:
    import pyarrow as pa

    from etl.extract.trace_role import PipelineOptions, Sinks


def refuse_rep(path: Path, *_: Any) -> NoReturn:
    raise InputError(path, "an Nsight Systems binary report is not read directly", None,
                     "export it to SQLite and ingest that: " + EXPORT_COMMAND.replace(
                         "REPORT.sqlite", f"{path.stem}.sqlite").replace(
                         "REPORT.nsys-rep", path.name))


def ingest_sqlite(path: Path, source_id: int, gpu_override: str | None, spill: Path,
                  sinks: Sinks, options: PipelineOptions) -> TraceResult:
    export = Export(path)
    try:
        return _ingest(export, source_id, gpu_override, sinks)
    finally:
        export.close()


def _ingest(export: Export, source_id: int, gpu_override: str | None, sinks: Sinks
            ) -> TraceResult:
    strings = _string_table(export.strings())
    start_utc = export.scalar("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME")
    anomalies: list[tuple[str, int | None, str]] = []
    if not isinstance(start_utc, int):
        start_utc = 0
        anomalies.append(("clock_unaligned", None, "no TARGET_INFO_SESSION_START_TIME: "
                          "times stay ns since the session start, not wall clock"))
    host = _host(export, strings)
    gpu = _activities(export, strings, first_id=len(host["start"]))
    if not any(t.startswith("CUPTI_ACTIVITY_KIND_") for t in export.tables) and not len(
            host["start"]):
        raise InputError(export.path, "an nsys export without CUDA or NVTX activity", None,
                         "profile with -t cuda,nvtx and export again")
    steps = _steps(host)
    links = _link(host, gpu, steps, anomalies)
    if _close_last_step(steps, host, gpu, links):
        anomalies.append(("step_end_inferred", int(steps.rows[-1]), (
            "the NVTX step ranges are never popped: each ends where the next starts, the "
            "last with the last GPU activity launched from it (work after the loop, if "
            "any, is counted in it)")))
    offset = np.int64(start_utc)
    host_table = _host_table(host, links, source_id, offset)
    kernel_table = _kernel_table(gpu, links, host, source_id, offset)
    sinks.host_events(host_table)
    sinks.end_of_host_events()
    sinks.kernels(kernel_table)
    devices = _devices(export, gpu, source_id, gpu_override)
    samples = _gpu_metrics(export, source_id, start_utc)
    if samples is not None:
        sinks.table("gpu_samples", samples)
    sinks.anomalies(_anomaly_table(anomalies, source_id))
    iterations = _iteration_table(steps, host, gpu, source_id, offset)
    names = [n for n in devices.column("name").to_pylist() if n]
    count = host_table.num_rows + kernel_table.num_rows
    return TraceResult(SourceInfo(count), iterations, devices, None, names,
                      kernel_table.num_rows, len(anomalies))


def _string_table(strings: dict[int, str]) -> tuple[pa.Array, pa.Array]:
    import pyarrow as pa

    return pa.array(list(strings), pa.int64()), pa.array(list(strings.values()), pa.string())


def _lookup(ids: pa.Array, strings: tuple[pa.Array, pa.Array]) -> pa.Array:
    """StringIds values of `ids`, column-wise (NULL for an id StringIds lacks)."""
    import pyarrow.compute as pc

    return pc.take(strings[1], pc.index_in(ids, value_set=strings[0]))


def _host(export: Export, strings: tuple[pa.Array, pa.Array]) -> dict[str, Any]:
    """Runtime and driver calls, then NVTX ranges, as numpy and pyarrow columns."""
    import pyarrow as pa
    import pyarrow.compute as pc

    i64 = pa.int64()
    parts = []
    for table, category in (("CUPTI_ACTIVITY_KIND_RUNTIME", "cuda_runtime"),
                            ("CUPTI_ACTIVITY_KIND_DRIVER", "cuda_driver")):
        cols = export.read(table, "calls", {"start": i64, "end": i64, "thread": i64,
                                            "correlation": i64, "name": i64})
        parts.append((category, cols, _lookup(cols["name"], strings), False))
    ranges = column_map()["nvtx_ranges"]["types"]
    nvtx = export.read("NVTX_EVENTS", "nvtx", {
        "start": i64, "end": i64, "event_type": i64, "text": pa.string(), "text_id": i64,
        "thread": i64})
    keep = np.isin(nvtx["event_type"].fill_null(-1).to_numpy(), ranges)
    nvtx = {k: v.filter(pa.array(keep)) for k, v in nvtx.items()}
    names = pc.coalesce(nvtx["text"], _lookup(nvtx["text_id"], strings))
    nvtx["correlation"] = pa.nulls(len(names), i64)
    parts.append(("nvtx", nvtx, names, True))
    return _concat_host(parts)


def _concat_host(parts: list[tuple[str, dict[str, Any], pa.Array, bool]]) -> dict[str, Any]:
    import pyarrow as pa

    out: dict[str, Any] = {"category": [], "name": [], "is_range": []}
    arrays: dict[str, list[np.ndarray]] = {k: [] for k in ("start", "end", "thread", "corr",
                                                           "has_corr", "has_end")}
    for category, cols, names, is_range in parts:
        n = len(names)
        out["category"].append(pa.repeat(pa.scalar(category), n))
        out["name"].append(names)
        out["is_range"].append(np.full(n, is_range))
        arrays["start"].append(cols["start"].fill_null(0).to_numpy())
        arrays["end"].append(cols["end"].fill_null(-1).to_numpy())
        arrays["has_end"].append(cols["end"].is_valid().to_numpy(zero_copy_only=False))
        arrays["thread"].append(cols["thread"].fill_null(0).to_numpy())
        arrays["corr"].append(cols["correlation"].fill_null(0).to_numpy())
        arrays["has_corr"].append(cols["correlation"].is_valid().to_numpy(zero_copy_only=False))
    for key, chunks in arrays.items():
        out[key] = np.concatenate(chunks) if chunks else np.array([], np.int64)
    out["is_range"] = np.concatenate(out["is_range"]) if parts else np.array([], bool)
    out["category"] = pa.concat_arrays(out["category"])
    out["name"] = pa.concat_arrays(out["name"])
    return out


def _activities(export: Export, strings: tuple[pa.Array, pa.Array], first_id: int
                ) -> dict[str, Any]:
    import pyarrow as pa
    import pyarrow.compute as pc

    i64 = pa.int64()
    keys = ("start", "end", "device", "stream", "correlation", "name", "grid_x", "grid_y",
            "grid_z", "block_x", "block_y", "block_z", "registers", "static_shared",
            "dynamic_shared", "bytes", "copy_kind")
    copy_kinds = column_map()["copy_kinds"]
    copy_names = (pa.array([int(k) for k in copy_kinds], i64),
                  pa.array([f"[CUDA memcpy {v}]" for v in copy_kinds.values()]))
    tables, names = [], []
    for table, kind in (("CUPTI_ACTIVITY_KIND_KERNEL", "kernel"),
                        ("CUPTI_ACTIVITY_KIND_MEMCPY", "memcpy"),
                        ("CUPTI_ACTIVITY_KIND_MEMSET", "memset")):
        cols = export.read(table, "activity", {k: i64 for k in keys})
        t = pa.table(cols)
        tables.append(t.append_column("kind", pa.repeat(pa.scalar(kind), t.num_rows)))
        if kind == "kernel":
            names.append(_lookup(cols["name"], strings))
        elif kind == "memcpy":
            names.append(pc.fill_null(_lookup(cols["copy_kind"], copy_names),
                                      "[CUDA memcpy Unknown]"))
        else:
            names.append(pa.repeat(pa.scalar("[CUDA memset]"), t.num_rows))
    gpu = pa.concat_tables(tables)
    return {"table": gpu, "names": pa.concat_arrays(names),
            "ids": np.arange(first_id, first_id + gpu.num_rows, dtype=np.int64)}


@dataclass
class Steps:
    rows: np.ndarray      # host rows of the step ranges
    number: np.ndarray
    start: np.ndarray
    end: np.ndarray
    unpopped: bool = False     # ranges never popped (ended by the capture)


def _steps(host: dict[str, Any]) -> Steps:
    patterns = [re.compile(p) for p in column_map()["steps"]["patterns"]]
    rows, numbers = [], []
    for i in np.flatnonzero(host["is_range"]):
        name = host["name"][int(i)].as_py() or ""
        m = next((m for p in patterns if (m := p.match(name))), None)
        if m is not None:
            rows.append(i)
            numbers.append(int(m.group(1)))
    r = np.array(rows, np.int64)
    order = np.argsort(host["start"][r], kind="stable") if len(r) else r
    r = r[order]
    start = host["start"][r]
    end = np.where(host["has_end"][r], host["end"][r], np.iinfo(np.int64).max)
    unpopped = bool(len(r) > 1 and (end[:-1] > start[1:]).any())
    if len(r) > 1:  # a step never popped ends where the next one starts
        end[:-1] = np.minimum(end[:-1], start[1:])
    end = np.where(end == np.iinfo(np.int64).max, start, end)
    return Steps(r, np.array(numbers, np.int64)[order], start, end, unpopped)


def _close_last_step(steps: Steps, host: dict[str, Any], gpu: dict[str, Any],
                     links: Links) -> bool:
    """When the steps were never popped, the last one ends with the last GPU activity
    launched from it (not at the capture's end: teardown calls follow it)."""
    if not steps.unpopped:
        return False
    import pyarrow.compute as pc

    last = steps.number[-1]
    launched = links.launch != link.NONE
    iteration = np.where(launched, links.host_iteration[np.where(launched, links.launch, 0)],
                         link.NONE)
    ends = pc.fill_null(gpu["table"].column("end"), 0).to_numpy()[iteration == last]
    if len(ends):
        steps.end[-1] = max(int(ends.max()), int(steps.start[-1]))
        links.host_iteration = link.assign_iterations(
            steps.start, steps.end, steps.number, host["start"], np.ones(len(host["start"]),
                                                                         bool))
    return True


@dataclass
class Links:
    launch: np.ndarray        # host row per GPU activity, or link.NONE
    parent: np.ndarray
    layer: np.ndarray
    host_iteration: np.ndarray


def _link(host: dict[str, Any], gpu: dict[str, Any], steps: Steps,
          anomalies: list[tuple[str, int | None, str]]) -> Links:
    n = len(host["start"])
    is_call = ~host["is_range"]
    launchers = np.flatnonzero(is_call & host["has_corr"])
    table = gpu["table"]
    gpu_corr = table.column("correlation").fill_null(0).to_numpy()
    gpu_has = table.column("correlation").is_valid().to_numpy(zero_copy_only=False)
    launch, _ = link.link_launches(host["corr"][launchers], launchers, gpu_corr, gpu_has)
    end = host["end"].copy()
    step_rows = np.zeros(n, bool)
    step_rows[steps.rows] = True
    end[steps.rows] = steps.end
    timed = host["has_end"] | step_rows
    links = link.link_host(host["thread"], host["start"], end, timed, np.zeros(n, bool),
                           host["is_range"] & ~step_rows)
    iteration = link.assign_iterations(steps.start, steps.end, steps.number, host["start"],
                                       np.ones(n, bool))
    import pyarrow.compute as pc

    kernel = pc.equal(table.column("kind"), "kernel").to_numpy(zero_copy_only=False)
    for i in np.flatnonzero((launch == link.NONE) & kernel):
        anomalies.append(("kernel_without_launch", int(gpu["ids"][i]),
                          "no runtime or driver call with this correlation id"))
    return Links(launch, links.parent, links.layer, iteration)


def _opt(values: np.ndarray, present: np.ndarray) -> pa.Array:
    import pyarrow as pa

    return pa.array(values, pa.int64(), mask=~present)


def _host_table(host: dict[str, Any], links: Links, source_id: int, offset: np.int64
                ) -> pa.Table:
    import pyarrow as pa

    from etl.extract.layer_columns import no_autograd_columns

    n = len(host["start"])
    thread = host["thread"]
    dur = host["end"] - host["start"]
    parent = links.parent
    return pa.table({
        "source_id": pa.repeat(pa.scalar(source_id, pa.int32()), n),
        "rank": pa.nulls(n, pa.int32()),
        "event_id": pa.array(np.arange(n, dtype=np.int64)),
        "category": host["category"],
        "name": host["name"],
        "ts_ns": pa.array(host["start"] + offset),
        "dur_ns": _opt(dur, host["has_end"]),
        "pid": pa.array((thread >> 24) & 0xFFFFFF).cast(pa.string()),
        "tid": pa.array(thread & 0xFFFFFF).cast(pa.string()),
        "correlation_id": _opt(host["corr"], host["has_corr"]),
        "external_id": pa.nulls(n, pa.int64()),
        "parent_event_id": _opt(parent, parent != link.NONE),
        "iteration": _opt(links.host_iteration, links.host_iteration != link.NONE),
        **no_autograd_columns(n),
    })


def _kernel_table(gpu: dict[str, Any], links: Links, host: dict[str, Any], source_id: int,
                  offset: np.int64) -> pa.Table:
    import pyarrow as pa
    import pyarrow.compute as pc

    from etl.extract.layer_columns import with_layer_columns

    t = gpu["table"]
    n = t.num_rows
    launch = links.launch
    found = launch != link.NONE
    safe = np.where(found, launch, 0)
    layer_row = links.layer[safe] if len(links.layer) else np.full(n, link.NONE)
    layer_row = np.where(found, layer_row, link.NONE)
    layer = pc.take(host["name"], pa.array(layer_row, pa.int64(), mask=layer_row == link.NONE))
    iteration = links.host_iteration[safe] if len(links.host_iteration) else np.full(n, -1)
    iteration = np.where(found, iteration, link.NONE)
    shared = pc.add(t.column("static_shared"), t.column("dynamic_shared"))
    table = pa.table({
        "source_id": pa.repeat(pa.scalar(source_id, pa.int32()), n),
        "rank": pa.nulls(n, pa.int32()),
        "kernel_id": pa.array(gpu["ids"]),
        "kind": t.column("kind"),
        "category": t.column("kind"),
        "device_id": t.column("device").cast(pa.int32()),
        "stream_id": t.column("stream"),
        "name": gpu["names"],
        "ts_ns": pc.add(t.column("start"), int(offset)),
        "dur_ns": pc.subtract(t.column("end"), t.column("start")),
        "correlation_id": t.column("correlation"),
        "external_id": pa.nulls(n, pa.int64()),
        **{k: t.column(k) for k in ("grid_x", "grid_y", "grid_z", "block_x", "block_y",
                                    "block_z")},
        "registers_per_thread": t.column("registers"),
        "shared_memory_bytes": shared,
        "bytes": t.column("bytes"),
        "launch_event_id": _opt(safe, found),
        "op_event_id": pa.nulls(n, pa.int64()),
        "op_name": pa.nulls(n, pa.string()),
        "layer": layer,
        "iteration": _opt(iteration, iteration != link.NONE),
    })
    return with_layer_columns(table, "nvtx", None)


def _iteration_table(steps: Steps, host: dict[str, Any], gpu: dict[str, Any],
                     source_id: int, offset: np.int64) -> pa.Table:
    import pyarrow as pa

    if len(steps.rows):
        n = len(steps.rows)
        rows = {"iteration": pa.array(steps.number), "start_ns": pa.array(steps.start + offset),
                "end_ns": pa.array(steps.end + offset),
                "boundary": pa.repeat(pa.scalar("ProfilerStep"), n),
                "event_id": pa.array(steps.rows)}
    else:
        span = _span(host, gpu)
        n = 1 if span else 0
        rows = {"iteration": pa.nulls(n, pa.int64()),
                "start_ns": pa.array([span[0] + int(offset)] if span else [], pa.int64()),
                "end_ns": pa.array([span[1] + int(offset)] if span else [], pa.int64()),
                "boundary": pa.array(["whole_trace"] * n, pa.string()),
                "event_id": pa.nulls(n, pa.int64())}
    return pa.table({"source_id": pa.repeat(pa.scalar(source_id, pa.int32()), n),
                     "rank": pa.nulls(n, pa.int32()), **rows})


def _span(host: dict[str, Any], gpu: dict[str, Any]) -> tuple[int, int] | None:
    t = gpu["table"]
    starts = [int(x) for x in (host["start"].min() if len(host["start"]) else None,
                               _min(t.column("start"))) if x is not None]
    ends = [int(x) for x in (host["end"].max() if len(host["end"]) else None,
                             _max(t.column("end"))) if x is not None]
    return (min(starts), max(max(ends), min(starts))) if starts and ends else None


def _min(column: Any) -> Any:
    import pyarrow.compute as pc

    return pc.min(column).as_py()


def _max(column: Any) -> Any:
    import pyarrow.compute as pc

    return pc.max(column).as_py()


def _devices(export: Export, gpu: dict[str, Any], source_id: int, gpu_override: str | None
             ) -> pa.Table:
    import pyarrow as pa

    i64 = pa.int64()
    info = export.read("TARGET_INFO_GPU", "gpu", {
        "id": i64, "name": pa.string(), "bus": pa.string(), "uuid": pa.string(),
        "sm_count": i64, "memory": i64, "major": i64, "minor": i64})
    rows: dict[int, dict[str, Any]] = {}
    for r in pa.table(info).to_pylist():
        if r["id"] is None or r["id"] in rows:
            continue
        cc = f"{r['major']}.{r['minor']}" if r["major"] is not None else None
        rows[r["id"]] = {"device_id": r["id"], "name": r["name"] or gpu_override,
                         "compute_capability": cc, "sm_count": r["sm_count"],
                         "memory_bytes": r["memory"], "properties_source": "TARGET_INFO_GPU"}
    for d in set(gpu["table"].column("device").drop_null().to_pylist()) - set(rows):
        rows[d] = {"device_id": d, "name": gpu_override, "compute_capability": None,
                   "sm_count": None, "memory_bytes": None,
                   "properties_source": "run.toml" if gpu_override else None}
    out = sorted(rows.values(), key=lambda r: r["device_id"])
    schema = pa.schema([("source_id", pa.int32()), ("rank", pa.int32()),
                        ("device_id", pa.int32()), ("name", pa.string()),
                        ("compute_capability", pa.string()), ("sm_count", pa.int32()),
                        ("memory_bytes", pa.int64()), ("properties_source", pa.string())])
    return pa.Table.from_pylist([{"source_id": source_id, "rank": None, **r} for r in out],
                                schema=schema)


def _gpu_metrics(export: Export, source_id: int, start_utc: int) -> pa.Table | None:
    """GPU_METRICS (nsys --gpu-metrics-devices) → gpu_samples, values from % to ratios.
    Layout from NVIDIA's export documentation (typeId's low byte is the GPU); the corpus
    has no such export."""
    import pyarrow as pa

    if "GPU_METRICS" not in export.tables:
        return None
    i64 = pa.int64()
    samples = export.read("GPU_METRICS", "gpu_metrics", {
        "timestamp": i64, "type_id": i64, "metric_id": i64, "value": pa.float64()})
    names = export.read("TARGET_INFO_GPU_METRICS", "gpu_metric_names", {
        "type_id": i64, "metric_id": i64, "name": pa.string()})
    by_id = {(t, m): n for t, m, n in zip(names["type_id"].to_pylist(),
                                          names["metric_id"].to_pylist(),
                                          names["name"].to_pylist())}
    mapped = column_map()["gpu_metric_map"]
    rows: dict[str, list[Any]] = {k: [] for k in ("i", "dev", "clock", "metric", "value",
                                                  "unit", "reported")}
    for i, (ts, type_id, metric_id, value) in enumerate(zip(
            *(samples[k].to_pylist() for k in ("timestamp", "type_id", "metric_id", "value")))):
        label = by_id.get((type_id, metric_id)) or f"metric {metric_id}"
        base, _, unit_text = label.partition(" [")
        percent = "%" in unit_text
        rows["i"].append(i)
        rows["dev"].append(type_id & 0xFF if type_id is not None else None)
        rows["clock"].append(ts)
        rows["metric"].append(mapped.get(base, base))
        rows["value"].append(value / 100 if percent and value is not None else value)
        rows["unit"].append("ratio" if percent else None)
        rows["reported"].append(unit_text.rstrip("]") or None)
    import pyarrow.compute as pc

    n = len(rows["i"])
    clock = pa.array(rows["clock"], i64)
    return pa.table({
        "source_id": pa.repeat(pa.scalar(source_id, pa.int32()), n),
        "sample_index": pa.array(rows["i"], i64),
        "device_index": pa.array(rows["dev"], pa.int32()),
        "device_uuid": pa.nulls(n, pa.string()), "device_bus_id": pa.nulls(n, pa.string()),
        "ts_ns": pc.add(clock, start_utc), "clock_ts_ns": clock,
        "clock": pa.repeat(pa.scalar("session_start"), n),
        "instrument": pa.repeat(pa.scalar("nsys"), n),
        "metric": pa.array(rows["metric"], pa.string()),
        "value": pa.array(rows["value"], pa.float64()),
        "unit": pa.array(rows["unit"], pa.string()),
        "reported_unit": pa.array(rows["reported"], pa.string())})


def _anomaly_table(found: list[tuple[str, int | None, str]], source_id: int) -> pa.Table:
    import pyarrow as pa

    n = len(found)
    return pa.table({
        "source_id": pa.repeat(pa.scalar(source_id, pa.int32()), n),
        "kind": pa.array([k for k, _, _ in found], pa.string()),
        "event_id": pa.array([e for _, e, _ in found], pa.int64()),
        "detail": pa.array([d for _, _, d in found], pa.string()),
        "ncu_source_id": pa.nulls(n, pa.int32()),
        "ncu_id": pa.nulls(n, pa.int64()),
    })
