"""Reading input bytes: plain or gzip, with a cap on inflation, errors as InputError."""
from __future__ import annotations

import os
import zlib
from pathlib import Path
from typing import Any, BinaryIO
from collections.abc import Iterator

from etl.core.errors import InputError

GZIP_MAGIC = b"\x1f\x8b"
HEAD_BYTES = 1 << 16
# Real traces compress ~18x; a stream that inflates far beyond this is a bomb, not a trace.
DEFAULT_MAX_INFLATE_RATIO = 1000
DEFAULT_MIN_INFLATE_CAP = 1 << 30


def inflate_cap(path: Path) -> int:
    """Largest decompressed size accepted for `path`.

    Default: 1000x the compressed size, at least 1 GiB. ETL_MAX_INFLATE_RATIO, when set,
    is the whole rule (no floor), so it can lower the cap as well as raise it.
    """
    configured = os.environ.get("ETL_MAX_INFLATE_RATIO")
    size = path.stat().st_size
    if configured:
        return int(configured) * size
    return max(DEFAULT_MIN_INFLATE_CAP, DEFAULT_MAX_INFLATE_RATIO * size)


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


def is_gzip(path: Path) -> bool:
    with open(path, "rb") as fh:
        return fh.read(2) == GZIP_MAGIC


def slice_checksum(text: bytes | bytearray | memoryview) -> int:
    """CRC-32 of a slice (isa-l: ~20 GB/s), so a worker that re-reads the slice from the
    file can tell it got the bytes that were validated."""
    from isal import isal_zlib

    return int(isal_zlib.crc32(text))


def read_slice(path: Path, offset: int, length: int, checksum: int) -> bytearray:
    """The slice `[` + bytes offset .. offset + length - 2 of a plain file + `]`, as the
    slicer validated it (it writes the brackets over the bytes around the events).

    A file changed since the slice was validated (different bytes or shorter) is refused.
    """
    text = bytearray(length)
    text[0], text[-1] = ord("["), ord("]")
    with open(path, "rb", buffering=0) as fh, memoryview(text) as view:
        fh.seek(offset)
        got, want = 0, length - 2
        while got < want and (n := fh.readinto(view[1 + got:length - 1])):
            got += n
        same = got == want and slice_checksum(view) == checksum
    if not same:
        raise InputError(path, "the file changed while it was being ingested",
                         f"byte {offset}", "ingest it again once nothing writes to it")
    return text


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
        """Inflate every member, at most BLOCK_BYTES of output per call, so a bomb is
        refused after at most one block beyond the cap."""
        from isal import isal_zlib

        cap, produced = inflate_cap(self.path), 0
        inflater = isal_zlib.decompressobj(wbits=31)
        pending, full, finished = b"", False, False
        while True:
            if not pending and not full:
                pending = fh.read(BLOCK_BYTES)
                if not pending:
                    break
            out = self._decompress(inflater, pending, fh.tell())
            full = len(out) == BLOCK_BYTES  # more output may wait without more input
            produced += len(out)
            if produced > cap:
                raise InputError(self.path, f"gzip inflates beyond {cap} bytes (a gzip bomb?)",
                                 f"compressed byte {fh.tell()}", "raise ETL_MAX_INFLATE_RATIO "
                                 "if the file is a genuine trace") from None
            if out:
                yield out
            if inflater.eof:
                pending, full, finished = inflater.unused_data, False, True
                if pending:  # another gzip member follows (concatenated .gz files)
                    inflater, finished = isal_zlib.decompressobj(wbits=31), False
            else:
                pending, finished = inflater.unconsumed_tail, False
        if not finished:
            self._cut(fh.tell())

    def _decompress(self, inflater: Any, data: bytes, offset: int) -> bytes:
        from isal import isal_zlib

        try:
            return bytes(inflater.decompress(data, BLOCK_BYTES))
        except isal_zlib.error as exc:  # type: ignore[misc]
            raise InputError(self.path, f"corrupt gzip data ({exc})", f"compressed byte "
                             f"{offset}", "re-copy the file from where the profiler wrote it"
                             ) from None

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
