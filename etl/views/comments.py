"""The documentation of every table and view, stored in warehouse.duckdb as COMMENT ON.

So that the DuckDB shell describes what it shows: `SELECT view_name, comment FROM
duckdb_views()` and `SELECT table_name, column_name, comment FROM duckdb_columns()`. A
view's comment is its file's leading comment, a column's its `-- column: doc` line; a
table's come from schemas/*.toml (description, grain, each column's description and unit).
CREATE OR REPLACE VIEW drops a view's comments, so these statements run after all of them.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from etl.core.schema import ALL_TABLES, table_schema

if TYPE_CHECKING:
    from etl.core.sql_files import View


def comment_statements(views: list[View]) -> list[str]:
    from etl.core.sql_files import stable_names

    statements = [s for table in ALL_TABLES for s in _table_comments(table)]
    newest = stable_names(views)
    for view in views:
        statements += _comments(view.name, view.doc, view.column_docs)
        if newest[view.stable] == view.name:
            doc = f"{view.doc} (The stable name of {view.name}, the newest version.)"
            statements += _comments(view.stable, doc, view.column_docs)
    return statements


def relation_comments() -> list[str]:
    """Comments of the catalog relations (etl/core/gpu_peaks.py)."""
    from etl.core.gpu_peaks import RELATION_DOCS

    return [s for name, (doc, columns) in RELATION_DOCS.items()
            for s in _comments(name, doc, columns)]


def _table_comments(table: str) -> list[str]:
    schema = table_schema(table)
    docs = {c.name: c.description + (f" Unit: {c.unit}." if c.unit else "")
            for c in schema.columns}
    return _comments(table, f"{schema.description} Grain: {schema.grain}.", docs)


def _comments(relation: str, doc: str, column_docs: dict[str, str]) -> list[str]:
    statements = [f"COMMENT ON VIEW {_name(relation)} IS {_text(doc)}"]
    statements += [f"COMMENT ON COLUMN {_name(relation)}.{_name(column)} IS {_text(text)}"
                   for column, text in column_docs.items()]
    return statements


def _name(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def _text(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"
