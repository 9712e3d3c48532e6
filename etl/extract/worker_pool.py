"""Worker processes: for decoding one big source on several cores, and for the ingest's
run folders (etl/load/ingest.py).

Spawned, not forked: the parent may hold DuckDB or Arrow threads whose locks a fork
would copy in whatever state they were. And spawned without the parent's main module:
multiprocessing's spawn runs the parent's `__main__` script again in each child (as
`__mp_main__`), so a plain script that calls `etl.ingest(...)` without an
`if __name__ == "__main__":` guard would ingest again in every child, and multiprocessing
refuses that ("bootstrapping phase"). The children only run this package's functions,
which they import by module name, so they need nothing of the parent's script.
"""
from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from multiprocessing import context, popen_spawn_posix  # POSIX only, as PR_SET_PDEATHSIG
from typing import Any

_PR_SET_PDEATHSIG = 1
MAIN_KEYS = ("init_main_from_path", "init_main_from_name")  # what makes a child run __main__


# mimalloc, pyarrow's allocator, gives freed pages back to the system 1 s after they are
# freed. A slice worker frees and takes again ~100 MB of Arrow buffers every ~0.2 s, so each
# slice faulted them in anew (a third of its minor faults, ~20 ms of system time). mimalloc
# reads the variable when pyarrow loads it: the worker sets it before it imports pyarrow
# (a value the user set wins). Idle workers still give the pages back, 10 s later.
ALLOCATOR_ENVIRONMENT = {"MIMALLOC_PURGE_DELAY": "10000"}


def worker_pool(workers: int) -> ProcessPoolExecutor:
    return ProcessPoolExecutor(workers, mp_context=spawn_context(),
                               initializer=_start_worker, initargs=(os.getpid(),))


def _start_worker(parent: int) -> None:
    for name, value in ALLOCATOR_ENVIRONMENT.items():
        os.environ.setdefault(name, value)
    _die_with_parent(parent)


def spawn_context() -> context.SpawnContext:
    """multiprocessing's spawn context, its children started without the main module."""
    return _Context()


_launching = threading.local()
_launch_lock = threading.Lock()


@contextmanager
def _main_left_out() -> Iterator[None]:
    """While this thread launches a child, the preparation data it sends leaves out the
    main module; other threads' launches (the user's own multiprocessing) are untouched."""
    from multiprocessing import spawn

    with _launch_lock:
        original = spawn.get_preparation_data

        def without_main(name: str) -> dict[str, Any]:
            data = original(name)
            if getattr(_launching, "active", False):
                for key in MAIN_KEYS:
                    data.pop(key, None)
            return data

        spawn.get_preparation_data = without_main  # type: ignore[assignment]
        _launching.active = True
        try:
            yield
        finally:
            _launching.active = False
            spawn.get_preparation_data = original  # type: ignore[assignment]


class _Popen(popen_spawn_posix.Popen):
    def _launch(self, process_obj: Any) -> None:
        with _main_left_out():
            super()._launch(process_obj)  # type: ignore[misc]  # not in typeshed


class _Process(context.SpawnProcess):  # module level: the child unpickles it by name
    @staticmethod
    def _Popen(process_obj: Any) -> Any:
        return _Popen(process_obj)


class _Context(context.SpawnContext):
    Process = _Process


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
