"""Progress inside one input file: bytes read and the pass under way.

A big trace is one run and one file, so a per-run counter says "0/1" for the whole read.
Readers report here how far they are; whoever shows progress (the CLI's bar) listens. The
listener is per process: in a worker process that extracts whole runs nobody listens and a
report costs one attribute check.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class FileProgress:
    path: Path
    stage: str               # "read" (pass 1), then the later passes by name
    done_bytes: int | None   # bytes of the file read so far (None after the read)
    total_bytes: int | None  # the file's size; None when unknown (a stream)
    # for gzip, done_bytes counts decompressed bytes against the compressed size: the bar
    # then overshoots, so done is shown alone (`compressed` says so)
    compressed: bool = False


Listener = Callable[[FileProgress], None]
_listener: Listener | None = None


def listen(listener: Listener | None) -> None:
    """Send this process's file progress to `listener` (None: stop)."""
    global _listener
    _listener = listener


def report(progress: FileProgress) -> None:
    if _listener is not None:
        _listener(progress)


def describe(progress: FileProgress) -> str:
    """One short line: `trace.json 412/1,033 MB` while reading, `trace.json: linking` after."""
    name = progress.path.name
    if progress.done_bytes is None:
        return f"{name}: {progress.stage}"
    done = progress.done_bytes / 1e6
    if progress.total_bytes is None or progress.compressed:
        return f"{name} {done:,.0f} MB read"
    return f"{name} {done:,.0f}/{progress.total_bytes / 1e6:,.0f} MB"
