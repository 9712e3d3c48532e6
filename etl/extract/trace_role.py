"""What every reader of the trace role is handed: the run's sinks and its options.

A trace reader (registry role "trace") is called once per file as
`reader(path, source_id, gpu_override, spill, sinks, options)` and streams its rows into
`sinks`; the options carry the command's choices (salvage, processes, DuckDB threads) and
the tuning of the streaming readers.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import pyarrow as pa

SLICE_BYTES = 16 << 20        # JSON decoded at once by a streaming reader
CHUNK_ROWS = 1 << 16          # host rows linked at once (~300 bytes each with their names)
Writer = Callable[["pa.Table"], None]


@dataclass
class Sinks:
    """Where finished rows go (the run's table writers)."""

    host_events: Writer
    kernels: Writer
    anomalies: Writer
    end_of_host_events: Callable[[], None] = lambda: None  # lets buffers be written out
    # rows of any other table of the run (memory events, GPU metric samples, ...), by name
    table: Callable[[str, pa.Table], None] = lambda name, _rows: _no_table(name)


def _no_table(name: str) -> None:
    raise ValueError(f"no sink for table {name!r}")


@dataclass
class PipelineOptions:
    salvage: bool = False         # keep the complete events of a truncated file
    workers: int = 1              # slice-decoding processes (1: decode here)
    slice_bytes: int = SLICE_BYTES
    chunk_rows: int = CHUNK_ROWS
    threads: int = 2              # DuckDB threads
    step_pattern: str | None = None   # run.toml step_pattern: a regex, group 1 the step


class ReadInfo(Protocol):
    """What the ingest needs to know of how a source was read."""

    event_count: int          # events (records) read from the file
    truncated: bool           # the file ended early and what was complete was kept


@dataclass
class SourceInfo:
    """A ReadInfo for readers that keep nothing more about the read."""

    event_count: int
    truncated: bool = False


# Times from 2000-01-01 to 2100-01-01 UTC, in ns since 1970: a trace time in this range is
# read as the wall clock. Any other clock in use (a monotonic clock, ns since a session or
# a base time) is decades short of it: uptime would have to exceed 30 years.
WALL_CLOCK_NS = (946_684_800 * 10**9, 4_102_444_800 * 10**9)


def on_wall_clock(ns: int) -> bool:
    return WALL_CLOCK_NS[0] <= ns < WALL_CLOCK_NS[1]


@dataclass(frozen=True)
class TraceClock:
    """How a trace source's times map to the wall clock: UTC ns since 1970 = the source's
    ns (iterations.start_ns, kernels.ts_ns, ...) + utc_offset_ns (iterations.clock)."""

    kind: str                     # base_time, epoch, or unmapped
    utc_offset_ns: int | None     # None: unmapped
    reason: str | None = None     # why unmapped; None when mapped

    @staticmethod
    def unmapped(reason: str) -> TraceClock:
        return TraceClock("unmapped", None, reason)


def clock_of_times(first_ns: int | None, what: str) -> TraceClock:
    """The clock of a source whose reader states none: its times are taken as the wall
    clock when its first time is (on_wall_clock), else the clock is unmapped."""
    if first_ns is None:
        return TraceClock.unmapped(f"{what}: no iteration with a time")
    if on_wall_clock(first_ns):
        return TraceClock("epoch", 0)
    return TraceClock.unmapped(f"{what}: times start at {first_ns} ns, not ns since 1970 "
                               "(2000 to 2100), and the reader states no other clock")


# The one anomaly kind of a trace source with no GPU activity, whatever its format
# (schemas/anomalies.toml): its detail says what the source holds instead and why.
NO_GPU_ACTIVITY = "no_gpu_activity"
NO_GPU_ACTIVITY_NOTE = "no GPU activity"


def no_gpu_activity(cause: str) -> tuple[str, None, str]:
    """The anomaly (kind, event_id, detail) of a trace source without one GPU activity
    (kernel, copy or fill): `cause` says what the source holds instead."""
    return (NO_GPU_ACTIVITY, None, f"no GPU activity (kernel, copy or fill) in this source: "
            f"{cause}; it holds no GPU time, so no GPU utilization is computed for it")


def no_gpu_activity_remark(cause: str) -> tuple[str, str]:
    """What the ingest's output says of such a source: its summary note and warning."""
    return (NO_GPU_ACTIVITY_NOTE, f"{NO_GPU_ACTIVITY_NOTE}: {cause}; no GPU utilization for "
            f"this trace (anomaly {NO_GPU_ACTIVITY})")


@dataclass
class TraceResult:
    """What every trace reader returns for its file; its rows went to the sinks."""

    info: ReadInfo
    iterations: Any                 # pa.Table: the source's iterations
    devices: Any                    # pa.Table: the source's devices
    rank: int | None = None
    gpu_names: list[str] = field(default_factory=list)
    kernels: int = 0
    anomalies: int = 0
    # what the ingest's output says about the source: (a short note for its summary
    # table, a one-line warning)
    remarks: list[tuple[str, str]] = field(default_factory=list)
    # how its times map to UTC; None: the reader does not say (ingest: clock_of_times)
    clock: TraceClock | None = None


# Columns only some trace formats fill (kineto_json's operator and kernel args, autograd
# records and passes); a reader
# that has no such values leaves them out and the ingest adds them as NULL, so each reader
# names only what its format says (schemas/ says, per format, which fill them).
OPTIONAL_COLUMNS = {
    "host_events": ("input_dims", "input_types", "flops", "call_stack", "module_hierarchy",
                    "sequence_number", "fwd_thread_id", "pass"),
    "kernels": ("est_achieved_occupancy_share", "blocks_per_sm", "warps_per_sm"),
}


def with_optional_columns(table: pa.Table, name: str) -> pa.Table:
    """`table` (rows of table `name`) with its missing OPTIONAL_COLUMNS as NULL."""
    import pyarrow as pa

    from etl.core.schema import table_schema

    schema = table_schema(name).arrow()
    for column in OPTIONAL_COLUMNS.get(name, ()):
        if column not in table.column_names:
            kind = schema.field(column).type
            table = table.append_column(pa.field(column, kind), pa.nulls(table.num_rows, kind))
    return table
