"""Reading an nsys SQLite export: read-only, columns found by name (columns.toml).

Tables are read in chunks into pyarrow arrays (never Python rows for the whole table);
a missing table reads as zero rows and a missing column as NULLs.
"""
from __future__ import annotations

import sqlite3
import tomllib
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from etl.errors import InputError

if TYPE_CHECKING:
    import pyarrow as pa

CHUNK_ROWS = 1 << 16


@cache
def column_map() -> dict[str, Any]:
    with open(Path(__file__).with_name("columns.toml"), "rb") as fh:
        return tomllib.load(fh)


class Export:
    """An open export: which tables and columns it has, and chunked reads of them."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self.con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
            names = self.con.execute(
                "SELECT name FROM sqlite_master WHERE type IN ('table', 'view')").fetchall()
        except sqlite3.DatabaseError as exc:
            raise InputError(path, f"not a readable SQLite database ({exc})", None,
                             f"re-export it: {_export_hint(path)}") from None
        self.tables = {n for (n,) in names}

    def close(self) -> None:
        self.con.close()

    def columns(self, table: str) -> list[str]:
        if table not in self.tables:
            return []
        return [r[1] for r in self.con.execute(f'PRAGMA table_info("{table}")')]

    def read(self, table: str, section: str, types: dict[str, pa.DataType],
             where: str = "") -> dict[str, pa.Array]:
        """Columns of `section` (columns.toml) from `table`, each the first spelling present."""
        import pyarrow as pa

        present = set(self.columns(table))
        chosen = {key: next((c for c in column_map()[section][key] if c in present), None)
                  for key in types}
        if not present:
            return {key: pa.array([], t) for key, t in types.items()}
        select = ", ".join(f'"{c}"' if c else "NULL" for c in chosen.values())
        chunks: dict[str, list[pa.Array]] = {key: [] for key in types}
        try:
            cursor = self.con.execute(f'SELECT {select} FROM "{table}" {where}')
            while rows := cursor.fetchmany(CHUNK_ROWS):
                for key, values in zip(types, zip(*rows)):
                    chunks[key].append(_array(values, types[key]))
        except sqlite3.DatabaseError as exc:
            raise InputError(self.path, f"table {table} cannot be read ({exc})", None,
                             f"re-export it: {_export_hint(self.path)}") from None
        return {key: (pa.concat_arrays(parts) if parts else pa.array([], types[key]))
                for key, parts in chunks.items()}

    def scalar(self, sql: str) -> Any:
        try:
            row = self.con.execute(sql).fetchone()
        except sqlite3.DatabaseError:
            return None
        return row[0] if row else None

    def strings(self) -> dict[int, str]:
        if "StringIds" not in self.tables:
            return {}
        try:
            return dict(self.con.execute("SELECT id, value FROM StringIds"))
        except sqlite3.DatabaseError as exc:
            raise InputError(self.path, f"table StringIds cannot be read ({exc})", None,
                             f"re-export it: {_export_hint(self.path)}") from None


def _array(values: tuple[Any, ...], type_: pa.DataType) -> pa.Array:
    import pyarrow as pa

    try:
        return pa.array(values, type_)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        # a value of another type (SQLite columns are not typed): NULL, not a crash
        return pa.array([v if _fits(v, type_) else None for v in values], type_)


def _fits(value: Any, type_: pa.DataType) -> bool:
    import pyarrow as pa

    if value is None:
        return True
    if pa.types.is_integer(type_):
        return isinstance(value, int) and -(1 << 63) <= value < (1 << 63)
    if pa.types.is_floating(type_):
        return isinstance(value, (int, float))
    return isinstance(value, str)


def _export_hint(path: Path) -> str:
    return "nsys export --type sqlite --force-overwrite true --output OUT.sqlite REPORT.nsys-rep"
