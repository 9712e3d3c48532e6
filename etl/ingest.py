"""`etl ingest`: run folders → staged Parquet → published runs.

Each run is extracted whole in memory-light Arrow tables, staged, then published in one
atomic step (see warehouse.py). A refused run leaves the warehouse untouched; the other
runs of the command still land.
"""
from __future__ import annotations

import gc
import uuid
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from etl import __version__
from etl.errors import EtlError, InputError, RunError
from etl.extract.kineto import NotATrace, read_trace
from etl.match_stage import match_run
from etl.ncu_ingest import NcuPart, extract_ncu
from etl.runfolder import RunFolder, read_run_toml, relative, run_id_for, scan, sha256_file
from etl.warehouse import Warehouse


def extractor_version() -> str:
    """Code version plus a digest of the field map and metric catalog (data that changes
    the rows): a change re-ingests unchanged inputs."""
    import hashlib

    data = b"".join(p.read_bytes() for p in sorted(DATA_DIR.glob("*.toml")))
    return f"etl-{__version__}/data-{hashlib.sha256(data).hexdigest()[:10]}"


DATA_DIR = Path(__file__).resolve().parent / "extract"
TRACE_TABLES = ("devices", "iterations", "host_events", "kernels", "anomalies")


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


@dataclass(frozen=True)
class Options:
    debug: bool = False     # let exceptions through (tracebacks) instead of one-line errors
    salvage: bool = False   # keep the complete events of truncated traces
    jobs: int = 1           # run folders extracted in parallel processes


@dataclass
class Prepared:
    """A run extracted and staged by a worker, waiting for the (single) publisher."""

    result: RunResult
    staged: Path | None = None
    runs_row: Any = None


def prepare_folder(folder: Path, warehouse: Warehouse, options: Options) -> Prepared:
    """Extract and stage one run folder; input problems become a refused result."""
    started = time.perf_counter()
    try:
        prepared = _prepare(folder, warehouse, options)
    except EtlError as exc:
        if options.debug:
            raise
        if isinstance(exc, InputError):
            exc.path = _display_path(folder, exc.path)
        message = exc.line() if isinstance(exc, InputError) else str(exc)
        prepared = Prepared(RunResult(folder.name, "refused", error=message))
    except Exception as exc:  # a bug of ours must still cost only this run, in one line
        if options.debug:
            raise
        prepared = Prepared(RunResult(folder.name, "refused", error=(
            f"{folder.name}: internal error {type(exc).__name__}: {exc}; nothing of this run "
            "was written. Re-run with --debug for the traceback and report it")))
    prepared.result.seconds = time.perf_counter() - started
    return prepared


def _display_path(folder: Path, path: str) -> str:
    """`run_name/relative/path` for files inside the run folder, else the path as given."""
    try:
        return f"{folder.name}/{Path(path).relative_to(folder)}"
    except ValueError:
        return path


def _prepare(folder: Path, warehouse: Warehouse, options: Options) -> Prepared:
    run = scan(folder)
    dims, toml_text = read_run_toml(run.run_toml) if run.run_toml else ({}, None)
    inputs = _hash_inputs(run)
    run_id = run_id_for(run.name, list(inputs.items()))
    if _unchanged(warehouse, run.name, run_id):
        return Prepared(RunResult(run.name, "unchanged", run_id))
    sources, tables = _extract_sources(run, dims, inputs, options.salvage)
    ncu = extract_ncu(run, tables.get("devices"), dims)
    if not sources and not ncu.sources:
        raise RunError(f"{run.name}: no profiler output in the run folder "
                       f"({len(run.skipped)} file(s) skipped); nothing ingested")
    tables = _merge_ncu(tables, ncu)
    tables["kernel_match"] = match_run(tables.get("kernels"), tables.get("host_events"),
                                       tables["ncu_kernels"])
    publish_id = f"{run_id}-{uuid.uuid4().hex[:12]}"
    tables = {name: _tag(name, table, run_id, publish_id) for name, table in tables.items()}
    row = _runs_row(run, run_id, dims, toml_text, sources, tables, ncu.sources, publish_id)
    staged = warehouse.stage(publish_id, tables)
    return Prepared(_result(run, run_id, sources, tables), staged, row)


def _hash_inputs(run: RunFolder) -> dict[str, str]:
    """sha256 of every input file by relative path (read once; reused for `runs.sources`)."""
    files = list(run.traces) + list(run.ncu) + ([run.run_toml] if run.run_toml else [])
    return {relative(run, f): sha256_file(f) for f in files}


def _unchanged(warehouse: Warehouse, name: str, run_id: str) -> bool:
    runs = warehouse.read_runs(["run_id", "extractor_version"]).to_pylist()
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
    truncated: bool


def _extract_sources(run: RunFolder, dims: dict[str, Any], hashes: dict[str, str],
                     salvage: bool) -> tuple[list[Source], dict[str, Any]]:
    # The decoder creates millions of acyclic objects; the cyclic GC would only rescan them.
    gc.disable()
    try:
        return _extract_sources_gc_off(run, dims, hashes, salvage)
    finally:
        gc.enable()


def _extract_sources_gc_off(run: RunFolder, dims: dict[str, Any], hashes: dict[str, str],
                            salvage: bool) -> tuple[list[Source], dict[str, Any]]:
    import pyarrow as pa

    from etl.trace_tables import build

    sources: list[Source] = []
    parts: dict[str, list[pa.Table]] = {t: [] for t in TRACE_TABLES}
    for path in run.traces:
        rel = relative(run, path)
        try:
            trace = read_trace(path, salvage=salvage)
        except NotATrace as exc:
            run.skipped.append((rel, str(exc)))
            continue
        if trace.truncated:
            trace.anomalies.append(("truncated_input", None, "the file ends early; the "
                                    "complete events before the cut were kept (--salvage)"))
        built = build(trace, len(sources), dims.get("gpu"))
        sources.append(Source(len(sources), path, rel, built.rank, trace.event_count,
                              built.gpu_names, hashes[rel], trace.truncated))
        for table in TRACE_TABLES:
            parts[table].append(getattr(built, table))
    tables = {t: pa.concat_tables(p) if p else None for t, p in parts.items()}
    return sources, tables


def _merge_ncu(tables: dict[str, Any], ncu: NcuPart) -> dict[str, Any]:
    import pyarrow as pa

    merged = {**tables, **ncu.tables}
    trace_anomalies = tables.get("anomalies")
    merged["anomalies"] = (pa.concat_tables([trace_anomalies, ncu.anomalies])
                           if trace_anomalies is not None else ncu.anomalies)
    return merged


def _tag(name: str, table: Any, run_id: str, publish_id: str) -> Any:
    import pyarrow as pa

    from etl.warehouse import empty_table

    if table is None:  # a run without traces (ncu only): the trace tables are empty
        return empty_table(name)
    n = table.num_rows
    table = table.add_column(0, "publish_id", pa.array([publish_id] * n, pa.string()))
    return table.add_column(0, "run_id", pa.array([run_id] * n, pa.string()))


def _runs_row(run: RunFolder, run_id: str, dims: dict[str, Any], toml_text: str | None,
              sources: list[Source], tables: dict[str, Any],
              ncu_sources: list[dict[str, Any]], publish_id: str) -> Any:
    import pyarrow as pa

    from etl.schema import table_schema

    gpu, gpu_source = _gpu(dims, sources)
    row = {
        "run_id": run_id, "publish_id": publish_id, "publish_seq": 0,  # seq set at publish
        "run_name": run.name, "run_path": str(run.path.resolve()),
        "sources": [_source_entry(s) for s in sources], "ncu_sources": ncu_sources,
        "skipped": [{"path": p, "reason": r} for p, r in run.skipped],
        **{k: dims.get(k) for k in ("model", "framework", "framework_version", "exec_mode",
                                    "precision", "batch_size")},
        "gpu": gpu, "gpu_source": gpu_source, "tags": list(dims.get("tags", [])),
        "run_toml": toml_text, "truncated": any(s.truncated for s in sources),
        "extractor_version": extractor_version(),
        "ingested_at": datetime.now(UTC),
        "event_count": sum(s.events for s in sources),
        "anomaly_count": tables["anomalies"].num_rows,
    }
    return pa.Table.from_pylist([row], schema=table_schema("runs").arrow())


def _source_entry(source: Source) -> dict[str, Any]:
    return {"source_id": source.source_id, "path": source.rel, "format": "kineto_json",
            "bytes": source.path.stat().st_size, "sha256": source.sha256,
            "rank": source.rank, "events": source.events, "truncated": source.truncated}


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


def ingest_all(folders: list[Path], warehouse: Warehouse, options: Options = Options(),
               on_done: Callable[[RunResult], None] | None = None) -> list[RunResult]:
    """Extract runs in `options.jobs` processes; publish them one at a time, here."""
    warehouse.init()
    results: list[RunResult] = []
    for prepared in _prepared(folders, warehouse, options):
        if prepared.staged is not None and prepared.result.run_id is not None:
            warehouse.publish(prepared.staged, prepared.runs_row)
        results.append(prepared.result)
        if on_done:
            on_done(prepared.result)
    return results


def _prepared(folders: list[Path], warehouse: Warehouse, options: Options
              ) -> Iterator[Prepared]:
    jobs = max(1, min(options.jobs, len(folders)))
    if jobs == 1:
        for folder in folders:
            yield prepare_folder(folder, warehouse, options)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    context = multiprocessing.get_context("spawn")  # no inherited locks or open handles
    with ProcessPoolExecutor(jobs, mp_context=context) as pool:
        futures = [pool.submit(prepare_folder, f, warehouse, options) for f in folders]
        for future in as_completed(futures):
            yield future.result()
