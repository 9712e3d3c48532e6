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
import weakref
from collections.abc import Iterable
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import duckdb

    from etl.ingest import RunResult
    from etl.warehouse import Warehouse

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
    import duckdb

    from etl.errors import WarehouseError
    from etl.query import pin_snapshot

    target = _warehouse(warehouse)
    if not target.exists():
        raise WarehouseError(f"{target.root}: no warehouse here; run etl.ingest(RUNS, "
                             f"{str(target.root)!r}) first")
    _refresh_views(target)
    try:
        con = duckdb.connect(str(target.database), read_only=True)
    except duckdb.Error as exc:
        raise WarehouseError(f"{target.database}: cannot open ({exc})") from None
    lease = ExitStack()
    try:
        # every reference to a table opens its files: parse each footer once per connection
        con.execute("SET parquet_metadata_cache = true")
        lease.enter_context(target.reader_lease())  # taken before the listing it protects
        pin_snapshot(con, target)  # union_by_name: publishes of older schemas read as well
    except BaseException:
        con.close()
        lease.close()
        raise
    # a DuckDB connection cannot carry a close hook: the lease ends with the object
    weakref.finalize(con, lease.close)
    return con


def ingest(paths: PathLike | Iterable[PathLike], warehouse: PathLike | None = None,
           **options: Any) -> list[RunResult]:
    """Ingest run folders, or folders of run folders, as `etl ingest` does.

    Returns one RunResult per run folder: `status` is "ingested", "unchanged" or
    "refused" (then `error` is the one-line reason; the other runs still land). `options`
    are fields of etl.ingest.Options: `salvage=True` keeps the complete events of a
    truncated trace, `jobs=N` extracts N run folders at once (default as the command
    line's), `debug=True` raises instead of refusing. What is returned is visible to the
    next connect().
    """
    from etl.compact import compact, needs_compaction
    from etl.ingest import Options, ingest_all
    from etl.runfolder import find_run_folders

    target = _warehouse(warehouse)
    listed = [paths] if isinstance(paths, str | os.PathLike) else list(paths)
    folders = find_run_folders([Path(p) for p in listed])
    options.setdefault("jobs", min(2, os.cpu_count() or 1))
    results = ingest_all(folders, target, Options(**options))
    _refresh_views(target)
    if target.exists() and needs_compaction(target):
        compact(target)
    return results


def _warehouse(path: PathLike | None) -> Warehouse:
    from etl.warehouse import Warehouse

    return Warehouse.at(os.fspath(path) if path is not None
                        else os.environ.get("ETL_WAREHOUSE", "warehouse"))


def _refresh_views(target: Warehouse) -> None:
    """Recreate stale views; a warning when warehouse.duckdb is open elsewhere (the data
    is visible anyway: the tables are read from their files)."""
    import duckdb

    from etl.views import ensure_views

    try:
        fresh = ensure_views(target)
    except duckdb.ConnectionException:  # this process has it open read-only (connect())
        fresh = False
    if not fresh:
        warnings.warn(f"{target.database} is open (a DuckDB shell, or a connection of "
                      "etl.connect()); its views were not refreshed", stacklevel=3)
