"""Nsight Compute CSV exports: the details page (long) and the raw page (wide).

Details page (`ncu --csv`, default page): one row per kernel, section and metric, in three
header generations (≤2020 with "Kernel Time"; 2021–23 adding Block Size / Grid Size /
Device / CC; newer appending five rule columns: a rule row has empty metric fields and goes
to ncu_rules; ncu 2025 ends its metric rows after Metric Value, with a trailing comma).
Raw page (`ncu --csv --page raw`): a header of identity columns then metric names, a units
row, then one row per kernel. In both, application output and
==PROF== lines may precede the header, and numbers may carry thousands separators.

The human-readable page (no --csv) is refused: its numbers are rounded for display and its
metric names are display labels. The error gives the command that exports the raw page.
"""
from __future__ import annotations

import csv
import re
from pathlib import Path
from typing import Any

from etl.core.errors import InputError
from etl.extract.registry import NotThisFormat
from etl.extract.ncu.export import (
    NOT_AVAILABLE,
    Anomaly,
    MetricRows,
    NcuExport,
    RuleRows,
    build_export,
    parse_dims,
    parse_int,
)
from etl.extract.rawio import read_all

# Export column → kernel column (a field map: the same in every header generation).
IDENTITY_COLUMNS = {
    "ID": "ncu_id", "Process ID": "process_id", "Process Name": "process_name",
    "Host Name": "host_name", "Kernel Name": "kernel_name", "Kernel Time": "kernel_time_text",
    "Context": "context_id", "Stream": "stream_id", "Block Size": "block",
    "Grid Size": "grid", "Device": "device", "CC": "cc",
}
INT_COLUMNS = frozenset(("ncu_id", "process_id", "context_id", "stream_id"))
DETAILS_COLUMNS = ("Section Name", "Metric Name", "Metric Unit", "Metric Value")
RULE_COLUMNS = frozenset(("Rule Name", "Rule Type", "Rule Description",
                          "Estimated Speedup Type", "Estimated Speedup"))
_HEADER = re.compile(r'^\ufeff?"ID","Process ID","Process Name"')
_SECTION = re.compile(r"^ {4}Section: \S")
Rows = list[tuple[int, list[str]]]


def read_csv_export(path: Path, kind: str) -> NcuExport:
    """Read one CSV export sniffed as `kind` ("ncu_details_csv", "ncu_raw_csv", "ncu_text")."""
    lines = read_all(path).decode("utf-8", errors="replace").splitlines()
    if kind == "ncu_text":
        raise text_page_error(path, lines)
    start = next((i for i, line in enumerate(lines) if _HEADER.match(line)), None)
    if start is None:
        raise InputError(path, 'no CSV header ("ID","Process ID",...) found', None,
                         "export with ncu --csv (details) or ncu --csv --page raw")
    anomalies = _profiler_notices(lines[:start])
    header, rows = csv_rows(path, lines, start, anomalies)
    header_place = f"line {start + 1} (header)"
    if kind == "ncu_details_csv":
        return _read_details(path, header, header_place, rows, anomalies)
    return _read_raw(path, header, header_place, rows, anomalies)


def console_output(path: Path) -> NotThisFormat | InputError:
    """ncu's notices without an export: refused when the name claims a CSV export (what
    `ncu --csv ... > out.csv` leaves when profiling fails), else a log, skipped."""
    lines = read_all(path).decode("utf-8", errors="replace").splitlines()
    errors = [(i, line.strip()) for i, line in enumerate(lines) if line.startswith("==ERROR==")]
    notes = errors or [(i, line.strip()) for i, line in enumerate(lines)
                       if line.startswith("==WARNING==")]
    kind = ("error" if errors else "warning") + ("s" if len(notes) > 1 else "")
    text = " | ".join(note for _, note in notes[:3]) + (
        f" (and {len(notes) - 3} more)" if len(notes) > 3 else "")
    place = f"line {notes[0][0] + 1}" if notes else None
    if not path.name.lower().endswith(".csv"):
        return NotThisFormat(f"ncu's console output, not an export (only .csv names claim "
                             f"one): {place}: {text}")
    return InputError(path, f"ncu wrote no export, only its {kind}: {text}", place,
                      "fix what ncu reports, profile again, and keep the CSV it then writes")


def text_page_error(path: Path, lines: list[str]) -> InputError:
    first = next((i for i, line in enumerate(lines) if _SECTION.match(line)), 0)
    stem = path.name.removesuffix(".gz")
    for suffix in (".txt", ".log", ".out"):
        stem = stem.removesuffix(suffix)
    command = f"ncu --import {stem}.ncu-rep --csv --page raw > {stem}.csv"
    return InputError(path, "human-readable ncu page (numbers rounded for display, metrics "
                      "under display labels): not read", f"line {first + 1}",
                      f"export CSV from the report it was printed from: {command}")


def _profiler_notices(preamble: list[str]) -> list[Anomaly]:
    """==ERROR== / ==WARNING== lines before the header (application output is ignored)."""
    kinds = {"==ERROR==": "ncu_profiler_error", "==WARNING==": "ncu_profiler_warning"}
    return [(kind, None, line.strip()) for line in preamble
            for prefix, kind in kinds.items() if line.startswith(prefix)]


def csv_rows(path: Path, lines: list[str], start: int,
             anomalies: list[Anomaly]) -> tuple[list[str], Rows]:
    """Header and (file line, fields) rows, each as long as the header; a ragged or
    unterminated row is refused."""
    reader = csv.reader(lines[start:], strict=True)
    rows: Rows = []
    try:
        header = next(reader)
        for fields in reader:
            line = start + reader.line_num
            if not fields or (len(fields) == 1 and fields[0].startswith("==")):
                if fields:
                    anomalies.append(("ncu_profiler_notice", None, fields[0].strip()))
                continue
            fitted = _fitted(fields, header)
            if fitted is None:
                raise _ragged(path, line, len(fields), len(header), line == len(lines))
            rows.append((line, fitted))
    except csv.Error as exc:
        raise InputError(path, f"malformed CSV ({exc}): the file is probably truncated",
                         f"line {start + reader.line_num}",
                         "re-export or re-copy the ncu output") from None
    return header, rows


def _fitted(fields: list[str], header: list[str]) -> list[str] | None:
    """The row as long as the header, or None when it is ragged.

    ncu 2025 ends a details-page metric row after Metric Value, with a trailing comma (16
    fields under a 20-field header whose last five are rule columns); such a row is padded
    with empty rule fields. One trailing empty field is dropped (a trailing comma).
    """
    if len(fields) == len(header):
        return fields
    if len(fields) == len(header) + 1 and fields[-1] == "":
        return fields[:-1]
    rules = header.index("Rule Name") if "Rule Name" in header else None
    if rules is not None and rules <= len(fields) <= rules + 1 and not "".join(fields[rules:]):
        return fields[:rules] + [""] * (len(header) - rules)
    return None


def _ragged(path: Path, line: int, got: int, want: int, last: bool) -> InputError:
    what = "last row" if last else "row"
    cause = "the file is truncated" if last else "the CSV is malformed"
    return InputError(path, f"{what} has {got} fields, the header has {want}: {cause}",
                      f"line {line}", "re-export or re-copy the ncu output")


# ---- identity columns -------------------------------------------------------------------

def _kernel_row(path: Path, index: dict[str, int], fields: list[str], line: int,
                anomalies: list[Anomaly]) -> dict[str, Any]:
    row: dict[str, Any] = {}
    for column, target in IDENTITY_COLUMNS.items():
        text = fields[index[column]] if column in index else None
        if target in INT_COLUMNS:
            row[target] = _int_field(path, column, text, line)
        elif target in ("block", "grid"):
            _set_dims(row, target, text, anomalies)
        else:
            row[target] = text if text else None
    return row


def _int_field(path: Path, column: str, text: str | None, line: int) -> int | None:
    if column != "ID" and text is not None and text.strip() in NOT_AVAILABLE:
        return None  # a range result (--replay-mode range) has no single stream
    try:
        value = parse_int(text)
    except ValueError:
        raise InputError(path, f"{column} {text!r} is not a number", f"line {line}",
                         "re-export the ncu output; identity columns must be integers") from None
    if value is None and column == "ID":
        raise InputError(path, "ID is empty", f"line {line}", "re-export the ncu output")
    return value


def _set_dims(row: dict[str, Any], target: str, text: str | None,
              anomalies: list[Anomaly]) -> None:
    dims = parse_dims(text)
    if text and dims is None:
        anomalies.append(("ncu_bad_dims", None, f"{target} size {text!r} is not (x, y, z)"))
    for axis, value in zip("xyz", dims or (None, None, None)):
        row[f"{target}_{axis}"] = value


def _header_index(path: Path, header: list[str], place: str) -> dict[str, int]:
    index = {name: i for i, name in enumerate(header)}
    for required in ("ID", "Kernel Name"):
        if required not in index:
            raise InputError(path, f'header has no "{required}" column', place,
                             "export with ncu --csv (details) or ncu --csv --page raw")
    return index


def _add_kernel(kernels: dict[int, dict[str, Any]], row: dict[str, Any], line: int,
                anomalies: list[Anomaly]) -> int:
    ncu_id: int = row["ncu_id"]
    known = kernels.setdefault(ncu_id, row)
    if known is row and _is_range(row):
        anomalies.append(("ncu_range_result", ncu_id, f"line {line}: a range result "
                          "(--replay-mode range or app-range): its metrics are totals over "
                          "every launch inside the range, not one kernel's; it matches no "
                          "trace kernel"))
    if known is not row and known["kernel_name"] != row["kernel_name"]:
        anomalies.append(("ncu_id_conflict", ncu_id, f"line {line}: kernel name "
                          f"{row['kernel_name']!r} differs from {known['kernel_name']!r}; "
                          "first kept"))
    return ncu_id


def _is_range(row: dict[str, Any]) -> bool:
    """ncu names a range result "range" and gives it no launch shape."""
    return bool(row["kernel_name"] == "range" and row.get("block_x") is None
                and row.get("grid_x") is None)


# NVTX columns of `ncu --nvtx` ("thread Domain:Push/Pop_Range:...", "Id:Domain:Start/
# Stop_Range:..."): the ranges around each launch, text, not metrics
_NVTX_COLUMN = re.compile(r"Domain:(?:Push/Pop|Start/Stop)_Range")


# ---- details page -----------------------------------------------------------------------

def _read_details(path: Path, header: list[str], place: str, rows: Rows,
                  anomalies: list[Anomaly]) -> NcuExport:
    index = _header_index(path, header, place)
    if not all(c in index for c in DETAILS_COLUMNS[1:]):
        raise InputError(path, "header has no metric columns (Metric Name, Metric Unit, "
                         "Metric Value)", place,
                         "export the details page with ncu --csv, or the raw page with "
                         "--page raw")
    _unknown_columns(header, set(DETAILS_COLUMNS) | RULE_COLUMNS, anomalies)
    kernels: dict[int, dict[str, Any]] = {}
    metrics, rules = MetricRows(path), RuleRows()
    seen: set[tuple[int, str | None, str]] = set()  # a metric is keyed by its section too
    for line, fields in rows:
        ncu_id = _add_kernel(kernels, _kernel_row(path, index, fields, line, anomalies),
                             line, anomalies)
        name = fields[index["Metric Name"]]
        section = fields[index["Section Name"]] if "Section Name" in index else None
        if not name.strip():
            _add_rule(path, rules, index, fields, ncu_id, section, line)
            continue
        if (ncu_id, section, name) in seen:
            anomalies.append(("ncu_duplicate_metric", ncu_id, f"line {line}: {name} "
                              f"repeated in section {section!r}; first kept"))
            continue
        seen.add((ncu_id, section, name))
        metrics.add(ncu_id, name, section or None, fields[index["Metric Value"]],
                    fields[index["Metric Unit"]], f"line {line}")
    return _finish(path, "ncu_details_csv", kernels, metrics, anomalies, rules)


def _add_rule(path: Path, rules: RuleRows, index: dict[str, int], fields: list[str],
              ncu_id: int, section: str | None, line: int) -> None:
    """A row without a metric name is a rule result (Rule Name ... Estimated Speedup)."""
    def field(column: str) -> str | None:
        return fields[index[column]] if column in index else None

    name = (field("Rule Name") or "").strip()
    if not name:
        raise InputError(path, "row has neither a metric (Metric Name) nor a rule (Rule "
                         "Name)", f"line {line}", "re-export or re-copy the ncu output")
    rules.add(ncu_id, section, name, field("Rule Type"), field("Rule Description"),
              field("Estimated Speedup Type"), field("Estimated Speedup"))


def _unknown_columns(header: list[str], known: set[str], anomalies: list[Anomaly]) -> None:
    for name in header:
        if name not in IDENTITY_COLUMNS and name not in known:
            anomalies.append(("ncu_unknown_column", None, f"column {name!r} ignored"))


def _finish(path: Path, fmt: str, kernels: dict[int, dict[str, Any]], metrics: MetricRows,
            anomalies: list[Anomaly], rules: RuleRows | None = None) -> NcuExport:
    if not kernels:
        raise InputError(path, "no kernel rows after the header", None,
                         "ncu profiled nothing: check its ==PROF==/==ERROR== lines and re-run")
    return build_export([path], fmt, kernels, metrics, anomalies, rules)


# ---- raw page ---------------------------------------------------------------------------

def _read_raw(path: Path, header: list[str], place: str, rows: Rows,
              anomalies: list[Anomaly]) -> NcuExport:
    index = _header_index(path, header, place)
    nvtx = [name for name in header if _NVTX_COLUMN.search(name)]
    _unknown_columns(nvtx, set(), anomalies)
    metric_columns = [i for i, name in enumerate(header)
                      if name not in IDENTITY_COLUMNS and name not in nvtx]
    if not metric_columns:
        raise InputError(path, "header has no metric columns (only kernel identity)",
                         place, "profile with --metrics or a section set, "
                         "then export with ncu --csv --page raw")
    units = _units_row(path, header, index, rows)
    kernels: dict[int, dict[str, Any]] = {}
    metrics = MetricRows(path)
    for line, fields in rows[1:]:
        row = _kernel_row(path, index, fields, line, anomalies)
        if row["ncu_id"] in kernels:
            anomalies.append(("ncu_id_conflict", row["ncu_id"], f"line {line}: ID repeated; "
                              "first row kept"))
            continue
        ncu_id = _add_kernel(kernels, row, line, anomalies)
        for i in metric_columns:
            if fields[i] != "":  # an empty cell: metric not collected for this kernel
                metrics.add(ncu_id, header[i], None, fields[i], units[i],
                            f"line {line}, column {header[i]!r}")
    return _finish(path, "ncu_raw_csv", kernels, metrics, anomalies)


def _units_row(path: Path, header: list[str], index: dict[str, int], rows: Rows) -> list[str]:
    """The row after the header: empty identity cells, then one unit per metric column."""
    if not rows or rows[0][1][index["ID"]].strip():
        place = f"line {rows[0][0]}" if rows else "end of file"
        raise InputError(path, "raw page without its units row (the row after the header "
                         "must have an empty ID and the metric units)", place,
                         "export unchanged with ncu --import <report> --csv --page raw")
    return rows[0][1]  # a unit units.toml does not know is kept (common.MetricRows)
