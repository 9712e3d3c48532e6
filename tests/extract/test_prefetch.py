"""etl/extract/prefetch.py: the items in order, errors where they happen, no thread left."""
from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from etl.extract.prefetch import prefetched


def _prefetch_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "prefetch"]


def test_items_come_in_order_and_the_thread_ends() -> None:
    with prefetched(iter(range(1000))) as items:
        assert list(items) == list(range(1000))
    assert _prefetch_threads() == []


def test_an_error_of_the_source_is_raised_after_the_items_before_it() -> None:
    def source() -> Iterator[int]:
        yield 1
        yield 2
        raise ValueError("bad batch")

    got = []
    with pytest.raises(ValueError, match="bad batch"):
        with prefetched(source()) as items:
            for item in items:
                got.append(item)
    assert got == [1, 2]
    assert _prefetch_threads() == []


def _counted(n: int, pulled: list[int]) -> Iterator[int]:
    """0 .. n - 1, each noted in `pulled` as it is made."""
    for item in range(n):
        pulled.append(item)
        yield item


def test_leaving_early_stops_the_source() -> None:
    pulled: list[int] = []
    with pytest.raises(RuntimeError):
        with prefetched(_counted(10_000, pulled), ahead=2) as items:
            for item in items:
                if item == 3:
                    raise RuntimeError("the consumer fails")
    assert _prefetch_threads() == []
    # the thread was at most a few items ahead when it was told to stop, and pulled no more
    assert len(pulled) < 10


def test_the_source_runs_in_another_thread() -> None:
    where = []

    def source() -> Iterator[int]:
        where.append(threading.current_thread().name)
        yield 1

    with prefetched(source()) as items:
        assert list(items) == [1]
    assert where == ["prefetch"]


def test_at_most_one_item_is_made_ahead() -> None:
    pulled: list[int] = []
    with prefetched(_counted(50, pulled)) as items:
        for item in items:
            time.sleep(0.002)  # time for the thread to run ahead as far as it may
            assert len(pulled) <= item + 2  # this item and the next one only
