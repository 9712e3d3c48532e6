"""Released views keep their definition: their fingerprints live in sql/fingerprints.toml.

A view's fingerprint is the sha256 of its normalised sqlglot AST: the rendered SELECT parsed
as DuckDB SQL, unquoted identifiers folded to lower case, printed back without comments.
Formatting, jinja refactors that render the same SQL, and documentation edits are not
changes; anything that can change the rows is.

A view is released once sql/CHANGELOG.md names it (`gpu_utilization_v1`). `etl lint-sql`
fails when
  - a view file has no recorded fingerprint (`etl lint-sql --record` records it);
  - a released view's fingerprint differs: the change belongs in <name>_v<N+1>.sql beside
    it, with a CHANGELOG entry (a view not yet released is simply recorded again);
  - a recorded view's file is gone;
  - a view is not named in sql/CHANGELOG.md.
A released view whose SQL changed with the same rows (it reads the newest version of a view
below it, say) is recorded as a rewrite instead (etl/views/rewrites.py: `etl lint-sql
--same-rows VIEW`, and a test that runs the released SQL beside it).
The fingerprints depend on how sqlglot prints SQL, so the file records sqlglot's version;
after an upgrade of sqlglot alone, `etl lint-sql --record --rebase` takes them again.
"""
from __future__ import annotations

import hashlib
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from etl.core.sql_files import SQL_DIR, View, ViewError

FINGERPRINTS = SQL_DIR.parent / "fingerprints.toml"
CHANGELOG = SQL_DIR.parent / "CHANGELOG.md"
REWRITES = SQL_DIR.parent / "rewrites.toml"  # released views rewritten with the same rows
HEADER = """\
# Fingerprints of the views in sql/views/: sha256 of each view's normalised sqlglot AST
# (etl/views/fingerprints.py). Written by `etl lint-sql --record`; `etl lint-sql` fails when
# a released view (one that sql/CHANGELOG.md names) no longer matches its line here: a
# released view changes only by a new <name>_v<N+1>.sql beside it, with a CHANGELOG entry.
"""


@dataclass
class Recorded:
    sqlglot: str | None = None
    views: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Paths:
    fingerprints: Path = FINGERPRINTS
    changelog: Path = CHANGELOG
    rewrites: Path = REWRITES


def fingerprint(view: View) -> str:
    from sqlglot.optimizer.normalize_identifiers import normalize_identifiers

    tree = normalize_identifiers(view.tree.copy(), dialect="duckdb")
    return hashlib.sha256(tree.sql(dialect="duckdb", comments=False).encode()).hexdigest()


def sqlglot_version() -> str:
    import sqlglot

    return str(sqlglot.__version__)


def read_recorded(path: Path) -> Recorded:
    if not path.exists():
        return Recorded()
    with open(path, "rb") as fh:
        doc = tomllib.load(fh)
    return Recorded(doc.get("sqlglot"), dict(doc.get("views", {})))


def write_recorded(path: Path, recorded: Recorded) -> None:
    lines = [HEADER, f'sqlglot = "{recorded.sqlglot}"', "", "[views]"]
    lines += [f'{name} = "{digest}"' for name, digest in sorted(recorded.views.items())]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def released(views: list[View], changelog: Path) -> set[str]:
    """The views that sql/CHANGELOG.md names (as a whole word: gpu_utilization_v1)."""
    text = changelog.read_text(encoding="utf-8") if changelog.exists() else ""
    return {v.name for v in views
            if re.search(rf"(?<![\w]){re.escape(v.name)}(?![\w])", text)}


def check(views: list[View], paths: Paths = Paths()) -> list[str]:
    """Problems, one line each naming the file; empty when every view matches its record."""
    recorded = read_recorded(paths.fingerprints)
    named = released(views, paths.changelog)
    problems = []
    for view in views:
        problems += _check_one(view, recorded, view.name in named, paths)
    problems += [f"{paths.fingerprints}: {name} is recorded but its file is gone; a released "
                 "view is kept (restore it), or its removal is a CHANGELOG entry and this "
                 "line goes" for name in sorted(set(recorded.views) - {v.name for v in views})]
    return problems


def _check_one(view: View, recorded: Recorded, is_released: bool, paths: Paths) -> list[str]:
    problems = []
    wanted = recorded.views.get(view.name)
    if wanted is None:
        problems.append(f"{view.path}: {view.name} has no recorded fingerprint; run "
                        "`etl lint-sql --record` once the view is final")
    elif wanted != fingerprint(view):
        problems.append(_changed(view, recorded, is_released))
    if not is_released:
        problems.append(f"{view.path}: {paths.changelog} does not name {view.name}; add an "
                        "entry (date, symptom, context, migration)")
    return problems


def _changed(view: View, recorded: Recorded, is_released: bool) -> str:
    if is_released:
        line = (f"{view.path}: {view.name} is released and its SQL changed; put the change in "
                f"{view.stable}_v{view.version + 1}.sql (the stable name {view.stable} follows "
                "the newest) with a sql/CHANGELOG.md entry, and undo the edit here (or in "
                f"the macros of {view.macros} it imports: it must render as released); "
                f"if it returns the same rows, record the rewrite: etl lint-sql --same-rows "
                f"{view.name}")
    else:
        line = (f"{view.path}: {view.name} changed since its fingerprint was recorded; run "
                "`etl lint-sql --record`")
    if recorded.sqlglot != sqlglot_version():
        line += (f" (the fingerprints were taken with sqlglot {recorded.sqlglot}, this is "
                 f"{sqlglot_version()}: if sql/views/ is unchanged, take them again with "
                 "`etl lint-sql --record --rebase`)")
    return line


def record(views: list[View], paths: Paths = Paths(), rebase: bool = False) -> list[str]:
    """Record the fingerprints of new views and of changed views not yet released (all of
    them with `rebase`, allowed only under another sqlglot than the recorded one); the
    names recorded. A released view that changed is left for the lint to report."""
    recorded = read_recorded(paths.fingerprints)
    if rebase and recorded.sqlglot == sqlglot_version():
        raise ViewError(f"{paths.fingerprints}: taken with this sqlglot ({recorded.sqlglot}) "
                         "already; --rebase is for an upgrade of sqlglot alone")
    named = set() if rebase else released(views, paths.changelog)
    changed = []
    for view in views:
        digest, known = fingerprint(view), recorded.views.get(view.name)
        if known == digest or (known is not None and view.name in named):
            continue  # unchanged, or released and changed: the lint says what to do
        recorded.views[view.name] = digest
        changed.append(view.name)
    if changed or rebase:
        # a new view's fingerprint is taken with this sqlglot; the version changes on rebase
        recorded.sqlglot = sqlglot_version() if rebase else recorded.sqlglot or sqlglot_version()
        write_recorded(paths.fingerprints, recorded)
    return changed
