"""What the forecast reads of a run beyond its graph: each GPU activity's launch geometry,
and the operator whose shapes cost it.

The costing op of a kernel is the innermost host event enclosing its launch call (the
launch's parent_event_id, then that event's parent, ...) whose FLOPs or bytes the shape
formulas give (etl/core/op_cost.py): aten::mm inside aten::matmul inside aten::linear
costs its GEMM kernel, aten::mm inside an autograd MmBackward0 a backward one. An op that
launched several kernels (a GEMM and its split-K reduction) costs each of them with its
whole shape: the time model reads the op's arithmetic intensity, which the kernels share.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from etl.core.op_cost import OpCost, op_cost
from etl.replay.inputs import NONE, Columns
from etl.replay.inputs import query_columns as _columns

if TYPE_CHECKING:
    import duckdb

MAX_DEPTH = 64  # nesting levels looked up from a launch call

LAUNCH_SQL = """
SELECT source_id, kernel_id,
       grid_x * coalesce(grid_y, 1) * coalesce(grid_z, 1) AS blocks,
       block_x * coalesce(block_y, 1) * coalesce(block_z, 1) AS threads,
       registers_per_thread AS registers, shared_memory_bytes AS smem, bytes, memory_kind
FROM kernels
WHERE run_id = $run AND kind IN ('kernel', 'memcpy', 'memset') AND ts_ns IS NOT NULL
  AND dur_ns >= 0 AND device_id IS NOT NULL AND stream_id IS NOT NULL
ORDER BY source_id, kernel_id
"""
# an op's signature: its rank among the distinct (name, shapes, types) of the run's ops
# with shapes, the same in both queries
PARENTS_SQL = """
WITH signed AS (
    SELECT source_id, event_id,
           dense_rank() OVER (ORDER BY name, input_dims, input_types) AS signature
    FROM host_events
    WHERE run_id = $run AND input_dims IS NOT NULL
)
SELECT h.source_id, h.event_id, coalesce(h.parent_event_id, -1) AS parent, s.signature
FROM host_events AS h
LEFT JOIN signed AS s ON s.source_id = h.source_id AND s.event_id = h.event_id
WHERE h.run_id = $run
"""
SIGNATURES_SQL = """
SELECT DISTINCT dense_rank() OVER (ORDER BY name, input_dims, input_types) AS signature,
       name, input_dims, input_types
FROM host_events
WHERE run_id = $run AND input_dims IS NOT NULL
"""


@dataclass
class ActivityInputs:
    """Per GPU activity of the graph (the order of graph.events.gpu)."""

    blocks: np.ndarray        # grid blocks; NONE where not reported
    threads: np.ndarray       # threads per block; NONE where not reported
    registers: np.ndarray     # registers per thread; NONE where not reported
    smem: np.ndarray          # shared memory per block, bytes; NONE where not reported
    bytes: np.ndarray         # bytes of a copy or set; NONE otherwise
    memory_kind: np.ndarray   # HtoD, DtoH, DtoD, PtoP, memset, unknown or None
    cost: list[OpCost | None]  # the costing op's cost; None: no op with shapes encloses it
    cost_event: np.ndarray    # host_events.event_id of the costing op; NONE where none


def read(con: duckdb.DuckDBPyConnection, run_id: str, gpu: Columns) -> ActivityInputs:
    """The inputs of every activity in `gpu` (graph.events.gpu of the same run)."""
    params = {"run": run_id}
    launch = _columns(con, LAUNCH_SQL, params)
    at = _align(launch, gpu)
    cost_event, cost = costs(con, params, gpu)

    def pick(name: str) -> np.ndarray:
        out = np.full(len(gpu), NONE, np.int64)
        found = at >= 0
        out[found] = launch[name][at[found]]
        return out

    kinds = np.full(len(gpu), None, object)
    kinds[at >= 0] = launch["memory_kind"][at[at >= 0]]
    return ActivityInputs(pick("blocks"), pick("threads"), pick("registers"), pick("smem"),
                          pick("bytes"), kinds, cost, cost_event)


def _align(launch: Columns, gpu: Columns) -> np.ndarray:
    """Row of `launch` per activity of `gpu`, by (source_id, kernel_id); -1 when absent."""
    if not len(gpu) or not len(launch):
        return np.full(len(gpu), -1, np.int64)
    keys = (launch["source_id"] << 48) + launch["kernel_id"]
    wanted = (gpu["source_id"] << 48) + gpu["kernel_id"]
    order = np.argsort(keys, kind="stable")
    at = np.minimum(np.searchsorted(keys[order], wanted), len(keys) - 1)
    hit = keys[order][at] == wanted
    return np.where(hit, order[at], -1)


def costs(con: duckdb.DuckDBPyConnection, params: dict[str, str], gpu: Columns
          ) -> tuple[np.ndarray, list[OpCost | None]]:
    """Per activity of `gpu` (source_id, launch_event_id): the costing op's event id and
    its cost (see the module docstring); NONE and None where no op with shapes has one."""
    signatures = con.execute(SIGNATURES_SQL, params).fetchall()
    costs = {int(s): op_cost(name, dims, types) for s, name, dims, types in signatures}
    known = {s for s, c in costs.items() if c.flops is not None or c.bytes is not None}
    found_event = np.full(len(gpu), NONE, np.int64)
    found: list[OpCost | None] = [None] * len(gpu)
    if not known or not len(gpu):
        return found_event, found
    events = _columns(con, PARENTS_SQL, params)
    for source in np.unique(gpu["source_id"]).tolist():
        mine = np.flatnonzero(gpu["source_id"] == source)
        rows = np.flatnonzero(events["source_id"] == source)
        event_ids, hit_sig = _walk(events, rows, gpu["launch_event_id"][mine], known)
        for k, event_id, sig in zip(mine.tolist(), event_ids.tolist(), hit_sig.tolist()):
            if event_id != NONE:
                found_event[k], found[k] = event_id, costs[sig]
    return found_event, found


def _walk(events: Columns, rows: np.ndarray, launches: np.ndarray, known: set[int]
          ) -> tuple[np.ndarray, np.ndarray]:
    """Per launch call, the event id and signature of the innermost enclosing costed op."""
    size = int(events["event_id"][rows].max()) + 1 if len(rows) else 1
    parent = np.full(size, -1, np.int64)
    signature = np.full(size, -1, np.int64)
    ids = events["event_id"][rows]
    parent[ids] = events["parent"][rows]
    sig = events["signature"][rows]
    costed = np.isin(sig, np.fromiter(known, np.int64)) & (sig != NONE)
    signature[ids[costed]] = sig[costed]
    valid = (launches != NONE) & (launches >= 0) & (launches < size)
    current = np.where(valid, parent[np.where(valid, launches, 0)], -1)
    result = np.full(len(launches), NONE, np.int64)
    hit_sig = np.full(len(launches), -1, np.int64)
    for _ in range(MAX_DEPTH):
        alive = current >= 0
        if not alive.any():
            break
        here = np.where(alive, signature[np.maximum(current, 0)], -1)
        done = alive & (here >= 0)
        result[done], hit_sig[done] = current[done], here[done]
        current = np.where(done | ~alive, -1, parent[np.maximum(current, 0)])
    return result, hit_sig
