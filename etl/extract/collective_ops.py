"""Rows of collective_ops (schemas/collective_ops.toml) from what a format says of its
collectives: the columns a format lacks are NULL, never guessed."""
from __future__ import annotations

import pyarrow as pa

# collective_ops' columns after source_id and rank, with their types
COLUMNS = {"event_id": pa.int64(), "ts_ns": pa.int64(), "dur_ns": pa.int64(),
           "collective_name": pa.string(), "dtype": pa.string(),
           "in_msg_nelems": pa.int64(), "out_msg_nelems": pa.int64(),
           "in_split_size": pa.string(), "out_split_size": pa.string(),
           "group_size": pa.int64(), "process_group_name": pa.string(),
           "process_group_desc": pa.string(), "process_group_ranks": pa.string(),
           "comm_rank": pa.int64(), "seq": pa.int64(), "comms_id": pa.string(),
           "global_rank_start": pa.int64(), "global_rank_stride": pa.int64(),
           "src_rank": pa.int64(), "dst_rank": pa.int64()}


def collective_ops(source_id: int, rank: int | None, rows: pa.Table) -> pa.Table:
    """collective_ops rows of one source: `rows` holds any of COLUMNS by name."""
    n = rows.num_rows

    def column(name: str, kind: pa.DataType) -> pa.Array | pa.ChunkedArray:
        return rows[name].cast(kind) if name in rows.column_names else pa.nulls(n, kind)

    return pa.table({"source_id": pa.repeat(pa.scalar(source_id, pa.int32()), n),
                     "rank": pa.repeat(pa.scalar(rank, pa.int32()), n),
                     **{name: column(name, kind) for name, kind in COLUMNS.items()}})
