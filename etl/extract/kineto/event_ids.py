"""Event ids for slices whose events were not counted before they were handed out.

An event's id is its index in traceEvents, so a slice's first id is the number of events
in the slices before it. When the ingesting process hands slices out without decoding
them (trusted cuts, etl/extract/jsonslice.py), only the process that decodes a slice learns
its count. The slices' decoders then pass the numbering along a chain of small files in
the spill folder: the decoder of slice k waits for `first-k` (the first id of its slice),
writes `first-(k+1)` = that id + its count, and only then makes its columns. Decoding, the
costly part, runs in parallel; a decoder waits, at most, for the one before it to finish
decoding, which started earlier. A decoder that fails writes FAILED in its successor's
file, and the ingesting process writes `abort` when it gives up (or removes the folder), so
no one waits forever.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

FAILED = "failed"
_POLL_SECONDS = (0.0002, 0.002)  # first and longest pause between looks


class SliceFailed(Exception):
    """An earlier slice failed, or the ingest gave up: this slice's ids cannot be known."""


@dataclass(frozen=True)
class IdChain:
    folder: Path  # created by `start`; picklable, so workers get it with their slice

    def start(self) -> None:
        """Before the first slice: its first id is 0."""
        self.folder.mkdir(parents=True, exist_ok=True)
        self._publish(0, "0")

    def first_id(self, index: int, events: int) -> int:
        """The first id of slice `index`, which holds `events` events (waits for the slice
        before it); publishes the first id of slice index + 1. Calling it again for the
        same slice gives the same id."""
        first = self._wait(index)
        self._publish(index + 1, str(first + events))
        return first

    def fail(self, index: int) -> None:
        """Slice `index` failed before it published its successor's first id."""
        if not self._file(index + 1).exists():
            self._publish(index + 1, FAILED)

    def abort(self) -> None:
        """The ingest gives up: every decoder still waiting stops."""
        self._file_named("abort").touch()

    def _wait(self, index: int) -> int:
        pause = _POLL_SECONDS[0]
        path, abort = self._file(index), self._file_named("abort")
        while not path.exists():
            if abort.exists() or not self.folder.exists():  # gone: the spill was removed
                raise SliceFailed("the ingest of this file was stopped")
            time.sleep(pause)
            pause = min(2 * pause, _POLL_SECONDS[1])
        text = path.read_text()
        if text == FAILED:
            raise SliceFailed(f"slice {index - 1} failed")
        return int(text)

    def _publish(self, index: int, text: str) -> None:
        # written whole, then renamed: a reader never sees half a number
        partial = self._file_named(f"first-{index:06d}.partial")
        partial.write_text(text)
        os.replace(partial, self._file(index))

    def _file(self, index: int) -> Path:
        return self._file_named(f"first-{index:06d}")

    def _file_named(self, name: str) -> Path:
        return self.folder / name
