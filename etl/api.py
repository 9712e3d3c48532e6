"""The Python API for notebooks and scripts: `etl.connect()` and `etl.ingest()`.

They do what `etl query` and `etl ingest` do, and return Python objects instead of printing:

    import etl
    results = etl.ingest("runs/", "warehouse")      # one RunResult per run folder
    con = etl.connect("warehouse")                  # read-only DuckDB connection
    con.sql("SELECT run_name, gpu_util FROM run_summary").df()   # or .arrow(), .pl()

Imports of duckdb and pyarrow stay inside the functions: `import etl` must stay instant.
"""
from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import duckdb

    from etl.analysis.costs import Computed as CostsComputed
    from etl.analysis.critical_path import Computed
    from etl.analysis.forecast.run import Forecast
    from etl.analysis.scale_out import ScaleOut
    from etl.analysis.whatif import WhatIf
    from etl.load.ingest import RunResult
    from etl.warehouse.compact import CompactResult
    from etl.warehouse.store import Warehouse

PathLike = str | os.PathLike[str]


def connect(warehouse: PathLike | None = None) -> duckdb.DuckDBPyConnection:
    """A read-only DuckDB connection with every table and view of the warehouse.

    All its queries read one snapshot: the runs published before this call (as one
    `etl query` does), however long the connection is used; call connect() again to see
    runs ingested since. The snapshot's files stay on disk while the connection object
    lives (a reader lease, like `etl query`'s): drop it (`del con`) when done, so that
    later ingests may delete the files of replaced runs. `warehouse` defaults to
    $ETL_WAREHOUSE or ./warehouse, as on the command line.
    """
    from etl.views.query import open_snapshot

    target = _warehouse(warehouse).existing()
    return open_snapshot(target, _current_views(target))


def _current_views(target: Warehouse) -> duckdb.DuckDBPyConnection | None:
    """A read-only connection on views that need no refresh (the one that checked them
    serves the snapshot: opening the file loads its catalog); None after refreshing them."""
    import duckdb

    from etl.views.database import check_root, views_current

    check_root(target)
    try:
        con = duckdb.connect(str(target.database), read_only=True)
    except duckdb.Error:
        con = None  # no file yet, or a writer holds it: _refresh_views decides
    if con is not None and views_current(con, target):
        return con
    if con is not None:
        con.close()  # the views are written by a connection of their own
    _refresh_views(target)
    return None


class Ingested(list["RunResult"]):
    """What etl.ingest returns: one RunResult per run folder, in the order they finished,
    and what happened to the warehouse around them (the command line prints both)."""

    views_refreshed: bool = True          # False: warehouse.duckdb was open elsewhere
    compaction: CompactResult | None = None  # set when the ingest compacted the warehouse


def ingest(paths: PathLike | Iterable[PathLike], warehouse: PathLike | None = None, *,
           prefix: bool = False, name: str | None = None, engine: str = "local",
           master: str = "local[2]", on_start: Callable[[int], None] | None = None,
           on_done: Callable[[RunResult], None] | None = None, **options: Any) -> Ingested:
    """Ingest run folders, or folders of run folders: what `etl ingest` runs.

    Returns one RunResult per run folder: `status` is "ingested", "unchanged" or
    "refused" (then `error` is the one-line reason; the other runs still land). `options`
    are fields of etl.load.ingest.Options: `salvage=True` keeps the complete events of a
    truncated trace, `jobs=N` extracts N run folders at once (default min(2, CPUs)),
    `debug=True` raises instead of refusing, `replace`, `strict`. `prefix` and `name` name
    the runs as `etl ingest --prefix/--name` do; `engine="spark"` extracts each run folder
    as a Spark task (`master`). `on_start(n)` hears how many run folders were found and
    `on_done(result)` each run as it ends. What is returned is visible to the next
    connect().
    """
    from etl.load.ingest import Options, Published, ingest_all
    from etl.load.runfolder import find_run_folders

    target = _warehouse(warehouse)
    listed = [paths] if isinstance(paths, str | os.PathLike) else list(paths)
    folders = find_run_folders([Path(p) for p in listed], prefix, name)
    if on_start is not None:
        on_start(len(folders))
    if options.get("jobs") is None:
        options["jobs"] = default_jobs()
    settings = Options(**options)
    if engine == "spark":
        from etl.spark import local_session
        from etl.spark.ingest import ingest_spark

        results = ingest_spark(local_session(master, "etl ingest"), folders, target,
                               settings, on_done=on_done)
    else:
        # the publish's visibility margin (store.PUBLISH_MARGIN_SECONDS) passes while the
        # views are refreshed and the layout checked
        results = ingest_all(folders, target, settings, on_done=on_done, wait=False)
    done = Ingested(results)
    done.views_refreshed = _refresh_views(target)
    wait = results.wait if isinstance(results, Published) else _nothing
    done.compaction = _compact_if_needed(target, wait)
    wait()  # what this returns is what the next query sees
    return done


def _nothing() -> None:
    return None


def whatif(run: str, scales: Iterable[str] = (), warehouse: PathLike | None = None
           ) -> WhatIf:
    """What `etl whatif RUN --scale ...` computes: the run's iterations replayed with the
    scales (etl/analysis/whatif.py says how they read). `.rows` holds one dict per device
    and iteration (measured_ns, replayed_ns, whatif_ns, speedup_ratio), `.path` the
    what-if's critical path by kind and name, `.notes()` what the answer rests on."""
    from etl.analysis.whatif import what_if

    con = connect(warehouse)
    try:
        return what_if(con, run, list(scales))
    finally:
        con.close()


def forecast(run: str, gpu: str, by: str = "iteration", warehouse: PathLike | None = None,
             source_gpu: str | None = None, host_factor: float = 1.0,
             fallback: dict[str, str] | None = None, *, ranks: int | None = None,
             link: str | None = None, network: str | None = None, gpus_per_node: int = 8,
             grad_bytes: float | None = None, source_link: str | None = None) -> Forecast:
    """What `etl forecast RUN --gpu NAME` computes: the run's time on another GPU
    (etl/analysis/forecast/). `.rows` holds one dict per device and iteration (by="op",
    "layer", "kernel", "kernel_type": per group) with measured_ns, predicted_ns, the
    interval low_ns..high_ns and each method's share; `.notes` what it rests on, e.g. a
    peak memory the target cannot hold. `source_gpu` names the run's GPU where the trace
    does not; `host_factor` scales host time; `fallback` maps a precision the target
    lacks to one it has ({"bf16": "fp16"}). `ranks` (with link, network, gpus_per_node,
    grad_bytes, source_link as in scale_out): the same on that many GPUs of the target,
    its collectives timed for them (by "iteration" only; each row gains `ranks`)."""
    from etl.analysis.forecast.run import ForecastError
    from etl.analysis.forecast.run import forecast as run_forecast
    from etl.analysis.scale_out import forecast_gpu_ranks

    if ranks is not None and by != "iteration":
        raise ForecastError(f"--by {by} with --ranks: the ranks are forecast per iteration "
                            "(--by iteration)")
    con = connect(warehouse)
    try:
        if ranks is not None:
            return forecast_gpu_ranks(con, run, gpu, ranks, gpus_per_node, link, network,
                                      grad_bytes, source_link, source_gpu, host_factor,
                                      fallback)
        return run_forecast(con, run, gpu, by, source_gpu, host_factor, fallback)
    finally:
        con.close()


def critical_path(runs: Iterable[str] | None = None, warehouse: PathLike | None = None
                  ) -> Computed:
    """Compute and keep the critical path of the runs named (all by default) that have none
    yet: what `etl critical-path` runs, and what the views critical_path and
    critical_path_summary read (etl/analysis/critical_path.py)."""
    from etl.analysis.critical_path import ensure

    target = _warehouse(warehouse).existing()
    return ensure(target, None if runs is None else list(runs))


def costs(runs: Iterable[str] | None = None, warehouse: PathLike | None = None
          ) -> CostsComputed:
    """Compute and keep the kernel costs (FLOPs and bytes of every kernel, from its op's
    input shapes or its ncu counters) of the runs named (all by default) that have none
    yet: what `etl costs` runs, and what kernel_roofline, op_roofline, op_flops and mfu
    read (etl/analysis/costs.py)."""
    from etl.analysis.costs import ensure

    target = _warehouse(warehouse).existing()
    return ensure(target, None if runs is None else list(runs))


def scale_out(run: str, ranks: int, warehouse: PathLike | None = None, *,
              link: str | None = None, network: str | None = None, gpus_per_node: int = 8,
              grad_bytes: float | None = None, source_link: str | None = None) -> ScaleOut:
    """What `etl forecast RUN --ranks N` computes: the run's iterations data parallel on
    `ranks` GPUs over `link` (and `network` between machines of `gpus_per_node`), from the
    run's own collectives, or from `grad_bytes` of gradients for a one-GPU run
    (etl/analysis/scale_out.py). `.rows`: one dict per device and iteration
    (measured_ns, replayed_ns, forecast_ns, slowdown_ratio); `.notes`: what it rests on."""
    from etl.analysis.scale_out import forecast_ranks, target_topology

    con = connect(warehouse)
    try:
        gpu = con.execute("SELECT any_value(gpu) FROM runs WHERE run_name = ?",
                          [run]).fetchone()
        target = target_topology(ranks, gpus_per_node, link, network, gpu[0] if gpu else None)
        return forecast_ranks(con, run, target, grad_bytes, source_link)
    finally:
        con.close()


def default_jobs() -> int:
    """Run folders extracted at once unless told: two where there are two cores."""
    return min(2, os.cpu_count() or 1)


def _compact_if_needed(target: Warehouse, first: Callable[[], None]) -> CompactResult | None:
    """Compact when many runs sit in folders of their own, after `first` (the ingest's
    publishes made visible: compaction reads the runs as queries see them)."""
    from etl.warehouse.compact import compact, needs_compaction

    if target.exists() and needs_compaction(target):
        first()
        return compact(target)
    return None


def _warehouse(path: PathLike | None) -> Warehouse:
    from etl.warehouse.store import Warehouse

    return Warehouse.at(os.fspath(path) if path is not None
                        else os.environ.get("ETL_WAREHOUSE", "warehouse"))


def _refresh_views(target: Warehouse) -> bool:
    """Recreate stale views; False, with a warning, when warehouse.duckdb is open elsewhere
    (the data is visible anyway: the tables are read from their files)."""
    import duckdb

    from etl.views.database import ensure_views

    try:
        fresh = ensure_views(target)
    except duckdb.ConnectionException:  # this process has it open read-only (connect())
        fresh = False
    if not fresh:
        warnings.warn(f"{target.database} is open in another process; views were not "
                      "refreshed (new runs are visible anyway; `etl views` writes them later: "
                      "a DuckDB shell or an etl.connect() connection holds it)", stacklevel=3)
    return fresh
