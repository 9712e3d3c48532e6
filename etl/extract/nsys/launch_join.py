"""Pass 3a of the nsys reader: each join partition's GPU rows with their launch.

A GPU activity's launch is the first call (lowest event id) with its correlation id; pass 1
kept every call that has one in the partition of its id (parts/<k>/call.arrow), beside the
GPU rows (gpu.arrow). Nothing here needs pass 2 (the links and layers of the host rows), so
a second process joins the partitions while the host rows are linked: the joined rows
(joined.arrow, in event order) get their layer and iteration in pass 3b (passes.join_gpu).
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from etl.extract.kineto import kernel_join

if TYPE_CHECKING:
    import pyarrow as pa

CALL_PART, JOINED_PART = "call.arrow", "joined.arrow"   # in parts/<k>/, beside gpu.arrow
CALL_COLUMNS = ["event_id", "correlation_id", "ts_ns"]


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
    call of their correlation id): kernel_join's join, whose later launches of an id are
    not reported here (as before streaming)."""
    import pyarrow as pa

    if calls is None:
        calls = pa.schema([(c, pa.int64()) for c in CALL_COLUMNS]).empty_table()
    first, _ = kernel_join.first_of_each_id(calls.select(CALL_COLUMNS))
    return kernel_join.with_launch_columns(gpu, first.rename_columns(
        ["launch_event_id", "correlation_id", "launch_ts_ns"]))


def write_ipc(path: Path, table: pa.Table) -> None:
    import pyarrow as pa

    with pa.ipc.new_file(str(path), table.schema) as writer:
        writer.write_table(table)
