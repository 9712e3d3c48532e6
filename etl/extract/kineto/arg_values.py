"""Trace arguments that are not integers: the kinds of fields.toml [arg_types].

Each kind says how the typed decoder reads the argument (a field type that never forces
the slow path for one odd value) and how a slice's values become one Arrow column. A value
that is not of its kind is NULL with a `bad_argument` anomaly, never a guess.

    kind       written as (Kineto)                 column
    percent    63 (est. achieved occupancy %)      float64 share 0..1 (63 → 0.63)
    number     28.00926 (blocks per SM)            float64, finite and >= 0
    json       [[5, 128], []] (Input Dims)         string, the JSON compacted
    text_list  ["float", "Scalar"] (Input type)    list<string>
    text       "model.py(12): forward" (stack)     string; "" is NULL (nothing recorded)
    label      "0" or 3 (Process Group Name)       string: the text, or an integer's digits
"""
from __future__ import annotations

import decimal
import math
import sys
from collections.abc import Callable, Sequence
from functools import cache
from typing import Any

import msgspec
import pyarrow as pa
import pyarrow.compute as pc

Anomaly = tuple[str, int | None, str]
_NO_RAW = msgspec.Raw(b"")


@cache
def arg_kinds() -> dict[str, str]:
    """Column → kind of the non-integer arguments (columns not named are integers)."""
    from etl.extract.fields import field_map

    kinds: dict[str, str] = field_map("kineto").get("arg_types", {})
    unknown = set(kinds.values()) - set(_CONVERTERS)
    if unknown:
        raise ValueError(f"fields.toml [arg_types]: unknown kinds {sorted(unknown)}")
    return kinds


def decoder_field(kind: str, key: str) -> tuple[Any, Any]:
    """(field type, msgspec field) of one spelling of an argument of `kind`."""
    if kind == "json":  # kept as raw text: no Python objects for nested lists
        return msgspec.Raw, msgspec.field(default_factory=lambda: _NO_RAW, name=key)
    types = {"percent": float | str, "number": float | str, "text": str,
             "text_list": list[str] | str, "label": str | int}
    return types[kind] | None, msgspec.field(default=None, name=key)


def raw_texts(values: Sequence[msgspec.Raw]) -> list[str | None]:
    """Raw JSON values (typed decoding of a json kind) → compact JSON text; absent or
    null → None. Compacting makes the text the same whatever the writer's spacing."""
    if not any(map(len, values)):  # none written in the slice
        return [None] * len(values)
    out: list[str | None] = []
    for raw in values:
        text = msgspec.json.format(raw, indent=-1) if len(raw) else b"null"
        out.append(None if text == b"null" else text.decode("utf-8"))
    return out


def arg_array(column: str, values: Sequence[Any], ids: Sequence[int],
              anomalies: list[Anomaly], typed: bool) -> pa.Array:
    """One argument column of a slice as Arrow. `typed`: the values come from the typed
    decoder (json values are already text); else from the lenient one (any JSON value,
    floats as Decimal)."""
    kind = arg_kinds()[column]
    if not typed and kind == "json":
        values = [None if v is None else _ENCODER.encode(v).decode("utf-8") for v in values]
    if kind in _NUMBER_RANGES:  # the typed decoder reads them as float | str: no bool
        fast = _fast_numbers(values, *_NUMBER_RANGES[kind], bools=not typed)
    else:
        fast = _FAST[kind](values)
    if fast is not None:
        return fast
    convert = _CONVERTERS[kind]
    clean = []
    for value, event_id in zip(values, ids):
        converted = None if value is None else convert(value)
        if value is not None and converted is None and not _empty_text(kind, value):
            anomalies.append(("bad_argument", event_id, f"args {column} = "
                              f"{str(value)[:60]!r} is not {_WHAT[kind]}; stored as NULL"))
        clean.append(converted)
    return pa.array(clean, _ARROW[kind]())


def absent_arg_array(column: str, rows: int) -> pa.Array:
    """The column of an argument no event of the slice has."""
    return pa.nulls(rows, _ARROW[arg_kinds()[column]]())


_ENCODER = msgspec.json.Encoder(decimal_format="number")


def _empty_text(kind: str, value: Any) -> bool:
    return kind == "text" and value == ""


def _fast_numbers(values: Sequence[Any], high: float, scale: float = 1.0,
                  bools: bool = True) -> pa.Array | None:
    """All values numbers (not bools) within 0..high: the Arrow array (divided by `scale`)
    in one conversion; else None (checked value by value). `bools`: whether `values` may
    hold a bool (Arrow would convert it to 1.0 or 0.0)."""
    if bools and bool in set(map(type, values)):
        return None
    try:
        array = pa.array(values, pa.float64())
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        return None
    bounds = pc.min_max(array).as_py()  # NaN is never written; 1e999 reads as inf (> high)
    if bounds["min"] is not None and not 0 <= bounds["min"] <= bounds["max"] <= high:
        return None
    return array if scale == 1.0 else pc.divide(array, scale)


def _fast_texts(values: Sequence[Any]) -> pa.Array | None:
    if set(map(type, values)) <= {type(None), str} and "" not in values:
        return pa.array(values, pa.string())
    return None


def _fast_json(values: Sequence[Any]) -> pa.Array | None:
    if all(v is None or v.startswith("[") for v in values):
        return pa.array(values, pa.string())
    return None


def _fast_text_lists(values: Sequence[Any]) -> pa.Array | None:
    try:
        array = pa.array(values, pa.list_(pa.string()))
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return None  # a bare string or a non-string item: checked value by value
    return array


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            return None
    if not isinstance(value, (int, float, decimal.Decimal)):
        return None
    number = float(value)
    return number if math.isfinite(number) and number >= 0 else None


def _percent(value: Any) -> float | None:
    number = _number(value)
    return None if number is None or number > 100 else number / 100


def _json(value: Any) -> str | None:
    return value if isinstance(value, str) and value.startswith("[") else None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _label(value: Any) -> str | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return _text(value)


def _fast_labels(values: Sequence[Any]) -> pa.Array | None:
    kinds = set(map(type, values))
    if kinds <= {type(None), str} and "" not in values:
        return pa.array(values, pa.string())
    if kinds <= {type(None), int}:
        return pa.array([None if v is None else str(v) for v in values], pa.string())
    return None


def _text_list(value: Any) -> list[str] | None:
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return value
    return None


_CONVERTERS: dict[str, Callable[[Any], Any]] = {
    "percent": _percent, "number": _number, "json": _json, "text": _text,
    "text_list": _text_list, "label": _label}
# the numbers' (highest value, divisor) for _fast_numbers; the other kinds' fast paths
_NUMBER_RANGES = {"percent": (100.0, 100.0), "number": (sys.float_info.max, 1.0)}
_FAST: dict[str, Callable[[Sequence[Any]], pa.Array | None]] = {
    "json": _fast_json, "text": _fast_texts, "text_list": _fast_text_lists,
    "label": _fast_labels}
_ARROW: dict[str, Callable[[], pa.DataType]] = {
    "percent": pa.float64, "number": pa.float64, "json": pa.string, "text": pa.string,
    "text_list": lambda: pa.list_(pa.string()), "label": pa.string}
_WHAT = {"percent": "a number in 0..100", "number": "a finite number >= 0",
         "json": "a JSON list", "text": "text", "text_list": "a list of strings",
         "label": "text or an integer"}
