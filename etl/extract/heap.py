"""glibc's heap kept from one batch to the next."""
from __future__ import annotations

import ctypes

_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_THRESHOLD = -1, -2, -3   # glibc's malloc.h


def keep_freed_heap() -> None:
    """A reader's batches allocate and free numpy temporaries of 0.1-1 MiB each, and glibc
    hands such memory back to the OS at once (blocks it mmaps, or the heap's free top) to
    fault it in again for the next batch: 585 k page faults and ~1.4 s of system time for
    a 1 GB nsys export (bench/nsys_once.py). Blocks up to 64 MiB come from the heap and
    256 MiB of free heap stay with the process (its peak grew ~15 MiB). Nothing happens
    where there is no mallopt (not glibc); musl's does nothing."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    mallopt(_M_MMAP_THRESHOLD, 64 << 20)
    mallopt(_M_TRIM_THRESHOLD, 256 << 20)
    mallopt(_M_TOP_PAD, 64 << 20)
