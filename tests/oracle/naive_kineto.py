"""Naive, independent oracle for per-iteration GPU utilization of Kineto traces.

Deliberately written from the written definitions only (not from etl/), with
exact integer-nanosecond arithmetic, so that it can be used to check the ETL.
Standard library only.
"""

from __future__ import annotations

import bisect
import gzip
import json
import re
import statistics
from collections.abc import Iterable
from decimal import ROUND_HALF_EVEN, Decimal, localcontext
from fractions import Fraction
from pathlib import Path
from typing import Any

KERNEL_CATS = frozenset({"kernel", "Kernel"})
# kineto writes the runtime/driver calls of other backends as it writes cuda_runtime
# (output_json.cpp): XPU, PrivateUse1 devices, MTIA
LAUNCH_CATS = frozenset({"cuda_runtime", "cuda_driver", "Runtime", "xpu_runtime", "xpu_driver",
                         "privateuse1_runtime", "privateuse1_driver", "mtia_runtime"})
MEM_CATS = frozenset({"gpu_memcpy", "Memcpy", "gpu_memset", "Memset"})
STEP_CATS = frozenset({"cpu_op", "user_annotation"})
STEP_NAME = re.compile(r"ProfilerStep#(\d+)")

Interval = tuple[int, int]  # [start_ns, end_ns]


# ---------------------------------------------------------------- parsing


def load_trace(path: str | Path) -> dict[str, Any]:
    """Parse a (possibly gzipped) trace; floats become Decimal so no precision is lost."""
    raw = Path(path).read_bytes()
    if raw[:2] == b"\x1f\x8b":  # gzip magic, regardless of file extension
        raw = gzip.decompress(raw)
    return json.loads(raw, parse_float=Decimal)


def to_ns(us: Any) -> int:
    """Microseconds (int / Decimal / numeric string) -> integer ns, half-even beyond ns."""
    with localcontext() as ctx:
        ctx.prec = 60  # big enough that *1000 is always exact
        value = Decimal(us) if isinstance(us, (int, Decimal)) else Decimal(str(us))
        return int((value * 1000).to_integral_value(rounding=ROUND_HALF_EVEN))


def x_events(trace: dict[str, Any]) -> list[dict[str, Any]]:
    """Complete ('X') events that carry both ts and dur, including those written as a
    begin/end pair ('B' ... 'E'); nothing else is used."""
    events = trace.get("traceEvents", [])
    events = events if isinstance(events, list) else []
    return [
        e for e in as_complete(events)
        if isinstance(e, dict) and e.get("ph") == "X"
        and e.get("ts") is not None and e.get("dur") is not None
    ]


def as_complete(events: list[Any]) -> list[Any]:
    """Each B that an E closes (an E closes the most recent open B of its pid/tid, in file
    order) becomes the X it describes, in the B's place: dur = E.ts - B.ts, the B's name
    and category (the E's if the B has none), the B's args updated with the E's."""
    out = list(events)
    stacks: dict[tuple[str, str], list[int]] = {}
    for i, e in enumerate(events):
        if not isinstance(e, dict) or e.get("ph") not in ("B", "E"):
            continue
        thread = tuple("" if e.get(k) is None else str(e.get(k)) for k in ("pid", "tid"))
        stack = stacks.setdefault(thread, [])  # type: ignore[arg-type]
        if e["ph"] == "B":
            stack.append(i)
        elif stack:
            j = stack.pop()
            b = events[j]
            out[i] = None
            if b.get("ts") is None or e.get("ts") is None:
                continue
            dur = Decimal(to_ns(e["ts"]) - to_ns(b["ts"])) / 1000  # exact: ns / 1000
            out[j] = {
                **b, "ph": "X", "dur": dur, "cat": b.get("cat", e.get("cat")),
                "name": b.get("name", e.get("name")), "args": {**args(b), **args(e)}}
    return out


def span(e: dict[str, Any]) -> Interval:
    start = to_ns(e["ts"])
    return start, start + to_ns(e["dur"])


def args(e: dict[str, Any]) -> dict[str, Any]:
    a = e.get("args")
    return a if isinstance(a, dict) else {}


def rank_of(trace: dict[str, Any]) -> int | None:
    info = trace.get("distributedInfo")
    return info.get("rank") if isinstance(info, dict) else None


# ---------------------------------------------------------------- iterations


def iterations(events: list[dict[str, Any]]) -> list[tuple[int | None, int, int]]:
    """(N, hs, he) ordered by hs; one synthetic iteration if there is no ProfilerStep."""
    steps = []
    for e in events:
        m = STEP_NAME.fullmatch(str(e.get("name", "")))
        if e.get("cat") in STEP_CATS and m:
            hs, he = span(e)
            steps.append((int(m.group(1)), hs, he))
    if steps:
        # Tie-break on (he, N) only so the order is deterministic.
        return sorted(steps, key=lambda s: (s[1], s[2], s[0]))
    # Without steps the window is the span of all complete events, whatever their category
    # (the profiler's own "Trace" session span too).
    spans = [span(e) for e in events]
    if not spans:
        return []
    return [(None, min(s for s, _ in spans), max(t for _, t in spans))]


def step_of(launch_ts: int, iters: list[tuple[int | None, int, int]]) -> int | None:
    """Index of the containing iteration with the latest hs (later in order wins ties)."""
    found = None
    for i, (_, hs, he) in enumerate(iters):  # few iterations: a linear scan is fine
        if hs <= launch_ts <= he:
            found = i
    return found


# ---------------------------------------------------------------- interval math


def union(intervals: Iterable[Interval]) -> list[Interval]:
    """Merge into sorted, disjoint intervals (touching ones merge; that does not change length)."""
    merged: list[list[int]] = []
    for s, e in sorted(intervals):
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    return [(s, e) for s, e in merged]


def clipped_sums(intervals: Iterable[Interval], windows: list[Interval]) -> list[int]:
    """For each window, sum of len(interval ∩ window) over intervals.

    Non-empty windows are disjoint and sorted (guaranteed by construction), so each
    interval only needs to visit the windows it actually overlaps: O(n log w).
    """
    live = [(s, e, i) for i, (s, e) in enumerate(windows) if e > s]
    assert all(a[1] <= b[0] for a, b in zip(live, live[1:])), "windows must not overlap"
    ends = [e for _, e, _ in live]
    sums = [0] * len(windows)
    for s, e in intervals:
        k = bisect.bisect_right(ends, s)  # first window ending after s
        while k < len(live) and live[k][0] < e:
            ws, we, idx = live[k]
            sums[idx] += max(0, min(e, we) - max(s, ws))
            k += 1
    return sums


# ---------------------------------------------------------------- per device


def device_windows(
    iters: list[tuple[int | None, int, int]], kernels_by_iter: list[list[Interval]]
) -> list[Interval]:
    """Raw window = step span stretched to its kernels; then start >= every earlier raw end."""
    windows: list[Interval] = []
    prev_end: int | None = None
    for (_, hs, he), ks in zip(iters, kernels_by_iter):
        raw_s = min([hs] + [s for s, _ in ks])
        raw_e = max([he] + [e for _, e in ks])
        start = raw_s if prev_end is None else max(raw_s, prev_end)
        windows.append((start, raw_e))  # may be empty (raw_e < start): length clamps to 0
        prev_end = raw_e if prev_end is None else max(prev_end, raw_e)
    return windows


def gpu_utilization(path: str | Path) -> list[dict[str, Any]]:
    """One row per (rank, device_id, iteration), devices ascending, iterations by hs."""
    trace = load_trace(path)
    rank = rank_of(trace)
    events = x_events(trace)
    iters = iterations(events)

    launch_ts = {
        args(e)["correlation"]: to_ns(e["ts"])
        for e in events
        if e.get("cat") in LAUNCH_CATS and "correlation" in args(e)
    }
    kernels: dict[Any, list[Interval]] = {}  # device -> all kernel intervals
    mem: dict[Any, list[Interval]] = {}  # device -> memcpy/memset intervals
    per_iter: dict[Any, list[list[Interval]]] = {}  # device -> K_i intervals per iteration
    for e in events:
        cat, dev = e.get("cat"), args(e).get("device")
        if dev is None:
            continue  # without a device we cannot attribute the event
        if cat in MEM_CATS:
            mem.setdefault(dev, []).append(span(e))
        if cat not in KERNEL_CATS:
            continue
        kernels.setdefault(dev, []).append(span(e))
        slots = per_iter.setdefault(dev, [[] for _ in iters])
        corr = args(e).get("correlation")
        i = step_of(launch_ts[corr], iters) if corr in launch_ts else None
        if i is not None:
            slots[i].append(span(e))

    rows: list[dict[str, Any]] = []
    for dev in sorted(kernels):
        rows.extend(device_rows(rank, dev, iters, per_iter[dev], kernels[dev], mem.get(dev, [])))
    return rows


def device_rows(
    rank: int | None,
    dev: Any,
    iters: list[tuple[int | None, int, int]],
    k_iter: list[list[Interval]],
    kerns: list[Interval],
    mems: list[Interval],
) -> list[dict[str, Any]]:
    windows = device_windows(iters, k_iter)
    busy = clipped_sums(union(kerns), windows)
    activity = clipped_sums(union(kerns + mems), windows)
    ktime = clipped_sums(kerns, windows)  # not a union: overlapping kernels add up
    rows = []
    for i, (n, _, _) in enumerate(iters):
        start, end = windows[i]
        window_ns = max(0, end - start)
        rows.append({
            "rank": rank,
            "device_id": dev,
            "iteration": n,
            "window_start_ns": start,
            "window_ns": window_ns,
            "busy_ns": busy[i],
            "activity_busy_ns": activity[i],
            "kernel_count": len(k_iter[i]),
            "gpu_util": busy[i] / window_ns if window_ns else None,
            "kernel_time_ns": ktime[i],
        })
    return rows


# ---------------------------------------------------------------- selection


def selected_iterations(rows: Iterable[dict[str, Any]]) -> dict[tuple[Any, Any], Any]:
    """First iteration (row order) whose window is within 5% of the device's median window.

    Compared exactly (Fraction) so the 5% boundary is not subject to float rounding.
    A (rank, device) with no qualifying iteration is omitted.
    """
    groups: dict[tuple[Any, Any], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["rank"], r["device_id"]), []).append(r)
    chosen: dict[tuple[Any, Any], Any] = {}
    for key, rs in groups.items():
        med = Fraction(statistics.median([r["window_ns"] for r in rs]))
        for r in rs:
            if 20 * abs(r["window_ns"] - med) <= med:  # |w - m| <= 0.05 m
                chosen[key] = r["iteration"]
                break
    return chosen
