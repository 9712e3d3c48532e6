"""Read-only SQL on a warehouse, every query on one snapshot of the publishes.

The stored views (warehouse.duckdb) already give each query one snapshot: the publishes
visible at its start (etl/warehouse/store.py, "Snapshots"). `etl query` lists the folders once,
chooses each run's current publish, and pins every table of its connection to the files of
those publishes (TEMP views that shadow the stored ones): binding then reads one footer per
table instead of every file's, and the snapshot holds for a prepared statement too. It
holds a reader lease meanwhile, so none of the pinned folders is deleted before it ends.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from etl.core.errors import EtlError, WarehouseError

if TYPE_CHECKING:
    import duckdb

    from etl.warehouse.store import Warehouse

LIST_ATTEMPTS = 5
# DuckDB's messages when a pinned file's columns differ from the schema file's (a publish
# written under an older schemas/*.toml): the query is run again with union_by_name.
SCHEMA_MISMATCH = ("schema mismatch", "Error while reading file", "Failed to read file")


def run_query(warehouse_dir: Path, sql: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    import duckdb

    from etl.warehouse.store import Warehouse

    warehouse = Warehouse.at(warehouse_dir).existing()
    if not sql.strip():
        raise EtlError('no SQL given; for example: etl query "SELECT run_name FROM runs"')
    con = _connect_to_current_views(warehouse)
    try:
        _refuse_writes(con, sql)
        with warehouse.reader_lease():
            return _execute(con, warehouse, sql)
    except duckdb.Error as exc:
        raise QueryError(str(exc)) from None
    finally:
        con.close()


class QueryError(EtlError):
    """DuckDB refused the SQL: its first line is the error line; the rest (candidate
    columns, "Did you mean", the caret under the position) is `detail`, printed whole."""

    def __init__(self, message: str) -> None:
        first, _, rest = message.strip().partition("\n")
        super().__init__(f"query failed: {first}")
        self.detail = rest.strip("\n")


# Statement kinds that only read. COPY ... TO and EXPORT DATABASE write files even on a
# read-only connection; `etl query -o FILE` is the way to write a result.
READING = ("SELECT", "EXPLAIN", "CALL", "PRAGMA", "SET", "RELATION")


def _refuse_writes(con: duckdb.DuckDBPyConnection, sql: str) -> None:
    for statement in con.extract_statements(sql):
        kind = str(statement.type).rpartition(".")[2]
        if kind not in READING:
            raise EtlError(f"{kind} statements are not run by etl query, which only reads; "
                           "to write a result to a file: etl query \"SELECT ...\" "
                           "--format parquet -o FILE")


def export_query(warehouse_dir: Path, sql: str, path: Path, fmt: str) -> int:
    """Write the result of `sql` to `path` (parquet, csv or json) on one snapshot; the
    number of rows written."""
    import duckdb

    from etl.warehouse.store import Warehouse

    warehouse = Warehouse.at(warehouse_dir)
    con = _connect_to_current_views(warehouse)
    options = {"parquet": "FORMAT parquet, COMPRESSION zstd", "csv": "FORMAT csv, HEADER",
               "json": "FORMAT json, ARRAY true"}[fmt]
    try:
        _refuse_writes(con, sql)
        with warehouse.reader_lease():
            pin_snapshot(con, warehouse, union_by_name=True)
            target = str(path).replace("'", "''")
            rows = con.execute(f"COPY ({sql.strip().rstrip(';')}) TO '{target}' ({options})")
            return int(rows.fetchone()[0])  # type: ignore[index]
    except duckdb.Error as exc:
        raise QueryError(str(exc)) from None
    finally:
        con.close()


def _connect_to_current_views(warehouse: Warehouse) -> duckdb.DuckDBPyConnection:
    """A read-only connection on views as `ensure_views` writes them: written again first
    when their inputs changed or a shell dropped or replaced one (checked on the reader's
    own connection, so an unchanged warehouse is opened once)."""
    from etl.views.database import ensure_views, views_current

    con = _connect(warehouse) if warehouse.database.exists() else None
    if con is not None and views_current(con, warehouse):
        return con
    if con is not None:
        con.close()  # the views are written by a connection of their own
    ensure_views(warehouse)
    return _connect(warehouse)


def _connect(warehouse: Warehouse) -> duckdb.DuckDBPyConnection:
    import duckdb

    try:
        con = duckdb.connect(str(warehouse.database), read_only=True)
        # each reference to a table in a query opens its files again: parse footers once
        con.execute("SET parquet_metadata_cache = true")
        # DuckDB draws a progress bar on stdout for a query over 2 s: it would land in the
        # output (csv, a report's path) under load
        con.execute("SET enable_progress_bar = false")
    except duckdb.Error as exc:
        raise WarehouseError(f"{warehouse.database}: cannot open ({exc})") from None
    return con


def _execute(con: duckdb.DuckDBPyConnection, warehouse: Warehouse, sql: str
             ) -> tuple[list[str], list[tuple[Any, ...]]]:
    """`sql` on a fresh snapshot; once more with union_by_name if a file's schema differs."""
    import duckdb

    for union_by_name in (False, True):
        pin_snapshot(con, warehouse, union_by_name)
        try:
            cursor = con.execute(sql)
            columns = [d[0] for d in cursor.description] if cursor.description else []
            return columns, cursor.fetchall()
        except (duckdb.InvalidInputException, duckdb.ConversionException) as exc:
            if union_by_name or not any(m in str(exc) for m in SCHEMA_MISMATCH):
                raise
    raise AssertionError("unreachable")


def open_snapshot(warehouse: Warehouse, con: duckdb.DuckDBPyConnection | None = None
                  ) -> duckdb.DuckDBPyConnection:
    """A read-only connection to the warehouse's views, every table pinned to the publishes
    current now; the reader lease that keeps their files lasts as long as the connection
    object (etl.connect() is this, after refreshing the views). `con`: a read-only
    connection to warehouse.database to use (else one is opened)."""
    import weakref
    from contextlib import ExitStack

    import duckdb

    if con is None:
        try:
            con = duckdb.connect(str(warehouse.database), read_only=True)
        except duckdb.Error as exc:
            raise WarehouseError(f"{warehouse.database}: cannot open ({exc})") from None
    lease = ExitStack()
    try:
        # every reference to a table opens its files: parse each footer once per connection
        con.execute("SET parquet_metadata_cache = true")
        con.execute("SET enable_progress_bar = false")  # stdout is the caller's
        lease.enter_context(warehouse.reader_lease())  # taken before the listing it protects
        pin_snapshot(con, warehouse)  # union_by_name: publishes of older schemas read as well
    except BaseException:
        con.close()
        lease.close()
        raise
    # a DuckDB connection cannot carry a close hook: the lease ends with the object
    weakref.finalize(con, lease.close)
    return con


def pin_snapshot(con: duckdb.DuckDBPyConnection, warehouse: Warehouse,
                 union_by_name: bool = True) -> list[Path]:
    """Pin every table of `con` to the current publishes as listed now; their folders.
    With `union_by_name`, only the tables whose files differ in their schema are read
    by name across files (see _mixed_schemas)."""
    from etl.warehouse.compact import SEGMENT_PREFIX
    from etl.core.schema import DERIVED_TABLES, TABLES
    from etl.views.database import snapshot_view_sql
    from etl.warehouse.store import SCHEMA_DIR

    chosen = current_publishes(con, warehouse)
    folders = sorted({folder for _, folder in chosen})
    # a segment also holds rows of runs republished since: keep the chosen publishes only
    keep = ([publish_id for publish_id, _ in chosen]
            if any(f.name.startswith(SEGMENT_PREFIX) for f in folders) else None)
    schema = warehouse.data / SCHEMA_DIR
    files: dict[str, list[str]] = {}
    kept: dict[str, list[str] | None] = {}
    for table in TABLES:
        # the zero-row schema file comes first: it keeps the view valid with no runs at
        # all, and its declared types are the ones the other files are read as
        listed = [schema / f"{table}.parquet"] + [f / f"{table}.parquet" for f in folders]
        # like the stored views' globs, a publish without this table's file has no rows in it
        files[table] = [str(f) for f in listed if f.exists()]
        # a renamed run's folder also holds its old name's tombstone (etl/warehouse/manage.py)
        kept[table] = [publish_id for publish_id, _ in chosen] if table == "runs" else keep
    for table in DERIVED_TABLES:  # the rows computed for the chosen publishes, if any yet
        listed = [warehouse.derived / SCHEMA_DIR / f"{table}.parquet"] + [
            warehouse.derived_file(table, publish_id) for publish_id, _ in chosen]
        files[table], kept[table] = [str(f) for f in listed if f.exists()], None
    mixed = _mixed_schemas(con, files) if union_by_name else set()
    for table, paths in files.items():
        con.execute(snapshot_view_sql(table, paths, table in mixed, kept[table]))
    return folders


def _mixed_schemas(con: duckdb.DuckDBPyConnection, files: dict[str, list[str]]) -> set[str]:
    """The tables whose files do not all have one Parquet schema (publishes written under
    an older schemas/*.toml), compared as sets of columns: DuckDB matches columns by name.
    The others need no union_by_name, which makes every reference to a table read every
    file's footer when a query is bound (the report's views bound 3x slower with it)."""
    several = {table: paths for table, paths in files.items() if len(paths) > 1}
    signatures = _column_signatures(con, [p for paths in several.values() for p in paths])
    return {table for table, paths in several.items()
            if len({signatures.get(p, p) for p in paths}) != 1}


# A file's columns by (path, device, inode, size, mtime): a published file is written once
# and renamed into place, never changed, so each connection of a process (etl.connect in a
# notebook, the report, the tests) reads the footers of the new publishes only.
_SIGNATURES: dict[tuple[str, int, int, int, int], str] = {}
_MAX_SIGNATURES = 1 << 16


def _column_signatures(con: duckdb.DuckDBPyConnection, paths: list[str]) -> dict[str, str]:
    """Each file's columns (name, type, ...) as one comparable text; a file DuckDB names
    otherwise than `paths` does has none (its table then counts as mixed: read by name)."""
    import os

    keys = {}
    for path in paths:
        found = os.stat(path)
        keys[path] = (path, found.st_dev, found.st_ino, found.st_size, found.st_mtime_ns)
    missing = [p for p in dict.fromkeys(paths) if keys[p] not in _SIGNATURES]
    if missing:
        if len(_SIGNATURES) + len(missing) > _MAX_SIGNATURES:
            _SIGNATURES.clear()
        read = _read_signatures(con, missing)
        _SIGNATURES.update((keys[p], read[p]) for p in missing if p in read)
    return {p: _SIGNATURES[keys[p]] for p in paths if keys[p] in _SIGNATURES}


def _read_signatures(con: duckdb.DuckDBPyConnection, paths: list[str]) -> dict[str, str]:
    from etl.views.database import _sql_string, glob_literal

    listed = ", ".join(_sql_string(glob_literal(p)) for p in paths)
    rows = con.execute(
        "SELECT file_name, list_sort(list(CAST(row(name, type, converted_type, "
        "logical_type, repetition_type, num_children) AS VARCHAR))) "
        f"FROM parquet_schema([{listed}]) GROUP BY file_name").fetchall()
    return {file_name: "\x1f".join(columns) for file_name, columns in rows}


def current_publishes(con: duckdb.DuckDBPyConnection, warehouse: Warehouse
                      ) -> list[tuple[str, Path]]:
    """(publish id, folder) of each run's current publish: the highest publish_seq per run
    name among those visible now (the rule of the stored `runs` view).

    Reads two columns of every runs.parquet: a full read of `runs` here would cost seconds
    over 1 000 runs (DuckDB's cost is per file and column), and most queries project few
    of its columns. Only a folder superseded over the grace period ago may vanish while it
    is read (garbage collection by a publisher); the listing is then taken again.
    """
    import duckdb

    from etl.views.database import NOT_REMOVED, VISIBLE_AT_QUERY_START, _sql_string, glob_literal
    from etl.warehouse.store import SCHEMA_DIR

    for _ in range(LIST_ATTEMPTS):
        files = [str(p / "runs.parquet") for p in sorted(warehouse.data.iterdir())
                 if p.name != SCHEMA_DIR and p.is_dir()]
        if not files:
            return []
        # the zero-row schema file has every column, also where no publish has one yet
        files.append(str(warehouse.data / SCHEMA_DIR / "runs.parquet"))
        listed = ", ".join(_sql_string(glob_literal(f)) for f in files)
        try:
            rows = con.execute(
                f"SELECT publish_id, filename FROM (SELECT * FROM read_parquet([{listed}], "
                f"union_by_name = true, filename = true) WHERE {VISIBLE_AT_QUERY_START} "
                "QUALIFY row_number() OVER (PARTITION BY run_name "
                f"ORDER BY publish_seq DESC) = 1) WHERE {NOT_REMOVED}").fetchall()
        except duckdb.IOException:
            continue
        return [(publish_id, Path(name).parent) for publish_id, name in rows]
    raise WarehouseError(f"{warehouse.data}: publish folders keep disappearing; retry")
