"""Reading an nsys SQLite export: read-only, columns found by name (fields.toml).

Tables are read in batches of pyarrow arrays (never Python rows for the whole table);
a missing table reads as zero rows and a missing column as NULLs. Numeric columns are
decoded from the pages by pages.py (7x faster than sqlite3's Python values); a table it
cannot decode is read through sqlite3 from the row where it stopped.
"""
from __future__ import annotations

import sqlite3
from pathlib import Path
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from etl.extract.fields import field_map
from etl.core.errors import InputError
from etl.extract.nsys.pages import Column, NotDecodable, PageFile

if TYPE_CHECKING:
    import pyarrow as pa

CHUNK_ROWS = 1 << 16


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
        self.pages: PageFile | None = None
        try:
            self.pages = PageFile(path)
        except (NotDecodable, OSError):
            pass  # sqlite3 reads it

    def close(self) -> None:
        self.con.close()
        if self.pages is not None:
            self.pages.close()

    def columns(self, table: str) -> list[str]:
        if table not in self.tables:
            return []
        return [r[1] for r in self.con.execute(f'PRAGMA table_info("{table}")')]

    def read(self, table: str, section: str, types: dict[str, pa.DataType],
             where: str = "") -> dict[str, pa.Array]:
        """Columns of `section` (fields.toml) from `table`, each the first spelling present."""
        import pyarrow as pa

        chunks: dict[str, list[pa.Array]] = {key: [] for key in types}
        for batch in self.batches(table, section, types, where):
            for key, array in batch.items():
                chunks[key].append(array)
        return {key: (pa.concat_arrays(parts) if parts else pa.array([], types[key]))
                for key, parts in chunks.items()}

    def batches(self, table: str, section: str, types: dict[str, pa.DataType],
                where: str = "") -> Iterator[dict[str, pa.Array]]:
        """`read` a batch of rows at a time, in rowid order (a `where` reads through sqlite3)."""
        chosen = self._chosen(table, section, types)
        if chosen is None:
            return
        after = None
        if self.pages is not None and not where:
            decoded = _Decoded()
            try:
                yield from self._decoded(table, chosen, types, decoded)
                return
            except NotDecodable:
                after = decoded.last_rowid  # read the rest through sqlite3
        yield from self._fetched(table, chosen, types, where, after)

    def _chosen(self, table: str, section: str, types: dict[str, pa.DataType]
                ) -> dict[str, str | None] | None:
        present = set(self.columns(table))
        if not present:
            return None
        return {key: next((c for c in field_map("nsys")[section][key] if c in present), None)
                for key in types}

    def _decoded(self, table: str, chosen: dict[str, str | None],
                 types: dict[str, pa.DataType], decoded: _Decoded
                 ) -> Iterator[dict[str, pa.Array]]:
        import pyarrow as pa

        assert self.pages is not None
        root, columns = self._layout(table, chosen, types)
        names = [key for key, column in chosen.items() if column is not None]
        for rowid, arrays in self.pages.batches(root, columns):
            n = len(rowid)
            yield {key: (pa.array(arrays[names.index(key)][0], types[key],
                                  mask=~arrays[names.index(key)][1])
                         if key in names else pa.nulls(n, types[key])) for key in types}
            if n:
                decoded.last_rowid = int(rowid[-1])

    def _layout(self, table: str, chosen: dict[str, str | None],
                types: dict[str, pa.DataType]) -> tuple[int, list[Column]]:
        """The table's root page and the record positions of the chosen columns."""
        import pyarrow as pa

        info = self.con.execute(f'PRAGMA table_xinfo("{table}")').fetchall()
        [(root, without_rowid)] = self.con.execute(
            "SELECT rootpage, sql LIKE '%WITHOUT ROWID%' FROM sqlite_master WHERE name = ?",
            (table,)).fetchall()
        by_name = {row[1]: row for row in info}
        keys = sum(1 for row in info if row[5])
        if without_rowid or not isinstance(root, int) or any(row[6] for row in info):
            raise NotDecodable("not a plain rowid table")
        columns = []
        for key, name in chosen.items():
            if name is None:
                continue
            cid, _, decl, _, default, pk, _ = by_name[name]
            if default is not None or not (pa.types.is_integer(types[key])
                                           or pa.types.is_floating(types[key])):
                raise NotDecodable(f"column {name} is not a plain numeric column")
            columns.append(Column(cid, pa.types.is_floating(types[key]),
                                  pk == 1 and keys == 1 and decl.upper() == "INTEGER"))
        return root, columns

    def _fetched(self, table: str, chosen: dict[str, str | None],
                 types: dict[str, pa.DataType], where: str, after: int | None
                 ) -> Iterator[dict[str, pa.Array]]:
        select = ", ".join(f'"{c}"' if c else "NULL" for c in chosen.values())
        if after is not None:
            where = f"WHERE rowid > {after} ORDER BY rowid"
        try:
            cursor = self.con.execute(f'SELECT {select} FROM "{table}" {where}')
            while rows := cursor.fetchmany(CHUNK_ROWS):
                yield {key: _array(values, types[key])
                       for key, values in zip(types, zip(*rows))}
        except sqlite3.DatabaseError as exc:
            raise InputError(self.path, f"table {table} cannot be read ({exc})", None,
                             f"re-export it: {_export_hint(self.path)}") from None

    def count(self, table: str) -> int:
        """Rows of `table` (0 when absent)."""
        if table not in self.tables:
            return 0
        return int(self.scalar(f'SELECT count(*) FROM "{table}"') or 0)

    def correlation_ends(self, table: str, section: str, rows: int = 1000) -> list[int]:
        """Correlation ids of the first and last `rows` rows (rowid order) of `table`:
        two index seeks, for the range of its ids without reading it (none when the
        table, its column or its rowids are not there: the reading reports what is wrong)."""
        import pyarrow as pa

        chosen = self._chosen(table, section, {"correlation": pa.int64()})
        column = chosen.get("correlation") if chosen else None
        if column is None:
            return []
        sql = (f'SELECT "{column}" FROM (SELECT "{column}", rowid FROM "{table}" ORDER BY '
               f'rowid LIMIT {rows}) UNION ALL SELECT "{column}" FROM (SELECT "{column}", '
               f'rowid FROM "{table}" ORDER BY rowid DESC LIMIT {rows})')
        try:
            values = self.con.execute(sql).fetchall()
        except sqlite3.DatabaseError:
            return []
        return [v for (v,) in values if isinstance(v, int) and not isinstance(v, bool)]

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


class _Decoded:
    """How far the page decoder got (the last rowid it handed out)."""

    last_rowid: int | None = None


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
