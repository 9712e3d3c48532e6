"""The Nsight Compute part of a run: exports → ncu_kernels, ncu_metrics, ncu_levels.

Levels are computed here, at ingest, because which counters give a quantity is decided by
the metric catalog (data, per architecture); the SQL view reads the stored result.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from etl.runfolder import RunFolder, relative

if TYPE_CHECKING:
    import pyarrow as pa


@dataclass
class NcuPart:
    tables: dict[str, pa.Table]       # ncu_kernels, ncu_metrics, ncu_levels (no run_id yet)
    anomalies: pa.Table               # rows for the anomalies table (no run_id yet)
    sources: list[dict[str, Any]]     # runs.ncu_sources entries


def extract_ncu(run: RunFolder, devices: pa.Table | None, dims: dict[str, Any]) -> NcuPart:
    import pyarrow as pa

    from etl.extract.ncu_common import read_ncu

    exports = read_ncu(run.ncu) if run.ncu else []
    arch, sm_count = _hints(devices, dims)
    parts: dict[str, list[pa.Table]] = {"ncu_kernels": [], "ncu_metrics": [], "ncu_levels": []}
    anomalies, sources = [], []
    for ncu_source_id, export in enumerate(exports):
        levels = _levels(export, arch, sm_count)
        for name, table in (("ncu_kernels", export.kernels), ("ncu_metrics", export.metrics),
                            ("ncu_levels", levels)):
            parts[name].append(_with_source(table, ncu_source_id))
        anomalies.append(_anomalies(export.anomalies, ncu_source_id))
        sources.append({"ncu_source_id": ncu_source_id, "format": export.format,
                        "paths": [relative(run, p) for p in export.paths],
                        "kernels": export.kernels.num_rows,
                        "metrics": export.metrics.num_rows})
    tables = {name: pa.concat_tables(p) if p else _empty(name) for name, p in parts.items()}
    return NcuPart(tables, pa.concat_tables(anomalies) if anomalies else _anomalies([], 0),
                   sources)


def _levels(export: Any, arch: str | None, sm_count: int | None) -> pa.Table:
    from etl.ncu_catalog import kernel_levels

    return kernel_levels(export.metrics, export.kernels, arch, sm_count)


def _hints(devices: pa.Table | None, dims: dict[str, Any]) -> tuple[str | None, int | None]:
    """Architecture and SM count of the run's GPUs when the traces agree on one; run.toml's
    sm_count otherwise (an export's own values always win, in kernel_levels)."""
    from etl.ncu_catalog import arch_from_cc

    arch = sm = None
    if devices is not None and devices.num_rows:
        ccs = {c for c in devices["compute_capability"].to_pylist() if c}
        sms = {s for s in devices["sm_count"].to_pylist() if s}
        arch = arch_from_cc(ccs.pop()) if len(ccs) == 1 else None
        sm = sms.pop() if len(sms) == 1 else None
    if arch is None and dims.get("compute_capability"):
        arch = arch_from_cc(dims["compute_capability"])
    return arch, sm if sm is not None else dims.get("sm_count")


def _with_source(table: pa.Table, ncu_source_id: int) -> pa.Table:
    import pyarrow as pa

    return table.add_column(0, "ncu_source_id",
                            pa.array([ncu_source_id] * table.num_rows, pa.int32()))


def _empty(name: str) -> pa.Table:
    from etl.schema import table_schema

    schema = table_schema(name).arrow()
    for column in ("run_id", "publish_id"):  # added by the loader
        schema = schema.remove(schema.get_field_index(column))
    return schema.empty_table()


def _anomalies(rows: list[tuple[str, int | None, str]], ncu_source_id: int) -> pa.Table:
    import pyarrow as pa

    n = len(rows)
    return pa.table({
        "source_id": pa.nulls(n, pa.int32()),
        "kind": pa.array([r[0] for r in rows], pa.string()),
        "event_id": pa.nulls(n, pa.int64()),
        "detail": pa.array([r[2] for r in rows], pa.string()),
        "ncu_source_id": pa.array([ncu_source_id] * n, pa.int32()),
        "ncu_id": pa.array([r[1] for r in rows], pa.int64()),
    })
