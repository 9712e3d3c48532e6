"""The macros of sql/macros/, run over inline rows: rows in, rows out, no ingest.

Each case registers its rows as a DuckDB table (from pyarrow), renders a query that calls
the macro with the renderer of the views (etl.core.sql_files.render_text) and compares
what it returns with rows worked by hand, as Perfetto tests its interval macros.
"""
from __future__ import annotations

from typing import Any

import duckdb
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from etl.core.sql_files import SQL_DIR, render_text
from tests.oracle.naive_kineto import union

SCHEMA = pa.schema([("p", pa.int64()), ("start_ns", pa.int64()), ("end_ns", pa.int64())])
MERGE = """{% from 'intervals.sql' import merge_overlapping %}
WITH intervals AS (SELECT p, start_ns, end_ns FROM input),
{{ merge_overlapping('intervals', ['p']) }}"""


def in_order(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return sorted(rows, key=lambda row: tuple((v is None, v) for v in row))  # NULLs last


def run(template: str, rows: list[tuple[Any, ...]], schema: pa.Schema = SCHEMA
        ) -> list[tuple[Any, ...]]:
    con = duckdb.connect()
    con.register("input", pa.Table.from_pylist(
        [dict(zip(schema.names, row)) for row in rows], schema=schema))
    return in_order(con.execute(render_text(template)).fetchall())


# ---- merge_overlapping: one row per merged span --------------------------------------------

@pytest.mark.parametrize("rows,spans", [
    pytest.param([(1, 0, 10), (1, 5, 20), (1, 20, 30), (1, 40, 50), (1, 42, 45)],
                 [(1, 0, 30), (1, 40, 50)], id="the-example-of-intervals.sql"),
    pytest.param([(1, 0, 10), (1, 10, 20)], [(1, 0, 20)], id="touching"),
    pytest.param([(1, 0, 10), (1, 11, 20)], [(1, 0, 10), (1, 11, 20)], id="a-gap"),
    pytest.param([(1, 0, 100), (1, 10, 20), (1, 30, 40)], [(1, 0, 100)], id="nested"),
    pytest.param([(1, 5, 10), (1, 5, 10)], [(1, 5, 10)], id="identical"),
    pytest.param([(1, 3, 4)], [(1, 3, 4)], id="single"),
    pytest.param([(1, 5, 5), (1, 5, 8), (1, 8, 8), (1, 9, 9)], [(1, 5, 8), (1, 9, 9)],
                 id="zero-length"),
    pytest.param([(1, 20, 30), (1, 0, 10), (1, 5, 20)], [(1, 0, 30)], id="unsorted-input"),
    pytest.param([(1, 0, 10), (2, 5, 15)], [(1, 0, 10), (2, 5, 15)], id="partitions-apart"),
    pytest.param([(None, 0, 10), (None, 5, 20), (1, 0, 1)], [(1, 0, 1), (None, 0, 20)],
                 id="a-null-key-is-a-partition"),
    pytest.param([], [], id="no-rows"),
])
def test_merge_overlapping(rows: list[tuple[Any, ...]], spans: list[tuple[Any, ...]]) -> None:
    assert run(MERGE, rows) == in_order(spans)


def test_merge_overlapping_keeps_every_partition_column() -> None:
    schema = pa.schema([("run", pa.string()), ("device", pa.int64()),
                        ("start_ns", pa.int64()), ("end_ns", pa.int64())])
    template = """{% from 'intervals.sql' import merge_overlapping %}
WITH i AS (FROM input), {{ merge_overlapping('i', ['run', 'device']) }}"""
    rows = [("a", 0, 0, 10), ("a", 0, 5, 15), ("a", 1, 5, 15), ("b", 0, 12, 20)]
    assert run(template, rows, schema) == [("a", 0, 0, 15), ("a", 1, 5, 15), ("b", 0, 12, 20)]


# ---- earlier_ends: the latest end before each interval, under filters, in one pass ----------

TYPED = pa.schema([("p", pa.int64()), ("t", pa.string()), ("start_ns", pa.int64()),
                   ("end_ns", pa.int64())])
ENDS = """{% from 'intervals.sql' import earlier_ends %}
WITH e AS ({{ earlier_ends('input', ['p'], [('a_end_ns', "t = 'a'"), ('any_end_ns', 'true')]) }})
SELECT p, t, start_ns, end_ns, a_end_ns, any_end_ns,
       greatest(start_ns, any_end_ns) AS piece_start_ns
FROM e"""


def test_earlier_ends_the_example_of_intervals_sql() -> None:
    rows = [(1, "a", 0, 10), (1, "a", 5, 20), (1, "a", 20, 30), (1, "a", 40, 50),
            (1, "a", 42, 45)]
    got = [(start, end, any_end, piece) for _, _, start, end, _, any_end, piece
           in run(ENDS, rows, TYPED)]
    assert sorted(got) == [(0, 10, None, 0), (5, 20, 10, 10), (20, 30, 20, 20),
                           (40, 50, 30, 40), (42, 45, 50, 50)]  # the last piece is empty


def test_earlier_ends_filter_by_scope_within_each_partition() -> None:
    rows = [(1, "a", 0, 50), (1, "b", 10, 80), (1, "a", 60, 70), (1, "b", 90, 95),
            (2, "b", 0, 10), (2, "a", 5, 6), (None, "a", 0, 7), (None, "a", 1, 2)]
    assert run(ENDS, rows, TYPED) == in_order([
        (1, "a", 0, 50, None, None, 0),
        (1, "b", 10, 80, 50, 50, 50),    # an a-interval before it, ending at 50
        (1, "a", 60, 70, 50, 80, 80),    # the a-scope's earlier end is 50, any's 80
        (1, "b", 90, 95, 70, 80, 90),
        (2, "b", 0, 10, None, None, 0),  # partition 2 sees nothing of partition 1
        (2, "a", 5, 6, None, 10, 10),
        (None, "a", 0, 7, None, None, 0),
        (None, "a", 1, 2, 7, 7, 7),      # NULL keys are one partition
    ])


def test_earlier_ends_of_no_rows() -> None:
    assert run(ENDS, [], TYPED) == []


# ---- both against the naive oracle's union, on random intervals ------------------------------

INTERVALS = st.lists(st.tuples(st.integers(0, 60), st.integers(0, 15)).map(
    lambda t: (t[0], t[0] + t[1])), max_size=12)


@settings(max_examples=60, deadline=None)
@given(INTERVALS)
def test_spans_and_pieces_agree_with_a_naive_merge(intervals: list[tuple[int, int]]) -> None:
    rows = [(1, start, end) for start, end in intervals]
    spans = union(intervals)
    assert run(MERGE, rows) == [(1, s, e) for s, e in spans]
    pieces = [(piece, end) for *_, end, _, _, piece in run(ENDS, [(1, "a", *r[1:]) for r in rows],
                                                            TYPED) if end > piece]
    # the non-empty pieces never overlap, and they cover the spans' instants exactly
    pieces.sort()
    assert all(a_end <= b_start for (_, a_end), (b_start, _) in zip(pieces, pieces[1:]))
    assert union(pieces) == [(s, e) for s, e in spans if e > s]


def test_the_private_views_merge_with_the_macros() -> None:
    """Interval merging is written once: the four views that merge call intervals.sql and
    write no sweep of their own."""
    for name in ("gpu/_busy_intervals_v1", "breakdown/_type_spans_v1",
                 "breakdown/_type_coverage_v1", "breakdown/_activity_pieces_v1"):
        text = (SQL_DIR / f"{name}.sql").read_text()
        assert "from 'intervals.sql' import" in text, name
        assert "PRECEDING" not in text, name
