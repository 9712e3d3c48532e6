"""Kineto trace times → the wall clock (UTC), stated per source as a TraceClock.

Two clocks are found in PyTorch profiler traces (every Kineto trace of the corpus checked,
2021 to 2026):

| trace                      | baseTimeNanoseconds | first ts (µs)     | UTC ns           |
|----------------------------|---------------------|-------------------|------------------|
| Kineto to ~2023 (alexnet)  | absent              | 1695835542481129  | ts * 1000        |
| Kineto ~2024 on (nccl_data)| 1711964646000000000 | 4458676388068.751 | base + ts * 1000 |

The second reading was checked against the `INFO:` log lines such traces carry (local
time, PDT): nccl_data.json.gz logs 2024-05-22 17:15:22 and base + first ts is
2024-05-23T00:15:22Z. A trace whose times fit neither (no base and ts not µs since 1970,
or a base added to ts that already are) is unmapped, with the reason.
"""
from __future__ import annotations

from typing import Any

from etl.extract.trace_role import TraceClock, on_wall_clock


def kineto_clock(base_time: Any, span: tuple[int, int] | None, truncated: bool) -> TraceClock:
    """The clock of a Kineto source: `base_time` is its baseTimeNanoseconds as written
    (None when absent), `span` the first start and last end of its events, in ns."""
    if span is None:
        return TraceClock.unmapped("no complete event with a time: nothing to place")
    first = span[0]
    if base_time is None:
        return _without_base(first, truncated)
    if not isinstance(base_time, int) or isinstance(base_time, bool):
        return TraceClock.unmapped(f"baseTimeNanoseconds {str(base_time)[:40]!r} is not an "
                                   "integer number of ns")
    if on_wall_clock(first):
        return TraceClock.unmapped("ts are already µs since 1970 and baseTimeNanoseconds is "
                                   "given too: which clock is meant is unclear")
    if not on_wall_clock(base_time + first):
        return TraceClock.unmapped(f"baseTimeNanoseconds {base_time} + ts is not a time "
                                   "between 2000 and 2100")
    return TraceClock("base_time", base_time)


def _without_base(first: int, truncated: bool) -> TraceClock:
    if on_wall_clock(first):
        return TraceClock("epoch", 0)
    reason = ("ts are not µs since 1970 (the first is "
              f"{first / 1e9:.3f} s) and the trace has no baseTimeNanoseconds")
    if truncated:
        reason += " (the file is cut, and Kineto writes baseTimeNanoseconds after the events)"
    return TraceClock.unmapped(reason)
