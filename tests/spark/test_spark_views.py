"""Every view, transpiled to Spark SQL, returns over the corpus warehouse the rows DuckDB
returns (order-free, floats to 1e-9); every view is written in each dialect or fails loudly."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import cli
from tests.spark.compare import differences

pytestmark = pytest.mark.slow  # a SparkSession (a JVM) and corpus ingests


# A subset of test_views_values' corpus warehouse that gives every view rows (a real
# trace with a matched ncu page, an export beside a trace, exports alone, plain traces;
# and the demo's instrument-overhead set, below):
# Spark over all of it takes ten minutes on two cores (all views held there too).
RUNS = ("levels", "with_trace", "ncu_a100_details_cmdline-metrics_gardenia_gemm", "alexnet",
        "h100_bert", "ns_resolution_trace")


def _view_names() -> list[str]:
    """Every versioned view (a stable name is a projection of one of them)."""
    from etl.core.sql_files import discover

    return [v.name for v in discover()]


@pytest.fixture(scope="module")
def corpus_wh(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.views.warehouses import write_corpus_runs

    root = tmp_path_factory.mktemp("spark_views")
    write_corpus_runs(root / "runs")
    result = cli("ingest", *(str(root / "runs" / r) for r in RUNS), "--warehouse",
                 str(root / "wh"))
    assert result.returncode == 0, result.stderr
    # the demo's runs of one experiment that differ in instruments (instrument_overhead)
    assert cli("demo", str(root / "demo")).returncode == 0
    result = cli("ingest", *sorted(str(p) for p in (root / "demo").glob("cnn_*")),
                 "--warehouse", str(root / "wh"))
    assert result.returncode == 0, result.stderr
    # the derived table critical_path_segments, so that its views have rows to compare
    result = cli("critical-path", "--warehouse", str(root / "wh"))
    assert result.returncode == 0, result.stderr
    return root / "wh"


@pytest.fixture(scope="module")
def registered(spark: Any, corpus_wh: Path) -> list[str]:
    from etl.spark import register_warehouse

    return register_warehouse(spark, corpus_wh)


def test_every_table_and_view_is_registered(registered: list[str]) -> None:
    from etl.core.gpu_peaks import RELATION_DOCS
    from etl.core.schema import DERIVED_TABLES, TABLES
    from etl.core.sql_files import discover, stable_names

    assert set(registered) == (set(TABLES) | set(DERIVED_TABLES) | set(_view_names())
                               | set(stable_names(discover()))
                               | set(RELATION_DOCS))  # and the catalog relations


@pytest.mark.parametrize("name", _view_names())
def test_view_returns_duckdbs_rows_in_spark(name: str, spark: Any, registered: list[str],
                                             corpus_wh: Path) -> None:
    import etl

    duck = etl.connect(corpus_wh).execute(f"SELECT * FROM {name}").fetchall()
    frame = spark.sql(f"SELECT * FROM `{name}`")
    got = [tuple(r) for r in frame.collect()]
    assert differences(duck, got) == []
    if not name.startswith("_"):
        assert duck, f"{name} has no rows over the corpus: the comparison proves nothing"


def test_tables_hold_the_snapshot(spark: Any, registered: list[str], corpus_wh: Path) -> None:
    import etl

    for table in ("runs", "kernels", "iterations"):
        duck = etl.connect(corpus_wh).execute(f"SELECT * FROM {table}").fetchall()
        got = [tuple(r) for r in spark.sql(f"SELECT * FROM {table}").collect()]
        assert differences(duck, got) == [], table


def test_etl_query_engine_spark_prints_duckdbs_rows(spark: Any, corpus_wh: Path) -> None:
    import json

    from click.testing import CliRunner

    from etl.cli import main
    from tests.conftest import query_json

    sql = "SELECT run_name, rank, gpu_util FROM run_summary"
    result = CliRunner().invoke(main, ["query", sql, "--engine", "spark", "--format", "json",
                                       "--warehouse", str(corpus_wh)])
    assert result.exit_code == 0, result.output
    got = [tuple(r.values()) for r in json.loads(result.output)]
    want = [tuple(r.values()) for r in query_json(corpus_wh, sql)]
    assert want and differences(want, got) == []
    refused = CliRunner().invoke(main, ["query", "DROP VIEW runs", "--engine", "spark",
                                        "--warehouse", str(corpus_wh)])
    assert refused.exit_code != 0 and "only reads" in refused.output
    # the session this process ran before the command is left running
    assert spark.sparkContext._jsc is not None
    assert spark.range(2).count() == 2


def test_etl_views_dialect_prints_every_view() -> None:
    from click.testing import CliRunner

    from etl.cli import main

    result = CliRunner().invoke(main, ["views", "--dialect", "spark"])
    assert result.exit_code == 0, result.output
    for name in _view_names():
        assert f"CREATE OR REPLACE VIEW {name} AS" in result.output
    assert "PERCENTILE(" in result.output and "QUANTILE_CONT" not in result.output.upper()
