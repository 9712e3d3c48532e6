"""PyTorch profiler (Kineto) Chrome-trace JSON → Arrow columns of one source.

Decoding uses msgspec typed structs generated from `kineto_fields.toml`, so only the needed
fields are materialised and `ts`/`dur` stay raw text for exact nanoseconds. A trace whose
fields have unexpected types falls back to a lenient, per-event path that records every
oddity as an anomaly instead of failing or guessing.
"""
from __future__ import annotations

import decimal
import re
import tomllib
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import msgspec

from etl.errors import InputError
from etl.extract.rawio import read_all
from etl.extract.timeconv import us_texts_to_ns

FIELDS_FILE = Path(__file__).with_name("kineto_fields.toml")
ARG_COLUMNS = ("correlation", "external_id", "device", "stream", "registers_per_thread",
               "shared_memory_bytes", "bytes")
DIM_COLUMNS = ("grid", "block")


@cache
def field_map() -> dict[str, Any]:
    with open(FIELDS_FILE, "rb") as fh:
        return tomllib.load(fh)


@cache
def _decoders() -> tuple[msgspec.json.Decoder, msgspec.json.Decoder]:
    """(typed trace decoder, lenient any decoder keeping floats exact)."""
    aliases = field_map()["args"]
    arg_fields: list[tuple[str, Any, Any]] = []
    for column, keys in aliases.items():
        # strings are accepted here and normalised later (ROCm writes stream "0x0"; Triton
        # cpu_ops carry grid "grid(100,)"), so one odd field never forces the slow path
        kind = (list[int] | str) if column in DIM_COLUMNS else (int | str)
        for n, key in enumerate(keys):
            spec = msgspec.field(default=None, name=key)
            arg_fields.append((f"{column}__{n}", kind | None, spec))
    args = msgspec.defstruct("Args", arg_fields)
    raw = msgspec.Raw
    event: Any = msgspec.defstruct("Event", [
        ("ph", str | None, None), ("cat", str | None, None), ("name", str | None, None),
        ("pid", int | str | None, None), ("tid", int | str | None, None),
        ("ts", raw, msgspec.field(default_factory=lambda: raw(b""))),
        ("dur", raw, msgspec.field(default_factory=lambda: raw(b""))),
        ("args", args | None, None)])
    header = msgspec.defstruct("Header", [
        ("traceEvents", list[event]), ("deviceProperties", Any, None),
        ("distributedInfo", Any, None), ("displayTimeUnit", Any, None)])
    typed = msgspec.json.Decoder(header | list[event])
    lenient = msgspec.json.Decoder(float_hook=decimal.Decimal)
    return typed, lenient


class NotATrace(Exception):
    """Valid JSON that is not a trace (a config.json): the file is skipped, not refused."""


@dataclass
class SourceColumns:
    """Every complete/instant event of one trace as plain column lists (event order kept)."""

    event_id: list[int] = field(default_factory=list)
    ph: list[str | None] = field(default_factory=list)
    cat: list[str | None] = field(default_factory=list)
    name: list[str | None] = field(default_factory=list)
    pid: list[str | None] = field(default_factory=list)
    tid: list[str | None] = field(default_factory=list)
    ts_text: list[bytes] = field(default_factory=list)
    dur_text: list[bytes] = field(default_factory=list)
    args: dict[str, list[Any]] = field(default_factory=dict)


@dataclass
class KinetoTrace:
    path: Path
    columns: SourceColumns
    event_count: int
    device_properties: list[dict[str, Any]]
    distributed_info: dict[str, Any] | None
    display_time_unit: str | None
    anomalies: list[tuple[str, int | None, str]]


def looks_like_trace(head: bytes) -> bool:
    """Content sniffing: a Chrome-trace object or a bare array of trace events."""
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if text.startswith(b"{"):
        return b'"traceEvents"' in text or b'"schemaVersion"' in text
    return text.startswith(b"[") and b'"ph"' in text[:4096]


def read_trace(path: Path, data: bytes | None = None) -> KinetoTrace:
    if data is None:
        data = read_all(path)
    if not data.strip():
        raise InputError(path, "file is empty", None, "re-export the trace from the profiler")
    typed, lenient = _decoders()
    try:
        doc = typed.decode(data)
    except msgspec.ValidationError:
        return _read_lenient(path, _decode_any(path, data, lenient))
    except msgspec.DecodeError as exc:
        raise _decode_error(path, data, exc) from None
    return _from_typed(path, doc)


def _decode_any(path: Path, data: bytes, decoder: msgspec.json.Decoder) -> Any:
    try:
        return decoder.decode(data)
    except msgspec.DecodeError as exc:
        raise _decode_error(path, data, exc) from None


_BYTE_RE = re.compile(r"byte (\d+)")


def _decode_error(path: Path, data: bytes, exc: Exception) -> InputError:
    message = str(exc)
    match = _BYTE_RE.search(message)
    place = f"byte {match.group(1)}" if match else None
    at_end = match is not None and int(match.group(1)) >= len(data.rstrip()) - 1
    if at_end or "truncated" in message.lower():
        return InputError(path, "JSON ends early (truncated trace)", place,
                          "the writer was probably killed; re-copy or re-record the trace")
    return InputError(path, f"not valid JSON ({message})", place,
                      "check that the file is a PyTorch profiler trace")


def _from_typed(path: Path, doc: Any) -> KinetoTrace:
    """Columns by comprehension over the typed events (no per-event function calls)."""
    events = doc if isinstance(doc, list) else doc.traceEvents
    kept_ids = [i for i, ev in enumerate(events) if ev.ph in _KEPT_PHASES]
    kept = [events[i] for i in kept_ids]
    cols = SourceColumns(
        event_id=kept_ids, ph=[ev.ph for ev in kept], cat=[ev.cat for ev in kept],
        name=[ev.name for ev in kept],
        pid=[None if ev.pid is None else str(ev.pid) for ev in kept],
        tid=[None if ev.tid is None else str(ev.tid) for ev in kept],
        ts_text=[ev.ts for ev in kept], dur_text=[ev.dur for ev in kept])
    anomalies: list[tuple[str, int | None, str]] = []
    args = [ev.args for ev in kept]
    cols.args = {column: _normalise_arg(column, _arg_column(args, column, len(keys)),
                                        kept_ids, anomalies)
                 for column, keys in field_map()["args"].items()}
    header = (None, None, None) if isinstance(doc, list) else (
        doc.deviceProperties, doc.distributedInfo, doc.displayTimeUnit)
    return _finish(path, cols, len(events), header, anomalies)


_KEPT_PHASES = frozenset(("X", "i", "I"))


def _arg_column(args: list[Any], column: str, aliases: int) -> list[Any]:
    """One argument column; with several spellings the first present one wins."""
    values = [None if a is None else getattr(a, f"{column}__0") for a in args]
    for n in range(1, aliases):
        attr = f"{column}__{n}"
        values = [v if v is not None or a is None else getattr(a, attr)
                  for v, a in zip(values, args)]
    return values


def _append_common(cols: SourceColumns, i: int, ph: Any, cat: Any, name: Any, pid: Any,
                   tid: Any) -> None:
    cols.event_id.append(i)
    cols.ph.append(ph)
    cols.cat.append(cat)
    cols.name.append(name)
    cols.pid.append(None if pid is None else str(pid))
    cols.tid.append(None if tid is None else str(tid))


def _finish(path: Path, cols: SourceColumns, count: int, header: tuple[Any, Any, Any],
            anomalies: list[tuple[str, int | None, str]]) -> KinetoTrace:
    props, dist, unit = header
    props_list = [p for p in props if isinstance(p, dict)] if isinstance(props, list) else []
    dist_info = dist if isinstance(dist, dict) else None
    known = field_map()["known_display_time_units"]["units"]
    if unit is not None and unit not in known:
        anomalies.append(("unknown_display_time_unit", None,
                          f"displayTimeUnit {unit!r} is not one of {known}; ts/dur read as µs "
                          "(the Chrome trace format's unit whatever the display unit)"))
    return KinetoTrace(path, cols, count, props_list, dist_info,
                       unit if isinstance(unit, str) else None, anomalies)


# ---- lenient path: any JSON shape, every oddity recorded ------------------------------

def _read_lenient(path: Path, doc: Any) -> KinetoTrace:
    if isinstance(doc, dict):
        events = doc.get("traceEvents")
        header = (doc.get("deviceProperties"), doc.get("distributedInfo"),
                  doc.get("displayTimeUnit"))
    else:
        events, header = doc, (None, None, None)
    if not isinstance(doc, (dict, list)):
        raise NotATrace("JSON that is not an object or an array: not a profiler trace")
    if isinstance(doc, dict) and "traceEvents" not in doc:
        raise NotATrace("JSON without traceEvents: not a profiler trace")
    if isinstance(doc, list) and not any(isinstance(e, dict) and "ph" in e for e in doc):
        raise NotATrace("JSON array without trace events")
    if not isinstance(events, list):
        raise InputError(path, "traceEvents is not a list", None,
                         "check that the file is a PyTorch profiler trace")
    cols = SourceColumns(args={c: [] for c in field_map()["args"]})
    anomalies: list[tuple[str, int | None, str]] = []
    for i, ev in enumerate(events):
        _lenient_event(cols, i, ev, anomalies)
    cols.args = {c: _normalise_arg(c, v, cols.event_id, anomalies) for c, v in cols.args.items()}
    return _finish(path, cols, len(events), header, anomalies)


def _lenient_event(cols: SourceColumns, i: int, ev: Any,
                   anomalies: list[tuple[str, int | None, str]]) -> None:
    if not isinstance(ev, dict):
        anomalies.append(("malformed_event", i, f"event is a {type(ev).__name__}, not an object"))
        return
    if ev.get("ph") not in _KEPT_PHASES:
        return
    _append_common(cols, i, ev.get("ph"), _text(ev.get("cat")), _text(ev.get("name")),
                   ev.get("pid"), ev.get("tid"))
    cols.ts_text.append(_number_text(ev.get("ts")))
    cols.dur_text.append(_number_text(ev.get("dur")))
    args: dict[str, Any] = ev["args"] if isinstance(ev.get("args"), dict) else {}
    for column, keys in field_map()["args"].items():
        value = next((args[k] for k in keys if args.get(k) is not None), None)
        cols.args[column].append(value)


def _text(value: Any) -> str | None:
    return None if value is None else value if isinstance(value, str) else str(value)


def _number_text(value: Any) -> bytes:
    """Back to the JSON text the fast path sees; non-numbers become quoted text (flagged)."""
    if value is None:
        return b""
    if isinstance(value, bool) or not isinstance(value, (int, decimal.Decimal)):
        return b'"' + str(value).encode("utf-8", "replace")[:60] + b'"'
    return str(value).encode()


def _normalise_arg(column: str, values: list[Any], ids: list[int],
                   anomalies: list[tuple[str, int | None, str]]) -> list[Any]:
    """Integers (or int lists) stay; integer text ("7", "0x0") is parsed; the rest → NULL."""
    if set(map(type, values)) <= ({type(None), list} if column in DIM_COLUMNS
                                  else {type(None), int}):
        return values
    return [_coerce_arg(column, v, ids[i], anomalies) for i, v in enumerate(values)]


def _coerce_arg(column: str, value: Any, event_id: int,
                anomalies: list[tuple[str, int | None, str]]) -> Any:
    if value is None:
        return None
    if column in DIM_COLUMNS:
        if isinstance(value, list) and all(type(v) is int for v in value):
            return value
    elif type(value) is int:
        return value
    elif isinstance(value, str) and _INT_TEXT.match(value.strip()):
        return int(value.strip(), 0)
    anomalies.append(("bad_argument", event_id, f"args {column} = {str(value)[:60]!r} is not "
                      f"{'a list of integers' if column in DIM_COLUMNS else 'an integer'}; "
                      "stored as NULL"))
    return None


_INT_TEXT = re.compile(r"^-?(0x[0-9a-fA-F]+|[1-9][0-9]*|0)$")


def convert_times(trace: KinetoTrace) -> tuple[Any, Any]:
    """(ts_ns, dur_ns) Int64Arrays; problems become anomalies on the trace."""
    out = []
    for column, texts in (("ts", trace.columns.ts_text), ("dur", trace.columns.dur_text)):
        converted = us_texts_to_ns(texts)
        ids = trace.columns.event_id
        for row, problem in converted.problems:
            trace.anomalies.append((f"bad_{column}", ids[row],
                                    f"{column} {problem}; stored as NULL"))
        for row in converted.rounded:
            trace.anomalies.append((f"sub_ns_{column}", ids[row],
                                    f"{column} has more precision than 1 ns; rounded to ns"))
        out.append(converted.ns)
    return out[0], out[1]

