"""warehouse.duckdb as the DuckDB shell sees it: every table, view and column carries its
documentation (COMMENT ON), and views dropped or replaced from a writable shell come back."""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import duckdb
import pytest

from etl.core.gpu_peaks import RELATION_DOCS
from etl.core.schema import ALL_TABLES, table_schema
from etl.core.sql_files import discover, stable_names
from etl.views.database import views_current
from etl.warehouse.store import Warehouse
from tests.conftest import built_once, cli, ingested, kernel, launch, step, write_trace


def tiny_events() -> list[dict[str, Any]]:
    return [step(1, 0, 100_000), launch(1, 1_000), kernel(1, 10_000, 40_000)]


def tiny_ingested(root: Path) -> Path:
    write_trace(root / "runs" / "a" / "t.json", tiny_events())
    return ingested(root)


@pytest.fixture(scope="session")
def tiny_wh(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One run ingested once per session (built_once); never changed: each test damages
    a copy of its own."""
    return built_once(tmp_path_factory, "catalog", tiny_ingested)


@pytest.fixture
def warehouse(tiny_wh: Path, tmp_path: Path) -> Path:
    """A copy of tiny_wh (a warehouse reads its own folder: tests/views/test_relocate.py),
    its views current as the ingest left them."""
    copy = Path(shutil.copytree(tiny_wh, tmp_path / "wh", symlinks=True))
    with duckdb.connect(str(copy / "warehouse.duckdb"), read_only=True) as con:
        assert views_current(con, Warehouse.at(copy))
    return copy


def expected_docs() -> dict[str, tuple[str, dict[str, str]]]:
    """relation → (its comment, its columns' comments), from discovery and schemas/."""
    views = discover()
    newest = stable_names(views)
    docs = {}
    for table in ALL_TABLES:
        schema = table_schema(table)
        docs[table] = (f"{schema.description} Grain: {schema.grain}.", {
            c.name: c.description + (f" Unit: {c.unit}." if c.unit else "")
            for c in schema.columns})
    for name, (doc, columns) in RELATION_DOCS.items():  # the catalogs (etl/core/gpu_peaks.py)
        docs[name] = (doc, dict(columns))
    for view in views:
        docs[view.name] = (view.doc, dict(view.column_docs))
        if newest[view.stable] == view.name:
            docs[view.stable] = (f"{view.doc} (The stable name of {view.name}, the newest "
                                 "version.)", dict(view.column_docs))
    return docs


def stored_docs(con: Any) -> dict[str, tuple[str, dict[str, str]]]:
    views = con.execute("SELECT view_name, comment FROM duckdb_views() "
                        "WHERE database_name = current_database() AND NOT internal").fetchall()
    columns = con.execute("SELECT table_name, column_name, comment FROM duckdb_columns() "
                          "WHERE database_name = current_database()").fetchall()
    found: dict[str, tuple[str, dict[str, str]]] = {name: (doc, {}) for name, doc in views}
    for name, column, doc in columns:
        found[name][1][column] = doc
    return found


def test_every_relation_and_column_is_documented_in_the_database(warehouse: Path) -> None:
    with duckdb.connect(str(warehouse / "warehouse.duckdb"), read_only=True) as con:
        stored = stored_docs(con)
    expected = expected_docs()
    assert stored == expected
    assert all(doc and all(columns.values()) for doc, columns in stored.values())


def test_the_shell_shows_a_view_and_a_column_comment(warehouse: Path) -> None:
    with duckdb.connect(str(warehouse / "warehouse.duckdb"), read_only=True) as con:
        [(doc,)] = con.execute("SELECT comment FROM duckdb_views() "
                               "WHERE view_name = 'run_summary'").fetchall()
        [(column,)] = con.execute("SELECT comment FROM duckdb_columns() WHERE "
                                  "table_name = 'kernels' AND column_name = 'dur_ns'").fetchall()
    assert doc.startswith("run_summary: one representative iteration per run")
    assert "[project] \"Stable\" read as within 5% of the median window" in doc
    assert column.startswith("Duration") and column.endswith("Unit: ns.")


DAMAGE = {
    "dropped": "DROP VIEW run_summary",
    "dropped under others": "DROP VIEW gpu_utilization_v1",
    "replaced": "CREATE OR REPLACE VIEW gpu_utilization AS SELECT 1 AS gpu_util",
    "replaced alike": "CREATE OR REPLACE VIEW gpu_utilization AS SELECT * FROM gpu_utilization_v1",
    "comment cleared": "COMMENT ON VIEW kernels IS NULL",
    "macro dropped": "DROP MACRO _warehouse_files",
}


# The command that repairs each damage, `etl views` for half of them and `etl query` for
# the others. Both repair through the same two steps: views_current says no (the check
# that sees the damage), then ensure_views writes every view again whatever was damaged;
# so each damage once and each command on three checks what all twelve pairs did, at six
# rebuilds of the views (3.5 CPU s each) instead of twelve.
REPAIRS = {damage: ("views", "query")[i % 2] for i, damage in enumerate(sorted(DAMAGE))}


@pytest.mark.parametrize(("damage", "repair"), sorted(REPAIRS.items()))
def test_views_broken_from_a_writable_shell_are_written_again(warehouse: Path, damage: str,
                                                              repair: str) -> None:
    with duckdb.connect(str(warehouse / "warehouse.duckdb")) as con:  # a writable shell
        con.execute(DAMAGE[damage])
    if repair == "views":
        result = cli("views", "--warehouse", str(warehouse))
    else:
        result = cli("query", "SELECT 1", "--warehouse", str(warehouse))
    assert result.returncode == 0, result.stderr
    with duckdb.connect(str(warehouse / "warehouse.duckdb"), read_only=True) as con:
        assert stored_docs(con) == expected_docs()
        assert con.execute("SELECT run_name, gpu_util FROM run_summary").fetchall() == [
            ("a", 0.4)]
