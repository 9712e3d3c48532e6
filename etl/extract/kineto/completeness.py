"""Which iterations of a truncated (salvaged) trace the cut may have reached.

Kineto writes the host events first, then the launch calls with their GPU activities. A
cut file keeps a prefix of that, and the iterations whose GPU work lies after the cut read
as idle. Whether an iteration is recorded whole depends on how the writer ordered the
second part:
- in time order (Kineto since ~2023: launch calls by end, GPU activities by start), the
  prefix holds everything up to the latest record read;
- in batches (2022-era Kineto writes each CUPTI buffer in turn, buffers in no time order,
  several covering the same time), any part of the trace can follow the cut.

So an iteration of a truncated source is complete only when all of these hold (else `cut`
says the first that fails):

| condition                                                          | cut when not        |
|--------------------------------------------------------------------|---------------------|
| every launch call read ends no earlier, and every GPU activity     | records_out_of_order |
| read starts no earlier, than the one read before it                |                     |
| the launch calls read begin before the iteration (or inside it,    | launch_calls_cut    |
| for the first iteration) and reach its end (he <= latest end read) |                     |
| its window (he stretched to its kernels' ends) ends before the     | gpu_activities_cut  |
| latest GPU activity read starts, and no launch call before he has  |                     |
| a correlation id beyond every GPU activity read                    |                     |

e.g. steps [0, 100) [100, 200) [200, 300) µs; read: launches ending at 10, 110, 210, GPU
activities starting at 20, 120 (the last kernel cut off) → complete, gpu_activities_cut
(its window reaches 160 > 120, the kernel at 220 may follow), launch_calls_cut.

A file written in batches whose cut falls inside its first batch reads as one written in
order; when that batch covers the same time as a later one (two buffers filled at once),
iterations it covers are taken as complete while records of them lie after the cut.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from etl.extract.fields import field_map


@dataclass(frozen=True)
class Run:
    """Values met in file order: whether each is at least every one before it, and their
    least and greatest (None: no value)."""

    ordered: bool = True
    low: int | None = None
    high: int | None = None

    @classmethod
    def of(cls, values: np.ndarray) -> Run:
        if len(values) == 0:
            return cls()
        ordered = bool(np.all(values[1:] >= values[:-1]))
        return cls(ordered, int(values.min()), int(values.max()))

    def then(self, later: Run) -> Run:
        """This run followed by `later` in the file."""
        if later.low is None or later.high is None:
            return self
        if self.low is None or self.high is None:
            return later
        return Run(self.ordered and later.ordered and later.low >= self.high,
                   min(self.low, later.low), max(self.high, later.high))


@dataclass(frozen=True)
class RecordOrder:
    """The launch calls and GPU activities (complete events) of a stretch of the file."""

    launch_starts: Run = field(default_factory=Run)
    launch_ends: Run = field(default_factory=Run)
    gpu_starts: Run = field(default_factory=Run)

    @classmethod
    def of(cls, launches: pa.Table | None, gpu: pa.Table | None) -> RecordOrder:
        """From the launch calls and the GPU activities of the stretch, each in file order
        (ph, ts_ns and, for launch calls, dur_ns columns; None: there are none)."""
        order = cls()
        if launches is not None:
            calls = launches.filter(pc.fill_null(
                pc.and_(_timed(launches), pc.is_valid(launches["dur_ns"])), False))
            starts = _numpy(calls["ts_ns"])
            order = cls(Run.of(starts), Run.of(starts + _numpy(calls["dur_ns"])))
        if gpu is not None:
            activities = gpu["ts_ns"].filter(pc.fill_null(_timed(gpu), False))
            order = cls(order.launch_starts, order.launch_ends, Run.of(_numpy(activities)))
        return order

    @classmethod
    def of_events(cls, events: pa.Table) -> RecordOrder:
        """From events in file order, classified here by category (category, ph, ts_ns and
        dur_ns columns)."""
        categories = field_map("kineto")["categories"]
        launch = [c for c, spec in categories.items() if spec.get("launch")]
        gpu = [c for c, spec in categories.items() if spec["table"] == "gpu"]
        return cls.of(*(events.filter(pc.fill_null(pc.is_in(
            events["category"], pa.array(names, pa.string())), False)) for names in (launch, gpu)))

    def then(self, later: RecordOrder) -> RecordOrder:
        return RecordOrder(self.launch_starts.then(later.launch_starts),
                           self.launch_ends.then(later.launch_ends),
                           self.gpu_starts.then(later.gpu_starts))


@dataclass(frozen=True)
class RecordEnd:
    """How far the record of a truncated source reaches (see the module's table)."""

    order: RecordOrder
    first_lost_ns: int | None  # earliest launch call beyond every GPU activity read

    @classmethod
    def of(cls, order: RecordOrder, launch_correlation: Any, launch_ts: Any,
           gpu_correlation: Any) -> RecordEnd:
        """`order` of the file read; the correlation ids and starts of its launch calls and
        the correlation ids of its GPU activities (Arrow arrays)."""
        both = pc.and_(pc.is_valid(launch_correlation), pc.is_valid(launch_ts))
        correlation, ts = pc.filter(launch_correlation, both), pc.filter(launch_ts, both)
        last_gpu = pc.max(gpu_correlation).as_py()
        lost = ts if last_gpu is None else pc.filter(ts, pc.greater(correlation, last_gpu))
        return cls(order, pc.min(lost).as_py())

    def cut(self, start_ns: int, end_ns: int, window_end_ns: int, first: bool) -> str | None:
        """Why the iteration [start_ns, end_ns] (its window ending at window_end_ns; `first`:
        the source's earliest) is not recorded whole; None when it is."""
        launches, gpu = self.order.launch_ends, self.order.gpu_starts
        began = self.order.launch_starts.low
        if not (launches.ordered and gpu.ordered):
            return "records_out_of_order"
        if began is None or launches.high is None or end_ns > launches.high:
            return "launch_calls_cut"
        if start_ns < began and not (first and began <= end_ns):
            return "launch_calls_cut"
        if gpu.high is None or window_end_ns > gpu.high:
            return "gpu_activities_cut"
        if self.first_lost_ns is not None and end_ns >= self.first_lost_ns:
            return "gpu_activities_cut"
        return None


def window_ends(kernels: pa.Table) -> dict[int, int]:
    """The latest end of the GPU activities launched in each iteration (iteration, ts_ns
    and dur_ns columns; activities without an iteration or a time are left out)."""
    ok = pc.and_(pc.is_valid(kernels["iteration"]),
                 pc.fill_null(pc.greater_equal(kernels["dur_ns"], 0), False))
    timed = kernels.filter(pc.fill_null(ok, False))
    ends = pa.table({"iteration": timed["iteration"],
                     "end": pc.add(timed["ts_ns"], timed["dur_ns"])})
    grouped = ends.group_by("iteration").aggregate([("end", "max")])
    return dict(zip(grouped["iteration"].to_pylist(), grouped["end_max"].to_pylist()))


def merge_window_ends(into: dict[int, int], more: dict[int, int]) -> None:
    for iteration, end in more.items():
        into[iteration] = max(end, into.get(iteration, end))


def _timed(events: pa.Table) -> Any:
    return pc.and_(pc.equal(events["ph"], "X"), pc.is_valid(events["ts_ns"]))


def _numpy(column: Any) -> np.ndarray:
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    return np.asarray(column.to_numpy(zero_copy_only=False), dtype=np.int64)
