"""Worker processes for decoding one big source on several cores.

Spawned, not forked: the parent may hold DuckDB or Arrow threads whose locks a fork
would copy in whatever state they were.
"""
from __future__ import annotations

import os
import signal
import threading
import time
from concurrent.futures import ProcessPoolExecutor

_PR_SET_PDEATHSIG = 1


def worker_pool(workers: int) -> ProcessPoolExecutor:
    import multiprocessing

    return ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                               initializer=_die_with_parent, initargs=(os.getpid(),))


def _die_with_parent(parent: int) -> None:
    """A worker must not outlive an ingest killed with SIGKILL (it would wait forever on
    its queue): Linux kills it with its parent; elsewhere a thread watches the parent."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL) == 0:
            if os.getppid() != parent:  # the parent died before prctl took effect
                os._exit(1)
            return
    except (OSError, AttributeError):
        pass
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True).start()


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(1)
    os._exit(1)
