"""Released views rewritten with the same rows (etl/views/rewrites.py): each recorded
rewrite's released SQL (sql/rewrites.toml) runs beside the view as it is now, on the demo,
the edge-case and the corpus warehouses, and must return the same rows and columns.

The lint (tests/views/test_lint.py) checks that each stored SQL is the released view (its
fingerprint); this file checks that the rewrite kept its rows. bench/same_rows.py makes the
same comparison (etl.views.rewrites.rows_apart) between two revisions on any warehouse.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from etl.api import connect
from etl.core.sql_files import discover
from etl.views.fingerprints import REWRITES
from etl.views.rewrites import Rewrite, normalised_sql, read_rewrites, rows_apart

WAREHOUSES = ("demo_warehouse", "edge_wh", "corpus_wh")


@pytest.mark.parametrize("rewrite", read_rewrites(REWRITES),
                         ids=lambda r: f"{r.view}@{r.before[:8]}")
def test_a_rewritten_view_keeps_its_rows(rewrite: Rewrite, request: Any) -> None:
    compared = 0
    for fixture in WAREHOUSES:
        con = connect(request.getfixturevalue(fixture))
        apart = rows_apart(con, rewrite.released_sql, f"SELECT * FROM {rewrite.view}")
        assert apart.columns_before == apart.columns_after, fixture
        assert (apart.only_before, apart.only_after) == (0, 0), (fixture, apart)
        compared += apart.rows_before
    assert compared > 0, f"{rewrite.view}: no test warehouse has rows of it to compare"


def test_the_released_sql_as_kept_returns_the_views_rows(edge_wh: Path) -> None:
    """What the mechanism rests on: a view's SQL normalised as its fingerprint is taken (as
    sql/rewrites.toml keeps it) returns the rows and columns of the view itself."""
    con = connect(edge_wh)
    for view in discover():
        apart = rows_apart(con, normalised_sql(view), f"SELECT * FROM {view.name}")
        assert apart.same, (view.name, apart)
