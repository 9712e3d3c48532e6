"""PyTorch profiler (Kineto) Chrome-trace JSON: host events, GPU activities, steps.

decode.py decodes the file in slices; slice_spill.py, rows.py, kernel_join.py and
read.py turn the events into the run's tables in bounded memory; fields.toml maps the
trace's keys to columns. This module stays light: run-folder scanning imports it to sniff.
"""
from __future__ import annotations

from etl.extract.registry import Format

# Names that claim a trace: such a file that cannot be read refuses its run.
CLAIMED_SUFFIXES = (".json", ".json.gz", ".trace.json", ".pt.trace.json",
                    ".pt.trace.json.gz")


def looks_like_trace(head: bytes) -> bool:
    """Content sniffing: a Chrome-trace object or a bare array of trace events."""
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if text.startswith(b"{"):
        return b'"traceEvents"' in text or b'"schemaVersion"' in text
    return text.startswith(b"[") and b'"ph"' in text[:4096]


FORMATS = (
    Format(
        name="kineto_json", family="kineto", role="trace",
        reads="PyTorch profiler (Kineto) Chrome trace JSON, plain or gzip; one file per rank",
        recognised_by="a JSON object with traceEvents (or schemaVersion), or a JSON array "
                      "of events with ph; names ending .json / .json.gz claim it",
        fills=("host_events", "kernels", "iterations", "devices", "memory_events",
               "anomalies"),
        sniff=looks_like_trace, reader="etl.extract.kineto.read:read",
        claims=CLAIMED_SUFFIXES),
)
