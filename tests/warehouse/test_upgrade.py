"""A warehouse made by an older version keeps working after tables and columns are added."""
from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from tests.conftest import cli, query_json, write_trace
from tests.views.test_tiny_trace import EVENTS


def test_schema_files_of_new_tables_and_columns_are_written(tmp_path: Path) -> None:
    write_trace(tmp_path / "runs" / "r" / "t.json", EVENTS)
    wh = tmp_path / "wh"
    assert cli("ingest", str(tmp_path / "runs"), "--warehouse", str(wh)).returncode == 0
    schema_dir = wh / "data" / "_schema"
    (schema_dir / "ncu_rules.parquet").unlink()  # a table that did not exist yet
    runs = pq.read_table(schema_dir / "runs.parquet")
    pq.write_table(runs.drop_columns(["kernel_count"]), schema_dir / "runs.parquet")
    (wh / "views.sha256").unlink(missing_ok=True)  # as after an upgrade: views rewritten
    for stamp in wh.glob("*.sha256"):
        stamp.unlink()
    out = cli("runs", "--warehouse", str(wh))
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[2].split()[0] == "r"
    assert pq.read_schema(schema_dir / "runs.parquet").field("kernel_count").type == pa.int64()
    assert query_json(wh, "SELECT count(*) AS n FROM ncu_rules") == [{"n": 0}]


def test_views_written_once_are_current_for_readers(tmp_path: Path) -> None:
    """The stamp holds the catalog as a reader sees it, so queries do not write the views
    again (DuckDB prints some stored SQL differently in the connection that wrote it)."""
    import duckdb

    from etl.views.database import ensure_views, views_current
    from etl.warehouse.store import Warehouse

    warehouse = Warehouse.at(tmp_path / "wh")
    warehouse.init()
    assert ensure_views(warehouse)
    with duckdb.connect(str(warehouse.database), read_only=True) as con:
        assert views_current(con, warehouse)
    before = warehouse.database.stat().st_mtime_ns
    assert ensure_views(warehouse) and warehouse.database.stat().st_mtime_ns == before
