"""`etl ingest`: run folders → staged Parquet → published runs.

Each run's traces are streamed into its private staging folder (etl/extract/kineto/read.py: bounded
memory whatever the file size), the small tables are added, and the folder is published
in one atomic step (see warehouse.py). A refused run leaves the warehouse untouched and its
staging folder removed; the other runs of the command still land.
"""
from __future__ import annotations

import shutil
import threading
import time
import uuid
from concurrent.futures import Future
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from etl.core import VERSION as __version__
from etl.load import device_memory
from etl.core.errors import EtlError, InputError, RunError, counted
from etl.extract.registry import Format, NothingToIngest, NotThisFormat, grouped_by_reader
from etl.core.errors import name_text
from etl.match.stage import Preference, match_run
from etl.load.runfolder import (
    RUN_TOML,
    RunFolder,
    RunTarget,
    read_run_toml,
    relative,
    run_id_for,
    scan,
    sha256_file,
)
from etl.warehouse.store import RUN_TABLES, Publication, TableWriter, Warehouse


# Raise by one with every change of extractor or ingest code that changes the rows a run
# gets from unchanged inputs (the data files below are hashed instead): the runs ingested
# before are then re-ingested, not reported unchanged. 2: issue #33 (anomalies that say
# what a run lacks, GPU names of every source). 3: the syncs table (issue #30).
# 4: collective_ops (issue #32). 5: collective_ops from nsys's NCCL ranges. 6: runs'
# seconds_per_iteration from run.toml (issue #33). 7: nsys launches joined per process,
# ROCm kernels' geometry from their launch call.
ROWS_REVISION = 7


def extractor_version() -> str:
    """Code version and ROWS_REVISION, plus a digest of the field maps and metric catalog
    (data that changes the rows): a change of either re-ingests unchanged inputs."""
    import hashlib

    data = b"".join(p.read_bytes() for p in sorted((DATA_DIR / "extract").rglob("*.toml")))
    return (f"etl-{__version__}.r{ROWS_REVISION}/"
            f"data-{hashlib.sha256(data).hexdigest()[:10]}")


DATA_DIR = Path(__file__).resolve().parent.parent  # etl/


@dataclass
class RunResult:
    run_name: str
    status: str                 # ingested, unchanged, refused
    run_id: str | None = None
    events: int = 0
    kernels: int = 0            # GPU kernels of the traces
    ncu_kernels: int = 0        # kernels of the counters exports (ncu_kernels rows)
    anomalies: int = 0
    anomaly_kinds: dict[str, int] = field(default_factory=dict)  # count by kind, largest first
    seconds: float = 0.0
    error: str | None = None
    warnings: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)  # inputs set aside: "run/relative path"
    notes: list[str] = field(default_factory=list)  # short, for the summary table


PARALLEL_BYTES = 64 << 20  # files this big are decoded by one worker process per core


@dataclass(frozen=True)
class Options:
    debug: bool = False     # let exceptions through (tracebacks) instead of one-line errors
    salvage: bool = False   # keep the complete events of truncated traces
    jobs: int = 1           # run folders extracted in parallel processes
    replace: bool = False   # a run name may replace a run ingested from another folder
    slice_workers: int = 1  # processes decoding one big trace (when runs are not parallel)
    parallel_bytes: int = PARALLEL_BYTES
    strict: bool = False    # a counters export that cannot be read refuses its whole run


@dataclass
class Prepared:
    """A run extracted and staged by a worker, waiting for the (single) publisher."""

    result: RunResult
    staged: Path | None = None
    runs_row: Any = None


def prepare_folder(folder: Path | RunTarget, warehouse: Warehouse, options: Options
                   ) -> Prepared:
    """Extract and stage one run folder; input problems become a refused result."""
    target = folder if isinstance(folder, RunTarget) else RunTarget(folder, name_text(folder.name))
    started = time.perf_counter()
    try:
        prepared = _prepare(target, warehouse, options)
    except EtlError as exc:
        if options.debug:
            raise
        if isinstance(exc, InputError):
            exc.path = _display_path(target, exc.path)
        message = exc.line() if isinstance(exc, InputError) else str(exc)
        prepared = Prepared(RunResult(target.name, "refused", error=message))
    except Exception as exc:  # a bug of ours must still cost only this run, in one line
        if options.debug:
            raise
        prepared = Prepared(RunResult(target.name, "refused", error=(
            f"{target.name}: internal error {type(exc).__name__}: {exc}; nothing of this run "
            "was written. Re-run with --debug for the traceback and report it")))
    prepared.result.seconds = time.perf_counter() - started
    return prepared


def _display_path(target: RunTarget, path: str) -> str:
    """`run_name/relative/path` for files inside the run folder, else the path as given
    (also for a run given as one file: its path says which)."""
    if target.path.is_file():
        return path
    try:
        return f"{target.name}/{Path(path).relative_to(target.path)}"
    except ValueError:
        return path


def _prepare(target: RunTarget, warehouse: Warehouse, options: Options) -> Prepared:
    run = scan(target.path, target.name)
    dims, toml_text = read_run_toml(run.run_toml) if run.run_toml else ({}, None)
    ingested = _current_runs(warehouse, run, options.replace)
    key = _run_key(run, hash_first=bool(ingested))
    # hashed first exactly when ingested; a new run's hashes are not waited for here
    if ingested and key.run_id in ingested:
        return Prepared(_unchanged(run, ingested[key.run_id]))
    staged = warehouse.new_stage(key.suffix)
    try:
        return _stage_run(run, dims, toml_text, key, staged, options)
    except BaseException:
        shutil.rmtree(staged, ignore_errors=True)  # private: never published
        raise


class RunKey:
    """A run's input hashes and the ids made from them (run_id: content hash; publish_id:
    run_id plus a random suffix).

    Hashing a 1 GB trace takes about a second. When the warehouse holds no run of this name
    (at this extractor version) the run cannot be unchanged, so the hashes are computed in
    a thread while the traces are read; the ids are first needed for the first rows
    written, after a trace's first pass.
    """

    def __init__(self, name: str, hashes: Future[dict[str, str]]) -> None:
        self.name, self._hashes = name, hashes
        self.suffix = uuid.uuid4().hex[:12]

    @property
    def inputs(self) -> dict[str, str]:
        """sha256 by relative path (waits for the hashing; re-raises its error)."""
        return self._hashes.result()

    @property
    def run_id(self) -> str:
        return run_id_for(self.name, list(self.inputs.items()))

    @property
    def publish_id(self) -> str:
        return f"{self.run_id}-{self.suffix}"

    def constants(self) -> dict[str, str]:
        return {"run_id": self.run_id, "publish_id": self.publish_id}


def _run_key(run: RunFolder, hash_first: bool) -> RunKey:
    """`hash_first`: the run may be unchanged, and the check needs the hashes."""
    hashes: Future[dict[str, str]] = Future()
    if hash_first:
        hashes.set_result(_hash_inputs(run))
    else:
        threading.Thread(target=_hash_into, args=(run, hashes), daemon=True).start()
    return RunKey(run.name, hashes)


def _hash_into(run: RunFolder, hashes: Future[dict[str, str]]) -> None:
    try:
        hashes.set_result(_hash_inputs(run))
    except BaseException as exc:  # reaches the ingest at its first use of the ids
        hashes.set_exception(exc)


def _stage_run(run: RunFolder, dims: dict[str, Any], toml_text: str | None, key: RunKey,
               staged: Path, options: Options) -> Prepared:
    writers = {t: TableWriter(staged, t, key.constants) for t in RUN_TABLES}
    sources, small = _extract_sources(run, dims, key, staged, writers, options)
    if "devices" in small:  # run.toml gpu_memory_bytes where the traces give no memory
        small["devices"], notes = device_memory.with_run_toml_memory(small["devices"], dims)
        writers["anomalies"].write(device_memory.anomaly_table(notes))
    counters = _extract_counters(run, small.get("devices"), dims, key, len(sources),
                                 options.strict)
    sources += counters.sources
    sources += _extract_samples(run, dims, key, len(sources), writers)
    if not sources:
        raise counters.refused[0] if counters.refused else RunError(_nothing_read(run))
    set_aside = [_set_aside(run, exc) for exc in counters.refused]
    if counters.anomalies is not None:
        writers["anomalies"].write(counters.anomalies)
    if set_aside:
        writers["anomalies"].write(_refused_anomalies(set_aside))
    for name in ("host_events", "kernels"):  # read back by the matcher
        writers[name].close()
    writers["anomalies"].write(_step_hints(staged, sources, small.get("iterations")))
    has_ncu = counters.tables["ncu_kernels"].num_rows > 0
    kernels, host = _match_inputs(staged, sources) if has_ncu else (None, None)
    preference = Preference(dims.get("ncu_iteration"),
                            lambda: _run_summary_selection(staged, small, key))
    small = {**small, **counters.tables, "kernel_match": match_run(
        kernels, host, counters.tables["ncu_kernels"], preference)}
    writers["anomalies"].write(_placement_anomalies(preference))
    for name, table in small.items():
        writers[name].write(table)
    for name in RUN_TABLES:
        if name not in ("host_events", "kernels"):
            writers[name].close()  # a table nothing wrote to is a zero-row file
    counts = {t: w.rows for t, w in writers.items()}
    row = _runs_row(run, key.run_id, dims, toml_text, sources, counts, key.publish_id,
                    set_aside)
    result = _result(run, key.run_id, sources, counts, set_aside, _anomaly_kinds(staged))
    result.warnings += _unreachable(run, staged, counts["kernels"])
    return Prepared(result, staged, row)


def _anomaly_kinds(staged: Path) -> dict[str, int]:
    """The staged anomalies counted by kind, the most frequent first."""
    import pyarrow.parquet as pq

    kinds = pq.read_table(staged / "anomalies.parquet", columns=["kind"]).column("kind")
    counts = {str(c["values"]): int(c["counts"]) for c in kinds.value_counts().to_pylist()}
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def _step_hints(staged: Path, sources: list[Source], iterations: Any) -> Any:
    """no_step_markers for each trace source whose one window is the whole trace, with the
    run's own step_pattern candidates (step_hint.py), and a line of the ingest's output."""
    import pyarrow.compute as pc

    from etl.load import step_hint

    whole: set[int] = set()
    if iterations is not None:
        marked = pc.equal(iterations["boundary"], "whole_trace")
        whole = set(iterations.filter(marked)["source_id"].to_pylist())
    found = []
    for source in sources:
        if source.source_id in whole:
            text = step_hint.for_source(staged / "host_events.parquet", source.source_id,
                                        source.format.family)
            found.append((source.source_id, text))
            source.remarks.append(step_hint.remark(text))
    return _source_anomalies(step_hint.KIND, found)


def _source_anomalies(kind: str, found: list[tuple[int, str]]) -> Any:
    """Anomaly rows of one kind about whole sources: (source_id, detail)."""
    import pyarrow as pa

    n = len(found)
    return pa.table({
        "source_id": pa.array([s for s, _ in found], pa.int32()),
        "kind": pa.array([kind] * n, pa.string()),
        "event_id": pa.nulls(n, pa.int64()),
        "detail": pa.array([d for _, d in found], pa.string()),
        "ncu_source_id": pa.nulls(n, pa.int32()),
        "ncu_id": pa.nulls(n, pa.int64()),
    })


def _unreachable(run: RunFolder, staged: Path, activities: int) -> list[str]:
    """GPU activities that no utilization view can use: no row is a kernel with a device
    (the GPU-level views count kernels on a device), said once per run."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    if activities == 0:
        return []
    kernels = pq.read_table(staged / "kernels.parquet", columns=["kind", "device_id"])
    usable = pc.and_(pc.equal(kernels["kind"], "kernel"), pc.is_valid(kernels["device_id"]))
    if pc.any(usable).as_py():
        return []
    kinds = kernels.group_by("kind").aggregate([("kind", "count")]).to_pylist()
    listed = ", ".join(f"{k['kind_count']} {k['kind']}" for k in kinds)
    return [f"{run.name}: {activities} GPU activities ({listed}) but no kernel on a device: "
            "gpu_utilization, run_summary and the other GPU-level views have no row for "
            "this run (SELECT kind, category, count(*) FROM kernels GROUP BY ALL shows them)"]


def _nothing_read(run: RunFolder) -> str:
    """No input of any role was read: say what each file was taken for."""
    if not run.skipped:
        return f"{run.name}: no profiler output in the run folder; nothing ingested"
    listed = "; ".join(f"{rel}: {why}" for rel, why in run.skipped[:10])
    more = f"; and {len(run.skipped) - 10} more" if len(run.skipped) > 10 else ""
    # profiler output its reader found nothing to ingest in (a summary, not a timeline)
    # is still profiler output: say what it lacks, not that there is none
    what = ("nothing the tool can ingest in the run folder" if run.nothing_to_ingest else
            "no profiler output in the run folder")
    return (f"{run.name}: {what} ({len(run.skipped)} file(s) skipped: {listed}{more}); "
            "nothing ingested (etl formats lists what is read)")


def _hash_inputs(run: RunFolder) -> dict[str, str]:
    """sha256 of every input file by relative path (read once; reused for `runs.sources`)."""
    files = [p for p, _ in run.inputs] + ([run.run_toml] if run.run_toml else [])
    return {relative(run, f): sha256_file(f) for f in files}


def _current_runs(warehouse: Warehouse, run: RunFolder, replace: bool
                  ) -> dict[str, dict[str, Any]]:
    """The current `runs` row of this name by run_id, if this extractor version ingested it
    from this folder (a run with the same id is unchanged). A run of this name ingested
    from another folder is replaced only when the user says so: two folders of one name
    are two runs."""
    runs = warehouse.read_runs(["run_id", "extractor_version", "run_path", "event_count",
                                "anomaly_count", "kernel_count", "ncu_kernel_count",
                                "removed"]).to_pylist()
    mine = [r for r in runs if r["run_name"] == run.name and not r.get("removed")]
    for r in mine:
        if r["run_path"] != run.location() and not replace:
            raise RunError(f"{run.name}: the warehouse's run '{run.name}' was ingested from "
                           f"{r['run_path']}, not {run.location()}; pass --replace to replace "
                           "it, or --name / --prefix to keep both")
    return {r["run_id"]: r for r in mine if r["extractor_version"] == extractor_version()
            and r["run_path"] == run.location()}  # moved here: re-ingested, path updated


def _unchanged(run: RunFolder, row: dict[str, Any]) -> RunResult:
    """An unchanged run reports what the warehouse holds of it."""
    return RunResult(run.name, "unchanged", row["run_id"], events=row["event_count"],
                     kernels=row["kernel_count"] or 0,
                     ncu_kernels=row.get("ncu_kernel_count") or 0,
                     anomalies=row["anomaly_count"])


@dataclass
class Source:
    """One input file of the run, of any role (one `runs.sources` entry)."""

    source_id: int
    path: Path
    rel: str
    format: Format
    sha256: str
    events: int | None          # events read (trace), metric rows read (counters)
    rank: int | None = None
    truncated: bool = False
    gpu_names: list[str] = field(default_factory=list)
    ncu_source_id: int | None = None  # the ncu export this file belongs to
    remarks: list[tuple[str, str]] = field(default_factory=list)  # (note, warning line)


SMALL_TRACE_TABLES = ("devices", "iterations")


def _extract_sources(run: RunFolder, dims: dict[str, Any], key: RunKey,
                     staged: Path, writers: dict[str, TableWriter], options: Options
                     ) -> tuple[list[Source], dict[str, Any]]:
    """Stream every trace of the run into the writers; small tables are returned."""
    import pyarrow as pa

    from etl.extract.trace_role import Sinks, with_optional_columns
    from etl.extract.kernel_types import with_kernel_types

    def write_kernels(batch: pa.Table) -> None:  # every format's kernels get their types
        writers["kernels"].write(with_kernel_types(with_optional_columns(batch, "kernels")))

    def write_host(batch: pa.Table) -> None:
        writers["host_events"].write(with_optional_columns(batch, "host_events"))

    sinks = Sinks(write_host, write_kernels,
                  writers["anomalies"].write, writers["host_events"].flush,
                  lambda name, rows: writers[name].write(rows))
    sources: list[Source] = []
    parts: dict[str, list[pa.Table]] = {t: [] for t in SMALL_TRACE_TABLES}
    for path, fmt in run.of_role("trace"):
        rel = relative(run, path)
        source_id = len(sources)
        try:
            done = fmt.load_reader()(path, source_id, dims.get("gpu"),
                                     staged / f"spill-{source_id}", sinks,
                                     _pipeline_options(path, options,
                                                       dims.get("step_pattern")))
        except NotThisFormat as exc:
            run.skipped.append((rel, str(exc)))
            if isinstance(exc, NothingToIngest):
                run.nothing_to_ingest.append(rel)
            continue
        sources.append(Source(source_id, path, rel, fmt, key.inputs[rel], done.info.event_count,
                              done.rank, done.info.truncated, done.gpu_names,
                              remarks=done.remarks))
        parts["devices"].append(done.devices)
        parts["iterations"].append(_with_clock(_complete_unless_said(done.iterations),
                                               done.clock, fmt.name))
    return sources, {t: pa.concat_tables(p) for t, p in parts.items() if p}


@dataclass
class CountersPart:
    tables: dict[str, Any]      # COUNTER_TABLES
    anomalies: Any
    sources: list[Source]
    refused: list[InputError] = field(default_factory=list)  # files set aside, unreadable


def _extract_counters(run: RunFolder, devices: Any, dims: dict[str, Any], key: RunKey,
                      first_id: int, strict: bool = False) -> CountersPart:
    """Every counters input, one reader call per reader with all its files.

    A file the reader cannot read comes back refused (the reader's `refused`, beside the
    files it read): the run keeps its traces and other exports, and the file is reported;
    `strict` refuses the run instead.
    """
    groups = grouped_by_reader(run.of_role("counters"))
    if not groups:
        return CountersPart({t: _empty_table(t) for t in COUNTER_TABLES}, None, [])
    if len(groups) > 1:  # one counters family today; say so rather than mix export ids
        raise RunError(f"{run.name}: counters of several families in one run folder")
    [(fmt, paths)] = groups
    try:
        part = fmt.load_reader()(paths, devices, dims)
    except InputError as exc:
        if exc.path == RUN_TOML and run.run_toml is not None:  # a key of run.toml is wrong
            exc.path = str(run.run_toml)
        raise
    refused: list[InputError] = list(getattr(part, "refused", []))
    if refused and strict:
        raise refused[0]
    for path, why in getattr(part, "skipped", []):  # not its format after all (a log)
        run.skipped.append((relative(run, path), why))
    formats = {f.name: f for _, f in run.inputs}
    sources = [Source(first_id + i, e["path"], relative(run, e["path"]), formats[e["format"]],
                      key.inputs[relative(run, e["path"])], e["rows"],
                      gpu_names=e.get("gpu_names", []), ncu_source_id=e["ncu_source_id"])
               for i, e in enumerate(part.sources)]
    return CountersPart(part.tables, part.anomalies, sources, refused)


@dataclass(frozen=True)
class SetAside:
    """A counters file refused while its run was ingested without it."""

    rel: str       # path inside the run folder
    family: str    # the format family that could not read it (ncu)
    why: str       # place, problem and remedy, without the path


def _set_aside(run: RunFolder, exc: InputError) -> SetAside:
    path = Path(exc.path)
    fmt = next((f for p, f in run.inputs if p == path), None)
    why = ": ".join([exc.place, exc.problem] if exc.place else [exc.problem])
    if exc.remedy:
        why += ". " + exc.remedy
    return SetAside(relative(run, path), fmt.family if fmt else "counters", why)


def _refused_anomalies(set_aside: list[SetAside]) -> Any:
    import pyarrow as pa

    n = len(set_aside)
    return pa.table({
        "source_id": pa.nulls(n, pa.int32()),
        "kind": pa.array([f"{s.family}_export_refused" for s in set_aside], pa.string()),
        "event_id": pa.nulls(n, pa.int64()),
        "detail": pa.array([f"{s.rel}: {s.why}" for s in set_aside], pa.string()),
        "ncu_source_id": pa.nulls(n, pa.int32()),
        "ncu_id": pa.nulls(n, pa.int64()),
    })


COUNTER_TABLES = ("ncu_kernels", "ncu_metrics", "ncu_levels", "ncu_rules")


def _extract_samples(run: RunFolder, dims: dict[str, Any], key: RunKey, first_id: int,
                     writers: dict[str, TableWriter]) -> list[Source]:
    """Every samples input (monitor time series), one reader call per reader with all its
    files. A reader returns `tables` (rows by table name, without run_id/publish_id),
    `anomalies` (a table or None) and one `sources` entry per file (path, format, rows);
    a source's rows carry its `source_id`, which the reader is given as `first_id`."""
    sources: list[Source] = []
    formats = {f.name: f for _, f in run.inputs}
    for fmt, paths in grouped_by_reader(run.of_role("samples")):
        part = fmt.load_reader()(paths, dims, first_id + len(sources))
        for name, table in part.tables.items():
            writers[name].write(table)
        if part.anomalies is not None:
            writers["anomalies"].write(part.anomalies)
        sources += [Source(first_id + len(sources) + i, e["path"], relative(run, e["path"]),
                           formats[e["format"]], key.inputs[relative(run, e["path"])],
                           e["rows"], gpu_names=e.get("gpu_names", []))
                    for i, e in enumerate(part.sources)]
    return sources


def _empty_table(name: str) -> Any:
    from etl.core.schema import table_schema

    schema = table_schema(name).arrow()
    for column in ("run_id", "publish_id"):  # added by the writer
        schema = schema.remove(schema.get_field_index(column))
    return schema.empty_table()


def _complete_unless_said(iterations: Any) -> Any:
    """A reader that reads its files whole (all but a salvaging one) need not say that its
    iterations are complete: `complete` true and `cut` NULL are filled in for it."""
    import pyarrow as pa

    n = iterations.num_rows
    if "complete" not in iterations.column_names:
        iterations = iterations.append_column("complete", pa.repeat(pa.scalar(True), n))
    if "cut" not in iterations.column_names:
        iterations = iterations.append_column("cut", pa.nulls(n, pa.string()))
    return iterations


def _with_clock(iterations: Any, clock: Any, format_name: str) -> Any:
    """The source's clock (the reader's TraceClock, else read from its times) on each of
    its iterations: clock, utc_offset_ns, clock_reason (schemas/iterations.toml)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from etl.extract.trace_role import clock_of_times

    n = iterations.num_rows
    if clock is None:
        clock = clock_of_times(pc.min(iterations["start_ns"]).as_py() if n else None,
                               f"{format_name} reader")
    return (iterations
            .append_column("clock", pa.repeat(pa.scalar(clock.kind), n))
            .append_column("utc_offset_ns", pa.repeat(pa.scalar(clock.utc_offset_ns,
                                                                pa.int64()), n))
            .append_column("clock_reason", pa.repeat(pa.scalar(clock.reason, pa.string()), n)))


def _pipeline_options(path: Path, options: Options, step_pattern: str | None) -> Any:
    from etl.extract.trace_role import PipelineOptions

    big = path.stat().st_size >= options.parallel_bytes
    return PipelineOptions(salvage=options.salvage,
                           workers=options.slice_workers if big else 1,
                           threads=max(1, options.slice_workers), step_pattern=step_pattern)


def _run_summary_selection(staged: Path, small: dict[str, Any], key: RunKey
                           ) -> dict[int, int | None]:
    """run_summary's selected iteration per trace source, over the staged tables."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from etl.match.placement import run_summary_selection
    from etl.core.schema import table_schema

    loose = pa.schema([f.with_nullable(True) for f in table_schema("runs").arrow()])
    runs = pa.Table.from_pylist([{"run_id": key.run_id, "publish_id": key.publish_id,
                                  "run_name": "staged"}], schema=loose)
    return run_summary_selection({
        "kernels": pq.read_table(staged / "kernels.parquet"), "runs": runs,
        "iterations": _stamped(small["iterations"], key),
        "devices": _stamped(small["devices"], key),
        # run_summary reads the peak memory too; the selection does not depend on it
        "memory_events": _stamped(_empty_table("memory_events"), key)})


def _stamped(table: Any, key: RunKey) -> Any:
    """A small table with the run's constant columns (run_id, publish_id)."""
    import pyarrow as pa

    for column, value in key.constants().items():
        if column not in table.column_names:
            table = table.append_column(column, pa.repeat(pa.scalar(value), table.num_rows))
    return table


def _placement_anomalies(preference: Preference) -> Any:
    import pyarrow as pa

    n = len(preference.notes)
    return pa.table({
        "source_id": pa.nulls(n, pa.int32()),
        "kind": pa.array(["ncu_equivalent_iterations"] * n, pa.string()),
        "event_id": pa.nulls(n, pa.int64()),
        "detail": pa.array([d for _, d in preference.notes], pa.string()),
        "ncu_source_id": pa.array([s for s, _ in preference.notes], pa.int32()),
        "ncu_id": pa.nulls(n, pa.int64()),
    })


def _match_inputs(staged: Path, sources: list[Source]) -> tuple[Any, Any]:
    """Trace kernels and launch times for the matcher, read back from the staged files
    (only when there are traces; the matcher needs nothing when there is no export)."""
    import pyarrow.parquet as pq

    from etl.match.stage import TRACE_COLUMNS

    if not any(s.format.role == "trace" for s in sources):
        return None, None
    kernels = pq.read_table(staged / "kernels.parquet", columns=[
        *TRACE_COLUMNS, "kind", "kernel_id", "launch_event_id", "iteration"])
    host = pq.read_table(staged / "host_events.parquet",
                         columns=["source_id", "event_id", "ts_ns"])
    return kernels, host


def _runs_row(run: RunFolder, run_id: str, dims: dict[str, Any], toml_text: str | None,
              sources: list[Source], counts: dict[str, int], publish_id: str,
              set_aside: list[SetAside]) -> Any:
    import pyarrow as pa

    from etl.core.schema import table_schema

    gpu, gpu_source = _gpu(dims, sources)
    row = {
        "run_id": run_id, "publish_id": publish_id, "publish_seq": 0,  # seq set at publish
        "run_name": run.name, "run_path": run.location(),
        "sources": [_source_entry(s) for s in sources],
        "skipped": [{"path": p, "reason": r} for p, r in run.skipped]
        + [{"path": s.rel, "reason": f"{s.family} export refused: {s.why}"} for s in set_aside],
        **{k: dims.get(k) for k in ("model", "framework", "framework_version", "exec_mode",
                                    "precision", "batch_size")},
        "gpu": gpu, "gpu_source": gpu_source, "tags": list(dims.get("tags", [])),
        "seconds_per_iteration": _float_or_none(dims.get("seconds_per_iteration")),
        "run_toml": toml_text, "truncated": any(s.truncated for s in sources),
        "extractor_version": extractor_version(),
        "ingested_at": datetime.now(UTC),
        "event_count": _trace_events(sources),
        "anomaly_count": counts["anomalies"],
        "kernel_count": counts["kernels"],
        "ncu_kernel_count": counts["ncu_kernels"],
    }
    return pa.Table.from_pylist([row], schema=table_schema("runs").arrow())


def _float_or_none(value: Any) -> float | None:
    return None if value is None else float(value)


def _source_entry(source: Source) -> dict[str, Any]:
    return {"source_id": source.source_id, "path": source.rel, "format": source.format.name,
            "role": source.format.role, "bytes": source.path.stat().st_size,
            "sha256": source.sha256, "rank": source.rank, "events": source.events,
            "truncated": source.truncated, "ncu_source_id": source.ncu_source_id}


def _trace_events(sources: list[Source]) -> int:
    return sum(s.events or 0 for s in sources if s.format.role == "trace")


def _gpu(dims: dict[str, Any], sources: list[Source]) -> tuple[str | None, str | None]:
    """run.toml's gpu, else the first name a source gives (traces first, then the ncu
    exports' device names, then the monitors'), and where it came from."""
    if dims.get("gpu"):
        return dims["gpu"], "run.toml"
    for source in sources:
        if source.gpu_names:
            role = source.format.role
            return source.gpu_names[0], ("trace" if role == "trace" else source.format.family)
    return None, None


def _result(run: RunFolder, run_id: str, sources: list[Source], counts: dict[str, int],
            set_aside: list[SetAside], kinds: dict[str, int]) -> RunResult:
    result = RunResult(run.name, "ingested", run_id, events=_trace_events(sources),
                       kernels=counts["kernels"], ncu_kernels=counts["ncu_kernels"],
                       anomalies=counts["anomalies"], anomaly_kinds=kinds)
    for rel, reason in run.skipped:
        result.warnings.append(f"{run.name}/{rel}: skipped ({reason})")
    for s in set_aside:
        result.refused.append(f"{run.name}/{s.rel}")
        result.warnings.append(f"{run.name}/{s.rel}: {s.family} export refused, the run was "
                               f"ingested without it: {s.why} (etl ingest --strict refuses "
                               "the run instead)")
    for source in sources:
        for note, line in source.remarks:
            result.notes.append(note)
            result.warnings.append(f"{run.name}/{source.rel}: {line}")
    if result.anomalies:
        by_kind = ", ".join(f"{kind} {n:,}" for kind, n in kinds.items())
        result.warnings.append(f"{run.name}: {counted(result.anomalies, 'anomaly')} recorded: "
                               f"{by_kind} (each with its detail in the view run_anomalies, by "
                               "run_name, and in etl report)")
    return result


class Published(list[RunResult]):
    """The results of publish_all, and its last publication (None when nothing was
    published): `wait()` returns once it is visible to queries."""

    last: Publication | None = None

    def wait(self) -> None:
        if self.last is not None:
            self.last.wait_until_visible()


def ingest_all(folders: Sequence[Path | RunTarget], warehouse: Warehouse,
               options: Options = Options(),
               on_done: Callable[[RunResult], None] | None = None, wait: bool = True
               ) -> Published:
    """Extract runs in `options.jobs` processes; publish them one at a time, here.

    A single run gets the processes for its big traces instead (slice decoding).
    """
    warehouse.init()
    if len(folders) == 1:
        options = replace(options, slice_workers=options.jobs, jobs=1)
    return publish_all(_prepared(folders, warehouse, options), warehouse, on_done, wait)


def publish_all(prepared: Iterable[Prepared], warehouse: Warehouse,
                on_done: Callable[[RunResult], None] | None = None, wait: bool = True
                ) -> Published:
    """Publish staged runs one at a time, in this one process (the warehouse's single
    writer), as they arrive; return once the last publish is visible (unless `wait` is
    False: then the caller does other work first, and calls `.wait()` before it returns)."""
    results = Published()
    for item in prepared:
        if item.staged is not None and item.result.run_id is not None:
            results.last = warehouse.publish(item.staged, item.runs_row)
            if results.last.late:
                item.result.warnings.append(LATE_PUBLISH)
        results.append(item.result)
        if on_done:
            on_done(item.result)
    if wait:
        results.wait()  # what this returns is what the next query sees
    return results


LATE_PUBLISH = ("the publish took longer than its visibility margin: a query that started "
                "at that moment may have paired this run's old and new tables")


def _prepared(folders: Sequence[Path | RunTarget], warehouse: Warehouse, options: Options
              ) -> Iterator[Prepared]:
    jobs = max(1, min(options.jobs, len(folders)))
    if jobs == 1:
        for folder in folders:
            yield prepare_folder(folder, warehouse, options)
        return
    from concurrent.futures import ProcessPoolExecutor, as_completed

    from etl.extract.worker_pool import spawn_context

    # spawned: no inherited locks or open handles; without the caller's main script, so
    # that etl.ingest works from a plain script (etl/extract/worker_pool.py)
    with ProcessPoolExecutor(jobs, mp_context=spawn_context()) as pool:
        futures = [pool.submit(prepare_folder, f, warehouse, options) for f in folders]
        for future in as_completed(futures):
            yield future.result()
