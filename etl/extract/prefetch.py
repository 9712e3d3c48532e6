"""Items of an iterator made by a thread of their own, ahead of their use.

Pass 2 of a big trace pulls sorted batches out of DuckDB and links them in Python, one
after the other: while Python links a batch DuckDB waits, and while DuckDB merges the next
one Python waits. DuckDB and Arrow release the GIL while they work, so a thread that pulls
the next batch while this one is linked puts the second core to use (etl/extract/kineto/
read.py `_link_host`). Each item made ahead is memory held: one is the default.
"""
from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TypeVar

T = TypeVar("T")
_END = object()


@contextmanager
def prefetched(items: Iterable[T], ahead: int = 1) -> Iterator[Iterator[T]]:
    """The items of `items`, each pulled by a thread while the one before it is used (at
    most `ahead` items made and not yet taken); an error of `items` is raised where its
    item would have been. On leaving the block the thread is stopped and waited for, so
    what `items` reads from (a DuckDB result) may be closed right after."""
    handoff: queue.SimpleQueue[object] = queue.SimpleQueue()
    room = threading.Semaphore(ahead)
    stop = threading.Event()
    worker = threading.Thread(target=_pull, args=(iter(items), handoff, room, stop),
                              daemon=True, name="prefetch")
    worker.start()
    try:
        yield _taken(handoff, room)
    finally:
        stop.set()
        room.release()  # wake a thread waiting for room: it sees stop and ends
        worker.join()


def _pull(items: Iterator[T], handoff: queue.SimpleQueue[object],
          room: threading.Semaphore, stop: threading.Event) -> None:
    while True:
        room.acquire()
        if stop.is_set():
            return
        try:
            item: object = next(items)
        except StopIteration:
            item = _END
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer, raised there
            item = _Failed(exc)
        handoff.put(item)
        if item is _END or isinstance(item, _Failed):
            return


class _Failed:
    def __init__(self, error: BaseException) -> None:
        self.error = error


def _taken(handoff: queue.SimpleQueue[object], room: threading.Semaphore) -> Iterator[T]:
    while True:
        item = handoff.get()
        room.release()  # the thread may make the next one while this one is used
        if item is _END:
            return
        if isinstance(item, _Failed):
            raise item.error
        yield item  # type: ignore[misc]
