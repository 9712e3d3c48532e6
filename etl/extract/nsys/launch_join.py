"""Pass 3a of the nsys reader: each join partition's GPU rows with their launch.

A GPU activity's launch is the first call (lowest event id) with its correlation id in its
own process; pass 1 kept every call that has one in the partition of its id
(parts/<k>/call.arrow), beside the GPU rows (gpu.arrow). CUPTI numbers correlations per
process, so an export of several processes (`nsys profile torchrun ...`) repeats every id
once a process: both sides then carry a `process` column and are joined by the pair.
Nothing here needs pass 2 (the links and layers of the host rows), so a second process
joins the partitions while the host rows are linked: the joined rows (joined.arrow, in
event order) get their layer and iteration in pass 3b (passes.join_gpu).
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from etl.extract.kineto import kernel_join

if TYPE_CHECKING:
    import pyarrow as pa

CALL_PART, JOINED_PART = "call.arrow", "joined.arrow"   # in parts/<k>/, beside gpu.arrow
CALL_COLUMNS = ["event_id", "correlation_id", "ts_ns"]
PROCESS = "process"   # the pid, in both sides' partitions when the export names processes


def join_launches(parts: Path, count: int, gpu_file: str) -> None:
    """Write parts/<k>/joined.arrow for each of the `count` partitions with GPU rows."""
    for k in range(count):
        folder = parts / str(k)
        gpu = kernel_join.read_ipc(folder / gpu_file)
        if gpu is None or gpu.num_rows == 0:
            continue
        joined = with_launch(gpu, kernel_join.read_ipc(folder / CALL_PART))
        write_ipc(folder / JOINED_PART, joined)


def with_launch(gpu: pa.Table, calls: pa.Table | None) -> pa.Table:
    """GPU rows, in their order, with launch_event_id and launch_ts_ns (NULL without a
    call of their correlation id in their process): kernel_join's join, whose later
    launches of an id are not reported here (as before streaming)."""
    import pyarrow as pa

    if calls is None:
        calls = pa.schema([(c, pa.int64()) for c in CALL_COLUMNS]).empty_table()
    keyed, calls = linked_by_process(gpu, calls)
    first, _ = kernel_join.first_of_each_id(calls.select(CALL_COLUMNS))
    joined = kernel_join.with_launch_columns(keyed, first.rename_columns(
        ["launch_event_id", "correlation_id", "launch_ts_ns"]))
    at = joined.schema.get_field_index("correlation_id")
    return joined.set_column(at, "correlation_id", gpu["correlation_id"])


def linked_by_process(gpu: pa.Table, calls: pa.Table) -> tuple[pa.Table, pa.Table]:
    """Both sides with correlation_id made the join's key and without the process column:
    pid * 2^32 + id when both name processes (CUPTI's ids are 32-bit), else the id."""
    if PROCESS in gpu.column_names and PROCESS in calls.column_names:
        return _process_key(gpu), _process_key(calls)
    return _without_process(gpu), _without_process(calls)


def _process_key(table: pa.Table) -> pa.Table:
    import pyarrow as pa
    import pyarrow.compute as pc

    key = pc.add(pc.multiply(table[PROCESS].cast(pa.int64()), 1 << 32),
                 table["correlation_id"])
    at = table.schema.get_field_index("correlation_id")
    return _without_process(table.set_column(at, "correlation_id", key))


def _without_process(table: pa.Table) -> pa.Table:
    if PROCESS in table.column_names:
        return table.drop_columns([PROCESS])
    return table


def write_ipc(path: Path, table: pa.Table) -> None:
    import pyarrow as pa

    with pa.ipc.new_file(str(path), table.schema) as writer:
        writer.write_table(table)
