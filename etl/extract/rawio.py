"""Reading input bytes: plain or gzip, with a cap on inflation, errors as InputError."""
from __future__ import annotations

import os
import zlib
from pathlib import Path
from typing import BinaryIO
from collections.abc import Iterator

from etl.errors import InputError

GZIP_MAGIC = b"\x1f\x8b"
HEAD_BYTES = 1 << 16
# Real traces compress ~18x; a stream that inflates far beyond this is a bomb, not a trace.
DEFAULT_MAX_INFLATE_RATIO = 1000
DEFAULT_MIN_INFLATE_CAP = 1 << 30


def is_gzip(path: Path) -> bool:
    with open(path, "rb") as fh:
        return fh.read(2) == GZIP_MAGIC


def inflate_cap(path: Path) -> int:
    """Largest decompressed size accepted for `path` (env ETL_MAX_INFLATE_RATIO overrides)."""
    ratio = int(os.environ.get("ETL_MAX_INFLATE_RATIO", DEFAULT_MAX_INFLATE_RATIO))
    return max(DEFAULT_MIN_INFLATE_CAP, ratio * path.stat().st_size)


def read_head(path: Path, size: int = HEAD_BYTES) -> bytes:
    """First `size` decompressed bytes, best effort (for sniffing; never raises on bad gzip)."""
    with open(path, "rb") as fh:
        raw = fh.read(size)
    if not raw.startswith(GZIP_MAGIC):
        return raw
    try:
        return zlib.decompressobj(wbits=31).decompress(raw, size)
    except zlib.error:
        return b""


BLOCK_BYTES = 4 << 20


class BlockReader:
    """Decompressed blocks of a file (plain or gzip, multi-member), never the whole file.

    A gzip stream that ends early raises InputError, or with `salvage` just ends, with
    `truncated` set, so the complete events before the cut can be kept.
    """

    def __init__(self, path: Path, salvage: bool = False) -> None:
        self.path = path
        self.salvage = salvage
        self.truncated = False

    def __iter__(self) -> Iterator[bytes]:
        with open(self.path, "rb") as fh:
            if fh.read(2) != GZIP_MAGIC:
                fh.seek(0)
                while block := fh.read(BLOCK_BYTES):
                    yield block
                return
            fh.seek(0)
            yield from self._inflate(fh)

    def _inflate(self, fh: BinaryIO) -> Iterator[bytes]:
        from isal import isal_zlib

        cap, produced = inflate_cap(self.path), 0
        inflater = isal_zlib.decompressobj(wbits=31)
        while chunk := fh.read(BLOCK_BYTES):
            while chunk:
                try:
                    out = inflater.decompress(chunk)
                except isal_zlib.error as exc:  # type: ignore[misc]
                    raise InputError(self.path, f"corrupt gzip data ({exc})",
                                     f"compressed byte {fh.tell()}",
                                     "re-copy the file from where the profiler wrote it") from None
                produced += len(out)
                if produced > cap:
                    raise InputError(self.path, f"gzip inflates beyond {cap} bytes (a gzip "
                                     "bomb?)", f"compressed byte {fh.tell()}",
                                     "raise ETL_MAX_INFLATE_RATIO if the file is a genuine "
                                     "trace") from None
                yield out
                chunk = inflater.unused_data if inflater.eof else b""
                if chunk:
                    inflater = isal_zlib.decompressobj(wbits=31)
        if not inflater.eof:
            self._cut(fh.tell())

    def _cut(self, offset: int) -> None:
        if not self.salvage:
            raise InputError(self.path, "gzip stream is truncated", f"compressed byte {offset}",
                             "the profiler was probably killed while writing; re-copy or "
                             "re-record the trace, or ingest with --salvage to keep the "
                             "complete events")
        self.truncated = True


def read_all(path: Path) -> bytes:
    """The whole decompressed content (for layouts that cannot be streamed)."""
    return b"".join(BlockReader(path))
