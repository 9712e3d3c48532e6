"""Pass 2's host rows without the sort, when pass 1 found each call table in start order.

nsys writes a table's rows as its events start, every thread interleaved; linking needs
each thread's rows by (start, longer first, event id) and nothing else (link.link_sorted
with every_thread keeps each thread's open events across chunks). So the call tables are
read back from the spill as they were written and merged by start with each other and
with the NVTX ranges (held in memory, at most spill.NVTX_IN_MEMORY, and sorted), and each
chunk is sorted by thread in memory. A chunk holds every row that starts before some
bound and none after it, so that rows starting together (the only ones whose order the
files do not give) are always in one chunk, where they are sorted by the whole key. Rows
that cannot be linked (no end, or an end before the start) are passed through unlinked
wherever they fall, as the sorted path does with them.
"""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from etl.extract.nsys.spill import NVTX_FILE, calls_in_order_files, ipc_batches

if TYPE_CHECKING:
    import pyarrow as pa

MIN_SHARE = 1024     # rows a stream reads at least at once


def rows_in_start_order(spill: Path, step_rows: np.ndarray, step_link_end: np.ndarray,
                        chunk_rows: int) -> Iterator[pa.Table]:
    """The host rows in chunks, each sorted by (thread, start, link_end descending, event
    id) and every thread's rows in that order across chunks; the columns of passes.py's
    sorted query. Only for a spill whose call tables are each in start order."""
    runs = calls_in_order_files(spill)
    nvtx = _nvtx(spill / NVTX_FILE, step_rows, step_link_end)
    # a chunk takes rows from every stream: each reads its share, so a chunk stays
    # about chunk_rows rows (memory: linking a chunk costs ~20 arrays of its length)
    share = max(chunk_rows // max(len(runs) + (nvtx is not None), 1), MIN_SHARE)
    streams = [_Stream(_calls(path, share)) for path in runs]
    if nvtx is not None:
        streams.append(_Stream(nvtx.slice(k, share) for k in range(0, nvtx.num_rows, share)))
    yield from _merged(streams)


class _Stream:
    """Tables of rows in start order, read ahead as far as the merge needs."""

    def __init__(self, tables: Iterator[pa.Table]) -> None:
        self.tables = tables
        self.buffer: pa.Table | None = None
        self.done = False      # every table read (rows may still be in the buffer)

    def fill(self) -> None:
        """Read ahead until the buffer holds two start values (or all is read): then its
        rows before the last start can be merged."""
        while not self.done and (self.buffer is None or not self.buffer.num_rows
                                 or self.buffer["start"][0] == self.buffer["start"][-1]):
            self.extend()

    def extend(self) -> None:
        import pyarrow as pa

        table = next(self.tables, None)
        if table is None:
            self.done = True
        elif self.buffer is None or not self.buffer.num_rows:
            self.buffer = table
        else:
            self.buffer = pa.concat_tables([self.buffer, table])

    def last_start(self) -> int:
        assert self.buffer is not None
        return int(self.buffer["start"][-1].as_py())

    def take_before(self, bound: int | None) -> pa.Table | None:
        """The buffered rows that start before `bound` (None: all of them)."""
        if self.buffer is None or not self.buffer.num_rows:
            return None
        cut = self.buffer.num_rows if bound is None else int(
            np.searchsorted(_int64(self.buffer["start"]), bound, "left"))
        taken, self.buffer = self.buffer.slice(0, cut), self.buffer.slice(cut)
        return taken if taken.num_rows else None


def _merged(streams: list[_Stream]) -> Iterator[pa.Table]:
    """Chunks of the streams' rows: all that start before the least of the last starts
    read ahead by the streams that are not done (each holds rows before its last start),
    then the rest."""
    while True:
        for stream in streams:
            stream.fill()
        going = [stream for stream in streams if not stream.done]
        bound = min((stream.last_start() for stream in going), default=None)
        pieces = [p for p in (stream.take_before(bound) for stream in streams) if p]
        if pieces:
            yield _by_thread(pieces)
        elif bound is None:
            return
        else:  # the stream that set the bound holds rows before it (fill)
            raise AssertionError("the merge of the host rows made no progress")


def _calls(path: Path, rows: int) -> Iterator[pa.Table]:
    """A run of calls as written, `rows` at a time (the last fewer), with the sorted
    query's columns (a call is linked by its own end)."""
    pending: list[pa.RecordBatch] = []
    held = 0
    for batch in ipc_batches(path):
        while batch.num_rows:
            piece = batch.slice(0, rows - held)
            batch = batch.slice(piece.num_rows)
            pending.append(piece)
            held += piece.num_rows
            if held == rows:
                yield _call_chunk(pending)
                pending, held = [], 0
    if pending:
        yield _call_chunk(pending)


def _call_chunk(batches: list[pa.RecordBatch]) -> pa.Table:
    import pyarrow as pa
    import pyarrow.compute as pc

    table = pa.Table.from_batches(batches)
    return _with_link_columns(table, pc.is_valid(table["end"]), table["end"],
                              np.zeros(table.num_rows, bool))


def _nvtx(path: Path, step_rows: np.ndarray, step_link_end: np.ndarray) -> pa.Table | None:
    """The NVTX ranges by (start, link_end descending, event id): a step range is linked
    up to its end as the steps were read (the next step's start when never popped) and is
    no layer; the other ranges are layers, linked by their own end."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    if not path.exists():
        return None
    table = pq.read_table(path)
    event = _int64(table["event_id"])
    order = np.argsort(step_rows, kind="stable")
    at = np.minimum(np.searchsorted(step_rows[order], event), max(len(order) - 1, 0))
    is_step = (step_rows[order][at] == event) if len(order) else np.zeros(len(event), bool)
    step_end = step_link_end[order][at] if len(order) else np.zeros(len(event), np.int64)
    end = table["end"]
    timed = is_step | _bool(pc.is_valid(end))
    link_end = pa.array(np.where(is_step, step_end, _int64(end.fill_null(0))), pa.int64(),
                        mask=~timed)
    table = _with_link_columns(table, pa.array(timed), link_end, ~is_step)
    key = _int64(link_end.fill_null(0))
    return table.take(pa.array(np.lexsort((event, -key, _int64(table["start"])))))


def _with_link_columns(table: pa.Table, timed: pa.Array, link_end: pa.Array,
                       is_layer: np.ndarray) -> pa.Table:
    """is_layer, link_end, linkable (timed and not ending before its start)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    linkable = pc.fill_null(pc.and_(timed, pc.greater_equal(link_end, table["start"])), False)
    return (table.append_column("is_layer", pa.array(is_layer))
            .append_column("link_end", link_end).append_column("linkable", linkable))


def _by_thread(pieces: list[pa.Table]) -> pa.Table:
    """One chunk in (thread, start, link_end descending, event id) order. A piece of one
    stream is in start order already, so a stable sort by thread does unless a thread has
    rows in two pieces or two rows start at the same time (then the whole key is
    sorted)."""
    import pyarrow as pa

    table = pieces[0] if len(pieces) == 1 else pa.concat_tables(pieces)
    if table.num_rows < 2:
        return table
    thread, start = _int64(table["thread"]), _int64(table["start"])
    if _threads_meet(pieces) or bool((start[1:] == start[:-1]).any()):
        key = _int64(table["link_end"].fill_null(0))
        order = np.lexsort((_int64(table["event_id"]), -key, start, thread))
    elif bool((thread[1:] != thread[:-1]).any()):
        order = np.argsort(thread, kind="stable")
    else:
        return table
    return table.take(pa.array(order))


def _threads_meet(pieces: list[pa.Table]) -> bool:
    """Has a thread rows in more than one piece?"""
    import pyarrow.compute as pc

    if len(pieces) < 2:
        return False
    threads = [_int64(pc.unique(piece["thread"])) for piece in pieces]
    every = np.concatenate(threads)
    return len(np.unique(every)) < len(every)


def _int64(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    return np.asarray(column.to_numpy(), np.int64)


def _bool(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    return np.asarray(column.to_numpy(zero_copy_only=False), bool)
