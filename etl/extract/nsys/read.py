"""An nsys SQLite export → host_events, kernels, iterations, devices (and gpu_samples).

Times: nsys writes ns since the session start; every ts_ns here is mapped to the wall
clock, ns since 1970 UTC = TARGET_INFO_SESSION_START_TIME.utcEpochNs + the export's
time, so that monitor samples (gpu_samples) fall into the iteration windows; the reader
states that clock (TraceResult.clock session_start, offset 0). An export without a session
start keeps the session clock: the clock unmapped with the reason, an anomaly
clock_unaligned, and its GPU_METRICS samples without ts_ns.

Rows, numbered together (event_id / kernel_id): runtime and driver calls, then NVTX
ranges (host_events), then kernels, copies and sets (kernels). Links are etl/extract/link.py's:
a GPU activity's launch is the call with its correlation id; its layer the innermost
NVTX range (not a step) enclosing the launch on the launching thread; iterations are NVTX
step ranges (fields.toml [steps], or run.toml's step_pattern); a range never popped (the
corpus ResNet-18 run's "iterationN") ends where the next step starts, and the last such
one with the last GPU activity launched from it (not at the end of the capture).

Memory is bounded whatever the export's size: spill.py writes the tables to the spill
folder batch by batch (pass 1; with PipelineOptions.workers > 1 the activity tables in a
second process, while the host rows are read and sorted here), passes.py links the host
rows out of core and joins the GPU activities to their launches (passes 2 and 3); rows go
to the sinks as they come, GPU_METRICS samples too (gpu_metrics.py).
"""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import numpy as np

from etl.core.errors import InputError
from etl.extract.kineto.kernel_join import release_memory
from etl.extract.nsys import EXPORT_COMMAND
from etl.extract.nsys.gpu_metrics import (SAMPLES_FILE, sample_batches, spill_samples,
                                           spilled_samples)
from etl.extract.nsys.passes import (Context, LinkOptions, Steps, close_last_step, join_gpu,
                                     link_host, pass_2_files)
from etl.extract.heap import keep_freed_heap
from etl.extract.removal import Removal
from etl.extract.nsys.spill import (GRAPH_NAME, PID_MASK, PID_SHIFT, SPILLED_TABLES, Names,
                                    Spilled, StepRanges, spill_export)
from etl.extract.nsys.decode import Export
from etl.extract.nsys.collectives import NcclRanges
from etl.extract.nsys.syncs import EVENT_TABLE, SYNC_TABLE, read_syncs
from etl.extract.fields import field_map
from etl.extract.step_names import STEP_NUMBER_REMEDY, StepNames, StepNumberError
from etl.extract.trace_role import (SourceInfo, TraceClock, TraceResult, no_gpu_activity,
                                     no_gpu_activity_remark)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    import pyarrow as pa

    from etl.extract.trace_role import PipelineOptions, Sinks


def refuse_rep(path: Path, *_: Any) -> NoReturn:
    raise InputError(path, "an Nsight Systems binary report is not read directly", None,
                     "export it to SQLite and ingest that: " + EXPORT_COMMAND.replace(
                         "REPORT.sqlite", f"{path.stem}.sqlite").replace(
                         "REPORT.nsys-rep", path.name))


def read(path: Path, source_id: int, gpu_override: str | None, spill: Path,
                  sinks: Sinks, options: PipelineOptions) -> TraceResult:
    keep_freed_heap()
    export = Export(path)
    spill.mkdir(parents=True)
    removal = Removal()
    try:
        return _ingest(export, source_id, gpu_override, spill, sinks, options, removal)
    except StepNumberError as exc:
        raise InputError(path, exc.problem(), "NVTX_EVENTS, run.toml step_pattern",
                         STEP_NUMBER_REMEDY) from None
    finally:
        export.close()
        removal.close()
        shutil.rmtree(spill, ignore_errors=True)


def _ingest(export: Export, source_id: int, gpu_override: str | None, spill: Path,
            sinks: Sinks, options: PipelineOptions, removal: Removal) -> TraceResult:
    names = Names(export.strings())
    start_utc, clock = session_clock(export)
    anomalies: list[tuple[str, int | None, str]] = []
    if clock.reason:
        anomalies.append(("clock_unaligned", None, clock.reason))
    found_steps = StepRanges(step_patterns(options.step_pattern))
    spilled = spill_export(export, names, found_steps, spill, start_utc, options.workers)
    context = Context(source_id, start_utc, spilled.host_rows)
    try:
        return _linked(export, spilled, names, _steps(found_steps), anomalies, context,
                       clock, gpu_override, spill, sinks, options, removal)
    finally:
        spilled.close()


def _linked(export: Export, spilled: Spilled, names: Names, steps: Steps,
            anomalies: list[tuple[str, int | None, str]], context: Context,
            clock: TraceClock, gpu_override: str | None, spill: Path, sinks: Sinks,
            options: PipelineOptions, removal: Removal) -> TraceResult:
    """Passes 2 and 3 over pass 1's spill, whose GPU half may still be under way; each
    spill file is removed once read for the last time."""
    if not spilled.has_activity_tables and not spilled.host_rows:
        raise InputError(export.path, "an nsys export without CUDA or NVTX activity", None,
                         "profile with -t cuda,nvtx and export again")
    source_id, start_utc = context.source_id, context.offset
    link_end = steps.end.copy()
    samples_read = _gpu_samples(export, spilled, spill, source_id,
                                start_utc if clock.reason is None else None)

    def gpu_spilled() -> None:
        """Pass 1's GPU half done (while pass 2 runs: link_host says when it needs the
        steps final), then the last step closed with the GPU rows when the steps are
        never popped."""
        spilled.wait_for_gpu()
        release_memory()  # pass 1's batches are gone: give their pages back
        if steps.unpopped:
            close_last_step(steps, spill, spilled.parts)

    nccl = NcclRanges(sinks.host_events)
    link_host(spill, names, steps, link_end, context, nccl,
              LinkOptions(spilled.parts, options.chunk_rows, options.threads,
                          spilled.in_start_order),
              gpu_spilled)
    sinks.end_of_host_events()
    removal.remove(*pass_2_files(spill))
    release_memory()
    orphans = join_gpu(spill, spilled.parts, steps, context, names, sinks.kernels,
                       spilled.wait_for_join, removal.remove)
    anomalies += [("kernel_without_launch", i, "no runtime or driver call with this "
                   "correlation id") for i in orphans]
    if steps.unpopped:
        anomalies.append(("step_end_inferred", int(steps.rows[-1]), (
            "the NVTX step ranges are never popped: each ends where the next starts, the "
            "last with the last GPU activity launched from it (work after the loop, if "
            "any, is counted in it)")))
    cause = _no_gpu_activity(spilled)
    if cause is not None:
        anomalies.append(no_gpu_activity(cause))
    anomalies += _export_notes(spilled) + _tables_not_read(export)
    devices = _devices(export, spilled.gpu.devices, source_id, gpu_override)
    for samples in samples_read():
        sinks.table("gpu_samples", samples)
    syncs = read_syncs(export, names.strings, source_id, spilled.host_rows + spilled.gpu.rows,
                       int(start_utc))
    if syncs is not None:
        sinks.table("syncs", syncs)
    collectives = nccl.table(source_id)
    if collectives is not None:
        sinks.table("collective_ops", collectives)
    sinks.anomalies(_anomaly_table(anomalies, source_id))
    iterations = _iteration_table(steps, spilled, source_id, np.int64(start_utc))
    gpu_names = [n for n in devices.column("name").to_pylist() if n]
    count = spilled.host_rows + spilled.gpu.rows
    return TraceResult(SourceInfo(count), iterations, devices, None, gpu_names,
                       spilled.gpu.rows, len(anomalies), clock=clock,
                       remarks=[] if cause is None else [no_gpu_activity_remark(cause)])


def _no_gpu_activity(spilled: Spilled) -> str | None:
    """What an export without one kernel, copy or set holds instead; None when it has
    GPU activities."""
    if spilled.gpu.rows:
        return None
    calls = spilled.host_rows - spilled.nvtx_rows
    return (f"{spilled.nvtx_rows} NVTX ranges and {calls} CUDA runtime/driver calls, no CUPTI "
            "kernel, memcpy or memset record: profiled without CUDA tracing (nsys profile "
            "-t nvtx, without cuda)? Profile with -t cuda,nvtx")


def _gpu_samples(export: Export, spilled: Spilled, spill: Path, source_id: int,
                 start_utc: int | None) -> Callable[[], Iterator[pa.Table]]:
    """GPU_METRICS as gpu_samples batches: read by the worker, if there is one, while the
    host rows are linked here (the returned call waits for it), else read when called."""
    if "GPU_METRICS" not in export.tables:
        return lambda: iter(())
    spilled_file = spill / SAMPLES_FILE
    samples = spilled.aside(spill_samples, export.path, spilled_file, source_id, start_utc)
    if samples is None:
        return lambda: sample_batches(export, source_id, start_utc)

    def from_worker() -> Iterator[pa.Table]:
        samples.result()
        return spilled_samples(spilled_file)
    return from_worker


def session_clock(export: Export) -> tuple[int, TraceClock]:
    """The session start (ns since 1970 UTC, added to every time the export writes) and
    the clock the rows are then on, stated by the reader rather than guessed from the size
    of its times (iterations.clock): session_start (offset 0, the times are UTC already)
    or unmapped with the reason (the times stay ns since the session start)."""
    start = export.scalar("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME")
    if start is None:
        return 0, TraceClock.unmapped("no TARGET_INFO_SESSION_START_TIME in the export: "
                                      "times stay ns since the session start")
    if not isinstance(start, int) or isinstance(start, bool):
        return 0, TraceClock.unmapped(
            f"TARGET_INFO_SESSION_START_TIME.utcEpochNs {str(start)[:40]!r} is not an "
            "integer number of ns: times stay ns since the session start")
    return start, TraceClock("session_start", 0)


def step_patterns(custom: str | None) -> StepNames:
    """The step markers: run.toml's step_pattern alone when set, else fields.toml's."""
    return StepNames.of(custom, field_map("nsys")["steps"]["patterns"])


def _steps(found: StepRanges) -> Steps:
    """Step ranges by start, those of one number that overlap merged (_merged_steps); a
    range ends where the next one starts at the latest (one never popped always does)."""
    kept, merged = _merged_steps(*(
        np.concatenate(parts) if parts else np.zeros(0, dtype)
        for parts, dtype in ((found.rows, np.int64), (found.numbers, np.int64),
                             (found.start, np.int64), (found.end, np.int64),
                             (found.has_end, bool), (found.threads, np.int64))))
    r, number, start, end, has_end = kept
    order = np.argsort(start, kind="stable")
    r, number, start = r[order], number[order], start[order]
    end = np.where(has_end[order], end[order], np.iinfo(np.int64).max)
    # never popped: a range holds the next one whole (both end at the capture's end, or
    # have none); a range that the next merely overlaps (steps of processes that run
    # apart, merged) is cut where the next starts but says nothing of the last one's end
    unpopped = bool(len(r) > 1 and ((end[:-1] > start[1:]) & (end[1:] <= end[:-1])).any())
    if len(r) > 1:
        end[:-1] = np.minimum(end[:-1], start[1:])
    end = np.where(end == np.iinfo(np.int64).max, start, end)
    return Steps(r, number, start, end, unpopped, *merged)


def _merged_steps(r: np.ndarray, number: np.ndarray, start: np.ndarray, end: np.ndarray,
                  has_end: np.ndarray, thread: np.ndarray
                  ) -> tuple[tuple[np.ndarray, ...], tuple[np.ndarray, np.ndarray]]:
    """Ranges of one step number pushed by different threads that overlap in time as one,
    from the earliest start to the latest end, at the earliest one's event id: the same
    step of several processes (`nsys profile torchrun ...`: each rank pushes its own
    ProfilerStep#N). Ranges of one thread never merge (a loop run twice, ranges never
    popped that all end at the capture's end), nor do ranges without an end. Returns the
    ranges kept (r, number, start, end, has_end) and the event ids and own ends of those
    merged into them."""
    keep: list[int] = []
    merged: list[int] = []
    joined_end = end.copy()
    threads: set[int] = set()   # of the range kept last and those merged into it
    for i in np.lexsort((r, start, number)).tolist():
        last = keep[-1] if keep else None
        if (last is not None and number[i] == number[last] and has_end[last] and has_end[i]
                and start[i] < joined_end[last] and int(thread[i]) not in threads):
            joined_end[last] = max(joined_end[last], end[i])
            merged.append(i)
            threads.add(int(thread[i]))
            continue
        keep.append(i)
        threads = {int(thread[i])}
    at, away = np.array(keep, np.int64), np.array(merged, np.int64)
    return ((r[at], number[at], start[at], joined_end[at], has_end[at]),
            (r[away], end[away]))


def _iteration_table(steps: Steps, spilled: Spilled, source_id: int, offset: np.int64
                     ) -> pa.Table:
    import pyarrow as pa

    if len(steps.rows):
        n = len(steps.rows)
        rows = {"iteration": pa.array(steps.number), "start_ns": pa.array(steps.start + offset),
                "end_ns": pa.array(steps.end + offset),
                "boundary": pa.repeat(pa.scalar("ProfilerStep"), n),
                "event_id": pa.array(steps.rows)}
    else:
        span = _span(spilled)
        n = 1 if span else 0
        rows = {"iteration": pa.nulls(n, pa.int64()),
                "start_ns": pa.array([span[0] + int(offset)] if span else [], pa.int64()),
                "end_ns": pa.array([span[1] + int(offset)] if span else [], pa.int64()),
                "boundary": pa.array(["whole_trace"] * n, pa.string()),
                "event_id": pa.nulls(n, pa.int64())}
    return pa.table({"source_id": pa.repeat(pa.scalar(source_id, pa.int32()), n),
                     "rank": pa.nulls(n, pa.int32()), **rows})


def _span(spilled: Spilled) -> tuple[int, int] | None:
    starts = [x for x in (spilled.host_start, spilled.gpu.start) if x is not None]
    ends = [x for x in (spilled.host_end, spilled.gpu.end) if x is not None]
    return (min(starts), max(max(ends), min(starts))) if starts and ends else None


def _devices(export: Export, used: set[int], source_id: int, gpu_override: str | None
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
    for d in used - set(rows):
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


def _export_notes(spilled: Spilled) -> list[tuple[str, int | None, str]]:
    """What the export holds that the rows cannot say: several processes, whole graphs."""
    notes: list[tuple[str, int | None, str]] = []
    processes = sorted({(p >> PID_SHIFT) & PID_MASK for p in spilled.gpu.processes})
    if len(processes) > 1:
        notes.append(("several_processes", None, (
            f"GPU activities of {len(processes)} processes (pid "
            f"{', '.join(str(p) for p in processes[:8])}{' ...' if len(processes) > 8 else ''})"
            " in one export: each kernel's launch is found in its own process, but the "
            "processes share one sequence of iterations (a step's window runs from the "
            "first process's start of it to the last one's end) and the run has no ranks; "
            "profile each rank with an nsys of its own (torchrun "
            "... nsys profile -o rank_%q{RANK} python train.py) for per-rank iterations")))
    graphs = spilled.gpu.graphs
    if graphs:
        notes.append(("cuda_graph_traced_whole", None, (
            f"{graphs} CUDA graph execution(s) traced as a whole (nsys --cuda-graph-trace=graph, "
            f"its default): each is one kernels row named {GRAPH_NAME} over the graph's span, "
            "counted as busy time with any gaps between its nodes; the kernels inside (names, "
            "launch geometry, count) are not in the export: profile with "
            "--cuda-graph-trace=node for them")))
    return notes


def _tables_not_read(export: Export) -> list[tuple[str, int | None, str]]:
    """CUPTI activity tables with rows that no reader here takes (fields.toml [tables])."""
    known = {*SPILLED_TABLES, SYNC_TABLE, EVENT_TABLE, *field_map("nsys")["tables"]["not_work"]}
    unread = {t: export.count(t) for t in sorted(export.tables)
              if t.startswith("CUPTI_ACTIVITY_KIND_") and t not in known}
    listed = ", ".join(f"{t} ({n} rows)" for t, n in unread.items() if n)
    if not listed:
        return []
    return [("nsys_tables_not_read", None, (
        f"CUPTI activity tables this reader does not take: {listed}; GPU time they hold, "
        "if any, is not in kernels or any utilization"))]


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
