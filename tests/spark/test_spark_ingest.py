"""`etl ingest --engine spark` gives the tables of the local ingest, reports a refused run
as it does, and a task killed after staging its run leaves nothing visible but the retry."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import copy_corpus_run, corpus_path
from tests.spark.compare import differences

pytestmark = pytest.mark.slow  # a SparkSession (a JVM) and corpus ingests

# what differs between two ingests of the same files
PER_PUBLISH = {"runs": "publish_id, publish_seq, ingested_at, run_path"}


@pytest.fixture(scope="module")
def run_folders(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    from tests.load.test_corpus import RUNS as CORPUS_RUNS

    root = tmp_path_factory.mktemp("spark_ingest_runs")
    names = [n for n in CORPUS_RUNS if n in ("alexnet", "h100_bert", "ns_resolution_trace")]
    folders = [copy_corpus_run(corpus_path(*CORPUS_RUNS[n]), root, n) for n in names]
    broken = root / "broken"
    broken.mkdir()
    (broken / "trace.json").write_text('{"traceEvents": [{"ph": "X", "ts": 1')
    return [*folders, broken]


def _tables(warehouse: Path) -> dict[str, list[tuple[Any, ...]]]:
    import etl
    from etl.core.schema import TABLES

    con = etl.connect(warehouse)
    return {t: con.execute(f"SELECT * EXCLUDE ({PER_PUBLISH.get(t, 'publish_id')}) "
                           f"FROM {t}").fetchall() for t in TABLES}


def _ingest(spark: Any, folders: list[Path], warehouse: Path, **kw: Any) -> list[Any]:
    from etl.load.ingest import Options
    from etl.spark.ingest import ingest_spark
    from etl.warehouse.store import Warehouse

    return ingest_spark(spark, folders, Warehouse.at(warehouse), Options(), **kw)


def test_spark_ingest_gives_the_tables_of_the_local_ingest(
        spark: Any, run_folders: list[Path], tmp_path: Path) -> None:
    from etl.load.ingest import Options, ingest_all
    from etl.warehouse.store import Warehouse

    local = ingest_all(run_folders, Warehouse.at(tmp_path / "local"), Options(jobs=1))
    distributed = _ingest(spark, run_folders, tmp_path / "spark")
    assert [(r.run_name, r.status, r.error) for r in distributed] == [
        (r.run_name, r.status, r.error) for r in local]
    assert [r.status for r in local].count("ingested") == 3
    assert "broken/trace.json" in (local[-1].error or "")
    mine, theirs = _tables(tmp_path / "spark"), _tables(tmp_path / "local")
    assert len(mine["runs"]) == 3 and len(mine["kernels"]) > 100
    for table in mine:
        assert differences(mine[table], theirs[table]) == [], table
    again = _ingest(spark, run_folders[:3], tmp_path / "spark")
    assert [r.status for r in again] == ["unchanged"] * 3


def test_a_task_killed_after_staging_leaves_no_visible_partial_run(
        spark: Any, run_folders: list[Path], tmp_path: Path) -> None:
    marker = tmp_path / "killed"
    results = _ingest(spark, run_folders[:3], tmp_path / "wh", kill_once=marker)
    assert marker.exists(), "no task was killed: the test proves nothing"
    assert [r.status for r in results] == ["ingested"] * 3
    tables = _tables(tmp_path / "wh")
    assert sorted(r[0] for r in _names(tmp_path / "wh")) == sorted(
        f.name for f in run_folders[:3])
    publishes = {row[0] for row in _publish_ids(tmp_path / "wh")}
    assert len(publishes) == 3
    # one publish folder per run: the killed attempt's staged run never landed in data/
    landed = [p for p in (tmp_path / "wh" / "data").iterdir() if p.name != "_schema"]
    assert len(landed) == 3
    assert len(tables["kernels"]) > 100
    # the killed attempt's staged run stays private, outside data/
    assert any((tmp_path / "wh" / "staging").iterdir())


def _names(warehouse: Path) -> list[tuple[Any, ...]]:
    import etl

    return etl.connect(warehouse).execute("SELECT run_name FROM runs").fetchall()


def _publish_ids(warehouse: Path) -> list[tuple[Any, ...]]:
    import etl

    return etl.connect(warehouse).execute(
        "SELECT DISTINCT publish_id FROM kernels UNION SELECT publish_id FROM runs").fetchall()
