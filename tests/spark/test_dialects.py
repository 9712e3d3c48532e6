"""Every view is written in each dialect from its one definition, or fails naming the file."""
from __future__ import annotations

from pathlib import Path

import pytest

from etl.views.dialects import DIALECTS, override_path, view_select
from etl.core.sql_files import ViewError, discover, load_view


@pytest.mark.parametrize("dialect", ["duckdb", "spark"])
def test_every_view_is_written_in_the_executed_dialects(dialect: str) -> None:
    import sqlglot

    for view in discover():
        written = sqlglot.parse_one(view_select(view, dialect), read=dialect)
        assert tuple(s.alias_or_name for s in written.selects) == view.columns, view.name


def test_quantile_cont_becomes_sparks_exact_percentile(tmp_path: Path) -> None:
    path = tmp_path / "q_v1.sql"
    path.write_text("-- q [project]\nSELECT quantile_cont(x, 0.9) AS p90_x FROM kernels\n"
                    "-- p90_x: x\n")
    view = load_view(path)
    assert "PERCENTILE(x, 0.9)" in view_select(view, "spark")
    with pytest.raises(ViewError, match="q_v1.sql: quantile_cont has no exact equivalent"):
        view_select(view, "trino")


def test_quantile_disc_becomes_sparks_exact_within_group_form(tmp_path: Path) -> None:
    path = tmp_path / "d_v1.sql"
    path.write_text("-- d [project]\nSELECT quantile_disc(x, 0.9) AS p90_x FROM kernels\n"
                    "-- p90_x: x\n")
    written = " ".join(view_select(load_view(path), "spark").split())
    assert "PERCENTILE_DISC(0.9) WITHIN GROUP (ORDER BY x NULLS LAST)" in written
    assert "APPROX" not in written


def test_an_override_beside_the_view_is_used_and_discovery_ignores_it(tmp_path: Path) -> None:
    path = tmp_path / "o_v1.sql"
    path.write_text("-- o [project]\nSELECT 1 AS one FROM kernels\n-- one: one\n")
    override_path(load_view(path), "trino").write_text("SELECT 2 AS one FROM kernels\n")
    [view] = discover(tmp_path)
    assert "2 AS one" in view_select(view, "trino")
    assert "1 AS one" in view_select(view, "spark")


def test_an_unknown_dialect_is_refused() -> None:
    with pytest.raises(ViewError, match="unknown dialect 'oracle'.*" + ", ".join(DIALECTS)):
        view_select(discover()[0], "oracle")


def test_a_query_registers_the_views_it_reads_and_no_other() -> None:
    """`etl query --engine spark` creates only these in Spark (each costs an analysis)."""
    from etl.spark.session import tables_named_in, views_read_by
    from etl.views.catalog import checked_views

    views = checked_views()
    named = tables_named_in("WITH w AS (SELECT * FROM runs) "
                            "SELECT * FROM run_summary JOIN w USING (run_id)")
    assert named is not None and set(named) == {"w", "runs", "run_summary"}
    assert views_read_by(views, named) == {
        "run_summary", "run_summary_v5", "gpu_utilization_v5", "_window_coverage_v1",
        "_activity_pieces_v1", "_iteration_windows_v3", "_iteration_memory_v3"}
    assert views_read_by(views, ["gpu_utilization_v1"]) >= {"gpu_utilization_v1"}
    assert "gpu_utilization" not in views_read_by(views, ["gpu_utilization_v1"])
    assert tables_named_in("SELEC nothing (((") is None
