"""Reading input bytes: plain or gzip, with a cap on inflation, errors as InputError."""
from __future__ import annotations

import os
import zlib
from pathlib import Path

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


def read_all(path: Path, max_bytes: int | None = None) -> bytes:
    """The whole decompressed content of `path`; gzip errors and bombs become InputError."""
    if not is_gzip(path):
        return path.read_bytes()
    cap = inflate_cap(path) if max_bytes is None else max_bytes
    return _gunzip(path, cap)


def _gunzip(path: Path, cap: int) -> bytes:
    """Inflate every gzip member (concatenated .gz files are valid gzip), within `cap`."""
    from isal import isal_zlib

    out = bytearray()
    inflater = isal_zlib.decompressobj(wbits=31)
    consumed = 0
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 22):
            while chunk:
                try:
                    out += inflater.decompress(chunk)
                except isal_zlib.error as exc:  # type: ignore[misc]
                    raise InputError(path, f"corrupt gzip data ({exc})", f"byte {consumed}",
                                     "re-copy the file from where the profiler wrote it") from None
                chunk = inflater.unused_data if inflater.eof else b""
                if chunk:
                    inflater = isal_zlib.decompressobj(wbits=31)
            consumed = fh.tell()
            if len(out) > cap:
                raise InputError(path, f"gzip inflates beyond {cap} bytes (a gzip bomb?)",
                                 f"byte {consumed}", "raise ETL_MAX_INFLATE_RATIO if the file "
                                 "is a genuine trace") from None
    if not inflater.eof:
        raise InputError(path, "gzip stream is truncated", f"byte {consumed}",
                         "the profiler was probably killed while writing; re-copy or "
                         "re-record the trace") from None
    return bytes(out)
