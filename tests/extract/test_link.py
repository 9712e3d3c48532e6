"""The vectorised linker equals the obvious stack sweep, whole or cut into chunks."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from etl.extract import link
from tests.oracle.stack_sweep import sweep

spans = st.lists(st.tuples(st.integers(0, 3), st.integers(0, 60), st.integers(0, 25),
                           st.booleans(), st.booleans()), max_size=120)


def _arrays(events: list[tuple[int, int, int, bool, bool]]) -> tuple[np.ndarray, ...]:
    thread = np.array([e[0] for e in events], dtype=np.int64)
    start = np.array([e[1] for e in events], dtype=np.int64)
    end = start + np.array([e[2] for e in events], dtype=np.int64)
    return (thread, start, end, np.array([e[3] for e in events], dtype=bool),
            np.array([e[4] for e in events], dtype=bool))


@settings(max_examples=300, deadline=None)
@given(spans)
def test_in_memory_links_equal_the_sweep(events: list[tuple[int, int, int, bool, bool]]
                                         ) -> None:
    thread, start, end, is_op, is_layer = _arrays(events)
    got = link.link_host(thread, start, end, np.ones(len(events), dtype=bool), is_op,
                         is_layer)
    want = sweep(thread.tolist(), start.tolist(), end.tolist(), is_op.tolist(),
                 is_layer.tolist())
    assert (got.parent.tolist(), got.op.tolist(), got.layer.tolist(),
            sorted(got.overlaps)) == want


@settings(max_examples=300, deadline=None)
@given(spans, st.integers(1, 7))
def test_chunked_links_equal_the_sweep(events: list[tuple[int, int, int, bool, bool]],
                                       size: int) -> None:
    thread, start, end, is_op, is_layer = _arrays(events)
    n = len(events)
    order = np.lexsort((np.arange(n), -end, start, thread))
    carry = link.Carry.empty()
    parent, op, layer = np.full(n, -1), np.full(n, -1), np.full(n, -1)
    overlaps: list[int] = []
    for at in range(0, n, size):
        rows = order[at:at + size]
        chunk = link.SortedEvents(thread[rows], start[rows], end[rows], rows.astype(np.int64),
                                  is_op[rows], is_layer[rows])
        found, carry = link.link_sorted(chunk, carry)
        parent[rows], op[rows], layer[rows] = found.parent, found.op, found.layer
        overlaps += rows[found.overlap].tolist()
    want = sweep(thread.tolist(), start.tolist(), end.tolist(), is_op.tolist(),
                 is_layer.tolist())
    assert (parent.tolist(), op.tolist(), layer.tolist(), sorted(overlaps)) == want


def test_a_hand_made_nest() -> None:
    # step [0,100) ⊃ op A [10,50) ⊃ launch [20,21); op B [50,60) starts where A ends
    # (half-open); C [55,70) overlaps B's end.
    thread = np.zeros(5, dtype=np.int64)
    start = np.array([0, 10, 20, 50, 55])
    end = np.array([100, 50, 21, 60, 70])
    is_op = np.array([False, True, False, True, True])
    is_layer = np.array([True, False, False, False, False])
    got = link.link_host(thread, start, end, np.ones(5, dtype=bool), is_op, is_layer)
    assert got.parent.tolist() == [-1, 0, 1, 0, 3]
    assert got.op.tolist() == [-1, -1, 1, -1, 3]
    assert got.layer.tolist() == [-1, 0, 0, 0, 0]
    assert got.overlaps == [4]


@settings(max_examples=300, deadline=None)
@given(spans, st.integers(1, 7))
def test_marks_equal_the_sweep(events: list[tuple[int, int, int, bool, bool]], size: int
                               ) -> None:
    # the 5th flag marks; the innermost marked ancestor is the sweep's innermost layer when
    # the marks are the layers, and a marked event is its own mark
    thread, start, end, is_op, is_mark = _arrays(events)
    inherited = sweep(thread.tolist(), start.tolist(), end.tolist(), is_op.tolist(),
                      is_mark.tolist())[2]
    want = [row if is_mark[row] else up for row, up in enumerate(inherited)]
    whole = link.link_host(thread, start, end, np.ones(len(events), dtype=bool), is_op,
                           np.zeros(len(events), dtype=bool), is_mark)
    n = len(events)
    order = np.lexsort((np.arange(n), -end, start, thread))
    carry, mark = link.Carry.empty(), np.full(n, -1)
    for at in range(0, n, size):
        rows = order[at:at + size]
        found, carry = link.link_sorted(link.SortedEvents(
            thread[rows], start[rows], end[rows], rows.astype(np.int64), is_op[rows],
            np.zeros(len(rows), dtype=bool), is_mark[rows]), carry)
        mark[rows] = found.mark
    assert whole.mark.tolist() == want and mark.tolist() == want


@settings(max_examples=300, deadline=None)
@given(spans, st.integers(1, 7))
def test_a_stream_in_start_order_links_as_the_sweep(
        events: list[tuple[int, int, int, bool, bool]], size: int) -> None:
    # threads interleaved, as a profiler writes its calls: the stream is in (start, longer
    # first) order, each chunk sorted by thread; the carry keeps every thread's stack
    thread, start, end, is_op, is_layer = _arrays(events)
    n = len(events)
    order = np.lexsort((np.arange(n), -end, start))
    carry = link.Carry.empty()
    parent, op, layer, mark = (np.full(n, -1) for _ in range(4))
    overlaps: list[int] = []
    for at in range(0, n, size):
        rows = order[at:at + size]
        rows = rows[np.argsort(thread[rows], kind="stable")]
        chunk = link.SortedEvents(thread[rows], start[rows], end[rows], rows.astype(np.int64),
                                  is_op[rows], is_layer[rows], is_layer[rows])
        found, carry = link.link_sorted(chunk, carry, every_thread=True)
        parent[rows], op[rows], layer[rows] = found.parent, found.op, found.layer
        mark[rows] = found.mark
        overlaps += rows[found.overlap].tolist()
    want = sweep(thread.tolist(), start.tolist(), end.tolist(), is_op.tolist(),
                 is_layer.tolist())
    assert (parent.tolist(), op.tolist(), layer.tolist(), sorted(overlaps)) == want
    assert mark.tolist() == [row if is_layer[row] else up for row, up in enumerate(want[2])]
