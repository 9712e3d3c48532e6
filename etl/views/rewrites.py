"""Released views rewritten with the same rows: the SQL may change, the rows may not.

A released view never changes its rows or columns. Its SQL may still have to change
without a new version: to read the newest version of a view below it that returns the
same rows, say. Such a rewrite changes the fingerprint, which `etl lint-sql` refuses
unless the rewrite is recorded here, as SQLMesh decides by program, not by a copy of the
file, whether a change breaks its readers (a "non-breaking" change keeps the rows):

    etl lint-sql --same-rows run_utilization_v2     # after editing it; HEAD has it as released

records in sql/rewrites.toml the view, the fingerprint it was released with (`from`), its
new one (`to`), and its SQL as released, normalised as its fingerprint is taken (so that
the lint checks that the stored SQL *is* the released view: sha256 = `from`). The lint
then accepts the new fingerprint, and tests/views/test_rewrites.py runs the stored SQL
beside the view on the test warehouses (the corpus, the demo, the edge cases) and fails
when a row or a column is apart (EXCEPT ALL both ways, duplicates counted, as
bench/same_rows.py does on larger warehouses). A rewrite that changes rows fails that test:
its place is a new version, <name>_v<N+1>.sql, with a CHANGELOG entry.

Each entry allows one step (`from` was the recorded fingerprint, `to` is); the entries of
a view chain from the fingerprint it was released with to the one recorded now, and the
test checks each stored SQL against the view as it is now.
"""
from __future__ import annotations

import datetime
import hashlib
import itertools
import subprocess
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from etl.core.sql_files import SQL_DIR, View, ViewError, discover
from etl.views.fingerprints import Paths, fingerprint, read_recorded, released, write_recorded

if TYPE_CHECKING:
    import duckdb

SQL_PATHS = Paths()  # sql/fingerprints.toml, sql/CHANGELOG.md, sql/rewrites.toml

HEADER = """\
# Released views whose SQL changed without a change of rows (etl/views/rewrites.py). Each
# entry keeps the view's SQL as released, normalised as its fingerprint is taken (its
# sha256 is `from`); tests/views/test_rewrites.py runs it beside the view on the test
# warehouses and fails when a row or a column is apart. Written by
# `etl lint-sql --same-rows VIEW`; never edited by hand (the lint checks every entry).
"""


@dataclass(frozen=True)
class Rewrite:
    view: str
    date: str
    before: str        # the fingerprint it had: sha256 of released_sql normalised
    after: str         # the fingerprint the rewrite gave it
    released_sql: str  # the SELECT as released (normalised, pretty-printed, no comments)


def normalised_sql(view: View) -> str:
    """The view's SELECT as its fingerprint is taken, pretty-printed: what is kept."""
    from sqlglot.optimizer.normalize_identifiers import normalize_identifiers

    tree = normalize_identifiers(view.tree.copy(), dialect="duckdb")
    return str(tree.sql(dialect="duckdb", comments=False, pretty=True))


def sql_fingerprint(sql: str) -> str:
    """The fingerprint of a stored SELECT (etl/views/fingerprints.py's, of SQL text)."""
    import sqlglot
    from sqlglot.optimizer.normalize_identifiers import normalize_identifiers

    tree = normalize_identifiers(sqlglot.parse_one(sql, read="duckdb"), dialect="duckdb")
    return hashlib.sha256(tree.sql(dialect="duckdb", comments=False).encode()).hexdigest()


def read_rewrites(path: Path) -> list[Rewrite]:
    if not path.exists():
        return []
    with open(path, "rb") as fh:
        doc = tomllib.load(fh)
    return [Rewrite(e["view"], e["date"], e["from"], e["to"], e["released_sql"].strip())
            for e in doc.get("rewrite", [])]


def write_rewrites(path: Path, rewrites: list[Rewrite]) -> None:
    parts = [HEADER]
    for r in rewrites:
        if "'''" in r.released_sql:
            raise ViewError(f"{r.view}: its SQL holds ''', which a TOML literal cannot")
        parts.append(f'[[rewrite]]\nview = "{r.view}"\ndate = "{r.date}"\n'
                     f'from = "{r.before}"\nto = "{r.after}"\n'
                     f"released_sql = '''\n{r.released_sql}\n'''\n")
    path.write_text("\n".join(parts), encoding="utf-8")


def check(views: list[View], paths: Paths = SQL_PATHS) -> list[str]:
    """Problems with the recorded rewrites, one line each; empty when every entry holds
    the SQL it claims and each view's entries chain to its recorded fingerprint."""
    rewrites = read_rewrites(paths.rewrites)
    recorded = read_recorded(paths.fingerprints).views
    known = {v.name for v in views}
    problems = []
    for i, r in enumerate(rewrites):
        where = f"{paths.rewrites}: rewrite {i + 1} ({r.view})"
        if r.view not in known:
            problems.append(f"{where}: no such view")
        if sql_fingerprint(r.released_sql) != r.before:
            problems.append(f"{where}: its released_sql is not the SQL whose fingerprint is "
                            f"`from` {r.before[:12]}; the entry was edited")
        later = [s for s in rewrites[i + 1:] if s.view == r.view]
        wanted = later[0].before if later else recorded.get(r.view)
        if r.after != wanted:
            problems.append(f"{where}: `to` {r.after[:12]} is neither the next rewrite's "
                            f"`from` nor the recorded fingerprint ({str(wanted)[:12]})")
    return problems


def record(views: list[View], base: list[View], names: list[str],
           paths: Paths = SQL_PATHS, today: str | None = None) -> list[Rewrite]:
    """Record that each named released view, as `views` render it, returns the rows it
    returns as `base` renders it (the released SQL, e.g. HEAD's): an entry each in
    sql/rewrites.toml, and its new fingerprint in sql/fingerprints.toml. Refused, naming
    the view, when it is not released, unchanged, or `base` does not hold it as recorded."""
    recorded = read_recorded(paths.fingerprints)
    rewrites = read_rewrites(paths.rewrites)
    now, then = {v.name: v for v in views}, {v.name: v for v in base}
    named = released(views, paths.changelog)
    added = []
    for name in names:
        view, old = now.get(name), then.get(name)
        if view is None or name not in named:
            raise ViewError(f"{name}: not a released view (sql/CHANGELOG.md names it once "
                            "released); a view not yet released is simply recorded again")
        if old is None or fingerprint(old) != recorded.views.get(name):
            raise ViewError(f"{name}: the base revision does not hold it as its fingerprint "
                            "was recorded; --base names the revision that does")
        if fingerprint(view) == recorded.views[name]:
            raise ViewError(f"{view.path}: {name} renders as recorded; nothing to record")
        if view.columns != old.columns:
            raise ViewError(f"{view.path}: {name} returns other columns than released "
                            f"({', '.join(old.columns)}); that is a new version")
        added.append(Rewrite(name, today or datetime.date.today().isoformat(),
                             recorded.views[name], fingerprint(view), normalised_sql(old)))
        recorded.views[name] = fingerprint(view)
    write_rewrites(paths.rewrites, rewrites + added)
    write_recorded(paths.fingerprints, recorded)
    return added


def views_at(revision: str, sql_dir: Path = SQL_DIR) -> list[View]:
    """The views as `revision` of the checkout renders them (its sql/views and sql/macros)."""
    root = sql_dir.parent.parent
    archive = subprocess.run(["git", "archive", revision, "sql"], cwd=root,
                             capture_output=True)
    if archive.returncode != 0:
        raise ViewError(f"{root}: git archive {revision} sql failed: "
                        f"{archive.stderr.decode(errors='replace').strip()}")
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["tar", "-x", "-C", tmp], input=archive.stdout, check=True)
        return discover(Path(tmp) / "sql" / "views")


@dataclass(frozen=True)
class Apart:
    """Two queries' results side by side: row counts, rows only in each (EXCEPT ALL, so
    duplicates count), and their columns (name, type)."""
    rows_before: int
    rows_after: int
    only_before: int
    only_after: int
    columns_before: list[tuple[str, str]]
    columns_after: list[tuple[str, str]]

    @property
    def same(self) -> bool:
        return (self.columns_before == self.columns_after and self.only_before == 0
                and self.only_after == 0)


def rows_apart(con: duckdb.DuckDBPyConnection, before: str, after: str,
               digits: int | None = None) -> Apart:
    """How the rows of the SELECT `before` and of `after` differ on `con`.

    Floating-point sums depend on the order of their terms, which DuckDB's threads vary:
    the queries run on one thread, so that each is evaluated the same way each time. With
    `digits`, DOUBLE and FLOAT columns are compared to that many significant digits (for
    two computations that need not add in the same order); without, bit for bit.
    """
    [(threads,)] = con.execute("SELECT current_setting('threads')").fetchall()
    con.execute("SET threads = 1")
    try:
        return _rows_apart(con, before, after, digits)
    finally:
        con.execute(f"SET threads = {int(threads)}")


_TEMP_NAMES = itertools.count()


def _rows_apart(con: duckdb.DuckDBPyConnection, before: str, after: str,
                digits: int | None) -> Apart:
    def one(sql: str) -> int:
        row = con.execute(sql).fetchone()
        assert row is not None
        return int(row[0])

    def columns(sql: str) -> list[tuple[str, str]]:
        return [(name, str(kind)) for name, kind, *_ in con.execute(f"DESCRIBE ({sql})")
                .fetchall()]

    def compared(sql: str, kinds: list[tuple[str, str]]) -> str:
        if digits is None:
            return f"({sql})"
        quoted = ['"' + name.replace('"', '""') + '"' for name, _ in kinds]
        projection = ", ".join(f"format('{{:.{digits}g}}', {q}) AS {q}"
                               if kind in ("DOUBLE", "FLOAT") else q
                               for q, (_, kind) in zip(quoted, kinds))
        return f"(SELECT {projection} FROM ({sql}))"

    kinds_before, kinds_after = columns(before), columns(after)
    # each query is run once, into a temporary table the four counts read: a view over
    # other views costs its whole tree at every read
    a, b = (f"_rows_apart_{side}_{next(_TEMP_NAMES)}" for side in ("before", "after"))
    con.execute(f"CREATE TEMP TABLE {a} AS {compared(before, kinds_before)}")
    try:
        con.execute(f"CREATE TEMP TABLE {b} AS {compared(after, kinds_after)}")
        try:
            return Apart(one(f"SELECT count(*) FROM {a}"), one(f"SELECT count(*) FROM {b}"),
                         one(f"SELECT count(*) FROM (FROM {a} EXCEPT ALL FROM {b})"),
                         one(f"SELECT count(*) FROM (FROM {b} EXCEPT ALL FROM {a})"),
                         kinds_before, kinds_after)
        finally:
            con.execute(f"DROP TABLE {b}")
    finally:
        con.execute(f"DROP TABLE {a}")
