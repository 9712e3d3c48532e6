"""Every table and view, over the corpus and over edge-case warehouses, returns NULL where a
value cannot be computed, never NaN or ±infinity (DuckDB's 0.0/0.0 is NaN, x/0.0 is inf).

The list of views comes from discovery (sql/views/), so a new view is checked the day it
is added. The edge cases are tiny inline runs, one folder each, each named for the case
(tests/views/warehouses.py).
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from etl.views.query import run_query
from etl.core.schema import TABLES
from etl.core.sql_files import discover
from tests.conftest import shared

# the warehouses edge_wh and corpus_wh: tests/views/conftest.py, tests/views/warehouses.py


def view_names() -> list[str]:
    """Every relation a user can query: tables, versioned views and their stable names."""
    views = discover()
    return [*TABLES, *sorted({v.name for v in views} | {v.stable for v in views})]


def nonfinite(value: Any) -> bool:
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, dict):
        return any(nonfinite(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(nonfinite(v) for v in value)
    return False


def float_columns(con: Any, relation: str) -> list[str]:
    """The columns of `relation` whose type holds FLOAT or DOUBLE (nested too): the only
    ones whose values come back as Python floats, so the only ones that can be NaN."""
    return [name for name, kind, *_ in con.execute(f'DESCRIBE "{relation}"').fetchall()
            if "DOUBLE" in kind or "FLOAT" in kind]


def views_kept(warehouse: Path) -> Any:
    """etl.connect(warehouse), one snapshot for every relation as a notebook reads them,
    with each view kept in a TEMP table of its name, which shadows the stored view for the
    views that read it (creation order: a view after what it reads). Each view is then
    computed once over its inputs' rows, not with its whole tree below it again, and
    still returns the rows it returns to a reader (52 of 58 CPU s of the NaN check on the
    corpus were the trees computed again)."""
    from etl.api import connect

    con = connect(warehouse)
    [(database,)] = con.execute("SELECT current_database()").fetchall()
    for view in discover():
        con.execute(f'CREATE TEMP TABLE "{view.name}" AS FROM {database}.main."{view.name}"')
    return con


@pytest.fixture(scope="module")
def kept() -> Iterator[Callable[[Path], Any]]:
    """views_kept of a warehouse, made once for this file's tests that read it."""
    made: dict[Path, Any] = {}

    def connection(warehouse: Path) -> Any:
        if warehouse not in made:
            made[warehouse] = views_kept(warehouse)
        return made[warehouse]

    yield connection
    for con in made.values():
        con.close()


def nonfinite_columns(con: Any) -> dict[str, list[str]]:
    """relation → its columns holding NaN or ±inf in some row, on views_kept's `con`."""
    found = {}
    for name in view_names():
        columns = float_columns(con, name)
        quoted = ", ".join('"' + c.replace('"', '""') + '"' for c in columns)
        rows = con.execute(f'SELECT {quoted} FROM "{name}"').fetchall() if columns else []
        bad = sorted({c for row in rows for c, v in zip(columns, row) if nonfinite(v)})
        if bad:
            found[name] = bad
    return found


# ---- the tests -----------------------------------------------------------------------------

def test_edge_cases_reach_the_views(edge_wh: Path) -> None:
    """The edge cases are what they claim to be, so the NaN test below sees them."""
    _, rows = run_query(edge_wh, "SELECT run_name, count(*) FILTER (WHERE kind = 'kernel'), "
                        "sum(dur_ns) FROM runs LEFT JOIN kernels USING (run_id) GROUP BY ALL "
                        "ORDER BY 1")
    assert rows == [("idle_devices", 6, 30_000), ("ncu_counter_subset", 6, 30_000),
                    ("ncu_zero_gpu_time", 6, 0), ("no_kernels", 0, None),
                    ("zero_gpu_time", 6, 0)]
    _, matched = run_query(edge_wh, "SELECT run_name, iteration, count(*) FROM "
                           "kernel_utilization GROUP BY ALL ORDER BY 1")
    assert matched == [("ncu_counter_subset", 1, 3), ("ncu_zero_gpu_time", 1, 3)]
    _, levels = run_query(edge_wh, "SELECT run_name, count(issue_slot_util), "
                          "count(smsp_active_util) FROM kernel_utilization GROUP BY ALL ORDER BY 1")
    assert levels == [("ncu_counter_subset", 0, 3), ("ncu_zero_gpu_time", 3, 3)]


def test_no_relation_returns_nan_or_infinity_on_edge_cases(
        edge_wh: Path, kept: Callable[[Path], Any]) -> None:
    assert nonfinite_columns(kept(edge_wh)) == {}


@pytest.mark.slow  # every relation over the whole corpus (make check: the edge cases)
def test_no_relation_returns_nan_or_infinity_on_the_corpus(
        corpus_wh: Path, kept: Callable[[Path], Any]) -> None:
    assert nonfinite_columns(kept(corpus_wh)) == {}


# v2 renamed these columns (sql/CHANGELOG.md, 2026-11-25) and changed nothing else
RENAMED = {
    "kernel_summary": {"busy_share_ratio": "busy_share"},
    "op_time": {"gpu_time_share_ratio": "gpu_time_share"},
    "issue_slot_distribution": {"above_60pct_ratio": "above_60pct_share"},
    "match_quality": {"count_coverage_ratio": "matched_count_share",
                      "time_coverage_ratio": "matched_time_share"},
    "tc_time_cdf": {"time_share_at_most_ratio": "cumulative_time_share"},
    "layer_utilization": {
        f"{x}_{stat}": f"{'time_weighted_mean' if stat == 'mean' else stat}_{x}"
        for x in ("smsp_active_util", "issue_slot_util", "tc_active_util", "tc_issue_util")
        for stat in ("mean", "p10", "p50", "p90")},
}


def rows_of(con: Any, sql: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    """The columns and rows of `sql` on `con`, as run_query gives them."""
    cursor = con.execute(sql)
    return [d[0] for d in cursor.description], cursor.fetchall()


# The version tests below read views_kept (the fixture kept): each version is computed
# over the rows of the versions it reads, once per file, not over its whole tree per query.
@pytest.mark.parametrize("stable", sorted(RENAMED))
@pytest.mark.parametrize("where", ["edge", shared("corpus")])
def test_v2_is_v1_with_renamed_columns(stable: str, where: str, request: Any,
                                       kept: Callable[[Path], Any]) -> None:
    con = kept(request.getfixturevalue(f"{where}_wh"))
    old_columns, old_rows = rows_of(con, f"SELECT * FROM {stable}_v1")
    new_columns, new_rows = rows_of(con, f"SELECT * FROM {stable}_v2")
    assert new_columns == [RENAMED[stable].get(c, c) for c in old_columns]
    assert sorted(new_rows, key=repr) == sorted(old_rows, key=repr)
    # the stable name follows the newest version, which keeps v2's columns (op_time and
    # layer_utilization v3 add layer_kind and pass)
    assert set(new_columns) <= set(rows_of(con, f"SELECT * FROM {stable} LIMIT 0")[0])
    if where == "corpus":
        assert old_rows, f"{stable}: the corpus gives no rows to compare"


@pytest.mark.parametrize("stable", ["op_time", "layer_utilization"])
@pytest.mark.parametrize("where", ["edge", shared("corpus")])
def test_v3_splits_v2_by_layer_kind_and_pass(stable: str, where: str, request: Any,
                                            kept: Callable[[Path], Any]) -> None:
    con = kept(request.getfixturevalue(f"{where}_wh"))
    totals = ("SELECT run_id, op_name, layer, sum(kernel_count), sum(gpu_time_ns) "
              "FROM {} GROUP BY ALL")
    _, v2 = rows_of(con, totals.format(f"{stable}_v2"))
    _, v3 = rows_of(con, totals.format(f"{stable}_v3"))
    assert sorted(v3, key=repr) == sorted(v2, key=repr)
    _, kinds = rows_of(con, f"SELECT count(*) FROM {stable}_v3 WHERE "
                       "(layer IS NULL) <> (layer_kind IS NULL)")
    assert kinds == [(0,)]


# new versions for readers of older versions (sql/CHANGELOG.md, 2026-11-28): their rows
# differ from their predecessors' only on inputs these warehouses lack (a tie between
# iterations that run_summary v1 and v2 break apart, an incomplete iteration with ncu
# levels, memory events sharing an instant), and mfu_v3's reasons name another path. Their
# floating-point averages add the same terms in another order: compared to 12 digits.
SUCCESSORS = [
    ("tc_amdahl_v2", "tc_amdahl_v3", "*"),
    ("batch_scaling_v1", "batch_scaling_v2", "*"),
    ("mfu_v2", "mfu_v3", "* REPLACE (replace(mfu_reason, 'etl/gpu_peaks.toml', "
                         "'etl/core/gpu_peaks.toml') AS mfu_reason)"),
]


@pytest.mark.parametrize("before,after,columns", SUCCESSORS)
@pytest.mark.parametrize("where", ["edge", shared("corpus"), shared("demo")])
def test_a_new_version_keeps_its_predecessors_rows_here(before: str, after: str, columns: str,
                                                        where: str, request: Any,
                                                        kept: Callable[[Path], Any]) -> None:
    """Over views_kept: each version computed over the rows of the versions it reads (to
    12 digits, as before, whatever order a plan adds in), its tree computed once a file."""
    from etl.views.rewrites import rows_apart

    fixture = "demo_warehouse" if where == "demo" else f"{where}_wh"
    apart = rows_apart(kept(request.getfixturevalue(fixture)),
                       f"SELECT {columns} FROM {before}", f"SELECT * FROM {after}", digits=12)
    assert apart.same, apart
    if where != "edge":
        assert apart.rows_before > 0, f"{before}: no rows to compare in the {where} warehouse"
