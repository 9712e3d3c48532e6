"""Nsight Systems: the SQLite export (kernels, copies, sets, runtime/driver calls, NVTX
ranges, GPUs, session start, GPU_METRICS) and `nsys stats` cuda_gpu_trace CSV → the trace
tables (host_events, kernels, iterations, devices) and gpu_samples.

fields.toml maps each table's columns (found by name: the schema changed between nsys
2022.1 and 2025.5; 2026.2 exports read too); decode.py (pages.py: the page decoder)
reads an export, read.py turns it into rows in three passes (spill.py, in_order.py and
passes.py, launch_join.py, gpu_metrics.py), stats_csv.py reads the stats CSV. This module
stays light: run-folder scanning imports it.
"""
from __future__ import annotations

import re
from pathlib import Path

from etl.extract.registry import Format

SQLITE_MAGIC = b"SQLite format 3\x00"
# table names that only an nsys export has, in its schema page(s)
_NSYS_TABLES = (b"TARGET_INFO_SESSION_START_TIME", b"CUPTI_ACTIVITY_KIND_", b"NVTX_EVENTS",
                b"TARGET_INFO_GPU")
_GPU_TRACE_HEADER = re.compile(rb"^(?:\xef\xbb\xbf)?Start \(ns\),Duration \(ns\),CorrId,")
EXPORT_COMMAND = "nsys export --type sqlite --output REPORT.sqlite REPORT.nsys-rep"


def looks_like_nsys_sqlite(head: bytes) -> bool:
    return head.startswith(SQLITE_MAGIC) and any(t in head for t in _NSYS_TABLES)


def has_nsys_schema(path: Path) -> bool:
    """A SQLite file whose schema names nsys tables, wherever its pages are: a schema that
    grew after the data was written (tables created late, an index added at the end) lies
    beyond the first 64 KiB that looks_like_nsys_sqlite sees."""
    import sqlite3

    with open(path, "rb") as file:
        if file.read(len(SQLITE_MAGIC)) != SQLITE_MAGIC:
            return False
    try:
        con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            names = [n for (n,) in con.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'")]
        finally:
            con.close()
    except sqlite3.Error:
        return False  # not readable as SQLite: no format claims it
    return any(name.encode().startswith(t) for name in names for t in _NSYS_TABLES)


def looks_like_gpu_trace_csv(head: bytes) -> bool:
    return _GPU_TRACE_HEADER.match(head) is not None


_SUMMARY_HEADER = re.compile(rb"^(?:\xef\xbb\xbf)?Time ?\(%\),Total Time \(ns\),", re.MULTILINE)


def looks_like_stats_summary(head: bytes) -> bool:
    """An `nsys stats` summary CSV: its header (after the notes nsys prints before it when
    its output is redirected) starts Time (%),Total Time (ns),..."""
    return _SUMMARY_HEADER.search(head[:4096]) is not None


def looks_like_nsys_rep(head: bytes) -> bool:
    return False  # recognised by its name only (.nsys-rep): its magic is not documented


FILLS = ("host_events", "kernels", "iterations", "devices", "gpu_samples", "anomalies")
FORMATS = (
    Format(
        name="nsys_sqlite", family="nsys", role="trace",
        reads="Nsight Systems SQLite export (nsys export --type sqlite, or the .sqlite "
              "nsys stats writes); schemas of nsys 2022.1 to 2025.5",
        recognised_by="the SQLite magic and nsys table names (TARGET_INFO_SESSION_START_TIME, "
                      "CUPTI_ACTIVITY_KIND_*, NVTX_EVENTS) in the schema (in the first 64 KiB, "
                      "else read with sqlite3)",
        fills=FILLS, sniff=looks_like_nsys_sqlite, sniff_file=has_nsys_schema,
        reader="etl.extract.nsys.read:read"),
    Format(
        name="nsys_gpu_trace_csv", family="nsys", role="trace",
        reads="nsys stats --report cuda_gpu_trace --format csv (kernels, copies, sets; "
              "no launches or iterations)",
        recognised_by="the header Start (ns),Duration (ns),CorrId,...",
        fills=("kernels", "iterations", "devices", "anomalies"),
        sniff=looks_like_gpu_trace_csv, reader="etl.extract.nsys.stats_csv:read"),
    Format(
        name="nsys_stats_summary_csv", family="nsys", role="trace",
        reads="nsys stats summary reports as CSV (cuda_gpu_kern_sum, cuda_api_sum, ...): "
              "totals per name, no timeline (skipped, naming the export that has it)",
        recognised_by="the header Time (%),Total Time (ns),... (after nsys's notes)",
        fills=(), sniff=looks_like_stats_summary,
        reader="etl.extract.nsys.stats_summary:read",
        refused="ingest the timeline: nsys export --type sqlite REPORT.nsys-rep (or nsys "
                "stats --report cuda_gpu_trace --format csv)"),
    Format(
        name="nsys_rep", family="nsys", role="trace",
        reads="Nsight Systems binary report (refused: export it to SQLite first)",
        recognised_by="the name suffix .nsys-rep (or .qdrep)",
        fills=(), sniff=looks_like_nsys_rep, claims=(".nsys-rep", ".qdrep"),
        reader="etl.extract.nsys.read:refuse_rep",
        refused=EXPORT_COMMAND),
)
