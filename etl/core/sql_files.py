"""The SQL of sql/views/ as data: found, rendered, parsed and ordered; no database.

A view file `sql/views/<area>/<name>_v<N>.sql` holds one documented SELECT (jinja for
structure only). A piece of SQL that several views share is a jinja macro of sql/macros/,
one file per idea, which a view imports by the file's name
(`{% from 'intervals.sql' import merge_overlapping %}`): versions of a view that share
their logic render it from one copy, and a released version keeps its fingerprint as long
as it renders the same SQL (etl/views/fingerprints.py). Every stage that needs a view's
rule reads it from here — the views layer to create it in DuckDB or Spark, the match stage
to run run_summary's selection over one run's staged tables — so a rule is written once,
in SQL, and no lower stage imports a higher one.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from etl.core.errors import EtlError
from etl.core.gpu_peaks import RELATION_DOCS
from etl.core.resources import data_dir
from etl.core.schema import ALL_TABLES

if TYPE_CHECKING:
    import jinja2

SQL_DIR = data_dir("sql") / "views"
MACRO_DIR = SQL_DIR.parent / "macros"
_FILE_RE = re.compile(r"^(?P<name>_?[a-z][a-z0-9_]*)_v(?P<version>\d+)\.sql$")
_COLUMN_DOC_RE = re.compile(r"^--\s{1,4}(?P<col>[a-z_][a-z0-9_]*)\s*:\s*(?P<doc>\S.*)$")


class ViewError(EtlError):
    """A view file that breaks the house rules; the message names the file."""


@dataclass(frozen=True)
class View:
    name: str          # versioned name, e.g. gpu_utilization_v1
    stable: str        # gpu_utilization
    version: int
    path: Path
    select: str        # rendered SELECT text
    columns: tuple[str, ...]
    column_docs: dict[str, str]
    depends_on: frozenset[str]
    doc: str = ""      # the leading comment: what the view is, its grain, its sources
    # the parsed sqlglot Query, shared by every load of the same text: copy before changing
    tree: Any = field(default=None, compare=False, repr=False)
    macros: Path = MACRO_DIR  # the folder its `{% from '...' import ... %}` read


def discover(sql_dir: Path = SQL_DIR) -> list[View]:
    """The views of `sql_dir` (sql/views/), rendered with the macros beside it
    (sql/macros/), in the order they can be created."""
    # `<name>_v<N>.<dialect>.sql` is a view's form in another dialect (etl/views/dialects.py)
    macros = sql_dir.parent / "macros"
    views = [load_view(p, macros) for p in sorted(sql_dir.rglob("*.sql")) if "." not in p.stem]
    return order_views(views)


@lru_cache(maxsize=8)
def _environment(macros: Path) -> jinja2.Environment:
    import jinja2

    # StrictUndefined: a misspelt variable or macro argument fails instead of rendering ''
    return jinja2.Environment(loader=jinja2.FileSystemLoader(macros),
                              undefined=jinja2.StrictUndefined)


def render(path: Path, macros: Path = MACRO_DIR) -> str:
    """A SQL file rendered by jinja, its imports read from `macros`."""
    return render_text(path.read_text(encoding="utf-8"), macros, str(path))


def render_text(text: str, macros: Path = MACRO_DIR, where: str = "<string>") -> str:
    """SQL text rendered by jinja, its imports read from `macros`; a ViewError names
    `where` (and the macro file, when the fault is there)."""
    import jinja2

    try:
        return _environment(macros).from_string(text).render()
    except jinja2.TemplateNotFound as exc:
        raise ViewError(f"{where}: imports {exc.name!r}, which is not in {macros}") from None
    except jinja2.TemplateSyntaxError as exc:
        place = f"{exc.filename}, line {exc.lineno}" if exc.filename else f"line {exc.lineno}"
        raise ViewError(f"{where}: jinja syntax error ({place}): {exc.message}") from None
    except (jinja2.TemplateError, TypeError) as exc:  # an undefined name, a wrong call
        raise ViewError(f"{where}: does not render: {exc}") from None


def load_view(path: Path, macros: Path = MACRO_DIR) -> View:
    match = _FILE_RE.match(path.name)
    if not match:
        raise ViewError(f"{path}: file name must be <name>_v<N>.sql")
    text = render(path, macros)
    view = _parsed_view(path, macros, text)
    # the docs copied (a caller may change its own); the tree is shared: it is never
    # changed in place (a caller copies it first, as fingerprints.py and dialects.py do)
    return View(view.name, view.stable, view.version, path, text, view.columns,
                dict(view.column_docs), view.depends_on, view.doc, view.tree, macros)


@lru_cache(maxsize=1024)
def _parsed_view(path: Path, macros: Path, text: str) -> View:
    """The view of `path` rendered as `text`, parsed: parsing costs far more than rendering,
    and one process (a test session, a notebook) discovers the same views again and again;
    the rendered text is in the key, so an edited view or macro is parsed anew."""
    import sqlglot
    from sqlglot import exp

    match = _FILE_RE.match(path.name)
    assert match is not None
    try:
        tree = sqlglot.parse_one(text, read="duckdb")
    except sqlglot.errors.ParseError as exc:
        raise ViewError(f"{path}: does not parse: {exc}") from None
    if not isinstance(tree, exp.Query):
        raise ViewError(f"{path}: must be a single SELECT (no DDL or DML)")
    columns = tuple(_projection_names(path, tree))
    return View(f"{match['name']}_v{match['version']}", match["name"], int(match["version"]),
                path, text, columns, _column_docs(text), frozenset(_dependencies(tree)),
                _leading_doc(text), tree, macros)


def _projection_names(path: Path, tree: object) -> list[str]:
    from sqlglot import exp

    assert isinstance(tree, exp.Query)
    names = []
    for projection in tree.selects:
        if isinstance(projection, exp.Star) or (isinstance(projection, exp.Column)
                                                and isinstance(projection.this, exp.Star)):
            raise ViewError(f"{path}: SELECT * in the final projection; name the columns")
        names.append(projection.alias_or_name)
    return names


def _dependencies(tree: object) -> set[str]:
    from sqlglot import exp

    assert isinstance(tree, exp.Expression)
    # DuckDB matches names case-insensitively, quoted or not
    ctes = {cte.alias.lower() for cte in tree.find_all(exp.CTE)}
    return {t.name.lower() for t in tree.find_all(exp.Table) if t.name
            and t.name.lower() not in ctes and not isinstance(t.this, exp.Anonymous)}


def _column_docs(text: str) -> dict[str, str]:
    """Column docs: the `-- name: description` lines after the last line of SQL."""
    lines = text.rstrip().splitlines()
    docs: dict[str, str] = {}
    for line in reversed(lines):
        stripped = line.strip()
        if not stripped.startswith("--"):
            break
        if m := _COLUMN_DOC_RE.match(stripped):
            docs[m["col"]] = m["doc"]
    return docs


def _leading_doc(text: str) -> str:
    """The comment lines before the first line of SQL, as one paragraph."""
    lines = []
    for line in text.lstrip().splitlines():
        if not line.startswith("--"):
            break
        lines.append(line[2:].strip())
    return " ".join(line for line in lines if line)


def order_views(views: list[View]) -> list[View]:
    """Topological order by parsed dependencies; unknown tables and cycles fail."""
    by_name = {v.name: v for v in views}
    stable = stable_names(views)
    known = set(ALL_TABLES) | set(by_name) | set(stable) | set(RELATION_DOCS)
    ordered: list[View] = []
    state: dict[str, str] = {}

    def visit(view: View, chain: tuple[str, ...]) -> None:
        if state.get(view.name) == "done":
            return
        if state.get(view.name) == "visiting":
            raise ViewError(f"{view.path}: dependency cycle {' -> '.join(chain + (view.name,))}")
        state[view.name] = "visiting"
        for dep in sorted(view.depends_on):
            if dep not in known:
                raise ViewError(f"{view.path}: reads unknown table or view {dep!r}")
            target = by_name.get(dep) or by_name.get(stable.get(dep, ""))
            if target is not None:
                visit(target, chain + (view.name,))
        state[view.name] = "done"
        ordered.append(view)

    for view in views:
        visit(view, ())
    return ordered


def stable_names(views: list[View]) -> dict[str, str]:
    latest: dict[str, View] = {}
    for v in views:
        if v.stable not in latest or v.version > latest[v.stable].version:
            latest[v.stable] = v
    return {stable: v.name for stable, v in latest.items()}


def needed_by(name: str, views: list[View]) -> list[View]:
    """The view `name` (a stable name means its newest version) and every view it reads,
    in the order they can be created: what an engine needs to answer that one view."""
    by_name = {v.name: v for v in views}
    stable = stable_names(views)
    wanted: set[str] = set()
    pending = [stable.get(name, name)]
    while pending:
        current = pending.pop()
        if current in wanted or current not in by_name:
            continue  # a table, or a catalog relation
        wanted.add(current)
        pending += [stable.get(dep, dep) for dep in by_name[current].depends_on]
    return [v for v in views if v.name in wanted]  # discover() returns creation order
