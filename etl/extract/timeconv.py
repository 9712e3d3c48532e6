"""Exact decimal-microsecond → integer-nanosecond conversion, vectorised.

Kineto prints `ts`/`dur` as `{µs}.{ns:03}`. A float64 of µs since the epoch is off by up to
0.25 µs, so the raw JSON number text is converted instead: all texts are joined into one
buffer and parsed by Arrow as decimal128 (fast path); anything else (exponents, more than
three decimals, strings, garbage) is converted one by one and reported.
"""
from __future__ import annotations

import decimal
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

_PLAIN = r"^-?[0-9]{1,19}(\.[0-9]{1,3})?$"
_NUMBER = re.compile(rb"^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$")
_INT64_MAX = (1 << 63) - 1


@dataclass
class Converted:
    ns: pa.Int64Array
    # (row index, problem) for values that are present but not usable as numbers
    problems: list[tuple[int, str]] = field(default_factory=list)
    rounded: list[int] = field(default_factory=list)


def us_texts_to_ns(texts: Sequence[bytes]) -> Converted:
    """Convert raw JSON number texts (b"" = absent) to int64 ns; absent → NULL."""
    strings = _as_string_array(texts)
    plain = pc.fill_null(pc.match_substring_regex(strings, _PLAIN), False)
    if pc.all(pc.or_(plain, pc.equal(pc.binary_length(strings), 0))).as_py():
        return Converted(_plain_to_ns(strings))
    return _slow_path(texts)


def _as_string_array(texts: Sequence[bytes]) -> pa.StringArray:
    blob = b"\n".join(texts)
    if blob.count(b"\n") != len(texts) - 1 or b"\r" in blob:
        return pa.array([bytes(t).decode("utf-8", "replace") for t in texts], pa.string())
    arr = pa.array(blob.split(b"\n"), pa.binary()) if texts else pa.array([], pa.binary())
    return pc.cast(arr, pa.string())


def _plain_to_ns(strings: pa.StringArray) -> pa.Int64Array:
    empty = pc.equal(pc.binary_length(strings), 0)
    cleaned = pc.if_else(empty, pa.scalar(None, pa.string()), strings)
    dec = pc.cast(cleaned, pa.decimal128(24, 3))
    scaled = pc.multiply(dec, pa.scalar(decimal.Decimal(1000), pa.decimal128(4, 0)))
    return pc.cast(scaled, pa.int64())


def _slow_path(texts: Sequence[bytes]) -> Converted:
    out: list[int | None] = []
    result = Converted(pa.array([], pa.int64()))
    for i, raw in enumerate(texts):
        value = _one(bytes(raw), i, result)
        out.append(value)
    result.ns = pa.array(out, pa.int64())
    return result


def _one(raw: bytes, index: int, result: Converted) -> int | None:
    if not raw:
        return None
    if not _NUMBER.match(raw):
        result.problems.append((index, f"not a number: {raw[:40]!r}"))
        return None
    exact = decimal.Decimal(raw.decode()) * 1000
    ns = int(exact.to_integral_value(rounding=decimal.ROUND_HALF_EVEN))
    if ns != exact:
        result.rounded.append(index)
    if abs(ns) > _INT64_MAX:
        result.problems.append((index, f"out of range: {raw[:40]!r}"))
        return None
    return ns
