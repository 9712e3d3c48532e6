"""The warehouse in a SparkSession: every table and every view, on one snapshot.

    from etl.spark import register_warehouse
    register_warehouse(spark, "/shared/warehouse")
    spark.sql("SELECT run_name, gpu_util FROM run_summary").show()

The snapshot is `etl query`'s (etl/views/query.py): the driver lists the publishes once, keeps
each run name's highest publish visible now (not removed), and registers each table as a
TEMP view over exactly those publishes' files; a segment's rows are kept by publish id.
The views are the DuckDB definitions transpiled to Spark SQL (etl/views/dialects.py),
created as TEMP views in dependency order. Runs published afterwards are seen by calling
it again. The files must be readable by every executor at the same path (shared storage).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any


if TYPE_CHECKING:
    from collections.abc import Iterable

    from pyspark.sql import DataFrame, SparkSession

    from etl.core.sql_files import View
    from etl.warehouse.store import Warehouse

# Settings the views need: timestamps read and shown as UTC, as DuckDB's TIMESTAMPTZ; the
# publishes' files are named one by one, and listing them on the driver costs less than a
# Spark job per table (Spark lists over 32 paths in a job: seconds each on a busy cluster).
SESSION_CONF = {"spark.sql.session.timeZone": "UTC",
                "spark.sql.sources.parallelPartitionDiscovery.threshold": "1000000"}


def register_warehouse(spark: SparkSession, warehouse: str | os.PathLike[str],
                       views: Iterable[str] | None = None) -> list[str]:
    """Register every table and view of the warehouse at `warehouse` as TEMP views of
    `spark`, pinned to the runs published before this call; the names registered.
    `views`: only these views (stable or versioned names; others are ignored) and the
    views they read are registered (Spark analyses each view as it is created: all of
    them take minutes on one machine)."""
    from etl.views.dialects import view_statements
    from etl.views.catalog import checked_views
    from etl.warehouse.store import Warehouse

    target = Warehouse.at(os.fspath(warehouse)).existing()
    for key, value in SESSION_CONF.items():
        spark.conf.set(key, value)
    names = register_tables(spark, target) + register_catalogs(spark)
    every = checked_views()
    wanted = None if views is None else views_read_by(every, views)
    for name, select in view_statements(every, "spark"):
        if wanted is None or name in wanted:
            spark.sql(f"CREATE OR REPLACE TEMP VIEW `{name}` AS\n{select}")
            names.append(name)
    return names


def views_read_by(views: list[View], names: Iterable[str]) -> set[str]:
    """The names among `names` that are views (stable or versioned), with every view they
    read, directly or not (a stable name reads its pinned version)."""
    from etl.core.sql_files import stable_names

    by_name = {v.name: v for v in views}
    pinned = stable_names(views)
    found: set[str] = set()
    todo = [n for n in names if n in by_name or n in pinned]
    while todo:
        name = todo.pop()
        if name in found:
            continue
        found.add(name)
        todo += [pinned[name]] if name in pinned else [
            d for d in by_name[name].depends_on if d in by_name or d in pinned]
    return found


def tables_named_in(sql: str) -> list[str] | None:
    """The relations a Spark SQL query names (None when sqlglot cannot parse it: then
    every view is registered and Spark reports the error)."""
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import ParseError

    try:
        trees = sqlglot.parse(sql, read="spark")
    except ParseError:
        return None
    return [t.name for tree in trees if tree is not None for t in tree.find_all(exp.Table)]


def register_tables(spark: SparkSession, warehouse: Warehouse) -> list[str]:
    """Each table as a TEMP view over the current publishes' files (see pin_snapshot)."""
    from etl.warehouse.compact import SEGMENT_PREFIX
    from etl.core.schema import DERIVED_TABLES, TABLES

    chosen = snapshot(warehouse)
    folders = sorted({folder for _, folder in chosen})
    ids = [publish_id for publish_id, _ in chosen]
    segments = any(f.name.startswith(SEGMENT_PREFIX) for f in folders)
    for table in TABLES:
        keep = ids if table == "runs" or segments else None
        table_frame(spark, warehouse, table, folders, keep).createOrReplaceTempView(table)
    derived = [warehouse.derived / publish_id for publish_id in ids]
    for table in DERIVED_TABLES:  # computed after the publishes (etl critical-path)
        table_frame(spark, warehouse, table, derived, None).createOrReplaceTempView(table)
    return list(TABLES + DERIVED_TABLES)


def register_catalogs(spark: SparkSession) -> list[str]:
    """The catalog relations (etl/core/gpu_peaks.py) as TEMP views, in Spark SQL."""
    import sqlglot

    from etl.core.gpu_peaks import relation_selects

    for name, select in relation_selects().items():
        spark_select = sqlglot.transpile(select, read="duckdb", write="spark")[0]
        spark.sql(f"CREATE OR REPLACE TEMP VIEW `{name}` AS {spark_select}")
    return list(relation_selects())


def snapshot(warehouse: Warehouse) -> list[tuple[str, Path]]:
    """(publish id, folder) of each run's current publish, by DuckDB's own rule."""
    import duckdb

    from etl.views.query import current_publishes

    with duckdb.connect() as con:
        return current_publishes(con, warehouse)


def table_frame(spark: SparkSession, warehouse: Warehouse, table: str, folders: list[Path],
                keep: list[str] | None) -> DataFrame:
    """The table's rows in `folders` (the zero-row schema file gives the types; a file
    written before a column existed reads it as NULL), only publishes in `keep`."""
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema

    from etl.core.schema import table_schema
    from etl.warehouse.store import SCHEMA_DIR

    from etl.core.schema import DERIVED_TABLES

    root = warehouse.derived if table in DERIVED_TABLES else warehouse.data
    schema_file = root / SCHEMA_DIR / f"{table}.parquet"
    schema = from_arrow_schema(table_schema(table).arrow())  # no Spark job to read a footer
    files = [_uri(schema_file)] + [_uri(f / f"{table}.parquet") for f in folders
                                   if (f / f"{table}.parquet").exists()]
    frame = spark.read.schema(schema).parquet(*files)
    if keep is not None:
        frame = frame.where(F.col("publish_id").isin(keep) if keep else F.lit(False))
    return frame.select(*[F.col(f"`{c}`") for c in table_schema(table).names])


def _uri(path: Path) -> str:
    # Hadoop reads a bare path as a glob; a file: URI with the glob characters escaped
    # names exactly this file
    text = str(path)
    for char in "\\{}[]*?":
        text = text.replace(char, "\\" + char)
    return "file://" + text


def rows(spark: SparkSession, sql: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    """The columns and rows of `sql`, one reading statement (`etl query --engine spark`)."""
    from etl.core.errors import EtlError
    from etl.views.query import QueryError

    _refuse_writes(sql)
    try:
        frame = spark.sql(sql)
    except Exception as exc:  # pyspark's AnalysisException, ParseException, ...
        if type(exc).__module__.startswith("pyspark"):
            raise QueryError(str(exc)) from None
        raise
    if not frame.columns:
        raise EtlError("the statement returned no columns")
    return frame.columns, [tuple(r) for r in frame.collect()]


def _refuse_writes(sql: str) -> None:
    """etl query only reads: a SELECT (or WITH, DESCRIBE), one statement."""
    import sqlglot
    from sqlglot import exp

    from etl.core.errors import EtlError

    try:
        statements = [s for s in sqlglot.parse(sql, read="spark") if s is not None]
    except sqlglot.errors.ParseError as exc:
        raise EtlError(f"query failed: {str(exc).splitlines()[0]}") from None
    if len(statements) != 1 or not isinstance(statements[0], exp.Query | exp.Describe):
        raise EtlError("etl query --engine spark runs one SELECT (or WITH, DESCRIBE); it "
                       "only reads")
