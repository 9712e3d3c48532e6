"""Rows of two engines compared order-free, floats to 1e-9 (relative or absolute)."""
from __future__ import annotations

import datetime as dt
import decimal
import math
from typing import Any

TOLERANCE = 1e-9


def normal(value: Any) -> Any:
    """One value as plain Python, whichever engine returned it: a struct (DuckDB dict,
    Spark Row) is a tuple of its values, a time is UTC seconds, a decimal a float."""
    if isinstance(value, dict):
        return tuple(normal(v) for v in value.values())
    if isinstance(value, tuple):  # a pyspark Row is a tuple
        return tuple(normal(v) for v in value)
    if isinstance(value, list):
        return [normal(v) for v in value]
    if isinstance(value, dt.datetime):
        stamp = value if value.tzinfo else value.replace(tzinfo=dt.UTC)
        return stamp.timestamp()
    if isinstance(value, decimal.Decimal):
        return float(value)
    return value


def _key(value: Any) -> str:
    """A sort key that ignores float differences below the tolerance (to 6 digits)."""
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, tuple | list):
        return "(" + ",".join(_key(v) for v in value) + ")"
    return repr(value)


def close(a: Any, b: Any) -> bool:
    if isinstance(a, float | int) and isinstance(b, float | int) and not (
            isinstance(a, bool) or isinstance(b, bool)):
        return math.isclose(a, b, rel_tol=TOLERANCE, abs_tol=TOLERANCE)
    if isinstance(a, tuple | list) and isinstance(b, tuple | list):
        return len(a) == len(b) and all(close(x, y) for x, y in zip(a, b))
    return bool(a == b)


def differences(left: list[tuple[Any, ...]], right: list[tuple[Any, ...]]) -> list[str]:
    """What differs between two row lists (empty when they hold the same rows)."""
    a = sorted((normal(r) for r in left), key=_key)
    b = sorted((normal(r) for r in right), key=_key)
    if len(a) != len(b):
        return [f"{len(a)} rows against {len(b)}"]
    return [f"{x} != {y}" for x, y in zip(a, b) if not close(x, y)][:5]
