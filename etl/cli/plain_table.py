"""Query results as a text table that fits the terminal, at the speed of CSV.

Only the first `limit` rows are formatted (the count of all rows is printed under the
table), so the cost does not grow with the result. Columns are kept left to right while
they fit the width; the rest are elided and named below the table, as the DuckDB shell
does. Floats show SIGNIFICANT digits here (csv and json print every digit); a long cell is
cut with an ellipsis.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import date, datetime
from decimal import Decimal
from typing import Any

SIGNIFICANT = 6
MAX_CELL = 40
GAP = "  "


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


def _cut(text: str) -> str:
    return text if len(text) <= MAX_CELL else text[:MAX_CELL - 1] + "…"


def render(columns: Sequence[str], rows: Sequence[Sequence[Any]], total: int,
           width: int) -> list[str]:
    """Lines of the table for `rows` (already limited), `total` rows in the result."""
    cells = [[_cut(cell_text(v)) for v in row] for row in rows]
    widths = [max([len(_cut(c))] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    shown = _fitting(widths, width)
    numeric = [_is_numeric(rows, i) for i in range(len(columns))]

    def line(values: Sequence[str]) -> str:
        parts = [values[i].rjust(widths[i]) if numeric[i] else values[i].ljust(widths[i])
                 for i in shown]
        return GAP.join(parts).rstrip()

    out = [line([_cut(c) for c in columns]), GAP.join("-" * widths[i] for i in shown)]
    out += [line(r) for r in cells]
    out.append(_footer(len(rows), total))
    hidden = [columns[i] for i in range(len(columns)) if i not in shown]
    if hidden:
        out.append(f"{len(hidden)} column(s) not shown to fit {width} characters: "
                   f"{', '.join(hidden)} (use --format csv, or select fewer columns)")
    return out


def render_lines(columns: Sequence[str], rows: Sequence[Sequence[Any]], total: int
                 ) -> list[str]:
    """Each row as one `column = value` line per column, names right-aligned, a blank line
    between rows (DuckDB's `.mode line`): for rows wider than the terminal."""
    width = max((len(c) for c in columns), default=0)
    out: list[str] = []
    for row in rows:
        if out:
            out.append("")
        out += [f"{c.rjust(width)} = {cell_text(v)}" for c, v in zip(columns, row)]
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
