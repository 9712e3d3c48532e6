"""The project's own exceptions: every input problem becomes one clear line."""
from __future__ import annotations

from pathlib import Path


class EtlError(Exception):
    """Base class: an error the CLI reports in one line, without a traceback."""


class InputError(EtlError):
    """An input file that claims to be profiler output but cannot be read.

    Carries the file, the place inside it (byte, line or event index) and what to do, so
    the CLI can print `path: place: problem. remedy` on one line.
    """

    def __init__(self, path: Path | str, problem: str, place: str | None = None,
                 remedy: str | None = None) -> None:
        self.path = str(path)
        self.problem = problem
        self.place = place
        self.remedy = remedy
        super().__init__(self.line())

    def line(self) -> str:
        parts = [self.path]
        if self.place:
            parts.append(self.place)
        text = ": ".join(parts) + ": " + self.problem
        if self.remedy:
            text += ". " + self.remedy
        return text


class RunError(EtlError):
    """A run folder that cannot be ingested as a whole (e.g. no profiler output in it)."""


class WarehouseError(EtlError):
    """The warehouse cannot be read or written (locked, corrupt, wrong path)."""
