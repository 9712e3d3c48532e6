"""Parsed monitor columns → gpu_samples rows: units, N/A, clocks and order checks.

A parser (decode.py) hands over a `Frame`: the per-row keys (sample index, device, raw time
text) and each metric's column of value texts. Everything here is column-wise (pyarrow
compute, numpy), so a day of 1 s samples of 8 GPUs (700 k rows) converts in well under a
second; only distinct time texts are parsed one by one.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError
from etl.extract.fields import field_map

if TYPE_CHECKING:
    import pyarrow as pa

NA_TEXTS = ("N/A", "[N/A]", "[Not Supported]", "[Unknown Error]", "-", "NaN", "nan", "")
_HEX = r"^0[xX][0-9a-fA-F]{1,16}$"   # nvidia-smi writes bitmasks so: 0x0000000000000004
_NUMBER = r"^(?P<num>[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?)\s*(?P<unit>[A-Za-z%]*)$"
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass
class MetricColumn:
    name: str                     # the instrument's field name
    texts: Any                    # one text per row of the frame (list or string array)
    header_unit: str | None = None


@dataclass
class Frame:
    """One source's parsed rows; every list has one entry per row (an output line)."""

    instrument: str
    section: str                  # the field map's section (nvidia_smi, dcgm, ...)
    # each a list or a pyarrow array, one entry per row
    sample_index: Any
    device_index: Any
    times: Any = None             # the time as printed; None: no time column
    device_uuid: Any = None
    device_bus_id: Any = None
    device_name: Any = None       # the GPU model as printed (nvidia-smi name, modelName)
    metrics: list[MetricColumn] = field(default_factory=list)
    anomalies: list[tuple[str, str]] = field(default_factory=list)

    @property
    def rows(self) -> int:
        return len(self.sample_index)


def arrow(values: Any, type_: pa.DataType) -> pa.Array:
    """A pyarrow array of `type_` from a list or from pyarrow data (never row by row)."""
    import pyarrow as pa

    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if isinstance(values, pa.Array):
        return values if values.type == type_ else values.cast(type_)
    return pa.array(values, type_)


def canonical(section: str, name: str) -> tuple[str, str | None]:
    """(metric, default reported unit) of an instrument field; unknown fields keep their name."""
    entry = field_map("monitor")[section].get(name)
    if entry is None and section == "dcgm":
        entry = _dcgm_by_id_or_exporter(name)
    if entry is None:
        return name, None
    return entry["metric"], entry.get("default_unit") or None


def _dcgm_by_id_or_exporter(name: str) -> dict[str, Any] | None:
    for entry in field_map("monitor")["dcgm"].values():
        if name == str(entry["id"]) or name == entry["exporter"]:
            return dict(entry)
    return None


_UNIT_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ% "


def parse_values(texts: Any) -> tuple[pa.Array, str | None, int]:
    """(float64 values with nulls, the unit suffix the values carry, count not parsed).

    Fast path: N/A to NULL, a trailing unit trimmed, one cast; a column with anything
    else in it takes the regex path, which finds the bad values to count them."""
    import pyarrow as pa
    import pyarrow.compute as pc

    s = pc.utf8_trim_whitespace(arrow(texts, pa.string()))
    na = pc.fill_null(pc.is_in(s, value_set=pa.array(NA_TEXTS)), True)
    number = pc.utf8_rtrim(s, characters=_UNIT_CHARS)
    try:
        values = pc.cast(pc.if_else(na, pa.scalar(None, pa.string()), number), pa.float64())
    except pa.ArrowInvalid:
        return _parse_values_slowly(s, na)
    return values, _suffix(s, number, na), 0


def _suffix(s: pa.Array, number: pa.Array, na: pa.Array) -> str | None:
    import pyarrow.compute as pc

    first = pc.index(na, False).as_py()
    if first < 0:
        return None
    suffix = s[first].as_py()[len(number[first].as_py()):].strip()
    return suffix or None


def _parse_values_slowly(s: pa.Array, na: pa.Array) -> tuple[pa.Array, str | None, int]:
    import pyarrow as pa
    import pyarrow.compute as pc

    hex_values = pc.match_substring_regex(s, _HEX)
    if pc.all(pc.or_(hex_values, na)).as_py():  # bitmasks (clocks_event_reasons.*)
        return pa.array([None if t is None or not h else float(int(t, 16))
                         for t, h in zip(s.to_pylist(), hex_values.to_pylist())],
                        pa.float64()), None, 0
    parts = pc.extract_regex(s, _NUMBER)
    numbers = pc.struct_field(parts, "num")
    bad = pc.sum(pc.and_(pc.invert(na), pc.is_null(parts)).cast(pa.int64())).as_py() or 0
    units = pc.drop_null(pc.unique(pc.struct_field(parts, "unit"))).to_pylist()
    units = [u for u in units if u]
    return pc.cast(numbers, pa.float64()), (units[0] if units else None), bad


# What DCGM returns for a field it has no value of (dcgm_structs.h, DCGM_BLANK_VALUES):
# blank, not found, not supported, not permissioned. dcgmi prints them as N/A; the
# exporter prints the numbers (its README's sample: DCGM_FI_DEV_MEMORY_TEMP
# 9223372036854775794). Integers: 0x7ffffff0 + k (int32), from 0x7ffffffffffffff0 (int64,
# above 2^63 - 16 once read as a double); doubles: 2^47 + k.
DCGM_BLANKS = (*(float(0x7FFFFFF0 + k) for k in range(4)),
               *(float(2 ** 47 + k) for k in range(4)))
DCGM_INT64_BLANK = float(0x7FFFFFFFFFFFFFF0)


def without_dcgm_blanks(values: pa.Array) -> tuple[pa.Array, int]:
    """(values with DCGM's no-value sentinels NULL, how many there were)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    blank = pc.fill_null(pc.or_(pc.is_in(values, value_set=pa.array(DCGM_BLANKS)),
                                pc.greater_equal(values, DCGM_INT64_BLANK)), False)
    count = pc.sum(blank.cast(pa.int64())).as_py() or 0
    return (pc.if_else(blank, pa.scalar(None, pa.float64()), values) if count else values,
            count)


def convert(section: str, column: MetricColumn
            ) -> tuple[pa.Array, str, str | None, str | None, int, int]:
    """(values in the canonical unit, metric, canonical unit, reported unit, bad values,
    DCGM no-value sentinels made NULL)."""
    import pyarrow.compute as pc

    metric, default_unit = canonical(section, column.name)
    values, suffix, bad = parse_values(column.texts)
    blanks = 0
    if section == "dcgm":
        values, blanks = without_dcgm_blanks(values)
    reported = column.header_unit or suffix or default_unit
    unit = field_map("monitor")["units"].get(reported or "")
    if unit is None:
        return values, metric, reported, reported, bad, blanks
    factor = unit["factor"]
    scaled = (pc.divide(values, round(1 / factor)) if factor < 1
              else pc.multiply(values, factor))  # 35 % -> 0.35 exactly, not 0.35000000000000003
    return scaled, metric, unit["unit"], reported, bad, blanks


@dataclass
class Clock:
    """The source's times mapped to UTC, per row (see gpu_samples.clock)."""

    ts_ns: pa.Array
    clock_ts_ns: pa.Array
    clock: pa.Array


_ZONED = r"(?:Z|[+-][0-9]{2}:?[0-9]{2})$"


def map_clock(frame: Frame, timezone: str | None, what: str) -> Clock:
    """Column-wise when the times are ISO-like (Arrow's parser), else one distinct text at
    a time (dmon's 20261124 10:00:00)."""
    import pyarrow as pa

    n = frame.rows
    if frame.times is None:
        frame.anomalies.append(("samples_without_time", (
            f"{what}: no time column; samples keep their order as sample_index, ts_ns is NULL")))
        nulls = pa.nulls(n, pa.int64())
        return Clock(nulls, nulls, pa.repeat(pa.scalar("none"), n))
    zone = _zone(timezone, frame, what)
    times = arrow(frame.times, pa.string())
    try:
        clock = _vector_clock(times, zone, timezone)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        clock = _text_clock(times, zone, timezone, frame, what)
    _flag_unaligned(clock, frame, what)
    return clock


def _vector_clock(times: pa.Array, zone: ZoneInfo | None, timezone: str | None) -> Clock:
    import pyarrow as pa
    import pyarrow.compute as pc

    text = pc.replace_substring(pc.utf8_trim_whitespace(times), "/", "-")
    zoned = pc.fill_null(pc.match_substring_regex(text, _ZONED), False)
    utc = pc.cast(pc.if_else(zoned, text, pa.scalar(None, pa.string())),
                  pa.timestamp("ns", tz="UTC")).cast(pa.int64())
    naive_ts = pc.cast(pc.if_else(zoned, pa.scalar(None, pa.string()), text),
                       pa.timestamp("ns"))
    naive = naive_ts.cast(pa.int64())
    if zone is not None:
        local = pc.assume_timezone(naive_ts, timezone=timezone, ambiguous="earliest",
                                   nonexistent="earliest").cast(pa.int64())
        label = f"timezone:{timezone}"
    else:
        local, label = pa.nulls(len(text), pa.int64()), "unaligned"
    ts = pc.if_else(zoned, utc, local)
    reading = pc.if_else(zoned, utc, naive)
    kind = pc.if_else(zoned, pa.scalar("utc"), pa.scalar(label))
    kind = pc.if_else(pc.is_null(reading), pa.scalar("none"), kind)
    return Clock(ts, reading, kind)


def _text_clock(times: pa.Array, zone: ZoneInfo | None, timezone: str | None, frame: Frame,
                what: str) -> Clock:
    import pyarrow as pa

    values = times.to_pylist()
    parsed = {t: parse_time(t) for t in set(values) if t is not None}
    unparsed = sum(1 for t in values if t is not None and parsed[t] is None)
    if unparsed:
        frame.anomalies.append(("unparsed_time", f"{what}: {unparsed} sample time(s) could "
                                "not be read; their ts_ns is NULL"))
    mapped = {t: _to_utc(p, zone, timezone) for t, p in parsed.items()}
    none = (None, None, "none")
    rows = [mapped.get(t, none) if t is not None else none for t in values]
    return Clock(pa.array([r[0] for r in rows], pa.int64()),
                 pa.array([r[1] for r in rows], pa.int64()),
                 pa.array([r[2] for r in rows], pa.string()))


def _flag_unaligned(clock: Clock, frame: Frame, what: str) -> None:
    import pyarrow.compute as pc

    unaligned = pc.sum(pc.equal(clock.clock, "unaligned").cast("int64")).as_py() or 0
    if unaligned:
        frame.anomalies.append(("clock_unaligned", (
            f"{what}: {unaligned} sample time(s) are local time without a zone and run.toml "
            "has no timezone: kept with ts_ns NULL (clock_ts_ns holds the local reading); "
            "add timezone = \"Area/City\" to run.toml to align them")))


def _zone(timezone: str | None, frame: Frame, what: str) -> ZoneInfo | None:
    if timezone is None:
        return None
    try:
        return ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        frame.anomalies.append(("unknown_timezone", f"{what}: run.toml timezone {timezone!r} "
                                "is not an IANA zone name; local times are not aligned"))
        return None


def parse_time(text: str) -> datetime | None:
    cleaned = text.strip().replace("/", "-")
    try:
        return datetime.fromisoformat(cleaned)
    except ValueError:
        return None


def _to_utc(moment: datetime | None, zone: ZoneInfo | None, timezone: str | None
            ) -> tuple[int | None, int | None, str]:
    if moment is None:
        return None, None, "none"
    if moment.tzinfo is not None:
        return _ns(moment), _ns(moment), "utc"
    reading = _ns(moment.replace(tzinfo=UTC))  # the printed local reading
    if zone is None:
        return None, reading, "unaligned"
    return _ns(moment.replace(tzinfo=zone)), reading, f"timezone:{timezone}"


def _ns(moment: datetime) -> int:
    delta = moment - EPOCH
    return (delta.days * 86400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000


def order_anomalies(device: pa.Array, ts: pa.Array, what: str) -> list[tuple[str, str]]:
    """Samples out of order or repeated (same device and time), and clock jumps (a gap
    over 100 times the device's median interval and over 60 s)."""
    import numpy as np
    import pyarrow.compute as pc

    keep = pc.is_valid(ts)
    if (pc.sum(keep.cast("int64")).as_py() or 0) < 2:
        return []
    dev = pc.fill_null(device.filter(keep).cast("int64"), -1).to_numpy()
    t = ts.filter(keep).to_numpy()
    order = np.argsort(dev, kind="stable")
    dev, t = dev[order], t[order]
    same = dev[1:] == dev[:-1]
    step = (t[1:] - t[:-1])[same]
    found = []
    if (back := int((step < 0).sum())):
        found.append(("samples_out_of_order", f"{what}: {back} sample(s) earlier than the "
                      "one before them on the same device (kept; views order by ts_ns)"))
    if (repeated := int((step == 0).sum())):
        found.append(("samples_repeated", f"{what}: {repeated} sample(s) repeat the time of "
                      "the one before them on the same device (kept)"))
    forward = step[step > 0]
    if forward.size:
        median = float(np.median(forward))
        jumps = int(((forward > 100 * median) & (forward > 60_000_000_000)).sum())
        if jumps:
            found.append(("clock_jump", f"{what}: {jumps} gap(s) over 100x the median "
                          f"sample interval ({median / 1e9:.3g} s) and over 60 s"))
    return found


def mixed_models(device: pa.Array, name: pa.Array, what: str) -> list[tuple[str, str]]:
    """One GPU index that names several GPU models: two jobs on two machines writing one
    log. Their samples are kept, each with its device_name; the views, which know the GPU
    by its index, would average them as one GPU."""
    import pyarrow as pa
    import pyarrow.compute as pc

    table = pa.table({"device": device, "name": name}).filter(pc.is_valid(name))
    counts = table.group_by(["device", "name"]).aggregate([("name", "count")]).to_pylist()
    by_device: dict[int | None, list[tuple[str, int]]] = {}
    for row in counts:
        by_device.setdefault(row["device"], []).append((row["name"], row["name_count"]))
    found = []
    for index, models in sorted(by_device.items(), key=lambda kv: (kv[0] is None, kv[0])):
        if len(models) > 1:
            listed = ", ".join(f"{n!r} ({c} sample{'s' * (c != 1)})" for n, c in sorted(models))
            found.append(("device_models_mixed", (
                f"{what}: GPU index {index} names {len(models)} GPU models: {listed}; two "
                "jobs or machines writing one log? The samples keep their device_name, but "
                "the views know a GPU by its index and average them as one (filter "
                "gpu_samples by device_name, or split the log)")))
    return found


def to_table(frame: Frame, source_id: int, timezone: str | None, what: str) -> pa.Table:
    """The frame's gpu_samples rows (without run_id/publish_id), metric by metric."""
    import pyarrow as pa

    clock = map_clock(frame, timezone, what)
    device = arrow(frame.device_index, pa.int32())
    frame.anomalies += order_anomalies(device, clock.ts_ns, what)
    if frame.device_name is not None:
        frame.anomalies += mixed_models(device, arrow(frame.device_name, pa.string()), what)
    none = pa.nulls(frame.rows, pa.string())
    keys = {
        "sample_index": arrow(frame.sample_index, pa.int64()),
        "device_index": device,
        "device_uuid": none if frame.device_uuid is None else arrow(frame.device_uuid,
                                                                    pa.string()),
        "device_bus_id": none if frame.device_bus_id is None else arrow(
            frame.device_bus_id, pa.string()),
        "device_name": none if frame.device_name is None else arrow(frame.device_name,
                                                                    pa.string()),
        "ts_ns": clock.ts_ns, "clock_ts_ns": clock.clock_ts_ns, "clock": clock.clock,
    }
    parts = []
    bad_total = blank_total = 0
    unknown: dict[str, str] = {}   # metric -> a unit the catalog does not know
    for column in frame.metrics:
        values, metric, unit, reported, bad, blanks = convert(frame.section, column)
        bad_total += bad
        blank_total += blanks
        if reported is not None and reported not in field_map("monitor")["units"]:
            unknown[metric] = reported
        n = frame.rows
        parts.append(pa.table({
            "source_id": pa.repeat(pa.scalar(source_id, pa.int32()), n), **keys,
            "instrument": pa.repeat(pa.scalar(frame.instrument), n),
            "metric": pa.repeat(pa.scalar(metric), n), "value": values,
            "unit": pa.repeat(pa.scalar(unit, pa.string()), n),
            "reported_unit": pa.repeat(pa.scalar(reported, pa.string()), n)}))
    if bad_total:
        frame.anomalies.append(("unparsed_value", f"{what}: {bad_total} value(s) are not "
                                "numbers; kept as NULL"))
    if unknown:
        frame.anomalies.append(("unknown_unit", f"{what}: " + ", ".join(
            f"{metric} in {unit!r}" for metric, unit in sorted(unknown.items()))
            + ": units the monitor catalog does not know; the values kept as written"))
    if blank_total:
        frame.anomalies.append(("dcgm_no_value", f"{what}: {blank_total} value(s) are DCGM's "
                                "blank / not found / not supported / not permissioned "
                                "sentinels (dcgmi prints them as N/A); kept as NULL"))
    return pa.concat_tables(parts) if parts else _empty()


def _empty() -> pa.Table:
    from etl.core.schema import table_schema

    schema = table_schema("gpu_samples").arrow()
    for name in ("run_id", "publish_id"):
        schema = schema.remove(schema.get_field_index(name))
    return schema.empty_table()


def anomaly_table(found: list[tuple[int, str, str]]) -> pa.Table:
    import pyarrow as pa

    n = len(found)
    return pa.table({
        "source_id": pa.array([s for s, _, _ in found], pa.int32()),
        "kind": pa.array([k for _, k, _ in found], pa.string()),
        "event_id": pa.nulls(n, pa.int64()),
        "detail": pa.array([d for _, _, d in found], pa.string()),
        "ncu_source_id": pa.nulls(n, pa.int32()),
        "ncu_id": pa.nulls(n, pa.int64()),
    })
