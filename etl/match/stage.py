"""The matching stage at ingest: every ncu export of a run against the run's trace kernels.

The rule itself lives in etl/match/align.py; this module only shapes the inputs (trace
kernels in launch order, made unique across the run's trace files) and the output rows.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa

TRACE_COLUMNS = ["source_id", "device_id", "stream_id", "name", "ts_ns", "dur_ns",
                 "correlation_id", "grid_x", "grid_y", "grid_z", "block_x", "block_y",
                 "block_z"]


@dataclass
class Preference:
    """Where an export goes among equivalent iterations (etl/match/placement.py)."""

    ncu_iteration: int | None = None                       # run.toml
    selection: Callable[[], dict[int, int | None]] = dict  # run_summary's, asked lazily
    notes: list[tuple[int, str]] = field(default_factory=list)  # (ncu_source_id, detail)


def match_run(kernels: pa.Table | None, host: pa.Table | None, ncu_kernels: pa.Table,
              preference: Preference | None = None) -> pa.Table:
    """kernel_match rows (without run_id) for one run; empty without traces or exports.
    Placements among equivalent iterations are noted in `preference.notes`."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from etl.core.schema import table_schema

    schema = table_schema("kernel_match").arrow()
    for column in ("run_id", "publish_id"):  # added by the loader
        schema = schema.remove(schema.get_field_index(column))
    if kernels is None or host is None or ncu_kernels.num_rows == 0:
        return schema.empty_table()
    trace = _trace_side(kernels.filter(pc.equal(kernels["kind"], "kernel")), host)
    preference = preference or Preference()
    parts = []
    for ncu_source_id in sorted(set(ncu_kernels["ncu_source_id"].to_pylist())):
        export = ncu_kernels.filter(pc.equal(ncu_kernels["ncu_source_id"], ncu_source_id))
        parts.append(_rows(trace, export, ncu_source_id, preference))
    return pa.concat_tables(parts).select(schema.names).cast(schema)


def _trace_side(kernels: pa.Table, host: pa.Table) -> pa.Table:
    """Trace kernels with a run-unique kernel_id (their row) and their launch's start."""
    import pyarrow as pa

    launches = host.select(["source_id", "event_id", "ts_ns"]).rename_columns(
        ["source_id", "launch_event_id", "launch_ts_ns"])
    joined = kernels.join(launches, ["source_id", "launch_event_id"], join_type="left outer")
    joined = joined.sort_by([("source_id", "ascending"), ("kernel_id", "ascending")])
    table = joined.select(TRACE_COLUMNS + ["iteration", "launch_ts_ns"])
    table = table.append_column("trace_kernel_id", joined["kernel_id"])
    return table.append_column("kernel_id", pa.array(range(table.num_rows), pa.int64()))


def _rows(trace: pa.Table, export: pa.Table, ncu_source_id: int, preference: Preference
          ) -> pa.Table:
    import pyarrow as pa

    from etl.match.align import match_kernels
    from etl.match.placement import describe, place

    ncu = export.rename_columns([{"device": "device", "stream_id": "stream"}.get(c, c)
                                 for c in export.column_names])
    result = match_kernels(trace, ncu)
    result, placement = place(trace, result, preference.ncu_iteration, preference.selection)
    if placement is not None:
        preference.notes.append((ncu_source_id, describe(placement, ncu_source_id)))
    order = result["kernel_id"].to_numpy()
    return pa.table({
        "source_id": trace["source_id"].take(order),
        "kernel_id": trace["trace_kernel_id"].take(order),
        "ncu_source_id": pa.array([ncu_source_id] * result.num_rows, pa.int32()),
        "ncu_id": result["ncu_id"], "match_status": result["match_status"],
        "reason": result["reason"], "score": result["score"],
    })
