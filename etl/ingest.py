"""`etl ingest`: run folders → staged Parquet → published runs.

Each run is extracted whole in memory-light Arrow tables, staged, then published in one
atomic step (see warehouse.py). A refused run leaves the warehouse untouched; the other
runs of the command still land.
"""
from __future__ import annotations

import gc
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from etl import __version__
from etl.errors import EtlError, InputError, RunError
from etl.extract.kineto import NotATrace, field_map, read_trace
from etl.runfolder import RunFolder, read_run_toml, relative, run_id_for, scan, sha256_file
from etl.warehouse import RUN_TABLES, Warehouse


def extractor_version() -> str:
    return f"etl-{__version__}/kineto-{field_map()['version']}"


@dataclass
class RunResult:
    run_name: str
    status: str                 # ingested, unchanged, refused
    run_id: str | None = None
    events: int = 0
    kernels: int = 0
    anomalies: int = 0
    seconds: float = 0.0
    error: str | None = None
    warnings: list[str] = field(default_factory=list)


def ingest_folder(folder: Path, warehouse: Warehouse, debug: bool = False) -> RunResult:
    """Ingest one run folder; input problems become a refused result, never an exception."""
    started = time.perf_counter()
    try:
        result = _ingest(folder, warehouse)
    except EtlError as exc:
        if debug:
            raise
        if isinstance(exc, InputError):
            exc.path = _display_path(folder, exc.path)
        message = exc.line() if isinstance(exc, InputError) else str(exc)
        result = RunResult(folder.name, "refused", error=message)
    result.seconds = time.perf_counter() - started
    return result


def _display_path(folder: Path, path: str) -> str:
    """`run_name/relative/path` for files inside the run folder, else the path as given."""
    try:
        return f"{folder.name}/{Path(path).relative_to(folder)}"
    except ValueError:
        return path


def _ingest(folder: Path, warehouse: Warehouse) -> RunResult:
    run = scan(folder)
    dims, toml_text = read_run_toml(run.run_toml) if run.run_toml else ({}, None)
    inputs = _hash_inputs(run)
    run_id = run_id_for(run.name, list(inputs.items()))
    if _unchanged(warehouse, run.name, run_id):
        return RunResult(run.name, "unchanged", run_id)
    sources, tables = _extract_sources(run, dims, inputs)
    if not sources:
        raise RunError(f"{run.name}: no profiler output in the run folder "
                       f"({len(run.skipped)} file(s) skipped); nothing ingested")
    tables = {name: _tag(table, run_id) for name, table in tables.items()}
    row = _runs_row(run, run_id, dims, toml_text, sources, tables)
    staged = warehouse.stage(run_id, tables)
    warehouse.publish(staged, run_id, row)
    return _result(run, run_id, sources, tables)


def _hash_inputs(run: RunFolder) -> dict[str, str]:
    """sha256 of every input file by relative path (read once; reused for `runs.sources`)."""
    files = list(run.traces) + ([run.run_toml] if run.run_toml else [])
    return {relative(run, f): sha256_file(f) for f in files}


def _unchanged(warehouse: Warehouse, name: str, run_id: str) -> bool:
    runs = warehouse.read_runs().to_pylist()
    return any(r["run_name"] == name and r["run_id"] == run_id
               and r["extractor_version"] == extractor_version() for r in runs)


@dataclass
class Source:
    source_id: int
    path: Path
    rel: str
    rank: int | None
    events: int
    gpu_names: list[str]
    sha256: str


def _extract_sources(run: RunFolder, dims: dict[str, Any], hashes: dict[str, str]
                     ) -> tuple[list[Source], dict[str, Any]]:
    # The decoder creates millions of acyclic objects; the cyclic GC would only rescan them.
    gc.disable()
    try:
        return _extract_sources_gc_off(run, dims, hashes)
    finally:
        gc.enable()


def _extract_sources_gc_off(run: RunFolder, dims: dict[str, Any], hashes: dict[str, str]
                            ) -> tuple[list[Source], dict[str, Any]]:
    import pyarrow as pa

    from etl.trace_tables import build

    sources: list[Source] = []
    parts: dict[str, list[pa.Table]] = {t: [] for t in RUN_TABLES}
    for path in run.traces:
        rel = relative(run, path)
        try:
            trace = read_trace(path)
        except NotATrace as exc:
            run.skipped.append((rel, str(exc)))
            continue
        built = build(trace, len(sources), dims.get("gpu"))
        sources.append(Source(len(sources), path, rel, built.rank, trace.event_count,
                              built.gpu_names, hashes[rel]))
        for table in RUN_TABLES:
            parts[table].append(getattr(built, table))
    tables = {t: pa.concat_tables(p) if p else None for t, p in parts.items()}
    return sources, tables


def _tag(table: Any, run_id: str) -> Any:
    import pyarrow as pa

    return table.add_column(0, "run_id", pa.array([run_id] * table.num_rows, pa.string()))


def _runs_row(run: RunFolder, run_id: str, dims: dict[str, Any], toml_text: str | None,
              sources: list[Source], tables: dict[str, Any]) -> Any:
    import pyarrow as pa

    from etl.schema import table_schema

    gpu, gpu_source = _gpu(dims, sources)
    row = {
        "run_id": run_id, "run_name": run.name, "run_path": str(run.path.resolve()),
        "sources": [_source_entry(s) for s in sources],
        "skipped": [{"path": p, "reason": r} for p, r in run.skipped],
        **{k: dims.get(k) for k in ("model", "framework", "framework_version", "exec_mode",
                                    "precision", "batch_size")},
        "gpu": gpu, "gpu_source": gpu_source, "tags": list(dims.get("tags", [])),
        "run_toml": toml_text, "truncated": False, "extractor_version": extractor_version(),
        "ingested_at": datetime.now(UTC),
        "event_count": sum(s.events for s in sources),
        "anomaly_count": tables["anomalies"].num_rows,
    }
    return pa.Table.from_pylist([row], schema=table_schema("runs").arrow())


def _source_entry(source: Source) -> dict[str, Any]:
    return {"source_id": source.source_id, "path": source.rel, "format": "kineto_json",
            "bytes": source.path.stat().st_size, "sha256": source.sha256,
            "rank": source.rank, "events": source.events, "truncated": False}


def _gpu(dims: dict[str, Any], sources: list[Source]) -> tuple[str | None, str | None]:
    if dims.get("gpu"):
        return dims["gpu"], "run.toml"
    names = [n for s in sources for n in s.gpu_names]
    return (names[0], "trace") if names else (None, None)


def _result(run: RunFolder, run_id: str, sources: list[Source],
            tables: dict[str, Any]) -> RunResult:
    result = RunResult(run.name, "ingested", run_id,
                       events=sum(s.events for s in sources),
                       kernels=tables["kernels"].num_rows,
                       anomalies=tables["anomalies"].num_rows)
    for rel, reason in run.skipped:
        result.warnings.append(f"{run.name}/{rel}: skipped ({reason})")
    if result.anomalies:
        result.warnings.append(f"{run.name}: {result.anomalies} anomalies recorded "
                               f"(SELECT kind, count(*) FROM anomalies WHERE run_id = "
                               f"'{run_id}' GROUP BY kind)")
    return result


def ingest_all(folders: list[Path], warehouse: Warehouse, debug: bool = False,
               on_done: Callable[[RunResult], None] | None = None) -> list[RunResult]:
    warehouse.init()
    results = []
    for folder in folders:
        result = ingest_folder(folder, warehouse, debug)
        results.append(result)
        if on_done:
            on_done(result)
    return results
