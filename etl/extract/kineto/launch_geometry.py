"""Launch geometry written on the launch call, moved to the kernel it launched.

CUDA traces write a kernel's grid, block and shared memory on the kernel event; ROCm
traces (hipLaunchKernel, hipExtModuleLaunchKernel) write them on the launch call's args
instead, and the kernel event has none. A kernel without its own geometry takes its launch
call's, column by column (the kernel's own value wins where both have one); the launch
calls that carry any are kept apart in pass 1 (a file per slice, none for CUDA traces).
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pyarrow as pa

GEOMETRY = ["grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z",
            "shared_memory_bytes"]
FILE_GLOB = "lgeo-*.parquet"


def of_host_rows(base: pa.Table, is_host: np.ndarray) -> pa.Table | None:
    """event_id and GEOMETRY of the host rows of `base` that carry any; None: no row."""
    import pyarrow as pa
    import pyarrow.compute as pc

    carries = np.zeros(base.num_rows, dtype=bool)
    for column in GEOMETRY:
        if base[column].null_count < base.num_rows:
            carries |= np.asarray(pc.is_valid(base[column]).to_numpy(zero_copy_only=False))
    carries &= is_host
    if not carries.any():
        return None
    return base.select(["event_id", *GEOMETRY]).take(pa.array(np.flatnonzero(carries)))


def spill(geometry: pa.Table | None, folder: Path, index: int) -> None:
    import pyarrow.parquet as pq

    if geometry is not None:
        pq.write_table(geometry, folder / f"lgeo-{index:06d}.parquet")


def read_spilled(folder: Path) -> pa.Table | None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    tables = [pq.read_table(f) for f in sorted(folder.glob(FILE_GLOB))]
    return pa.concat_tables(tables).sort_by("event_id") if tables else None


def filled(kernels: pa.Table, geometry: pa.Table | None) -> pa.Table:
    """`kernels` (with launch_event_id) with each NULL GEOMETRY value taken from the launch
    call's, where `geometry` (sorted by event_id) has that call."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if geometry is None or geometry.num_rows == 0:
        return kernels
    ids = np.asarray(geometry["event_id"].to_numpy(), dtype=np.int64)
    launch = kernels["launch_event_id"]
    wanted = np.asarray(pc.fill_null(launch, -1).to_numpy(), dtype=np.int64)
    at = np.minimum(np.searchsorted(ids, wanted), len(ids) - 1)
    found = (ids[at] == wanted) & (wanted >= 0)
    if not found.any():
        return kernels
    rows = pa.array(at, pa.int64(), mask=~found)
    for column in GEOMETRY:
        where = kernels.schema.get_field_index(column)
        own = kernels[column]
        kernels = kernels.set_column(where, column, pc.coalesce(
            own, geometry[column].take(rows).cast(own.type)))
    return kernels
