"""XSpace bytes → planes, lines and events, with the stats the tables need.

The messages and field numbers (xplane.proto, package tensorflow.profiler):
  XSpace     1 planes (XPlane)  2 errors  3 warnings  4 hostnames
  XPlane     1 id  2 name  3 lines (XLine)  4 event_metadata (map<int64, XEventMetadata>)
             5 stat_metadata (map<int64, XStatMetadata>)  6 stats (XStat)
  XLine      1 id  2 name  3 timestamp_ns  4 events (XEvent)  9 duration_ps
             10 display_id  11 display_name
  XEvent     1 metadata_id  2 offset_ps  3 duration_ps  4 stats (XStat)  5 num_occurrences
  XStat      1 metadata_id  2 double  3 uint64  4 int64  5 str  6 bytes  7 ref (a stat
             metadata id whose name is the value)
  XEventMetadata  1 id  2 name  3 metadata  4 display_name  5 stats  6 child_id
  XStatMetadata   1 id  2 name  3 description
(a map entry is a message with 1 key and 2 value). Times: an event starts at its line's
timestamp_ns plus offset_ps; both are integers and are added as integers, so a start is
exact to the ns (floor of the ps). An aggregated event (num_occurrences, no offset) has no
time and is counted, not read.

The event loop is written out by hand (one-byte keys: every field number is below 16) as
it runs once per event; wire.py's generic `fields` reads the small messages.
"""
from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from etl.extract.fields import field_map
from etl.extract.xplane.wire import LEN, VARINT, WireError, double, fields, signed, varint

Value = int | float | str
Stats = dict[str, Value]


@dataclass
class Plane:
    id: int
    name: str
    stat_names: dict[int, str]
    event_names: dict[int, str]
    event_stats: dict[int, Stats]          # stats of an event's metadata (apply to all)
    stats: Stats                           # the plane's own stats (device properties)
    lines: list[tuple[int, int]]           # byte ranges of the XLine messages
    roles: dict[int, str]                  # stat metadata id → role (fields.toml [stats])


@dataclass
class Space:
    planes: list[Plane] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    hostnames: list[str] = field(default_factory=list)
    not_stored: Counter[str] = field(default_factory=Counter)   # stat name → count
    aggregated: int = 0                    # events with num_occurrences (no time)


def _text(buf: bytes, start: int, end: int) -> str:
    return bytes(buf[start:end]).decode("utf-8", "backslashreplace")


def read_space(buf: bytes) -> Space:
    """The XSpace's planes (their lines as byte ranges, decoded later) and messages."""
    space = Space()
    for number, wire, start, end in fields(buf, 0, len(buf)):
        if wire != LEN:
            if number <= 4:
                raise WireError(start, f"XSpace field {number} is not length-delimited")
            continue
        if number == 1:
            space.planes.append(_plane(buf, start, end))
        elif number in (2, 3, 4):
            [space.errors, space.warnings, space.hostnames][number - 2].append(
                _text(buf, start, end))
    return space


def _plane(buf: bytes, start: int, end: int) -> Plane:
    plane = Plane(0, "", {}, {}, {}, {}, [], {})
    stat_ranges: list[tuple[int, int]] = []
    event_metadata: list[tuple[int, int]] = []
    for number, wire, a, b in fields(buf, start, end):
        if number == 1 and wire == VARINT:
            plane.id = signed(a)
        elif number == 2 and wire == LEN:
            plane.name = _text(buf, a, b)
        elif number == 3 and wire == LEN:
            plane.lines.append((a, b))
        elif number == 4 and wire == LEN:
            event_metadata.append((a, b))
        elif number == 5 and wire == LEN:
            key, value = _map_entry(buf, a, b)
            names = dict(_small(buf, *value)) if value else {}
            plane.stat_names[key] = str(names.get(2, ""))
        elif number == 6 and wire == LEN:
            stat_ranges.append((a, b))
        elif number <= 6:
            raise WireError(a, f"XPlane field {number} has the wrong wire type {wire}")
    roles = field_map("xplane")["stats"]
    plane.roles = {k: roles[n] for k, n in plane.stat_names.items() if n in roles}
    not_stored: Counter[str] = Counter()
    for a, b in stat_ranges:
        _stat(buf, a, b, plane, plane.stats, not_stored, by_name=True)
    for a, b in event_metadata:
        key, value = _map_entry(buf, a, b)
        name, stats = _event_metadata(buf, value, plane)
        plane.event_names[key] = name
        if stats:
            plane.event_stats[key] = stats
    return plane


def _map_entry(buf: bytes, start: int, end: int) -> tuple[int, tuple[int, int] | None]:
    key, value = 0, None
    for number, wire, a, b in fields(buf, start, end):
        if number == 1 and wire == VARINT:
            key = signed(a)
        elif number == 2 and wire == LEN:
            value = (a, b)
    return key, value


def _small(buf: bytes, start: int, end: int) -> list[tuple[int, Value]]:
    """Fields of a small message: varints as ints, length-delimited fields as text."""
    return [(n, _text(buf, a, b) if w == LEN else a) for n, w, a, b in fields(buf, start, end)
            if w in (LEN, VARINT)]


def _event_metadata(buf: bytes, value: tuple[int, int] | None, plane: Plane
                    ) -> tuple[str, Stats]:
    if value is None:
        return "", {}
    name, display = "", ""
    stats: Stats = {}
    unused: Counter[str] = Counter()
    for number, wire, a, b in fields(buf, *value):
        if number == 2 and wire == LEN:
            name = _text(buf, a, b)
        elif number == 4 and wire == LEN:
            display = _text(buf, a, b)
        elif number == 5 and wire == LEN:
            _stat(buf, a, b, plane, stats, unused)
    return name or display, stats


def _stat(buf: bytes, start: int, end: int, plane: Plane, out: Stats,
          not_stored: Counter[str], by_name: bool = False) -> None:
    """One XStat into `out` under its role (or its name when `by_name`); a stat without a
    role is counted under its name."""
    key: int = 0
    value: Value | None = None
    for number, _wire, a, b in fields(buf, start, end):
        if number == 1:
            key = a
        elif number == 2:
            value = double(buf, a)
        elif number == 3:
            value = a
        elif number == 4:
            value = signed(a)
        elif number in (5, 6):
            value = _text(buf, a, b)
        elif number == 7:
            value = plane.stat_names.get(a, "")
    if value is None:
        return
    if by_name:
        out[plane.stat_names.get(key, str(key))] = value
    elif key in plane.roles:
        out[plane.roles[key]] = value
    else:
        not_stored[plane.stat_names.get(key, f"#{key}")] += 1


EventSink = Callable[[int, int, int, Stats], None]   # metadata id, ts_ns, dur_ns, stats


def read_line(buf: bytes, start: int, end: int) -> tuple[int, str, int, int]:
    """(id, name, timestamp_ns, number of events) of one XLine."""
    line_id, name, display, timestamp, events = 0, "", "", 0, 0
    for number, wire, a, b in fields(buf, start, end):
        if number == 1 and wire == VARINT:
            line_id = signed(a)
        elif number == 2 and wire == LEN:
            name = _text(buf, a, b)
        elif number == 11 and wire == LEN:
            display = _text(buf, a, b)
        elif number == 3 and wire == VARINT:
            timestamp = signed(a)
        elif number == 4 and wire == LEN:
            events += 1
        elif number in (1, 2, 3, 4, 11):
            raise WireError(a, f"XLine field {number} has the wrong wire type {wire}")
    return line_id, name or display, timestamp, events


def read_events(buf: bytes, line_start: int, line_end: int, timestamp_ns: int, plane: Plane,
                space: Space, sink: EventSink) -> None:
    """Decode each XEvent of the XLine in [line_start, line_end) and hand it to `sink`
    (aggregated ones are counted). The events are found as they are decoded: no list of
    their places (a 100 MB file has millions)."""
    roles, event_stats, not_stored = plane.roles, plane.event_stats, space.not_stored
    names = plane.stat_names
    at = line_start
    while at < line_end:
        if buf[at] != 0x22:                       # not field 4 (events): skip it
            at = _skip(buf, at, line_end)
            continue
        size, pos = varint(buf, at + 1, line_end)
        end = pos + size
        if end > line_end:
            raise WireError(pos, "an XEvent runs past the end of its XLine")
        at = end
        metadata_id = offset = duration = 0
        aggregated = False
        stats: Stats = {}
        while pos < end:
            key = buf[pos]
            pos += 1
            if key == 0x22:                       # 4 stats, length-delimited
                size, pos = varint(buf, pos, end)
                stop = pos + size
                if stop > end:
                    raise WireError(pos, "an XStat runs past the end of its XEvent")
                _event_stat(buf, pos, stop, roles, names, stats, not_stored)
                pos = stop
            elif key == 0x08:
                if pos < end and buf[pos] < 0x80:     # one-byte varint: most metadata ids
                    metadata_id = buf[pos]
                    pos += 1
                else:
                    metadata_id, pos = varint(buf, pos, end)
            elif key == 0x10:
                offset, pos = varint(buf, pos, end)
            elif key == 0x18:
                duration, pos = varint(buf, pos, end)
            elif key == 0x28:
                _, pos = varint(buf, pos, end)
                aggregated = True
            else:
                pos = _skip(buf, pos - 1, end)
        if aggregated:                            # num_occurrences instead of a start
            space.aggregated += 1
            continue
        if metadata_id in event_stats:
            stats = {**event_stats[metadata_id], **stats}
        offset, duration = signed(offset), signed(duration)
        sink(metadata_id, timestamp_ns + offset // 1000, duration // 1000, stats)


def _skip(buf: bytes, pos: int, end: int) -> int:
    """Past one field of a kind the event loop does not read (unknown or multi-byte key)."""
    return fields_once(buf, pos, end)[0][3]


def fields_once(buf: bytes, pos: int, end: int) -> list[tuple[int, int, int, int]]:
    key, at = varint(buf, pos, end)
    number, wire = key >> 3, key & 7
    if number == 0:
        raise WireError(pos, "field number 0")
    if wire == VARINT:
        value, at = varint(buf, at, end)
        return [(number, wire, value, at)]
    if wire == LEN:
        size, at = varint(buf, at, end)
        if at + size > end:
            raise WireError(at, "a field runs past the end of its message")
        return [(number, wire, at, at + size)]
    width = {1: 8, 5: 4}.get(wire)
    if width is None or at + width > end:
        raise WireError(at, f"wire type {wire} cannot be read here")
    return [(number, wire, at, at + width)]


def _event_stat(buf: bytes, pos: int, end: int, roles: dict[int, str], names: dict[int, str],
                out: Stats, not_stored: Counter[str]) -> None:
    key = 0
    value: Value | None = None
    while pos < end:
        tag = buf[pos]
        pos += 1
        if tag == 0x08:
            if pos < end and buf[pos] < 0x80:         # one-byte varint: most stat ids
                key = buf[pos]
                pos += 1
            else:
                key, pos = varint(buf, pos, end)
        elif tag == 0x18:
            value, pos = varint(buf, pos, end)
        elif tag == 0x20:
            raw, pos = varint(buf, pos, end)
            value = signed(raw)
        elif tag == 0x38:
            ref, pos = varint(buf, pos, end)
            value = names.get(ref, "")
        elif tag == 0x2A or tag == 0x32:
            size, pos = varint(buf, pos, end)
            if pos + size > end:
                raise WireError(pos, "an XStat string runs past the end of its message")
            value = bytes(buf[pos:pos + size]).decode("utf-8", "backslashreplace")
            pos += size
        elif tag == 0x11:
            if pos + 8 > end:
                raise WireError(pos, "an XStat double is cut off")
            value = double(buf, pos)
            pos += 8
        else:
            [(_, _, _, pos)] = fields_once(buf, pos - 1, end)
    role = roles.get(key)
    if role is None:
        not_stored[names.get(key, f"#{key}")] += 1
    elif value is not None:
        out[role] = value


def plane_kind(name: str) -> tuple[str, int | None]:
    """('host', None), ('gpu', device id) or ('other', None) from a plane's name."""
    planes = field_map("xplane")["planes"]
    if re.match(planes["host"], name):
        return "host", None
    found = re.match(planes["gpu"], name)
    if found and int(found.group(1)) < 1 << 31:   # devices.device_id is an int32
        return "gpu", int(found.group(1))
    return "other", None
