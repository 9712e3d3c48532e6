"""NCCL's own NVTX ranges → collective_ops rows (name only).

NCCL (2.8.3 and later) pushes an NVTX range named after each API call it runs, in its
"NCCL" domain: ncclAllReduce, ncclAllGather, ncclReduceScatter, ncclBroadcast, ncclReduce,
ncclSend, ncclRecv, ncclAllToAll, ncclGather, ncclScatter (NVIDIA/nccl src/include/nvtx.h,
the call's __func__). The call launches the collective's kernel from inside the range, so
the view collectives pairs it with its kernel as it pairs c10d's record_param_comms. Since
2.16.2 the range carries a payload with the message size; how nsys exports such payloads
is not documented and no export in reach has one, so the size stays NULL here (the
kernel's name and the view's pairing still say what ran and who waited)."""
from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from etl.extract.collective_ops import collective_ops
from etl.extract.trace_role import Writer

# NCCL's API name after "nccl" → collective_ops.collective_name as PyTorch spells it
CALLS = {"AllReduce": "allreduce", "AllGather": "all_gather", "ReduceScatter": "reduce_scatter",
         "Broadcast": "broadcast", "Reduce": "reduce", "Send": "send", "Recv": "recv",
         "AllToAll": "all_to_all", "AlltoAll": "all_to_all", "Gather": "gather",
         "Scatter": "scatter"}
PATTERN = "^nccl(" + "|".join(CALLS) + ")$"


class NcclRanges:
    """A host_events writer that passes every chunk on and keeps NCCL's ranges."""

    def __init__(self, writer: Writer) -> None:
        self.writer = writer
        self.kept: list[pa.Table] = []

    def __call__(self, chunk: pa.Table) -> None:
        mask = pc.and_(pc.equal(chunk["category"], "nvtx"),
                       pc.match_substring_regex(chunk["name"], PATTERN))
        found = chunk.filter(pc.fill_null(mask, False))
        if found.num_rows:
            self.kept.append(found.select(["event_id", "ts_ns", "dur_ns", "name"]))
        self.writer(chunk)

    def table(self, source_id: int) -> pa.Table | None:
        """The ranges kept, as collective_ops rows; None when there were none."""
        if not self.kept:
            return None
        rows = pa.concat_tables(self.kept)
        names = [CALLS[n.removeprefix("nccl")] for n in rows["name"].to_pylist()]
        rows = rows.drop_columns(["name"]).append_column(
            "collective_name", pa.array(names, pa.string()))
        return collective_ops(source_id, None, rows)
