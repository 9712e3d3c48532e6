"""The views in other SQL dialects: one definition (sql/views/, DuckDB SQL), transpiled.

Each view's SELECT is parsed as DuckDB and written in the target dialect by sqlglot with
`unsupported_level=RAISE`: a construct sqlglot cannot carry over fails, naming the file.
sqlglot may still emit SQL the target rejects without a warning, so a dialect counts as
supported only when a test runs its output on that engine (SUPPORTED; tests/spark/).

Where a view needs a form of its own in a dialect, it is a file beside the view,
`<name>_v<N>.<dialect>.sql` (a SELECT with the same columns), which discovery of the
DuckDB views ignores (their names end in `_v<N>.sql`). Overrides are rare: the neutral
definition is preferred.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from etl.core.sql_files import ViewError, render

if TYPE_CHECKING:
    from etl.core.sql_files import View

DIALECTS = ("duckdb", "spark", "trino")
# dialects whose transpiled views a test executes on the engine itself
SUPPORTED = ("duckdb", "spark")


def override_path(view: View, dialect: str) -> Path:
    return view.path.with_name(f"{view.name}.{dialect}.sql")


def view_select(view: View, dialect: str) -> str:
    """The view's SELECT in `dialect`: its override when there is one, else transpiled."""
    import sqlglot
    from sqlglot.errors import ErrorLevel, ParseError, UnsupportedError

    if dialect not in DIALECTS:
        raise ViewError(f"unknown dialect {dialect!r}; choose one of {', '.join(DIALECTS)}")
    path, tree = view.path, view.tree
    override = override_path(view, dialect)
    if override.exists():
        path = override
        text = render(override, view.macros)  # the view's own macros
        try:
            tree = sqlglot.parse_one(text, read="duckdb")
        except ParseError as exc:
            raise ViewError(f"{path}: does not parse: {exc}") from None
    tree = rewrite(tree, dialect, path)
    try:
        return str(tree.sql(dialect=dialect, unsupported_level=ErrorLevel.RAISE, pretty=True))
    except UnsupportedError as exc:
        raise ViewError(f"{path}: cannot be written in {dialect}: {exc}; add "
                        f"{override.name} beside it") from None


def view_statements(views: list[View], dialect: str) -> list[tuple[str, str]]:
    """(name, SELECT) of every view and stable name, in dependency order."""
    from etl.core.sql_files import stable_names

    stable = stable_names(views)
    statements = []
    for view in views:
        statements.append((view.name, view_select(view, dialect)))
        if stable[view.stable] == view.name:
            columns = ", ".join(_quote(c, dialect) for c in view.columns)
            statements.append((view.stable, f"SELECT {columns} FROM {view.name}"))
    return statements


def _quote(name: str, dialect: str) -> str:
    return f"`{name}`" if dialect == "spark" else f'"{name}"'


def rewrite(tree: Any, dialect: str, path: Path) -> Any:
    """DuckDB functions that sqlglot writes in a form the target rejects, rewritten in the
    tree (never in text). A new entry here must come with a test that runs the output.

    | DuckDB               | spark            | trino                             |
    |----------------------|------------------|-----------------------------------|
    | quantile_disc(x, q)  | percentile_disc(q) WITHIN GROUP (ORDER BY x) | as spark  |
    | quantile_cont(x, q)  | percentile(x, q) | refused: approx_percentile is not |
    |                      |                  | exact (sqlglot writes             |
    |                      |                  | PERCENTILE_CONT(x, q), which      |
    |                      |                  | Trino does not have)              |
    """
    from sqlglot import exp

    def fix(node: exp.Expression) -> exp.Expression:
        # quantile_disc(x, q): Spark's percentile_disc takes the SQL standard's form only
        if isinstance(node, exp.PercentileDisc) and node.expression is not None \
                and not isinstance(node.parent, exp.WithinGroup) and dialect == "spark":
            # Anonymous: sqlglot's Spark writer turns a PercentileDisc into the approximate
            # PERCENTILE_APPROX
            return exp.WithinGroup(
                this=exp.Anonymous(this="percentile_disc", expressions=[node.expression.copy()]),
                expression=exp.Order(expressions=[exp.Ordered(this=node.this.copy())]))
        # DuckDB's two-argument form; the WITHIN GROUP form carries over as it is
        if isinstance(node, exp.PercentileCont) and node.expression is not None \
                and not isinstance(node.parent, exp.WithinGroup):
            if dialect == "spark":
                return exp.Anonymous(this="percentile", expressions=[node.this.copy(),
                                                                     node.expression.copy()])
            if dialect == "trino":
                raise ViewError(f"{path}: quantile_cont has no exact equivalent in trino "
                                "(approx_percentile is approximate); add "
                                f"{path.name.removesuffix('.sql')}.trino.sql beside it")
        return node

    return tree.copy().transform(fix)
