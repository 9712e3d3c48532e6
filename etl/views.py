"""SQL views: discover sql/views/, render, lint, order by dependency, create in DuckDB.

A view file `sql/views/<area>/<name>_v<N>.sql` holds one documented SELECT; the tool wraps
it in CREATE OR REPLACE VIEW <name>_v<N>, and <name> points to the highest N. A view reads
pinned `_vN` names, and a released one never changes (etl/view_fingerprints.py). Tables are
views too, generated from schemas/ over the Parquet files that lie beside the database
(found at each query, so the folder may be copied or moved: ROOT_MACROS). Every view and
column carries its documentation as a DuckDB comment (etl/view_comments.py).

What a reader sees while `etl ingest` publishes (the stored views, e.g. the DuckDB shell):
DuckDB lists a table view's files when it binds that reference, once per reference, so
two references in one query (`runs` and `kernels`, or a view and a table) are listed at
two moments. Each `runs` reference keeps the publishes visible at the start of the query's
transaction (VISIBLE_AT_QUERY_START), which every listing made after that start holds
(etl/warehouse.py, "Snapshots"), so all references agree: one snapshot per query, or per
explicit transaction. A table view binds its own `runs` before its own files, and
superseded folders outlive a query by the grace period. A prepared statement binds in one
transaction and runs in the next: one whose binding takes longer than the publish margin
may pair two publishes. `etl query` lists the publishes once per query and pins every
table to those files (`snapshot_view_sql`, etl/query.py).
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from etl.errors import EtlError
from etl.gpu_peaks import RELATION_DOCS
from etl.resources import data_dir
from etl.schema import TABLES, table_schema

if TYPE_CHECKING:
    import duckdb

    from etl.warehouse import Warehouse

SQL_DIR = data_dir("sql") / "views"
_FILE_RE = re.compile(r"^(?P<name>_?[a-z][a-z0-9_]*)_v(?P<version>\d+)\.sql$")
_COLUMN_DOC_RE = re.compile(r"^--\s{1,4}(?P<col>[a-z_][a-z0-9_]*)\s*:\s*(?P<doc>\S.*)$")


class ViewError(EtlError):
    """A view file that breaks the house rules; the message names the file."""


@dataclass(frozen=True)
class View:
    name: str          # versioned name, e.g. gpu_utilization_v1
    stable: str        # gpu_utilization
    version: int
    path: Path
    select: str        # rendered SELECT text
    columns: tuple[str, ...]
    column_docs: dict[str, str]
    depends_on: frozenset[str]
    doc: str = ""      # the leading comment: what the view is, its grain, its sources
    tree: Any = field(default=None, compare=False, repr=False)  # the parsed sqlglot Query


def discover(sql_dir: Path = SQL_DIR) -> list[View]:
    # `<name>_v<N>.<dialect>.sql` is a view's form in another dialect (etl/spark/dialects.py)
    views = [load_view(p) for p in sorted(sql_dir.rglob("*.sql")) if "." not in p.stem]
    return order_views(views)


def load_view(path: Path) -> View:
    import jinja2
    import sqlglot
    from sqlglot import exp

    match = _FILE_RE.match(path.name)
    if not match:
        raise ViewError(f"{path}: file name must be <name>_v<N>.sql")
    text = jinja2.Environment(undefined=jinja2.StrictUndefined).from_string(
        path.read_text(encoding="utf-8")).render()
    try:
        tree = sqlglot.parse_one(text, read="duckdb")
    except sqlglot.errors.ParseError as exc:
        raise ViewError(f"{path}: does not parse: {exc}") from None
    if not isinstance(tree, exp.Query):
        raise ViewError(f"{path}: must be a single SELECT (no DDL or DML)")
    columns = tuple(_projection_names(path, tree))
    return View(f"{match['name']}_v{match['version']}", match["name"], int(match["version"]),
                path, text, columns, _column_docs(text), frozenset(_dependencies(tree)),
                _leading_doc(text), tree)


def _projection_names(path: Path, tree: object) -> list[str]:
    from sqlglot import exp

    assert isinstance(tree, exp.Query)
    names = []
    for projection in tree.selects:
        if isinstance(projection, exp.Star) or (isinstance(projection, exp.Column)
                                                and isinstance(projection.this, exp.Star)):
            raise ViewError(f"{path}: SELECT * in the final projection; name the columns")
        names.append(projection.alias_or_name)
    return names


def _dependencies(tree: object) -> set[str]:
    from sqlglot import exp

    assert isinstance(tree, exp.Expression)
    # DuckDB matches names case-insensitively, quoted or not
    ctes = {cte.alias.lower() for cte in tree.find_all(exp.CTE)}
    return {t.name.lower() for t in tree.find_all(exp.Table) if t.name
            and t.name.lower() not in ctes and not isinstance(t.this, exp.Anonymous)}


def _column_docs(text: str) -> dict[str, str]:
    """Column docs: the `-- name: description` lines after the last line of SQL."""
    lines = text.rstrip().splitlines()
    docs: dict[str, str] = {}
    for line in reversed(lines):
        stripped = line.strip()
        if not stripped.startswith("--"):
            break
        if m := _COLUMN_DOC_RE.match(stripped):
            docs[m["col"]] = m["doc"]
    return docs


def _leading_doc(text: str) -> str:
    """The comment lines before the first line of SQL, as one paragraph."""
    lines = []
    for line in text.lstrip().splitlines():
        if not line.startswith("--"):
            break
        lines.append(line[2:].strip())
    return " ".join(line for line in lines if line)


def lint(views: list[View]) -> list[str]:
    """Problems, one line each naming the file; empty when all views keep the house rules."""
    problems = []
    stable = stable_names(views)
    for view in views:
        if not view.doc:
            problems.append(f"{view.path}: no leading comment stating what the view is "
                            "and its grain")
        elif "[paper" not in view.doc and "[project]" not in view.doc:
            problems.append(f"{view.path}: the leading comment does not say where the "
                            "definitions come from: [paper §/Table/Fig.] or [project]")
        for column in view.columns:
            if column not in view.column_docs:
                problems.append(f"{view.path}: column {column} is not documented in the "
                                "trailing comment")
        for column in view.column_docs:
            if column not in view.columns:
                problems.append(f"{view.path}: documents {column}, which the view does not return")
        problems += _moving_references(view, stable)
        problems += _unguarded_divisions(view)
        if stable[view.stable] == view.name:  # older versions keep the names they had
            problems += _ratio_names(view)
    return problems


_RATIO_WORDS = ("util", "share", "ratio")
_ANNOTATION = re.compile(r"_(source|reason)$")  # text about a ratio column: x_util_source


def _ratio_names(view: View) -> list[str]:
    """One naming scheme for ratios: a level ends in _util, a fraction of a whole in
    _share, a comparison in _ratio, and a name holds one of the three, last."""
    problems = []
    for column in view.columns:
        words = [w for w in _ANNOTATION.sub("", column).split("_") if w in _RATIO_WORDS]
        if len(words) > 1 or (words and not _ANNOTATION.sub("", column).endswith(words[0])):
            problems.append(f"{view.path}: column {column}: a ratio's name ends in _util (a "
                            "level), _share (a fraction of a whole) or _ratio (a comparison), "
                            "once and last (p10_issue_slot_util, not issue_slot_util_p10)")
    return problems


def _moving_references(view: View, stable: dict[str, str]) -> list[str]:
    """A view reads pinned `_vN` names: publishing x_v2 must not change what y_v1 returns."""
    return [f"{view.path}: reads {dep}, the name that follows the newest version; read "
            f"{stable[dep]} instead" for dep in sorted(view.depends_on) if dep in stable]


def _unguarded_divisions(view: View) -> list[str]:
    """Divisions whose denominator may be 0: DuckDB gives NaN for 0.0/0.0 and ±inf for
    x/0.0, and a view returns NULL where a value cannot be computed."""
    from sqlglot import exp

    if view.tree is None:
        return []
    return [f"{view.path}: the division by {div.expression.sql('duckdb')} is unguarded; "
            "write x / nullif(d, 0) (DuckDB's 0.0/0.0 is NaN) or divide inside CASE WHEN"
            for div in view.tree.find_all(exp.Div) if not _guarded(div)]


def _guarded(div: Any) -> bool:
    """The denominator is nullif(d, 0) or a non-zero number, or the division sits in the
    THEN of a CASE WHEN (whose condition is taken to exclude a zero denominator)."""
    from sqlglot import exp

    den = div.expression.unnest()
    if isinstance(den, exp.Nullif):
        return True
    if isinstance(den, exp.Literal) and den.is_number:
        return float(den.this) != 0
    node = div
    while node.parent is not None:
        if isinstance(node.parent, exp.If) and node.arg_key == "true":
            return True
        node = node.parent
    return False


def order_views(views: list[View]) -> list[View]:
    """Topological order by parsed dependencies; unknown tables and cycles fail."""
    by_name = {v.name: v for v in views}
    stable = stable_names(views)
    known = set(TABLES) | set(by_name) | set(stable) | set(RELATION_DOCS)
    ordered: list[View] = []
    state: dict[str, str] = {}

    def visit(view: View, chain: tuple[str, ...]) -> None:
        if state.get(view.name) == "done":
            return
        if state.get(view.name) == "visiting":
            raise ViewError(f"{view.path}: dependency cycle {' -> '.join(chain + (view.name,))}")
        state[view.name] = "visiting"
        for dep in sorted(view.depends_on):
            if dep not in known:
                raise ViewError(f"{view.path}: reads unknown table or view {dep!r}")
            target = by_name.get(dep) or by_name.get(stable.get(dep, ""))
            if target is not None:
                visit(target, chain + (view.name,))
        state[view.name] = "done"
        ordered.append(view)

    for view in views:
        visit(view, ())
    return ordered


def stable_names(views: list[View]) -> dict[str, str]:
    latest: dict[str, View] = {}
    for v in views:
        if v.stable not in latest or v.version > latest[v.stable].version:
            latest[v.stable] = v
    return {stable: v.name for stable, v in latest.items()}


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
# visible-from time (etl/warehouse.py: data/<publish_id>.v<µs>/) is not after the start of
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
]

MACRO_DOCS = {
    "_warehouse_database": "This database's path, from DuckDB's default temp_directory "
                           "(<database>.tmp).",
    "_warehouse_root": "The warehouse folder this database lies in (with a trailing /; '' "
                       "for the working directory), or the variable warehouse_root when "
                       "set: the table views read data/*/<table>.parquet under it.",
    "_warehouse_files": "The glob of a table's Parquet files under _warehouse_root(), its "
                        "glob characters matched literally.",
}


# A name whose latest publish is a tombstone (etl rm, etl mv) is gone; rows published
# before the column existed read NULL.
NOT_REMOVED = "NOT coalesce(removed, false)"


def table_view_sql(table: str) -> str:
    """A table as a view over its Parquet files, keeping each run's current publish.

    `runs` comes first in FROM so it is bound (its files listed) before the table's own
    files: a publish folder that `runs` sees is then already in the table's listing.
    """
    files = f"_warehouse_files('{table}')"
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
    all views of one query read the same publishes (see etl/query.py). The TEMP view shadows
    the stored one, and the stored views resolve their tables through the search path, temp
    first, so they read the pinned files too. A run's own folder holds that publish's rows
    only; a segment (etl/compact.py) also holds runs republished since, so with segments
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


def checked_views() -> list[View]:
    """The views of sql/views/, in dependency order; a ViewError when one breaks a rule."""
    views = discover()
    problems = lint(views)
    if problems:
        raise ViewError(problems[0] + (f" (and {len(problems) - 1} more)" if len(problems) > 1
                                       else ""))
    return views


def all_statements(warehouse: Warehouse) -> Statements:
    from etl.view_comments import comment_statements, relation_comments

    from etl.gpu_peaks import relation_selects

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
    return Statements([*ROOT_MACROS, *(table_view_sql(t) for t in TABLES)], statements,
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
    from etl import gpu_peaks, schema, view_comments
    from etl.schema import SCHEMA_DIR

    digest = hashlib.sha256()
    sources = [*sorted(SQL_DIR.rglob("*.sql")), *sorted(SCHEMA_DIR.glob("*.toml")),
               Path(__file__), Path(schema.__file__), Path(view_comments.__file__),
               Path(gpu_peaks.__file__), gpu_peaks.CATALOG]
    for path in sources:
        digest.update(b"\0" + str(path.relative_to(SQL_DIR.parent.parent)).encode() + b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()


STAMP = "views.sha256"
# What a writable shell can break: a view dropped or replaced (its text or comment changes,
# and a replaced view loses its column comments with its own). duckdb_views() costs a few
# ms; duckdb_functions() tens, so the macros are checked by what they return instead.
_STORED_VIEWS = ("SELECT view_name, sql, comment FROM duckdb_views() "
                 "WHERE database_name = current_database() AND NOT internal ORDER BY view_name")


def _catalog_digest(con: duckdb.DuckDBPyConnection) -> str:
    return hashlib.sha256(repr(con.execute(_STORED_VIEWS).fetchall()).encode()).hexdigest()


def views_current(con: duckdb.DuckDBPyConnection, warehouse: Warehouse) -> bool:
    """Whether `con` (on warehouse.database) holds the views as the last `ensure_views`
    left them, made from the current inputs: the stamp says which, the catalog is read."""
    import duckdb

    stamp = warehouse.root / STAMP
    if not stamp.exists() or stamp.read_text("utf-8").split() != [
            inputs_fingerprint(), _catalog_digest(con)]:
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

    from etl.view_template import copy_template, save_template

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
            stamp = f"{inputs_fingerprint()}\n{_catalog_digest(reader)}\n"
    except (duckdb.IOException, duckdb.ConnectionException):
        return True  # a writer holds it now: the next check writes the views again
    (warehouse.root / STAMP).write_text(stamp, "utf-8")
    if new:
        save_template(warehouse, STAMP)
    return True


def catalog_digest_of(database: Path) -> str | None:
    """The catalog digest of a views database file; None when it is not one."""
    import duckdb

    try:
        with duckdb.connect(str(database), read_only=True) as con:
            return _catalog_digest(con)
    except duckdb.Error:
        return None


def _cheap_binding_order(warehouse: Warehouse, statements: Statements) -> list[str]:
    """The statements, with the tables first over their zero-row schema files only.

    DuckDB binds each CREATE VIEW, and binding a view binds every table view under it again,
    whose read_parquet(union_by_name) reads the footer of every file: over 1 000 runs that
    took 109 s and 8.9 GB. Over the schema files the views bind at once; the tables are then
    pointed at the data, once each (a view is stored as SQL and bound again at each query).
    """
    from etl.warehouse import SCHEMA_DIR

    placeholders = []
    for table in TABLES:
        path = _sql_string(glob_literal(str(warehouse.data / SCHEMA_DIR / f"{table}.parquet")))
        columns = ", ".join(f'"{c}"' for c in table_schema(table).names)
        placeholders.append(f"CREATE OR REPLACE VIEW {table} AS SELECT {columns} FROM "
                            f"read_parquet({path})")
    return placeholders + statements.views + statements.tables + statements.comments
