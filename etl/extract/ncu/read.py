"""The Nsight Compute part of a run: exports → ncu_kernels, ncu_metrics, ncu_levels,
ncu_rules.

This is the reader every ncu format registers (etl/extract/ncu/__init__.py): it is called
once with all the run's ncu files, because one-metric-per-file exports of one session
merge into one export. Levels are computed here, at ingest, because which counters give a
quantity is decided by the metric catalog (data, per architecture); the SQL view reads the
stored result.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from etl.core.errors import InputError
from etl.extract.ncu import looks_like_ncu
from etl.extract.ncu.export import NcuExport, merge_split_exports
from etl.extract.rawio import read_head
from etl.extract.registry import NotThisFormat

if TYPE_CHECKING:
    import pyarrow as pa


TABLES = ("ncu_kernels", "ncu_metrics", "ncu_levels", "ncu_rules")


@dataclass
class NcuPart:
    tables: dict[str, pa.Table]       # TABLES (no run_id yet)
    anomalies: pa.Table               # rows for the anomalies table (no run_id yet)
    sources: list[dict[str, Any]]     # one per file: path, format, rows, ncu_source_id
    refused: list[InputError] = field(default_factory=list)  # files that cannot be read
    skipped: list[tuple[Path, str]] = field(default_factory=list)  # not exports after all


def read_ncu(paths: list[Path]) -> list[NcuExport]:
    """Read the ncu files of ONE run folder; one-metric-per-file details exports of one
    session (same IDs, kernel names and process name, disjoint metrics) become one export.
    The first file that cannot be read raises its InputError."""
    read = read_each(paths)
    if read.refused:
        raise read.refused[0]
    if read.skipped:
        raise NotThisFormat(read.skipped[0][1])
    return read.exports


@dataclass
class Read:
    exports: list[NcuExport]
    refused: list[InputError]          # files that cannot be read, with their error
    skipped: list[tuple[Path, str]]    # files that are no export after all (ncu's logs)


def read_each(paths: list[Path]) -> Read:
    """Like read_ncu, but a file that cannot be read is set aside with its error and the
    others are read: one broken export does not hide the rest of the run."""
    read = Read([], [], [])
    for path in sorted(paths):
        try:
            read.exports.append(_read_one(path))
        except InputError as exc:
            read.refused.append(exc)
        except NotThisFormat as exc:
            read.skipped.append((path, str(exc)))
    read.exports = merge_split_exports(read.exports)
    return read


def _read_one(path: Path) -> NcuExport:
    from etl.extract.ncu import decode_csv, decode_rep

    kind = looks_like_ncu(read_head(path))
    if kind == "ncu_console":
        raise decode_csv.console_output(path)
    if kind == "ncu_summary_csv":
        raise InputError(path, "ncu --print-summary output: each metric's minimum, maximum "
                         "and average over a kernel's launches, with no launch ID to match",
                         None, "export every launch: ncu --import REPORT.ncu-rep --csv "
                         "--page raw")
    if kind == "ncu_rep":
        return decode_rep.read_rep(path)
    if kind in ("ncu_details_csv", "ncu_raw_csv", "ncu_text"):
        return decode_csv.read_csv_export(path, kind)
    raise InputError(path, "not an Nsight Compute export (no CSV header "
                     '"ID","Process ID",..., no report magic)', None,
                     "pass only ncu outputs: --csv stdout, --page raw CSV or .ncu-rep")


def read(paths: list[Path], devices: pa.Table | None, dims: dict[str, Any]) -> NcuPart:
    import pyarrow as pa

    read = read_each(paths)
    exports = read.exports
    arch, sm_count = _hints(devices, dims)
    parts: dict[str, list[pa.Table]] = {t: [] for t in TABLES}
    anomalies, sources = [], []
    for ncu_source_id, export in enumerate(exports):
        levels = _levels(export, arch, sm_count)
        for name, table in (("ncu_kernels", export.kernels), ("ncu_metrics", export.metrics),
                            ("ncu_levels", levels), ("ncu_rules", export.rules)):
            parts[name].append(_with_source(table, ncu_source_id))
        anomalies.append(_anomalies(export.anomalies, ncu_source_id))
        sources.extend(_file_entries(export, ncu_source_id))
    tables = {name: pa.concat_tables(p) if p else _empty(name) for name, p in parts.items()}
    return NcuPart(tables, pa.concat_tables(anomalies) if anomalies else _anomalies([], 0),
                   sources, read.refused, read.skipped)


def _file_entries(export: NcuExport, ncu_source_id: int) -> list[dict[str, Any]]:
    rows = export.path_rows if len(export.path_rows) == len(export.paths) else [
        export.metrics.num_rows if len(export.paths) == 1 else None for _ in export.paths]
    names = [n for n in dict.fromkeys(export.kernels["device_name"].to_pylist()) if n]
    return [{"path": path, "format": export.format, "rows": n, "ncu_source_id": ncu_source_id,
             "gpu_names": names} for path, n in zip(export.paths, rows)]


def _levels(export: Any, arch: str | None, sm_count: int | None) -> pa.Table:
    from etl.extract.ncu.levels import kernel_levels

    return kernel_levels(export.metrics, export.kernels, arch, sm_count)


def _hints(devices: pa.Table | None, dims: dict[str, Any]) -> tuple[str | None, int | None]:
    """Architecture and SM count of the run's GPUs when the traces agree on one; run.toml's
    sm_count otherwise (an export's own values always win, in kernel_levels)."""
    from etl.extract.ncu.levels import arch_from_cc

    arch = sm = None
    if devices is not None and devices.num_rows:
        ccs = {c for c in devices["compute_capability"].to_pylist() if c}
        sms = {s for s in devices["sm_count"].to_pylist() if s}
        try:
            arch = arch_from_cc(ccs.pop()) if len(ccs) == 1 else None
        except ValueError:  # a trace's odd capability text: the export or run.toml decide
            arch = None
        sm = sms.pop() if len(sms) == 1 else None
    if arch is None and dims.get("compute_capability"):
        try:
            arch = arch_from_cc(dims["compute_capability"])
        except ValueError:
            raise InputError("run.toml", f"{dims['compute_capability']!r} is not a compute "
                             "capability".replace("'", '"'), "key compute_capability",
                             'write it as major.minor, e.g. compute_capability = "7.0"') from None
    return arch, sm if sm is not None else dims.get("sm_count")


def _with_source(table: pa.Table, ncu_source_id: int) -> pa.Table:
    import pyarrow as pa

    return table.add_column(0, "ncu_source_id",
                            pa.array([ncu_source_id] * table.num_rows, pa.int32()))


def _empty(name: str) -> pa.Table:
    from etl.core.schema import table_schema

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
