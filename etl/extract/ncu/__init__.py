"""Nsight Compute exports: per-kernel counters → ncu_kernels, ncu_metrics, ncu_levels,
ncu_rules.

export.py holds the shared model (units, kernel identity, merging one-metric-per-file
exports), decode_csv.py and decode_rep.py the readers, levels.py the metric catalog
(metrics.toml) and the paper's levels, read.py the transform to the run's tables. This
module stays light: run-folder scanning imports it to sniff.
"""
from __future__ import annotations

import re
from collections.abc import Callable

from etl.extract.registry import Format

REP_MAGIC = b"NVR\x00"  # first bytes of every .ncu-rep in ../shared/corpus/ncu
_CSV_HEADER = re.compile(rb'(?m)^"ID","Process ID","Process Name"[^\r\n]*')
_TEXT_SECTION = re.compile(rb"(?m)^ {4}Section: \S")
# ncu --print-summary per-kernel|per-gpu --csv: no ID, Invocations and Minimum/Maximum/Average
_SUMMARY_HEADER = re.compile(rb'(?m)^"Process ID","Process Name"[^\r\n]*"Invocations"'
                             rb'[^\r\n]*"Average"')
_TEXT_RULE = re.compile(rb"(?m)^ {4}-{3,} -{3,}")
# ncu's own notices that mean no export follows: an error, or nothing profiled
_NO_EXPORT = re.compile(rb"(?m)^==ERROR== |^==WARNING== No kernels were profiled")
READER = "etl.extract.ncu.read:read"
FILLS = ("ncu_kernels", "ncu_metrics", "ncu_levels", "ncu_rules", "kernel_match",
         "anomalies")


def looks_like_ncu(head: bytes) -> str | None:
    """Which ncu export the first 64 KiB of a file are, or None.

    "ncu_rep" (binary report, magic NVR\\0), "ncu_details_csv" (long: Section/Metric
    Name/Unit/Value columns), "ncu_raw_csv" (wide: one column per metric, units row),
    "ncu_text" (the human-readable page, which is refused with the command that exports CSV),
    "ncu_summary_csv" (--print-summary: aggregates over launches, refused the same way),
    or "ncu_console" (ncu's ==ERROR== / "No kernels were profiled" notices with no export:
    what `ncu --csv ... > out.csv` leaves when profiling fails).
    """
    if head.startswith(REP_MAGIC):
        return "ncu_rep"
    head = head.replace(b"\xef\xbb\xbf", b"", 1)
    header = _CSV_HEADER.search(head)
    if header:
        line = header.group()
        details = (b'"Metric Name"', b'"Metric Value"', b'"Section Name"', b'"Metric Unit"')
        return "ncu_details_csv" if any(c in line for c in details) else "ncu_raw_csv"
    if _SUMMARY_HEADER.search(head):
        return "ncu_summary_csv"
    if _TEXT_SECTION.search(head) and _TEXT_RULE.search(head):
        return "ncu_text"
    if _NO_EXPORT.search(head):
        return "ncu_console"
    return None


def _is(kind: str) -> Callable[[bytes], bool]:
    def sniff(head: bytes) -> bool:
        return looks_like_ncu(head) == kind
    sniff.__name__ = f"looks_like_{kind}"
    return sniff


FORMATS = (
    Format(
        name="ncu_rep", family="ncu", role="counters",
        reads="Nsight Compute binary report (.ncu-rep), read with NVIDIA's ncu_report "
              "module (the [ncu] extra)",
        recognised_by="the magic bytes NVR\\0; the name suffix .ncu-rep claims it",
        fills=FILLS, sniff=_is("ncu_rep"), reader=READER,
        claims=(".ncu-rep",)),
    Format(
        name="ncu_details_csv", family="ncu", role="counters",
        reads="ncu --csv (details page): one row per kernel and metric, with sections",
        recognised_by='a CSV header "ID","Process ID","Process Name",... with Metric '
                      "Name / Metric Value columns",
        fills=FILLS, sniff=_is("ncu_details_csv"), reader=READER),
    Format(
        name="ncu_raw_csv", family="ncu", role="counters",
        reads="ncu --csv --page raw: one row per kernel, one column per metric, a units row",
        recognised_by='a CSV header "ID","Process ID","Process Name",... without Metric '
                      "Name columns",
        fills=FILLS, sniff=_is("ncu_raw_csv"), reader=READER),
    Format(
        name="ncu_text", family="ncu", role="counters",
        reads="ncu's human-readable page (refused: it rounds values)",
        recognised_by="indented 'Section:' headings with dashed rules",
        fills=(), sniff=_is("ncu_text"), reader=READER,
        refused="export CSV instead: ncu --import REPORT.ncu-rep --csv --page raw"),
    Format(
        name="ncu_summary_csv", family="ncu", role="counters",
        reads="ncu --print-summary per-kernel --csv: each metric's minimum, maximum and "
              "average over a kernel's launches (refused: no launch to match)",
        recognised_by='a CSV header "Process ID","Process Name",... with Invocations and '
                      "Minimum / Maximum / Average columns, no ID",
        fills=(), sniff=_is("ncu_summary_csv"), reader=READER,
        refused="export every launch instead: ncu --import REPORT.ncu-rep --csv --page raw"),
    Format(
        name="ncu_console", family="ncu", role="counters",
        reads="what `ncu --csv ... > out.csv` leaves when profiling fails: ncu's notices and "
              "the program's output, no export (refused with ncu's error text)",
        recognised_by="a line starting '==ERROR== ' or '==WARNING== No kernels were "
                      "profiled' and no CSV header; a .csv name claims an export (its run is "
                      "refused), any other name is a log (skipped, with the text)",
        fills=(), sniff=_is("ncu_console"), reader=READER,
        refused="fix the error ncu reports, then profile again"),
)
