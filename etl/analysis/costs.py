"""Each kernel's FLOPs and bytes, computed when asked and kept: the derived table
kernel_costs (schemas/kernel_costs.toml), which the rooflines and op_flops / mfu read.

Shapes: the innermost op enclosing the kernel's launch with a FLOP/byte formula
(etl/analysis/forecast/inputs.py finds it, etl/core/op_cost.py costs it); an op that
launched several kernels shares its FLOPs and bytes among them in proportion to their
durations (each then runs at the op's rate). Counters: a kernel matched to an Nsight
Compute result with FLOP and DRAM counters (etl/analysis/forecast/ncu.py) takes those
instead. Like the critical path, it is not written at ingest: `etl costs`, and `etl
query` or `etl report` when they read a view that needs it, compute it per run publish.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from etl.analysis.forecast import inputs as activity_inputs
from etl.analysis.forecast import ncu
from etl.replay.inputs import NONE, query_columns

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

    from etl.warehouse.store import Warehouse

TABLE = "kernel_costs"
# the views that read kernel_costs (a query naming one computes it first)
READERS = re.compile(r"(?i)\b(kernel_roofline|op_roofline|op_flops|mfu|kernel_costs)")
KERNELS_SQL = """
SELECT source_id, kernel_id, launch_event_id, dur_ns
FROM kernels
WHERE run_id = $run AND kind = 'kernel' AND dur_ns >= 0
ORDER BY source_id, kernel_id
"""


@dataclass
class Computed:
    runs: list[str] = field(default_factory=list)   # computed now
    kept: list[str] = field(default_factory=list)   # computed before


def ensure(warehouse: Warehouse, run_names: list[str] | None = None) -> Computed:
    """Compute and keep kernel_costs of each current run (those named) lacking it."""
    from etl.views.database import ensure_views
    from etl.views.query import open_snapshot

    ensure_views(warehouse)
    con = open_snapshot(warehouse)
    try:
        done = Computed()
        for name, run_id, publish_id in con.execute(
                "SELECT run_name, run_id, publish_id FROM runs ORDER BY run_name").fetchall():
            if run_names is not None and name not in run_names:
                continue
            if warehouse.derived_file(TABLE, publish_id).exists():
                done.kept.append(name)
                continue
            warehouse.write_derived(TABLE, publish_id, _stamped(costs(con, run_id), run_id,
                                                                publish_id))
            done.runs.append(name)
        return done
    finally:
        con.close()


def costs(con: duckdb.DuckDBPyConnection, run_id: str) -> pa.Table:
    """The run's kernel_costs rows (without run_id, publish_id)."""
    kernels = query_columns(con, KERNELS_SQL, {"run": run_id})
    event, cost = activity_inputs.costs(con, {"run": run_id}, kernels)
    shaped = _sources_with_shapes(con, run_id)
    by_kernel = {(int(s), int(k)): _uncosted(int(s), int(k), int(s) in shaped)
                 for s, k in zip(kernels["source_id"].tolist(), kernels["kernel_id"].tolist())}
    for row in _shape_rows(kernels, event, cost) + ncu.kernel_counts(con, run_id, kernels):
        by_kernel[(row["source_id"], row["kernel_id"])] = row
    return _table([by_kernel[k] for k in sorted(by_kernel)])


def _sources_with_shapes(con: duckdb.DuckDBPyConnection, run_id: str) -> set[int]:
    return {int(s) for (s,) in con.execute(
        "SELECT DISTINCT source_id FROM host_events WHERE run_id = ? AND input_dims IS NOT "
        "NULL", [run_id]).fetchall()}


def _uncosted(source: int, kernel: int, shaped: bool) -> dict[str, Any]:
    reason = ("no op enclosing the launch has input shapes with a FLOP/byte formula"
              if shaped else "the trace has no input shapes (profile with record_shapes=True)")
    return {"source_id": source, "kernel_id": kernel, "cost_reason": reason}


def _shape_rows(kernels: Any, event: np.ndarray, cost: list[Any]) -> list[dict[str, Any]]:
    has = np.flatnonzero(event != NONE)
    if not len(has):
        return []
    keys = (kernels["source_id"][has] << 48) + event[has]
    duration = kernels["dur_ns"][has].astype(np.float64)
    _, group, count = np.unique(keys, return_inverse=True, return_counts=True)
    total = np.bincount(group, weights=duration)
    share = np.where(total[group] > 0, duration / np.maximum(total[group], 1),
                     1.0 / count[group])
    out = []
    for k, part, n in zip(has.tolist(), share.tolist(), count[group].tolist()):
        c = cost[k]
        out.append({"source_id": int(kernels["source_id"][k]),
                    "kernel_id": int(kernels["kernel_id"][k]), "cost_event_id": int(event[k]),
                    "op_family": c.family, "precision": c.precision, "matrix": c.matrix,
                    "flops": None if c.flops is None else c.flops * part,
                    "bytes": None if c.bytes is None else c.bytes * part,
                    "op_kernel_count": n, "cost_source": "shape" if c.flops is not None else None,
                    "cost_note": c.note, "cost_reason": c.reason})
    return out


def _table(rows: list[dict[str, Any]]) -> pa.Table:
    import pyarrow as pa

    from etl.core.schema import table_schema

    schema = table_schema(TABLE).arrow()
    fields = [f for f in schema if f.name not in ("run_id", "publish_id")]
    return pa.table({f.name: pa.array([r.get(f.name) for r in rows], f.type) for f in fields},
                    schema=pa.schema(fields))


def _stamped(rows: pa.Table, run_id: str, publish_id: str) -> pa.Table:
    import pyarrow as pa

    n = rows.num_rows
    return rows.append_column("run_id", pa.repeat(pa.scalar(run_id), n)).append_column(
        "publish_id", pa.repeat(pa.scalar(publish_id), n))
