"""Released views rewritten with the same rows (etl/views/rewrites.py): on the demo, the
edge-case and the corpus warehouses, every view as it is now returns the rows and columns
it returned with the rewritten views as released (their SQL kept in sql/rewrites.toml).

Not only the rewritten views are compared but every view that reads them: a rewrite may
keep a view's rows and still change what is built on them, and those views are released
too. Floating-point columns are compared to 12 significant digits: the same terms added in
another order differ in their last bits, and DuckDB's hash aggregates vary that order from
one run to the next even on one thread (the corpus run `levels`: smsp_active_util
0.635593487584393 in one run, 0.6355934875843919 in the next, the same SQL and files).
The lint (tests/views/test_lint.py) checks that each kept SQL is the released view (its
fingerprint). bench/same_rows.py makes the same comparison (etl.views.rewrites.rows_apart)
between two revisions on any warehouse.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from etl.api import connect
from etl.core.sql_files import View, discover
from etl.views.fingerprints import REWRITES
from etl.views.rewrites import Rewrite, normalised_sql, read_rewrites, rows_apart
from tests.conftest import shared

WAREHOUSES = ("demo_warehouse", "edge_wh", "corpus_wh")


def as_released(rewrites: list[Rewrite]) -> dict[str, str]:
    """Each rewritten view's SQL as first released (the earliest of its entries)."""
    released: dict[str, str] = {}
    for rewrite in rewrites:
        released.setdefault(rewrite.view, rewrite.released_sql)
    return released


def readers(names: set[str], views: list[View]) -> list[View]:
    """The views `names` and every view that reads one of them, directly or not."""
    reached = set(names)
    for view in views:  # creation order: a view comes after what it reads
        if view.depends_on & reached:
            reached.add(view.name)
    return [v for v in views if v.name in reached]


def rows_now_and_as_released(warehouse: Path, released: dict[str, str]
                             ) -> dict[str, Any]:
    """view → how its rows differ (rows_apart) between the rewritten views as they are and
    as released, for every view that reads a rewritten one."""
    con = connect(warehouse)
    con.execute("SET threads = 1")  # as rows_apart's (the order can still vary: 12 digits)
    affected = readers(set(released), discover())
    for view in affected:  # a temporary table keeps DuckDB's types (Arrow has no HUGEINT)
        con.execute(f"CREATE TEMP TABLE now_{view.name} AS SELECT * FROM {view.name}")
    for name, sql in released.items():  # a TEMP view shadows the stored one for every reader
        con.execute(f"CREATE TEMP VIEW {name} AS {sql}")
    return {v.name: rows_apart(con, f"SELECT * FROM {v.name}", f"FROM now_{v.name}",
                               digits=12) for v in affected}


# every reader of a rewritten view, over the demo, the edge cases and the corpus (~30 s on
# one thread): `make test` only (tests/slow_tests.py); each rewritten view has rows in at
# least one of them (test_each_rewritten_view_has_rows_to_compare)
@pytest.mark.parametrize("fixture", [shared("demo_warehouse"), "edge_wh", shared("corpus_wh")])
def test_rewrites_keep_the_rows_of_every_view_that_reads_them(fixture: str,
                                                              request: Any) -> None:
    released = as_released(read_rewrites(REWRITES))
    apart = rows_now_and_as_released(request.getfixturevalue(fixture), released)
    assert set(released) <= set(apart)
    assert {name: a for name, a in apart.items() if not a.same} == {}


def test_each_rewritten_view_has_rows_to_compare(request: Any) -> None:
    """A comparison of no rows proves nothing: each rewritten view has rows somewhere."""
    rewrites = read_rewrites(REWRITES)
    assert rewrites, "sql/rewrites.toml records no rewrite: this file has nothing to check"
    counts = {name: 0 for name in as_released(rewrites)}
    for fixture in WAREHOUSES:  # the small ones first: the corpus is asked only if need be
        empty = [name for name, n in counts.items() if n == 0]
        if not empty:
            break
        con = connect(request.getfixturevalue(fixture))
        for name in empty:  # one row is enough
            counts[name] += con.execute(
                f"SELECT count(*) FROM (SELECT 1 FROM {name} LIMIT 1)").fetchone()[0]
    assert [name for name, n in counts.items() if n == 0] == []


def test_a_rewrite_that_changes_a_readers_rows_fails(edge_wh: Path) -> None:
    """The check above can fail: a 'rewrite' of kernel_utilization_v2 that halves the
    issue-slot levels changes its rows and those of the views that read it."""
    views = {v.name: v for v in discover()}
    released = normalised_sql(views["kernel_utilization_v2"])
    changed = released.replace("u.issue_slot_util,", "u.issue_slot_util * 0.5 AS issue_slot_util,")
    assert changed != released
    apart = rows_now_and_as_released(edge_wh, {"kernel_utilization_v2": changed})
    assert not apart["kernel_utilization_v2"].same
    assert not apart["issue_slot_distribution_v2"].same  # a reader of it


def test_the_released_sql_as_kept_returns_the_views_rows(edge_wh: Path) -> None:
    """What the mechanism rests on: a view's SQL normalised as its fingerprint is taken (as
    sql/rewrites.toml keeps it) returns the rows and columns of the view itself.

    Each view is compared over the rows of the views it reads, kept in TEMP tables of
    their names (which shadow the stored views for every reader): the two sides then read
    the same input rows, in the same order, and neither evaluates the tree below it again
    (17 CPU s for the 84 views, against 5)."""
    con = connect(edge_wh)
    [(database,)] = con.execute("SELECT current_database()").fetchall()
    for view in discover():  # creation order: a view comes after what it reads
        apart = rows_apart(con, normalised_sql(view), f"SELECT * FROM {view.name}")
        assert apart.same, (view.name, apart)
        con.execute(f"CREATE TEMP TABLE {view.name} AS FROM {database}.main.{view.name}")
