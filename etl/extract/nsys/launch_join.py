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

import numpy as np

if TYPE_CHECKING:
    import pyarrow as pa

CALL_PART, JOINED_PART = "call.arrow", "joined.arrow"   # in parts/<k>/, beside gpu.arrow


def join_launches(parts: Path, count: int, gpu_file: str) -> None:
    """Write parts/<k>/joined.arrow for each of the `count` partitions with GPU rows."""
    for k in range(count):
        folder = parts / str(k)
        gpu = read_ipc(folder / gpu_file)
        if gpu is None or gpu.num_rows == 0:
            continue
        joined = with_launch(gpu, read_ipc(folder / CALL_PART))
        write_ipc(folder / JOINED_PART, joined)


def with_launch(gpu: pa.Table, calls: pa.Table | None) -> pa.Table:
    """GPU rows, in their order, with launch_event_id and launch_ts_ns (NULL without a
    call of their correlation id): a binary search among the first calls by id."""
    import pyarrow as pa
    import pyarrow.compute as pc

    ids, event, start = _first_calls(calls)
    wanted = np.asarray(pc.fill_null(gpu["correlation_id"], 0).to_numpy(), np.int64)
    found = np.asarray(pc.is_valid(gpu["correlation_id"]).to_numpy(zero_copy_only=False),
                       bool)
    at = np.minimum(np.searchsorted(ids, wanted), max(len(ids) - 1, 0))
    found &= (ids[at] == wanted) if len(ids) else False
    return (gpu.append_column("launch_event_id", pa.array(
                np.where(found, event[at] if len(ids) else 0, 0), pa.int64(), mask=~found))
            .append_column("launch_ts_ns", pa.array(
                np.where(found, start[at] if len(ids) else 0, 0), pa.int64(), mask=~found)))


def _first_calls(calls: pa.Table | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Correlation ids (sorted, unique) with the event id and start of their first call."""
    if calls is None or calls.num_rows == 0:
        empty = np.zeros(0, np.int64)
        return empty, empty, empty
    corr, event, start = (np.asarray(calls[c].to_numpy(), np.int64)
                          for c in ("correlation_id", "event_id", "ts_ns"))
    if not _in_order(corr, event):  # calls of one thread come in id order
        order = np.lexsort((event, corr))
        corr, event, start = corr[order], event[order], start[order]
    first = np.r_[True, corr[1:] != corr[:-1]]
    return corr[first], event[first], start[first]


def _in_order(corr: np.ndarray, event: np.ndarray) -> bool:
    later = corr[1:] > corr[:-1]
    tie = (corr[1:] == corr[:-1]) & (event[1:] > event[:-1])
    return bool((later | tie).all())


def read_ipc(path: Path) -> pa.Table | None:
    """An Arrow IPC file of the spill, memory-mapped (None when absent: no rows)."""
    import pyarrow as pa

    if not path.exists():
        return None
    with pa.memory_map(str(path)) as source:
        return pa.ipc.open_file(source).read_all()


def write_ipc(path: Path, table: pa.Table) -> None:
    import pyarrow as pa

    with pa.ipc.new_file(str(path), table.schema) as writer:
        writer.write_table(table)
