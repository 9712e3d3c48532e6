"""The one registry of input formats: what a file is, which role it plays, who reads it.

Every module that scans run folders, hashes inputs, dispatches readers, records a source's
`format` or reports skipped files asks this registry; no other module names a format.

A format family is one folder under etl/extract/ (kineto/, ncu/, ...) whose `__init__.py`
defines `FORMATS`, a tuple of `Format` entries, and imports nothing heavy (run-folder
scanning imports every family to sniff files). Adding a family is that folder plus its
name in `FAMILIES` below; CONTRIBUTING.md walks through it.

Roles, and what a reader of each role is called with (the `reader` is "module:function",
imported only when a file of the format is read):
- trace: one call per file, `reader(path, source_id, gpu_override, spill, sinks, options)`
  streaming host events and GPU activities into the run's table writers (etl/load/ingest.py:
  `Sinks`, `PipelineOptions`); returns a `TraceResult` (trace_role.py: rank, events read,
  devices, iterations, GPU names, truncated, remarks).
- counters: one call per reader with every file of the run it reads,
  `reader(files, devices, dims)` → a part with `tables`, `anomalies` and one `sources`
  entry per file (ncu/tables.py `NcuPart`; files of one session may merge into one export).
- samples: time series from monitors; one call per reader with every file it reads,
  `reader(files, dims, first_source_id)` → a part with `tables` (rows by table name),
  `anomalies` and one `sources` entry per file (path, format, rows), the files numbered
  from `first_source_id` in the rows they write (etl/load/ingest.py, `_extract_samples`).
- A trace reader writes rows of tables other than host_events/kernels/anomalies (memory
  events, GPU metric samples) through `sinks.table(name, rows)`.

Recognition: a file belongs to the first format whose `claims` (file-name suffixes) match
its name, else to the first whose `sniff` accepts its first 64 KiB. A file whose name
claims a format but whose content cannot be read refuses its run (it was meant as input);
a file nothing recognises is skipped, and listed with the reason.
"""
from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Literal

Role = Literal["trace", "counters", "samples"]
# Families in the order their formats are tried (claims first, then sniffing).
FAMILIES = ("kineto", "ncu", "monitor", "nsys", "xplane")


class NotThisFormat(Exception):
    """Raised by a reader for a file that turned out not to be its format (valid JSON
    without trace events): the file is skipped with this reason, not refused."""


class NothingToIngest(NotThisFormat):
    """Raised by a reader for a file that is its format but holds nothing the warehouse
    keeps (an nsys stats summary: totals, no timeline): skipped with this reason, and a
    run folder of nothing else is refused as such, not as one without profiler output."""


@dataclass(frozen=True)
class Format:
    name: str                         # recorded in runs.sources[].format
    family: str                       # the folder under etl/extract/
    role: Role
    reads: str                        # what the format is, for `etl formats`
    recognised_by: str                # how its files are recognised, in words
    fills: tuple[str, ...]            # warehouse tables it writes rows to
    sniff: Callable[[bytes], bool]    # content test on a file's first 64 KiB
    reader: str                       # "module:function"
    claims: tuple[str, ...] = ()      # lower-case file-name suffixes that claim the format
    refused: str | None = None        # a recognised file that is never read: the remedy
    # Paths below a run folder that a tool nests by convention (globs relative to the run
    # folder, e.g. "plugins/profile/*/*.xplane.pb"): the folder holding them is the run.
    layout: tuple[str, ...] = ()
    # A content test that opens the file, for what the first 64 KiB may not show (a SQLite
    # schema written after the data); tried only when no format's sniff accepted the head.
    sniff_file: Callable[[Path], bool] | None = None

    def claimed_by(self, name: str) -> bool:
        return name.lower().endswith(self.claims) if self.claims else False

    def load_reader(self) -> Callable[..., Any]:
        module, _, function = self.reader.partition(":")
        return getattr(importlib.import_module(module), function)  # type: ignore[no-any-return]


@cache
def formats() -> tuple[Format, ...]:
    """Every registered format, in recognition order."""
    found: list[Format] = []
    for family in FAMILIES:
        module = importlib.import_module(f"etl.extract.{family}")
        found.extend(module.FORMATS)
    names = [f.name for f in found]
    duplicates = {n for n in names if names.count(n) > 1}
    if duplicates:
        raise RuntimeError(f"etl/extract: format names registered twice: {sorted(duplicates)}")
    return tuple(found)


def by_name(name: str) -> Format:
    for fmt in formats():
        if fmt.name == name:
            return fmt
    raise KeyError(name)


def claimed_format(name: str) -> Format | None:
    """The format a file name claims (its suffix), if any."""
    return next((f for f in formats() if f.claimed_by(name)), None)


def sniffed_format(head: bytes) -> Format | None:
    """The first format whose content test accepts these leading bytes."""
    return next((f for f in formats() if f.sniff(head)), None)


def recognise(path: Path, head: Callable[[Path], bytes]) -> tuple[Format | None, bool]:
    """(format, claimed): by name first, else by content (head read only when needed)."""
    claimed = claimed_format(path.name)
    if claimed is not None:
        # a name can claim a family while the content says which of its formats it is
        sniffed = sniffed_format(head(path))
        if sniffed is not None and sniffed.family == claimed.family:
            return sniffed, True
        return claimed, True
    sniffed = sniffed_format(head(path))
    if sniffed is None:
        sniffed = next((f for f in formats() if f.sniff_file is not None and f.sniff_file(path)),
                       None)
    return sniffed, False


def layouts() -> tuple[str, ...]:
    """Every registered format's nested layout globs."""
    return tuple(pattern for fmt in formats() for pattern in fmt.layout)


def claims_any(name: str) -> bool:
    return claimed_format(name) is not None


def grouped_by_reader(inputs: Iterable[tuple[Path, Format]]
                      ) -> list[tuple[Format, list[Path]]]:
    """Counters and samples inputs, one group per reader (in first-seen order), each
    group's paths sorted: a reader sees every file of the run it reads at once."""
    groups: dict[str, tuple[Format, list[Path]]] = {}
    for path, fmt in inputs:
        groups.setdefault(fmt.reader, (fmt, []))[1].append(path)
    return [(fmt, sorted(paths)) for fmt, paths in groups.values()]
