"""Exact decimal-microsecond → integer-nanosecond conversion, vectorised.

Kineto prints `ts`/`dur` as `{µs}.{ns:03}`. A float64 of µs since the epoch is off by up to
0.25 µs, so the raw JSON number text is converted instead: all texts are joined into one
buffer and parsed by Arrow, as integers where the text allows (integer µs, or three
decimals with the dot dropped) and else as decimal128; anything else (exponents, more than
three decimals, strings, garbage) is converted one by one and reported.
"""
from __future__ import annotations

import decimal
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

# Arrow's decimal parser also accepts "nan"/"inf" spellings and a leading "+": a value must
# start like a JSON number to take the fast path.
_FIRST_CHAR = r"^[-0-9]$"
_NUMBER = re.compile(rb"^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$")
# beyond 2^62 ns (146 years) a value is garbage, and ts + dur could overflow int64 in SQL
_NS_LIMIT = 1 << 62


@dataclass
class Converted:
    ns: pa.Int64Array
    # (row index, problem) for values that are present but not usable as numbers
    problems: list[tuple[int, str]] = field(default_factory=list)
    rounded: list[int] = field(default_factory=list)


def us_texts_to_ns(texts: Sequence[bytes]) -> Converted:
    """Convert raw JSON number texts (b"" = absent) to int64 ns; absent → NULL.

    Fast paths, both by Arrow's integer parse: integer µs (older Kineto writes no
    decimals), and µs with exactly three decimals (`{µs}.{ns:03}`, newer Kineto), whose
    text without the dot is the ns; otherwise Arrow parses every text as
    decimal128(24, 3), which fails (rather than rounds) on more than three decimals,
    quotes or garbage; then the slow path decides.
    """
    blob = b"".join(texts)
    strings = _absent_as_null(_as_string_array(texts, blob))
    try:
        if b"x" not in blob and b"X" not in blob:  # the integer parse would read hex
            exact = (_whole_us_to_ns(strings) if b"." not in blob
                     else _three_decimals_to_ns(strings))
            if exact is not None:
                return Converted(exact)
        return Converted(_plain_to_ns(strings))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return _slow_path(texts)


def _as_string_array(texts: Sequence[bytes], blob: bytes) -> pa.Array:
    """One Arrow string array of the texts (joined in `blob`): no per-item objects."""
    lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
    offsets = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return pa.LargeStringArray.from_buffers(len(texts), pa.py_buffer(offsets),
                                            pa.py_buffer(blob))


def _absent_as_null(strings: pa.Array) -> pa.Array:
    empty = pc.equal(pc.binary_length(strings), 0)
    return pc.if_else(empty, pa.scalar(None, pa.large_string()), strings)


def _whole_us_to_ns(strings: pa.Array) -> pa.Int64Array | None:
    """Every text an integer (a sign and digits: the parse takes nothing else but hex) →
    ns, ~4x cheaper than the decimal parse; None if some text is not, or is too large."""
    return _integers_scaled(strings, pa.scalar(1000, pa.int64()))


def _three_decimals_to_ns(strings: pa.Array) -> pa.Int64Array | None:
    """Texts that are integers or have exactly three decimals → ns, by dropping the dot
    (exact: digits are moved, not computed), ~6x cheaper than the decimal parse; None if
    some text has another number of decimals or is not digits once the dot is gone (an
    exponent, quotes), or is too large: the decimal path decides then."""
    dot = pc.find_substring(strings, ".")
    has_dot = pc.greater_equal(dot, 0)
    decimals = pc.subtract(pc.binary_length(strings), pc.add(dot, 1))
    if pc.all(pc.or_(pc.invert(has_dot), pc.equal(decimals, 3))).as_py() is False:
        return None
    scale = pc.if_else(has_dot, pa.scalar(1, pa.int64()), pa.scalar(1000, pa.int64()))
    digits = pc.replace_substring(strings, ".", "", max_replacements=1)
    return _integers_scaled(digits, scale)


def _integers_scaled(strings: pa.Array, scale: pa.Scalar | pa.Array
                     ) -> pa.Int64Array | None:
    """Integer texts times `scale`, in range; None if some text is not an integer or the
    product overflows."""
    try:
        ns = pc.multiply_checked(pc.cast(strings, pa.int64()), scale)
    except pa.ArrowInvalid:
        return None
    return _in_range(ns)


def _plain_to_ns(strings: pa.Array) -> pa.Int64Array:
    if pc.all(pc.match_substring_regex(pc.utf8_slice_codeunits(strings, 0, 1),
                                           _FIRST_CHAR)).as_py() not in (True, None):
        raise pa.ArrowInvalid("a value does not start like a plain number")
    dec = pc.cast(strings, pa.decimal128(24, 3))
    scaled = pc.multiply(dec, pa.scalar(decimal.Decimal(1000), pa.decimal128(4, 0)))
    return _in_range(pc.cast(scaled, pa.int64()))


def _in_range(ns: pa.Int64Array) -> pa.Int64Array:
    largest = pc.max(pc.abs(ns)).as_py()
    if largest is not None and largest > _NS_LIMIT:
        raise pa.ArrowInvalid("a value is out of range")
    return ns


def _slow_path(texts: Sequence[bytes]) -> Converted:
    out: list[int | None] = []
    result = Converted(pa.array([], pa.int64()))
    for i, raw in enumerate(texts):
        value = _one(bytes(raw), i, result)
        out.append(value)
    result.ns = pa.array(out, pa.int64())
    return result


def _one(raw: bytes, index: int, result: Converted) -> int | None:
    if not raw or raw == b"null":  # JSON null is absent, as in the lenient decoder
        return None
    if not _NUMBER.match(raw):
        result.problems.append((index, f"not a number: {raw[:40]!r}"))
        return None
    exact = decimal.Decimal(raw.decode()) * 1000
    ns = int(exact.to_integral_value(rounding=decimal.ROUND_HALF_EVEN))
    if ns != exact:
        result.rounded.append(index)
    if abs(ns) > _NS_LIMIT:
        result.problems.append((index, f"out of range: {raw[:40]!r}"))
        return None
    return ns
