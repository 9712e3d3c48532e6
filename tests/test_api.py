"""The Python API: etl.ingest() returns the per-run results, etl.connect() a read-only
DuckDB connection on one snapshot, whose files a reader lease keeps."""
from __future__ import annotations

import gc
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

import etl
from etl.warehouse import store as warehouse_module
from etl.core.errors import WarehouseError
from etl.core.schema import TABLES
from etl.core.sql_files import discover
from tests.conftest import ROOT, cli, kernel, launch, query_json, step, write_trace


def tiny_run(folder: Path, busy: int) -> Path:
    """One iteration of 100 µs with one kernel of `busy` ns."""
    return write_trace(folder / "t.json", [step(1, 0, 100_000), launch(1, 1_000),
                                           kernel(1, 10_000, busy)])


@pytest.fixture(scope="module")
def demo_warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo ingested through etl.ingest, once for this file: its tests only read it."""
    tmp_path = tmp_path_factory.mktemp("api_demo")
    assert cli("demo", str(tmp_path / "runs")).returncode == 0
    results = etl.ingest(tmp_path / "runs", tmp_path / "wh", jobs=1)
    assert [(r.run_name, r.status, r.kernels) for r in results
            if r.run_name.startswith("resnet")] == [
        ("resnet_amp_ddp", "ingested", 580), ("resnet_amp_eager", "ingested", 275),
        ("resnet_amp_nsys", "ingested", 200), ("resnet_fp32_eager", "ingested", 240)]
    tf_runs = [r for r in results if r.run_name.startswith("tf_bert")]  # xplane runs
    assert len(tf_runs) == 8 and {r.status for r in tf_runs} == {"ingested"}
    return tmp_path / "wh"


def test_connect_answers_as_etl_query(demo_warehouse: Path) -> None:
    con = etl.connect(demo_warehouse)
    assert isinstance(con, duckdb.DuckDBPyConnection)
    sql = "SELECT run_name, rank, gpu_util, idle_ns FROM run_summary ORDER BY run_name, rank"
    expected = [tuple(r.values()) for r in query_json(demo_warehouse, sql)]
    assert con.execute(sql).fetchall() == expected
    (count,) = con.execute("SELECT count(*) FROM kernels").fetchone() or (None,)
    assert count == 2915 == query_json(demo_warehouse, "SELECT count(*) AS n FROM kernels")[0]["n"]
    table = con.sql("SELECT run_name, gpu_util FROM run_utilization WHERE ncu_reason IS NULL "
                    "ORDER BY run_name").to_arrow_table()
    assert table.column("run_name").to_pylist() == ["resnet_amp_eager", "resnet_fp32_eager"]


def test_every_table_and_view_is_there(demo_warehouse: Path) -> None:
    con = etl.connect(demo_warehouse)
    names = [*TABLES, *{v.stable for v in discover() if not v.stable.startswith("_")}]
    counts = {n: con.execute(f"SELECT count(*) FROM {n}").fetchone() for n in names}
    assert counts["runs"] == (16,) and counts["gpu_utilization"] != (0,)  # 3 PyTorch, nsys,
    # 8 TF, 4 of instrument_overhead
    with pytest.raises(duckdb.Error, match="read-only"):
        con.execute("CREATE TABLE scratch AS SELECT 1")


def test_a_connection_keeps_its_snapshot_and_files(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A connection reads the runs published before it, even when a run is replaced and
    garbage is collected with no grace period: its lease keeps the old files."""
    runs, wh = tmp_path / "runs", tmp_path / "wh"
    tiny_run(runs / "a", busy=40_000)
    assert [r.status for r in etl.ingest(str(runs), str(wh), jobs=1)] == ["ingested"]
    before = etl.connect(wh)
    tiny_run(runs / "a", busy=60_000)
    tiny_run(runs / "b", busy=10_000)
    assert [r.status for r in etl.ingest([runs], wh, jobs=1)] == ["ingested", "ingested"]
    monkeypatch.setattr(warehouse_module, "GRACE_SECONDS", 0)
    warehouse_module.Warehouse.at(wh).collect_garbage()
    busy = "SELECT run_name, busy_ns FROM gpu_utilization ORDER BY run_name"
    assert before.execute(busy).fetchall() == [("a", 40_000)]
    assert etl.connect(wh).execute(busy).fetchall() == [("a", 60_000), ("b", 10_000)]
    folders = len(list((wh / "data").iterdir()))
    del before
    gc.collect()  # the lease ends with the connection object
    warehouse_module.Warehouse.at(wh).collect_garbage()
    assert len(list((wh / "data").iterdir())) == folders - 1  # a's first publish


def test_ingest_returns_refusals_and_options(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    tiny_run(runs / "good", busy=40_000)
    (runs / "bad").mkdir()
    (runs / "bad" / "t.json").write_text('{"traceEvents": [{"ph": "X", "ts": 1')
    results = {r.run_name: r for r in etl.ingest(runs, tmp_path / "wh", jobs=1)}
    assert results["good"].status == "ingested" and results["good"].kernels == 1
    assert results["bad"].status == "refused" and "bad/t.json" in (results["bad"].error or "")
    salvaged = etl.ingest(runs / "bad", tmp_path / "wh", salvage=True, jobs=1)
    assert [r.status for r in salvaged] == ["ingested"]
    with pytest.raises(TypeError, match="nonsense"):
        etl.ingest(runs, tmp_path / "wh", nonsense=True)


def test_connect_refuses_a_missing_warehouse(tmp_path: Path) -> None:
    with pytest.raises(WarehouseError, match="no warehouse here"):
        etl.connect(tmp_path / "nowhere")


def test_import_is_cheap_and_ingest_stays_the_function() -> None:
    """`import etl` loads no heavy library, and etl.ingest is the API function (the
    loading stage's module, etl/load/ingest.py, does not shadow it)."""
    code = ("import sys, etl; heavy = [m for m in ('duckdb', 'pyarrow', 'numpy', 'click') "
            "if m in sys.modules]; from etl.load.ingest import Options; "
            "print(heavy, etl.ingest.__module__)")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, check=True)
    assert done.stdout.split() == ["[]", "etl.api"]


def test_connections_draw_no_progress_bar_on_stdout(demo_warehouse: Path) -> None:
    """DuckDB draws one on stdout for queries over 2 s: under load it landed in a report's
    output line. Every connection the library opens turns it off."""
    con = etl.connect(demo_warehouse)
    assert con.execute("SELECT current_setting('enable_progress_bar')").fetchone() == (False,)
    from etl.views.query import _connect
    from etl.warehouse.store import Warehouse

    other = _connect(Warehouse.at(str(demo_warehouse)))
    assert other.execute("SELECT current_setting('enable_progress_bar')").fetchone() == (False,)


def test_a_plain_script_ingests_with_worker_processes(tmp_path: Path) -> None:
    """The README's example in a script without `if __name__ == "__main__":`: the run
    folders go to two job processes, and a single run's trace to two slice workers
    (parallel_bytes=1), all spawned without running the script again in each child."""
    tiny_run(tmp_path / "runs" / "a", busy=40_000)
    tiny_run(tmp_path / "runs" / "b", busy=60_000)
    script = tmp_path / "plain.py"
    script.write_text(
        "import etl\n"
        "print('script body ran')\n"
        "jobs = etl.ingest('runs', 'wh', jobs=2)\n"
        "one = etl.ingest('runs/a', 'wh2', jobs=2, parallel_bytes=1)\n"
        "con = etl.connect('wh')\n"
        "print(sorted(r.status for r in jobs + one),\n"
        "      con.sql('SELECT count(*) FROM runs').fetchone()[0])\n")
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == ["script body ran",
                                        "['ingested', 'ingested', 'ingested'] 2"]


def test_ingest_returns_once_its_publish_is_visible(tmp_path: Path) -> None:
    """The publish's visibility margin passes while the views are refreshed, and still
    before etl.ingest returns: a folder's name carries its visible-from time (µs)."""
    import time

    tiny_run(tmp_path / "runs" / "a", busy=40_000)
    etl.ingest(tmp_path / "runs", tmp_path / "wh", jobs=1)
    returned_us = time.time() * 1e6
    [folder] = [p for p in (tmp_path / "wh" / "data").iterdir() if ".v" in p.name]
    assert returned_us >= int(folder.name.rpartition(".v")[2])
