"""The four monitor layouts → Frames (rows.py), and the samples-role reader.

Logs as people keep them: two writers leave NUL bytes and torn rows, nvidia-smi repeats
its header (or prints its default table first), dmon repeats its header every page. Rows
that parse are kept; the others are counted in an anomaly. A file with no sample at all
refuses its run in one line.
"""
from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from etl.core.errors import InputError
from etl.extract.monitor import SMI_ROW, SMI_TIME
from etl.extract.monitor.rows import Frame, MetricColumn
from etl.extract.fields import field_map
from etl.extract.registry import Format, formats

_HEADER_FIELD = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_.]*)\s*(?:\[([^\]]*)\])?\s*$")


PARSERS = {"nvidia_smi_csv": "parse_smi_csv", "nvidia_smi_dmon": "parse_dmon",
           "dcgmi_dmon": "parse_dcgmi", "dcgm_prometheus": "parse_prometheus"}


def read_file(path: Path, smi_query: str | None = None) -> tuple[Format, list[Frame]]:
    data = path.read_bytes()
    fmt = next((f for f in formats() if f.family == "monitor" and f.sniff(data[:65536])), None)
    if fmt is None:
        raise InputError(path, "not a GPU monitor log any more (its header is gone)", None,
                         "restore the header line, or remove the file")
    nul = data.count(b"\0")
    data = data.replace(b"\0", b"")
    parser = globals()[PARSERS[fmt.name]]
    frames: list[Frame] = (parser(data, smi_query) if fmt.name == "nvidia_smi_csv"
                           else parser(data.decode("utf-8", errors="replace")))
    if nul and frames:
        frames[0].anomalies.append(("nul_bytes", f"{path.name}: {nul} NUL byte(s) removed "
                                    "(two writers, or a crash while writing)"))
    return fmt, frames


def _header_fields(line: str) -> list[tuple[str, str | None]] | None:
    fields = []
    for part in line.split(","):
        m = _HEADER_FIELD.match(part)
        if m is None:
            return None
        fields.append((m.group(1), m.group(2) or None))
    return fields if len(fields) >= 2 else None


def _is_smi_header(fields: list[tuple[str, str | None]] | None) -> bool:
    if not fields:
        return False
    spec = field_map("monitor")
    known = spec["nvidia_smi"].keys() | spec["nvidia_smi_keys"].keys()
    return sum(name in known for name, _ in fields) >= 2


_TIME_TEXT = (r"^\s*[0-9]{4}[-/][0-9]{2}[-/][0-9]{2}[ T][0-9]{2}:[0-9]{2}:[0-9]{2}"
              r"(?:\.[0-9]+)?(?:Z|[+-][0-9]{2}:?[0-9]{2})?\s*$")


Fields = list[tuple[str, str | None]]


def parse_smi_csv(data: bytes, query: str | None = None) -> list[Frame]:
    """nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]: named by its header
    line, else (noheader) by `query`, run.toml's nvidia_smi_query (_headerless).

    Column-wise (pyarrow.csv, then compute): a day of 1 s samples of 8 GPUs is 700 k rows.
    Repeated header lines are removed as bytes; rows without the header's field count are
    skipped by the CSV reader's invalid-row handler, rows whose time is garbled after it."""
    data = data.replace(b"\r\n", b"\n")
    found = _smi_header(data)
    if found is None:
        return [_headerless(data, query)]
    start, header = found
    fields = _header_fields(header.decode("utf-8", "replace")) or []
    body = b"\n" + data[start + len(header):].lstrip(b"\n") + b"\n"
    repeated = 0
    while (count := body.count(b"\n" + header + b"\n")):
        repeated += count
        body = body.replace(b"\n" + header + b"\n", b"\n")
    frame = _smi_rows(body, fields, data[:start].count(b"\n"), "the CSV header")
    if repeated:
        frame.anomalies.append(("header_repeated", f"the header is repeated {repeated} "
                                "time(s) (kept: one header per row is a common loop)"))
    if query is not None and [n for n, _ in fields] != _query_names(query):
        frame.anomalies.append(("nvidia_smi_query_ignored", "the log's header names its "
                                "fields; run.toml nvidia_smi_query, which differs, is not used"))
    return [frame]


def _headerless(data: bytes, query: str | None) -> Frame:
    """A noheader log: its fields are named by run.toml nvidia_smi_query when that names
    as many fields as the first row has; else kept as field_1..field_N (the column of
    nvidia-smi timestamps as `timestamp`, so that samples keep their time), flagged."""
    first = SMI_ROW.search(data)
    if first is None:  # no row at all (the sniffed one was torn): read.read refuses it
        return Frame("nvidia-smi", "nvidia_smi", [], [])
    row = first.group(0).split(b", ")
    names = _query_names(query) if query is not None else []
    unnamed = len(names) != len(row)
    if unnamed:
        names = ["timestamp" if SMI_TIME.match(v) else f"field_{i + 1}"
                 for i, v in enumerate(row)]
    frame = _smi_rows(b"\n" + data[first.start():] + b"\n", [(n, None) for n in names],
                      data[:first.start()].count(b"\n"), "the first row")
    if unnamed:
        frame.anomalies.append(("fields_unnamed", _unnamed_detail(query, len(row))))
    return frame


def _query_names(query: str) -> list[str]:
    return [name.strip() for name in query.split(",") if name.strip()]


def _unnamed_detail(query: str | None, width: int) -> str:
    given = ("run.toml has no nvidia_smi_query" if query is None else
             f"run.toml nvidia_smi_query names {len(_query_names(query))} fields")
    return (f"a log written with --format=csv,noheader has no field names and {given}: its "
            f"{width} fields are kept as field_1..field_{width} (the timestamp recognised); "
            "set nvidia_smi_query in run.toml to the --query-gpu list the log was written "
            "with (e.g. nvidia_smi_query = \"timestamp,index,utilization.gpu\")")


def _smi_rows(body: bytes, fields: Fields, preamble: int, start: str) -> Frame:
    """The frame of the rows in `body` (header lines removed), with their anomalies."""
    import pyarrow as pa
    import pyarrow.compute as pc

    table, torn = _read_csv(body, len(fields))
    names = [name for name, _ in fields]
    if "timestamp" in names and table.num_rows:
        good = pc.fill_null(pc.match_substring_regex(
            table.column(names.index("timestamp")), _TIME_TEXT), False)
        torn += table.num_rows - (pc.sum(good.cast(pa.int64())).as_py() or 0)
        table = table.filter(good)
    frame = _smi_frame(fields, table)
    if preamble:
        frame.anomalies.append(("preamble_skipped", f"{preamble} line(s) before {start} "
                                "skipped (nvidia-smi's default table, or notes)"))
    if torn:
        frame.anomalies.append(("torn_rows", f"{torn} row(s) without the "
                                f"{len(fields)} fields of {start} or with a garbled time "
                                "skipped (torn by two writers or cut short)"))
    return frame


def _smi_header(data: bytes) -> tuple[int, bytes] | None:
    """Byte offset and text of the first header line (in the first 64 KiB, as sniffed);
    None for a log written with noheader."""
    offset = 0
    for line in data[:65536].split(b"\n"):
        if _is_smi_header(_header_fields(line.decode("utf-8", "replace"))):
            return offset, line
        offset += len(line) + 1
    return None


def _read_csv(body: bytes, width: int) -> tuple[Any, int]:
    import io

    import pyarrow as pa
    import pyarrow.csv as pv

    torn = [0]

    def skip(_row: Any) -> str:
        torn[0] += 1
        return "skip"

    names = [f"c{i}" for i in range(width)]
    try:
        table = pv.read_csv(
            io.BytesIO(body),
            read_options=pv.ReadOptions(column_names=names, use_threads=False),
            parse_options=pv.ParseOptions(invalid_row_handler=skip, quote_char=False),
            convert_options=pv.ConvertOptions(column_types={n: pa.string() for n in names},
                                              strings_can_be_null=False))
    except pa.ArrowInvalid:  # nothing but blank lines below the header
        table = pa.table({n: pa.array([], pa.string()) for n in names})
    return table, torn[0]


def _smi_frame(fields: list[tuple[str, str | None]], table: Any) -> Frame:
    import pyarrow as pa

    keys = field_map("monitor")["nvidia_smi_keys"]
    names = [name for name, _ in fields]
    device_col = "gpu" if "gpu" in names else "index"
    n = table.num_rows
    frame = Frame("nvidia-smi", "nvidia_smi", pa.array(range(n), pa.int64()),
                  pa.nulls(n, pa.int32()))
    for (name, unit), texts in zip(fields, table.columns):
        role = keys.get(name)
        if role == "time":
            frame.times = texts
        elif role == "device_index" and name == device_col:
            frame.device_index = _int_column(texts)
        elif role == "device_index":
            frame.anomalies.append(("column_ignored", f"column {name!r} ignored: the device "
                                    f"is taken from the log's own {device_col!r} column"))
        elif role in ("device_uuid", "device_bus_id", "device_name"):
            setattr(frame, role, _text_column(texts))
        elif role is None:
            frame.metrics.append(MetricColumn(name, texts, unit))
    return frame


def _int_column(texts: Any) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    text = pc.utf8_trim_whitespace(texts)
    digits = pc.fill_null(pc.match_substring_regex(text, r"^[0-9]{1,9}$"), False)
    return pc.cast(pc.if_else(digits, text, pa.scalar(None, pa.string())), pa.int32())


def _text_column(texts: Any) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    text = pc.utf8_trim_whitespace(texts)
    return pc.if_else(pc.equal(text, ""), pa.scalar(None, pa.string()), text)


def _int(text: str) -> int | None:
    text = text.strip()
    return int(text) if text.isdigit() else None


def parse_dmon(text: str) -> list[Frame]:
    """nvidia-smi dmon: '# gpu pwr ...' and '# Idx W ...' header lines (repeated every
    page), whitespace-separated rows, '-' for N/A; -o DT adds Date and Time columns."""
    lines = text.splitlines()
    names: list[str] = []
    units: list[str] = []
    rows: list[list[str]] = []
    torn = 0
    for i, line in enumerate(lines):
        if line.startswith("#"):
            tokens = line[1:].split()
            if "gpu" in tokens and i + 1 < len(lines) and lines[i + 1].startswith("#"):
                names, units = tokens, lines[i + 1][1:].split()
            continue
        tokens = line.split()
        if not tokens:
            continue
        if not names or len(tokens) != len(names):
            torn += 1
            continue
        rows.append(tokens)
    columns = dict(zip(names, [list(c) for c in zip(*rows)])) if rows else {}
    unit_of = dict(zip(names, units)) if len(units) == len(names) else {}
    frame = Frame("nvidia-smi dmon", "nvidia_smi_dmon", list(range(len(rows))),
                  [_int(t) for t in columns.get("gpu", [""] * len(rows))])
    if "Date" in columns and "Time" in columns:
        frame.times = [f"{d} {t}" for d, t in zip(columns["Date"], columns["Time"])]
    elif "Time" in columns:
        frame.anomalies.append(("time_without_date", "dmon -o T prints no date: sample "
                                "times are not used (use -o DT)"))
    frame.metrics = [MetricColumn(n, columns[n], unit_of.get(n)) for n in names
                     if n not in ("gpu", "Date", "Time") and n in columns]
    if torn:
        frame.anomalies.append(("torn_rows", f"{torn} dmon line(s) without the header's "
                                "columns skipped"))
    return [frame]


def parse_dcgmi(text: str) -> list[Frame]:
    """dcgmi dmon -e ...: '#Entity [ID] GRACT SMACT ...' (short names, or field ids),
    rows 'GPU 0  0.43  N/A ...'."""
    names: list[str] = []
    rows: list[tuple[int | None, list[str]]] = []
    torn = 0
    for line in text.splitlines():
        tokens = line.split()
        if not tokens or tokens[0] in ("ID", "Id"):
            continue
        if line.lstrip().startswith("#"):
            names = [t for t in line.lstrip()[1:].split() if t not in ("Entity", "ID", "Id")]
            continue
        if tokens[0].startswith("GPU") and len(tokens) == len(names) + 2 and names:
            rows.append((_int(tokens[1]), tokens[2:]))
        else:
            torn += 1
    frame = Frame("dcgmi dmon", "dcgm", list(range(len(rows))), [d for d, _ in rows])
    columns = [list(c) for c in zip(*[v for _, v in rows])] if rows else []
    frame.metrics = [MetricColumn(n, texts) for n, texts in zip(names, columns)]
    if torn:
        frame.anomalies.append(("torn_rows", f"{torn} dcgmi line(s) without the header's "
                                "fields skipped"))
    return [frame]


_PROM_LINE = re.compile(r"^(DCGM_FI_[A-Z0-9_]+)(?:\{([^}]*)\})?\s+(\S+)(?:\s+(-?\d+))?\s*$")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def parse_prometheus(text: str) -> list[Frame]:
    """DCGM exporter text: a scrape, or scrapes one after another (a sample whose series
    is already in the current scrape starts the next one; a line holding only a time,
    such as `date -Iseconds` between curl calls, times the scrape that follows)."""
    series: dict[str, dict[str, list[Any]]] = {}
    scrape, when, torn = 0, None, 0
    seen: set[tuple[str, str | None]] = set()
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = _PROM_LINE.match(line)
        if m is None:
            stamp = _time_line(line)
            if stamp is not None:
                when, scrape, seen = stamp, scrape + (1 if seen else 0), set()
            else:
                torn += 1
            continue
        name, labels_text, value, millis = m.groups()
        key = (name, labels_text)
        if key in seen:
            scrape, seen = scrape + 1, set()
        seen.add(key)
        labels = dict(_LABEL.findall(labels_text or ""))
        cols = series.setdefault(name, {k: [] for k in ("i", "d", "u", "b", "m", "t", "v")})
        cols["i"].append(scrape)
        cols["d"].append(_int(labels.get("gpu", "")))
        cols["u"].append(labels.get("UUID") or labels.get("uuid"))
        cols["b"].append(labels.get("pci_bus_id"))
        cols["m"].append(labels.get("modelName"))
        cols["t"].append(_millis(millis) if millis else when)
        cols["v"].append(value)
    frames = [_prom_frame(name, cols) for name, cols in series.items()]
    if torn and frames:
        frames[0].anomalies.append(("torn_rows", f"{torn} line(s) that are not DCGM samples "
                                    "skipped"))
    return frames


def _prom_frame(name: str, cols: dict[str, list[Any]]) -> Frame:
    frame = Frame("dcgm-exporter", "dcgm", cols["i"], cols["d"],
                  times=cols["t"] if any(t is not None for t in cols["t"]) else None,
                  device_uuid=cols["u"], device_bus_id=cols["b"], device_name=cols["m"])
    frame.metrics = [MetricColumn(name, cols["v"])]
    return frame


def _millis(text: str) -> str:
    return datetime.fromtimestamp(int(text) / 1000, UTC).isoformat()


def _time_line(line: str) -> str | None:
    try:
        datetime.fromisoformat(line.replace("/", "-"))
    except ValueError:
        return None
    return line
