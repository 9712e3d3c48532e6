"""Query results as a text table that fits the terminal, at the speed of CSV.

Only the first `limit` rows are formatted (the count of all rows is printed under the
table), so the cost does not grow with the result. Text columns are cut (with an ellipsis)
only as far as the terminal's width needs, widest first and never below MIN_CELL; the
columns that still do not fit are elided and named below the table, as the DuckDB shell
does. Floats show SIGNIFICANT digits here (csv and json print every digit); durations
(`*_ns` columns that are not instants) are shown in one unit per column, with the unit.
"""
from __future__ import annotations

import math
import re
from collections.abc import Sequence
from datetime import date, datetime
from decimal import Decimal
from typing import Any

SIGNIFICANT = 6
MIN_CELL = 16
GAP = "  "
INSTANT = re.compile(r"(^|_)(ts|start|end)_ns$")  # a point in time, not a duration
UNITS = ((1e9, "s"), (1e6, "ms"), (1e3, "µs"))


def cell_text(value: Any) -> str:
    """One value as the table shows it (NULL for missing)."""
    if value is None:
        return "NULL"
    if isinstance(value, float):
        return _float_text(value)
    if isinstance(value, Decimal):
        return _float_text(float(value))
    if isinstance(value, (datetime, date)):
        return value.isoformat(sep=" ") if isinstance(value, datetime) else value.isoformat()
    text = str(value)
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _float_text(value: float) -> str:
    if math.isnan(value) or math.isinf(value):
        return str(value)
    if value != 0 and (abs(value) >= 1e15 or abs(value) < 1e-4):
        return f"{value:.{SIGNIFICANT - 1}e}"
    if value == int(value) and abs(value) < 1e15:
        return f"{value:.1f}"
    digits = max(SIGNIFICANT - 1 - math.floor(math.log10(abs(value))), 0)
    text = f"{value:.{digits}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def is_duration(column: str) -> bool:
    return column.endswith("_ns") and not INSTANT.search(column)


def duration_texts(values: Sequence[Any]) -> list[str]:
    """Nanoseconds in the unit of the largest, to 3 decimals so that the column's points
    align (2124456 → `2.124 ms`); below a µs they stay integer ns."""
    numbers = [abs(float(v)) for v in values if isinstance(v, int | float | Decimal)]
    scale, unit = next(((f, u) for f, u in UNITS if numbers and max(numbers) >= f), (1, "ns"))
    if scale == 1:
        return [cell_text(v) for v in values]
    return [cell_text(v) if not isinstance(v, int | float | Decimal)
            else f"{float(v) / scale:.3f} {unit}" for v in values]


def column_texts(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[list[str]]:
    """Each column's cells as text (uncut): durations with their unit."""
    return [duration_texts([r[i] for r in rows]) if is_duration(c)
            else [cell_text(r[i]) for r in rows] for i, c in enumerate(columns)]


KEYS = ("run_name", "rank", "device_id")
STAR = re.compile(r"(?is)^\s*(select\s+(distinct\s+)?\*|from\s)")  # SELECT * and FROM x


def _rank(column: str) -> int:
    """Where a column goes in a `SELECT *` table: what a person reads a row by, then the
    levels, rates and durations, counts and sizes, other values, and last the ids and
    instants (run_id, source_id, window_start_ns) that only joins need."""
    if column in KEYS or column.endswith(("iteration", "_name")):
        return 0
    if column.endswith(("_util", "_share", "_ratio")):
        return 1
    if column.endswith("_per_s") or is_duration(column):
        return 2
    if column.endswith(("_count", "_bytes", "_flops")):
        return 3
    if column.endswith("_id") or INSTANT.search(column):
        return 5
    return 4


def meaningful_first(sql: str, columns: Sequence[str]) -> list[int]:
    """The order to show the columns of `SELECT * ...` in (stable within each rank); a
    query that names its columns keeps its own order."""
    if not STAR.match(sql):
        return list(range(len(columns)))
    return sorted(range(len(columns)), key=lambda i: _rank(columns[i]))


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[:max(width - 1, 0)] + "…"


def render(columns: Sequence[str], rows: Sequence[Sequence[Any]], total: int,
           width: int) -> list[str]:
    """Lines of the table for `rows` (already limited), `total` rows in the result."""
    texts = column_texts(columns, rows)
    numeric = [_is_numeric(rows, i) for i in range(len(columns))]
    natural = [max([len(c)] + [len(t) for t in texts[i]]) for i, c in enumerate(columns)]
    widths = _cut_widths(natural, numeric, width)
    shown = _fitting(widths, width)

    def line(values: Sequence[str]) -> str:
        parts = [_cut(values[i], widths[i]).rjust(widths[i]) if numeric[i]
                 else _cut(values[i], widths[i]).ljust(widths[i]) for i in shown]
        return GAP.join(parts).rstrip()

    out = [line(list(columns)), GAP.join("-" * widths[i] for i in shown)]
    out += [line([t[r] for t in texts]) for r in range(len(rows))]
    out.append(_footer(len(rows), total))
    hidden = [columns[i] for i in range(len(columns)) if i not in shown]
    if hidden:
        out.append(f"{len(hidden)} column(s) not shown to fit {width} characters: "
                   f"{', '.join(hidden)} (use --format line or csv, or select fewer columns)")
    return out


def _cut_widths(natural: list[int], numeric: list[bool], width: int) -> list[int]:
    """Text columns capped at the largest width that lets every column fit, if one of at
    least MIN_CELL does; else (columns will be elided anyway) at a third of the width, so
    that the columns shown are whole where they can be. Never past `width`."""
    def total(cap: int) -> int:
        return sum(w if n else min(w, cap) for w, n in zip(natural, numeric)) + len(GAP) * (
            len(natural) - 1)

    cap = max([w for w, n in zip(natural, numeric) if not n], default=0)
    if total(MIN_CELL) > width:
        cap = min(cap, max(MIN_CELL, width // 3))
    else:
        while total(cap) > width:
            cap -= 1
    return [min(w if n else min(w, cap), width) for w, n in zip(natural, numeric)]


def render_lines(columns: Sequence[str], rows: Sequence[Sequence[Any]], total: int
                 ) -> list[str]:
    """Each row as one `column = value` line per column, names right-aligned, a blank line
    between rows (DuckDB's `.mode line`): for rows wider than the terminal."""
    width = max((len(c) for c in columns), default=0)
    texts = column_texts(columns, rows)
    out: list[str] = []
    for r in range(len(rows)):
        if out:
            out.append("")
        out += [f"{c.rjust(width)} = {texts[i][r]}" for i, c in enumerate(columns)]
    return [*out, "", _footer(len(rows), total)] if out else [_footer(0, total)]


def _fitting(widths: list[int], width: int) -> list[int]:
    """Indexes of the columns that fit, left to right (at least the first)."""
    shown: list[int] = []
    used = 0
    for i, w in enumerate(widths):
        need = w + (len(GAP) if shown else 0)
        if shown and used + need > width:
            continue
        shown.append(i)
        used += need
    return shown


def _is_numeric(rows: Sequence[Sequence[Any]], index: int) -> bool:
    values = [r[index] for r in rows if r[index] is not None]
    return bool(values) and all(isinstance(v, (int, float, Decimal)) and not isinstance(v, bool)
                                for v in values)


def _footer(shown: int, total: int) -> str:
    if shown == total:
        return f"({total:,} row{'s' if total != 1 else ''})"
    return f"({total:,} rows, first {shown:,} shown; --limit N or --all for more)"
