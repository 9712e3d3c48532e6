"""Launch geometry written on the launch call, moved to the kernel it launched.

CUDA traces write a kernel's grid, block and shared memory on the kernel event; ROCm
traces (hipLaunchKernel, hipExtModuleLaunchKernel) write them on the launch call's args
instead, and the kernel event has none; for hipExtModuleLaunchKernel and
hipHccModuleLaunchKernel that "grid" counts threads (fields.toml [launch_geometry]).

A kernel without its own geometry takes its launch call's, column by column (the kernel's
own value wins where both have one). The launch calls that carry any are kept apart in
pass 1 (a file per slice; none for a CUDA trace unless Inductor's kernel ops write their
grid), and pass 3 holds them all (~64 bytes a launch call: 32 MB for a ROCm trace of
500 000 launches).
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from etl.extract.fields import field_map

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
    rows = base.select(["event_id", "name", *GEOMETRY]).take(pa.array(np.flatnonzero(carries)))
    return _in_blocks(rows).drop_columns(["name"])


def _in_blocks(rows: pa.Table) -> pa.Table:
    """The grid of the calls that write HIP's global work size (threads) in blocks:
    ceil(grid / block), where the block is known and positive."""
    import pyarrow as pa
    import pyarrow.compute as pc

    calls = field_map("kineto")["launch_geometry"]["global_work_size_calls"]
    threads = pc.is_in(rows["name"], pa.array(calls, pa.string()))
    if not pc.any(threads).as_py():
        return rows
    for axis in "xyz":
        grid, block = rows[f"grid_{axis}"], rows[f"block_{axis}"]
        known = pc.fill_null(pc.and_(threads, pc.greater(block, 0)), False)
        divisor = pc.if_else(known, block, pa.scalar(1, block.type))
        blocks = pc.divide(pc.add(grid, pc.subtract(divisor, 1)), divisor)  # integer ceil
        at = rows.schema.get_field_index(f"grid_{axis}")
        rows = rows.set_column(at, f"grid_{axis}",
                               pc.if_else(known, blocks.cast(grid.type), grid))
    return rows


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
