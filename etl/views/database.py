"""The views created in a warehouse's DuckDB database, and kept current.

A view file `sql/views/<area>/<name>_v<N>.sql` holds one documented SELECT; the tool wraps
it in CREATE OR REPLACE VIEW <name>_v<N>, and <name> points to the highest N. A view reads
pinned `_vN` names, and a released one never changes (etl/views/fingerprints.py). Tables are
views too, generated from schemas/ over the Parquet files that lie beside the database
(found at each query, so the folder may be copied or moved: ROOT_MACROS). Every view and
column carries its documentation as a DuckDB comment (etl/views/comments.py).

What a reader sees while `etl ingest` publishes (the stored views, e.g. the DuckDB shell):
DuckDB lists a table view's files when it binds that reference, once per reference, so
two references in one query (`runs` and `kernels`, or a view and a table) are listed at
two moments. Each `runs` reference keeps the publishes visible at the start of the query's
transaction (VISIBLE_AT_QUERY_START), which every listing made after that start holds
(etl/warehouse/store.py, "Snapshots"), so all references agree: one snapshot per query, or per
explicit transaction. A table view binds its own `runs` before its own files, and
superseded folders outlive a query by the grace period. A prepared statement binds in one
transaction and runs in the next: one whose binding takes longer than the publish margin
may pair two publishes. `etl query` lists the publishes once per query and pins every
table to those files (`snapshot_view_sql`, etl/views/query.py).
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from etl.core.schema import ALL_TABLES, DERIVED_TABLES, table_schema
from etl.core.sql_files import SQL_DIR, ViewError, stable_names
from etl.views.catalog import checked_views
from etl.views.template import catalog_digest

if TYPE_CHECKING:
    import duckdb

    from etl.warehouse.store import Warehouse


def _sql_string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def glob_literal(path: str) -> str:
    """`path` as a DuckDB glob pattern that matches only itself.

    DuckDB globs any path holding `*`, `?` or `[`; a one-character class `[c]` matches c
    literally (a lone `]` is already literal). There is no escape for a backslash: DuckDB's
    glob splits on it as on `/`, so such a root is refused by `check_root`.
    """
    return re.sub(r"[*?\[]", lambda m: f"[{m[0]}]", path)


def check_root(warehouse: Warehouse) -> None:
    """Refuse a warehouse path the views cannot name (see glob_literal)."""
    if "\\" in str(warehouse.root):
        raise ViewError(f"{warehouse.root}: a warehouse path with a backslash cannot be read "
                        "by DuckDB's file globbing; choose another --warehouse folder")


# A runs.parquet row (read with filename = true) is visible to a query when its folder's
# visible-from time (etl/warehouse/store.py: data/<publish_id>.v<µs>/) is not after the start of
# the query's transaction; a folder without that suffix always is.
VISIBLE_AT_QUERY_START = (
    "coalesce(TRY_CAST(regexp_extract(filename, '[.]v([0-9]+)[/]runs[.]parquet$', 1) "
    "AS BIGINT), 0) <= epoch_us(get_current_timestamp())")


# The stored views find the Parquet files beside the database they are stored in, at each
# query: a warehouse folder copied or moved elsewhere reads its own files, never the
# original's. DuckDB has no function for that path which a table function may take
# (read_parquet's arguments are folded to constants: duckdb_databases() is a subquery and
# not allowed), but current_setting() is folded, and DuckDB's default temp_directory is
# the database path with ".tmp" inserted before its first "?" (appended when there is
# none; the WAL is named the same way, see NO_WAL). A session that sets temp_directory or
# opens the file by ATTACH names the folder itself: SET VARIABLE warehouse_root = 'DIR'.
_TEMP = "current_setting('temp_directory')"
_DATABASE = "warehouse.duckdb"
_LOST = ("the warehouse views read the Parquet files beside warehouse.duckdb, found through "
         "the default temp_directory, which this session changed (or the database is "
         "attached): SET VARIABLE warehouse_root = '/path/to/the/warehouse/folder'")
ROOT_MACROS = [
    "CREATE OR REPLACE MACRO _warehouse_database() AS "
    f"CASE WHEN contains({_TEMP}, '?') "
    f"THEN left({_TEMP}, strpos({_TEMP}, '?') - 5) || substr({_TEMP}, strpos({_TEMP}, '?')) "
    f"ELSE left({_TEMP}, -4) END",
    "CREATE OR REPLACE MACRO _warehouse_root() AS "
    "CASE WHEN getvariable('warehouse_root') IS NOT NULL "
    "THEN rtrim(getvariable('warehouse_root'), '/') || '/' "
    f"WHEN _warehouse_database() = '{_DATABASE}' THEN '' "
    f"WHEN suffix(_warehouse_database(), '/{_DATABASE}') "
    f"THEN left(_warehouse_database(), -{len(_DATABASE)}) "
    f"ELSE error({_sql_string(_LOST)}) END",
    # a glob that matches the folder literally (as glob_literal does)
    "CREATE OR REPLACE MACRO _warehouse_files(table_name) AS "
    r"regexp_replace(_warehouse_root(), '([*?\[])', '[\1]', 'g') || 'data/*/' || table_name "
    "|| '.parquet'",
    # derived tables: derived/<publish_id>/<table>.parquet, and derived/_schema's zero-row one
    "CREATE OR REPLACE MACRO _derived_files(table_name) AS "
    r"regexp_replace(_warehouse_root(), '([*?\[])', '[\1]', 'g') || 'derived/*/' || "
    "table_name || '.parquet'",
]

MACRO_DOCS = {
    "_warehouse_database": "This database's path, from DuckDB's default temp_directory "
                           "(<database>.tmp).",
    "_warehouse_root": "The warehouse folder this database lies in (with a trailing /; '' "
                       "for the working directory), or the variable warehouse_root when "
                       "set: the table views read data/*/<table>.parquet under it.",
    "_warehouse_files": "The glob of a table's Parquet files under _warehouse_root(), its "
                        "glob characters matched literally.",
    "_derived_files": "The glob of a derived table's Parquet files (derived/<publish_id>/), "
                      "computed after a run's publish (etl critical-path).",
}


# A name whose latest publish is a tombstone (etl rm, etl mv) is gone; rows published
# before the column existed read NULL.
NOT_REMOVED = "NOT coalesce(removed, false)"


def table_view_sql(table: str) -> str:
    """A table as a view over its Parquet files, keeping each run's current publish.

    `runs` comes first in FROM so it is bound (its files listed) before the table's own
    files: a publish folder that `runs` sees is then already in the table's listing.
    """
    files = (f"_derived_files('{table}')" if table in DERIVED_TABLES
             else f"_warehouse_files('{table}')")
    if table == "runs":
        columns = ", ".join(f'"{c}"' for c in table_schema(table).names)
        return (f"CREATE OR REPLACE VIEW runs AS SELECT {columns} FROM ("
                f"SELECT * FROM read_parquet({files}, union_by_name = true, filename = true) "
                f"WHERE {VISIBLE_AT_QUERY_START} QUALIFY row_number() OVER "
                f"(PARTITION BY run_name ORDER BY publish_seq DESC) = 1) "
                f"WHERE {NOT_REMOVED}")
    columns = ", ".join(f't."{c}"' for c in table_schema(table).names)
    return (f"CREATE OR REPLACE VIEW {table} AS SELECT {columns} FROM "
            f"(SELECT publish_id FROM runs) AS current_publish "
            f"JOIN read_parquet({files}, union_by_name = true) AS t "
            f"ON t.publish_id = current_publish.publish_id")


def snapshot_view_sql(table: str, files: list[str], union_by_name: bool,
                      keep: list[str] | None = None) -> str:
    """A table as a TEMP view over an explicit list of files, for one connection.

    `etl query` lists the current publishes once and pins every table to their files, so
    all views of one query read the same publishes (see etl/views/query.py). The TEMP view shadows
    the stored one, and the stored views resolve their tables through the search path, temp
    first, so they read the pinned files too. A run's own folder holds that publish's rows
    only; a segment (etl/warehouse/compact.py) also holds runs republished since, so with segments
    `keep` lists the publish ids to read. Without union_by_name DuckDB reads one footer (the
    first file's, the zero-row schema file) to bind instead of every file's, once per
    reference to the table in a query; a file of another schema then fails the query,
    which `etl query` retries with union_by_name.
    """
    paths = ", ".join(_sql_string(glob_literal(f)) for f in files)
    columns = ", ".join(f'"{c}"' for c in table_schema(table).names)
    where = ("" if keep is None else " WHERE false" if not keep else
             " WHERE publish_id IN (" + ", ".join(map(_sql_string, keep)) + ")")
    return (f"CREATE OR REPLACE TEMP VIEW {table} AS SELECT {columns} FROM "
            f"read_parquet([{paths}], union_by_name = {str(union_by_name).lower()}){where}")


@dataclass(frozen=True)
class Statements:
    tables: list[str]    # the root macros, then each table as a view over its files
    views: list[str]     # CREATE VIEW of each view, then of its stable name
    comments: list[str]  # COMMENT ON each of them and their columns, run last


def all_statements(warehouse: Warehouse) -> Statements:
    from etl.views.comments import comment_statements, relation_comments

    from etl.core.gpu_peaks import relation_selects

    views = checked_views()
    # the catalog relations first: views that read them bind when they are created
    statements = [f"CREATE OR REPLACE VIEW {name} AS {select}"
                  for name, select in relation_selects().items()]
    stable = stable_names(views)
    for view in views:
        statements.append(f"CREATE OR REPLACE VIEW {view.name} AS\n{view.select}")
        if stable[view.stable] == view.name:
            statements.append(f"CREATE OR REPLACE VIEW {view.stable} AS SELECT "
                              + ", ".join(f'"{c}"' for c in view.columns) + f" FROM {view.name}")
    macro_docs = [f"COMMENT ON MACRO {name} IS {_sql_string(doc)}"
                  for name, doc in MACRO_DOCS.items()]
    return Statements([*ROOT_MACROS, *(table_view_sql(t) for t in ALL_TABLES)], statements,
                      comment_statements(views) + macro_docs + relation_comments())


# Commit straight into warehouse.duckdb by a checkpoint, never through a WAL file: DuckDB
# names the WAL by inserting ".wal" before the first "?" of the database path, so under a
# folder such as "wh?x" the commit failed ("Cannot open file .../wh.wal?x/..."). The
# checkpoint is as crash-safe as the WAL (the file header is switched last); the database
# holds views only, so the checkpoint is small.
NO_WAL: dict[str, str | bool | int | float | list[str]] = {
    "checkpoint_threshold": "0b", "auto_checkpoint_skip_wal_threshold": 0}


def inputs_fingerprint() -> str:
    """A hash of everything the statements are made from (the view files, the table
    schemas, the modules that write them; not the warehouse's path, which they do not
    hold): checked at every query, so it must cost far less than rendering and parsing
    every view."""
    digest = hashlib.sha256()
    for path in input_files():
        digest.update(b"\0" + str(path.relative_to(SQL_DIR.parent.parent)).encode() + b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()


def input_files() -> list[Path]:
    from etl.core import gpu_peaks, gpus, schema, sql_files
    from etl.core.schema import SCHEMA_DIR
    from etl.views import comments

    # the SQL folder whole: the views, and the macros they render with, whatever the suffix
    macros = SQL_DIR.parent / "macros"
    sql = {*SQL_DIR.parent.rglob("*.sql"), *(p for p in macros.rglob("*") if p.is_file())}
    return [*sorted(sql), *sorted(SCHEMA_DIR.glob("*.toml")),
            Path(__file__), Path(schema.__file__), Path(sql_files.__file__),
            Path(comments.__file__), Path(gpu_peaks.__file__), gpu_peaks.CATALOG,
            Path(gpus.__file__)]


STAMP = "views.sha256"
def views_current(con: duckdb.DuckDBPyConnection, warehouse: Warehouse) -> bool:
    """Whether `con` (on warehouse.database) holds the views as the last `ensure_views`
    left them, made from the current inputs: the stamp says which, the catalog is read."""
    import duckdb

    stamp = warehouse.root / STAMP
    if not stamp.exists() or stamp.read_text("utf-8").split() != [
            inputs_fingerprint(), catalog_digest(con)]:
        return False
    try:
        [(files,)] = con.execute("SELECT _warehouse_files('runs')").fetchall()
    except duckdb.Error:
        return False  # a macro was dropped
    return bool(files == glob_literal(f"{warehouse.root}/") + "data/*/runs.parquet")


def ensure_views(warehouse: Warehouse) -> bool:
    """Create or refresh the views when their inputs changed or the database no longer
    holds them as written (dropped or replaced from a shell); False if the file is locked."""
    import duckdb

    from etl.views.template import copy_template, save_template

    check_root(warehouse)
    new = not warehouse.database.exists()
    if new:
        warehouse.init()
        if copy_template(warehouse, inputs_fingerprint(), STAMP):
            return True
    else:
        try:
            with duckdb.connect(str(warehouse.database), read_only=True) as con:
                if views_current(con, warehouse):
                    return True
        except (duckdb.IOException, duckdb.ConnectionException):
            return False  # a writer holds the file
    statements = all_statements(warehouse)
    if not new:  # a new one was laid out above
        warehouse.init()  # schema files of tables newer than the warehouse, before binding
    try:
        con = duckdb.connect(str(warehouse.database), config=NO_WAL)
    except (duckdb.IOException, duckdb.ConnectionException):
        return False  # a reader holds the file; data stays visible through existing views
    try:
        con.execute("BEGIN")
        for statement in _cheap_binding_order(warehouse, statements):
            con.execute(statement)
        con.execute("COMMIT")
    finally:
        con.close()
    # the digest as a reader sees the catalog: DuckDB prints some stored SQL differently in
    # the connection that wrote it (CAST(NULL AS "DOUBLE") there, AS DOUBLE once reopened),
    # and a digest of the writer's text made every later query write the views again
    try:
        with duckdb.connect(str(warehouse.database), read_only=True) as reader:
            stamp = f"{inputs_fingerprint()}\n{catalog_digest(reader)}\n"
    except (duckdb.IOException, duckdb.ConnectionException):
        return True  # a writer holds it now: the next check writes the views again
    (warehouse.root / STAMP).write_text(stamp, "utf-8")
    if new:
        save_template(warehouse, STAMP)
    return True


def _cheap_binding_order(warehouse: Warehouse, statements: Statements) -> list[str]:
    """The statements, with the tables first over their zero-row schema files only.

    DuckDB binds each CREATE VIEW, and binding a view binds every table view under it again,
    whose read_parquet(union_by_name) reads the footer of every file: over 1 000 runs that
    took 109 s and 8.9 GB. Over the schema files the views bind at once; the tables are then
    pointed at the data, once each (a view is stored as SQL and bound again at each query).
    """
    from etl.warehouse.store import SCHEMA_DIR

    placeholders = []
    for table in ALL_TABLES:
        folder = warehouse.derived if table in DERIVED_TABLES else warehouse.data
        path = _sql_string(glob_literal(str(folder / SCHEMA_DIR / f"{table}.parquet")))
        columns = ", ".join(f'"{c}"' for c in table_schema(table).names)
        placeholders.append(f"CREATE OR REPLACE VIEW {table} AS SELECT {columns} FROM "
                            f"read_parquet({path})")
    return placeholders + statements.views + statements.tables + statements.comments
