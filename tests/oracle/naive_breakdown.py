"""Naive, independent oracle for the trace breakdown views (temporal_breakdown,
comm_overlap, kernel_breakdown, idle_breakdown, launch_stats) of Kineto traces.

Written from the views' written definitions, not from etl/ or sql/: kernel types by a
plain rule that holds on the corpus (a kernel named nccl* or a symmetric-memory all-reduce
is communication, a copy or set is memory, every other kernel computation), windows and
interval unions from naive_kineto. Standard library only, exact integer nanoseconds.
"""
from __future__ import annotations

import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

from tests.oracle.naive_kineto import (
    KERNEL_CATS,
    LAUNCH_CATS,
    MEM_CATS,
    args,
    clipped_sums,
    gpu_utilization,
    iterations,
    load_trace,
    rank_of,
    span,
    step_of,
    to_ns,
    union,
    x_events,
)


def kernel_type(e: dict[str, Any]) -> str | None:
    cat, name = e.get("cat"), str(e.get("name", ""))
    if cat in MEM_CATS:
        return "memory"
    if cat not in KERNEL_CATS:
        return None
    if name.startswith("nccl") or "multimem_all_reduce" in name:
        return "communication"
    return "computation"


def _activities(events: list[dict[str, Any]]) -> list[tuple[dict[str, Any], str]]:
    return [(e, t) for e in events if (t := kernel_type(e)) and args(e).get("device") is not None
            and to_ns(e["dur"]) >= 0]


def temporal(path: str | Path) -> dict[tuple[Any, Any, Any], dict[str, int]]:
    """(rank, device, iteration) → window_ns, computation_ns, communication_ns, memory_ns,
    idle_ns and the overlap figures, from the union of each kind of interval."""
    trace = load_trace(path)
    events = x_events(trace)
    rows = gpu_utilization(path)
    by_type: dict[Any, dict[str, list[tuple[int, int]]]] = defaultdict(lambda: defaultdict(list))
    for e, t in _activities(events):
        by_type[args(e)["device"]][t].append(span(e))
    out = {}
    for dev in {r["device_id"] for r in rows}:
        mine = [r for r in rows if r["device_id"] == dev]
        windows = [(r["window_start_ns"], r["window_start_ns"] + r["window_ns"]) for r in mine]
        kinds = by_type[dev]
        comp = clipped_sums(union(kinds["computation"]), windows)
        comm = clipped_sums(union(kinds["communication"]), windows)
        both = clipped_sums(union(kinds["computation"] + kinds["communication"]), windows)
        every = clipped_sums(union(kinds["computation"] + kinds["communication"]
                                   + kinds["memory"]), windows)
        for i, r in enumerate(mine):
            out[(r["rank"], dev, r["iteration"])] = {
                "window_ns": r["window_ns"], "computation_ns": comp[i],
                "communication_ns": both[i] - comp[i], "memory_ns": every[i] - both[i],
                "idle_ns": r["window_ns"] - every[i], "comm_union_ns": comm[i],
                "overlapped_ns": comm[i] + comp[i] - both[i]}
    return out


def _launches(events: list[dict[str, Any]]) -> dict[Any, dict[str, Any]]:
    """correlation id → its launch call (the first, when a trace repeats one)."""
    found: dict[Any, dict[str, Any]] = {}
    for e in events:
        if e.get("cat") in LAUNCH_CATS and "correlation" in args(e):
            found.setdefault(args(e)["correlation"], e)
    return found


def kernel_types(path: str | Path) -> dict[tuple[Any, Any, Any, str], tuple[int, int]]:
    """(rank, device, iteration of the launch, kernel type) → (count, sum of durations)."""
    trace = load_trace(path)
    events = x_events(trace)
    iters = iterations(events)
    launches = _launches(events)
    out: dict[tuple[Any, Any, Any, str], list[int]] = defaultdict(lambda: [0, 0])
    for e, t in _activities(events):
        launch = launches.get(args(e).get("correlation"))
        i = step_of(to_ns(launch["ts"]), iters) if launch else None
        n = iters[i][0] if i is not None else None
        acc = out[(rank_of(trace), args(e)["device"], n, t)]
        acc[0] += 1
        acc[1] += to_ns(e["dur"])
    return {k: (v[0], v[1]) for k, v in out.items()}


def idle(path: str | Path, kernel_wait_ns: int = 30_000) -> dict[tuple[Any, ...], tuple[int, int]]:
    """(rank, device, stream, iteration, category) → (interval count, idle ns): the gap
    before each activity of a stream since the latest earlier end, when positive."""
    trace = load_trace(path)
    events = x_events(trace)
    iters = iterations(events)
    launches = _launches(events)
    streams: dict[tuple[Any, Any], list[tuple[int, int, int, dict[str, Any]]]] = defaultdict(list)
    for order, (e, _) in enumerate(_activities(events)):
        if args(e).get("stream") is not None:
            start, end = span(e)
            streams[(args(e)["device"], args(e)["stream"])].append((start, order, end, e))
    out: dict[tuple[Any, ...], list[int]] = defaultdict(lambda: [0, 0])
    for (dev, stream), items in streams.items():
        latest = None
        for start, _, end, e in sorted(items, key=lambda x: (x[0], x[1])):
            if latest is not None and start > latest:
                launch = launches.get(args(e).get("correlation"))
                launch_ns = to_ns(launch["ts"]) if launch else None
                if launch_ns is not None and launch_ns > latest:
                    category = "host_wait"
                elif start - latest < kernel_wait_ns:
                    category = "kernel_wait"
                else:
                    category = "other"
                i = step_of(launch_ns, iters) if launch_ns is not None else None
                n = iters[i][0] if i is not None else None
                acc = out[(rank_of(trace), dev, stream, n, category)]
                acc[0] += 1
                acc[1] += start - latest
            latest = end if latest is None else max(latest, end)
    return {k: (v[0], v[1]) for k, v in out.items()}


def launch_stats(path: str | Path) -> dict[str, dict[str, int]]:
    """Activity name → launch_count, short_kernel_count, launch_outlier_count,
    delay_outlier_count and sum_launch_delay_ns (ns; HTA's cut-offs 50 µs and 100 µs)."""
    events = x_events(load_trace(path))
    launches = _launches(events)
    out: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for e, _ in _activities(events):
        launch = launches.get(args(e).get("correlation"))
        if launch is None or to_ns(launch["dur"]) < 0:
            continue
        l_start, l_end = span(launch)
        start, end = span(e)
        cpu, gpu, delay = l_end - l_start, end - start, max(0, start - l_end)
        acc = out[str(e.get("name"))]
        acc["launch_count"] += 1
        acc["short_kernel_count"] += gpu < cpu <= 50_000
        acc["launch_outlier_count"] += cpu > 50_000
        acc["delay_outlier_count"] += delay > 100_000
        acc["sum_launch_delay_ns"] += delay
    return {k: dict(v) for k, v in out.items()}


def graph_launch_delays(path: str | Path) -> dict[tuple[str, bool], tuple[int, int]]:
    """(activity name, graph launch) → (delays counted, delays over 100 µs), as
    launch_stats_v3 counts them: a launch call that enqueued several activities, or whose
    name says GraphLaunch, is a graph launch, and only its earliest activity's delay counts
    (ties: the first written)."""
    events = x_events(load_trace(path))
    launches = _launches(events)
    by_call: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for e, _ in _activities(events):
        corr = args(e).get("correlation")
        if corr in launches and to_ns(launches[corr]["dur"]) >= 0:
            by_call[corr].append(e)
    out: dict[tuple[str, bool], list[int]] = defaultdict(lambda: [0, 0])
    for corr, activities in by_call.items():
        call = launches[corr]
        graph = len(activities) > 1 or "graphlaunch" in str(call.get("name")).lower()
        first = min(activities, key=lambda e: span(e)[0])  # min keeps the first of a tie
        for e in activities:
            acc = out[(str(e.get("name")), graph)]
            if graph and e is not first:
                continue
            acc[0] += 1
            acc[1] += span(e)[0] - span(call)[1] > 100_000
    return {k: (v[0], v[1]) for k, v in out.items()}


def median_by_iteration(rows: dict[tuple[Any, Any, Any], dict[str, int]], field: str
                        ) -> dict[Any, float]:
    """iteration → median of `field` over the (rank, device) rows of that iteration."""
    values: dict[Any, list[int]] = defaultdict(list)
    for (_, _, iteration), r in rows.items():
        values[iteration].append(r[field])
    return {i: statistics.median(v) for i, v in values.items()}


def copies(path: str | Path) -> dict[tuple[Any, ...], tuple[int, int | None, int]]:
    """(rank, device, iteration of the launch, direction) → (count, sum of bytes or None
    when no activity gives them, sum of durations of those with bytes); direction from the
    name 'Memcpy HtoD ...', 'memset' for sets."""
    trace = load_trace(path)
    events = x_events(trace)
    iters = iterations(events)
    launches = _launches(events)
    out: dict[tuple[Any, ...], list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for e, t in _activities(events):
        if t != "memory":
            continue
        name = str(e.get("name", ""))
        direction = "memset" if e.get("cat") in ("gpu_memset", "Memset") else name[7:11]
        launch = launches.get(args(e).get("correlation"))
        i = step_of(to_ns(launch["ts"]), iters) if launch else None
        acc = out[(rank_of(trace), args(e)["device"], iters[i][0] if i is not None else None,
                   direction)]
        acc[0] += 1
        if args(e).get("bytes") is not None:
            acc[1] += int(args(e)["bytes"])
            acc[2] += to_ns(e["dur"])
            acc[3] += 1
    return {k: (v[0], v[1] if v[3] else None, v[2]) for k, v in out.items()}
