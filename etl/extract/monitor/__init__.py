"""GPU monitors: nvidia-smi --query-gpu CSV logs, nvidia-smi dmon, dcgmi dmon and the DCGM
exporter's Prometheus text → gpu_samples (one value per row, canonical metric and unit).

fields.toml maps each instrument's fields to canonical metrics and units; rows.py turns
parsed columns into rows (units, N/A, clocks, order checks); decode.py parses the four
layouts. This module stays light: run-folder scanning imports it to sniff.

Recognition is by content only (a monitor log is a .csv or .log like many others):
- nvidia_smi_csv: a comma-separated header line naming nvidia-smi query fields
  (timestamp, index, utilization.gpu [%], pci.bus_id, power.draw [W], ...), at least two of
  them known; or, for a log written with noheader, a row holding nvidia-smi's own
  timestamp (2026/11/24 10:00:00.250) among fields separated by ", " (its fields are
  named by run.toml nvidia_smi_query; a noheader log without the timestamp field is not
  recognised).
- nvidia_smi_dmon: a "# gpu" header line followed by a "# Idx" units line.
- dcgmi_dmon: a "#Entity" header line (fields by short name or id).
- dcgm_prometheus: DCGM_FI_* samples in Prometheus text format.
An ncu CSV starts with "ID","Process ID": none of these tests accepts it.
"""
from __future__ import annotations

import re

from etl.extract.registry import Format

READER = "etl.extract.monitor.read:read"
_SMI_FIELD = rb"(?:timestamp|index|name|uuid|pci\.bus_id|utilization\.gpu|utilization\.memory" \
             rb"|memory\.used|memory\.total|memory\.free|power\.draw|temperature\.gpu" \
             rb"|clocks\.(?:sm|mem|gr|current\.\w+)|fan\.speed|pstate)"
_SMI_HEADER = re.compile(rb"(?m)^\s*" + _SMI_FIELD + rb"(?: \[[^\]\r\n]*\])?\s*,\s*"
                         + rb"[a-z_.]+(?: \[[^\]\r\n]*\])?\s*(?:,|\r?$)")
_SMI_TIME = rb"[0-9]{4}/[0-9]{2}/[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}"
# a noheader row: nvidia-smi's timestamp as one of two or more ", "-separated fields
SMI_ROW = re.compile(rb"(?m)^(?:(?:[^,\r\n]*, )+" + _SMI_TIME + rb"(?:, [^,\r\n]*)*|"
                     + _SMI_TIME + rb"(?:, [^,\r\n]*)+)\r?$")
SMI_TIME = re.compile(rb"^\s*" + _SMI_TIME + rb"\s*$")
# -o DT prints Date and Time columns before gpu, -o T only Time (units YYYYMMDD, HH:MM:SS)
_DMON = re.compile(rb"(?m)^#\s*(?:(?:Date\s+)?Time\s+)?gpu\s+[a-z]+[^\r\n]*\r?\n"
                   rb"#\s*(?:\S+\s+){0,2}Idx\b")
_DCGMI = re.compile(rb"(?m)^#\s*Entity\s+")
_PROM = re.compile(rb"(?m)^(?:# (?:HELP|TYPE) )?DCGM_FI_[A-Z0-9_]+(?:\{[^}\r\n]*\})?\s+\S+")


def looks_like_smi_csv(head: bytes) -> bool:
    if head.lstrip().startswith(b'"ID"'):
        return False
    text = head.replace(b"\0", b"")
    return _SMI_HEADER.search(text) is not None or SMI_ROW.search(text) is not None


def looks_like_dmon(head: bytes) -> bool:
    return _DMON.search(head) is not None


def looks_like_dcgmi(head: bytes) -> bool:
    return _DCGMI.search(head) is not None


def looks_like_prometheus(head: bytes) -> bool:
    return _PROM.search(head) is not None


FILLS = ("gpu_samples", "anomalies")
FORMATS = (
    Format(
        name="nvidia_smi_csv", family="monitor", role="samples",
        reads="nvidia-smi --query-gpu=... --format=csv (with units, nounits, the header "
              "repeated, the default table before it; any field order)",
        recognised_by="a CSV header line of nvidia-smi query fields (timestamp, index, "
                      "utilization.gpu [%], ...), or noheader rows with nvidia-smi's "
                      "timestamp (fields named by run.toml nvidia_smi_query)",
        fills=FILLS, sniff=looks_like_smi_csv, reader=READER),
    Format(
        name="nvidia_smi_dmon", family="monitor", role="samples",
        reads="nvidia-smi dmon output (fixed-width columns, '-' for N/A, optional -o DT or -o T)",
        recognised_by="a '# gpu ...' header line followed by a '# Idx ...' units line",
        fills=FILLS, sniff=looks_like_dmon, reader=READER),
    Format(
        name="dcgmi_dmon", family="monitor", role="samples",
        reads="dcgmi dmon -e ... output (fields by short name or id, N/A samples)",
        recognised_by="a '#Entity' header line",
        fills=FILLS, sniff=looks_like_dcgmi, reader=READER),
    Format(
        name="dcgm_prometheus", family="monitor", role="samples",
        reads="DCGM exporter Prometheus text: one saved scrape or a series of them",
        recognised_by="lines DCGM_FI_*{labels} value (or their # HELP / # TYPE lines)",
        fills=FILLS, sniff=looks_like_prometheus, reader=READER),
)
