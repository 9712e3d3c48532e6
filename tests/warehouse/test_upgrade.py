"""A warehouse made by an older version keeps working after tables and columns are added."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.conftest import cli, cli_subprocess, query_json, write_trace
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


def test_only_tables_whose_publishes_differ_are_read_by_name(tmp_path: Path) -> None:
    """A publish written before a runs column existed: etl.connect() reads runs by name
    across files (its publishes differ) and every other table without union_by_name."""
    import etl

    for name in ("old", "new"):
        write_trace(tmp_path / "runs" / name / "t.json", EVENTS)
    wh = tmp_path / "wh"
    # in a process of its own: this process's DuckDB would keep the footer of the file
    # rewritten below in its Parquet metadata cache (published files are never rewritten)
    done = cli_subprocess("ingest", str(tmp_path / "runs"), "--warehouse", str(wh))
    assert done.returncode == 0, done.stderr
    [old_runs] = [p for p in (wh / "data").glob("*/runs.parquet")
                  if pq.read_table(p).column("run_name").to_pylist() == ["old"]]
    pq.write_table(pq.read_table(old_runs).drop_columns(["seconds_per_iteration"]), old_runs)
    con = etl.connect(wh)
    by_name = dict(con.execute(
        "SELECT view_name, regexp_matches(sql, 'union_by_name = (true|CAST\\(''t'')') "
        "FROM duckdb_views() "
        "WHERE temporary AND database_name = 'temp' AND schema_name = 'main'").fetchall())
    assert by_name["runs"] and not any(v for k, v in by_name.items() if k != "runs")
    assert con.execute("SELECT run_name, seconds_per_iteration FROM runs ORDER BY run_name"
                       ).fetchall() == [("new", None), ("old", None)]


def test_a_process_reads_the_footers_of_each_published_file_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Published files never change: a second etl.connect() in one process reads no
    footer to choose union_by_name, and a third one after an ingest reads the new run's."""
    import etl
    from etl.views import query

    read: list[str] = []
    original = query._read_signatures

    def counted(con: Any, paths: list[str]) -> dict[str, str]:
        read.extend(paths)
        return original(con, paths)

    monkeypatch.setattr(query, "_read_signatures", counted)
    monkeypatch.setattr(query, "_SIGNATURES", {})
    for name in ("a", "b"):
        write_trace(tmp_path / "runs" / name / "t.json", EVENTS)
    wh = tmp_path / "wh"
    etl.ingest(tmp_path / "runs" / "a", wh, jobs=1)
    etl.ingest(tmp_path / "runs" / "b", wh, jobs=1)
    etl.connect(wh).close()
    first = set(read)
    assert first and all(Path(p).is_relative_to(wh) for p in first)
    read.clear()
    etl.connect(wh).close()
    assert read == []
    write_trace(tmp_path / "runs" / "c" / "t.json", EVENTS)
    etl.ingest(tmp_path / "runs" / "c", wh, jobs=1)
    con = etl.connect(wh)
    assert read and not set(read) & first  # only the new publish's files
    assert con.execute("SELECT count(*) FROM runs").fetchone() == (3,)
