"""Spill files removed by a thread of their own while the reader goes on."""
from __future__ import annotations

import queue
import shutil
import threading
from pathlib import Path


class Removal:
    """Paths (files or folders) removed one after another by a thread: unlinking a large
    file gives its page-cache pages back inside the system call, which releases the GIL
    (~0.5 s per GB of spill on the bench machine), so it overlaps the reader's own work.
    `close` waits for every removal asked for."""

    def __init__(self) -> None:
        self._paths: queue.SimpleQueue[Path | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._remove_each, name="spill-removal",
                                        daemon=True)
        self._thread.start()

    def remove(self, *paths: Path) -> None:
        for path in paths:
            self._paths.put(path)

    def close(self) -> None:
        self._paths.put(None)
        self._thread.join()

    def _remove_each(self) -> None:
        while (path := self._paths.get()) is not None:
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
