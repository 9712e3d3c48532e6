"""The house rules of a view file, checked before any view is created.

Each rule is one function returning problems, one line each naming the file: a leading
comment that says what the view is and where its definitions come from, every column
documented, pinned `_vN` reads, guarded divisions, one naming scheme for ratios.
"""
from __future__ import annotations

import re
from typing import Any

from etl.core.sql_files import View, ViewError, discover, stable_names


def checked_views() -> list[View]:
    """The views of sql/views/, in dependency order; a ViewError when one breaks a rule."""
    views = discover()
    problems = lint(views)
    if problems:
        raise ViewError(problems[0] + (f" (and {len(problems) - 1} more)" if len(problems) > 1
                                       else ""))
    return views


def lint(views: list[View]) -> list[str]:
    """Problems, one line each naming the file; empty when all views keep the house rules."""
    problems = []
    stable = stable_names(views)
    for view in views:
        if not view.doc:
            problems.append(f"{view.path}: no leading comment stating what the view is "
                            "and its grain")
        elif "[paper" not in view.doc and "[project]" not in view.doc:
            problems.append(f"{view.path}: the leading comment does not say where the "
                            "definitions come from: [paper §/Table/Fig.] or [project]")
        for column in view.columns:
            if column not in view.column_docs:
                problems.append(f"{view.path}: column {column} is not documented in the "
                                "trailing comment")
        for column in view.column_docs:
            if column not in view.columns:
                problems.append(f"{view.path}: documents {column}, which the view does not return")
        problems += _moving_references(view, stable)
        problems += _unguarded_divisions(view)
        if stable[view.stable] == view.name:  # older versions keep the names they had
            problems += _ratio_names(view)
    return problems


_RATIO_WORDS = ("util", "share", "ratio")
_ANNOTATION = re.compile(r"_(source|reason)$")  # text about a ratio column: x_util_source


def _ratio_names(view: View) -> list[str]:
    """One naming scheme for ratios: a level ends in _util, a fraction of a whole in
    _share, a comparison in _ratio, and a name holds one of the three, last."""
    problems = []
    for column in view.columns:
        words = [w for w in _ANNOTATION.sub("", column).split("_") if w in _RATIO_WORDS]
        if len(words) > 1 or (words and not _ANNOTATION.sub("", column).endswith(words[0])):
            problems.append(f"{view.path}: column {column}: a ratio's name ends in _util (a "
                            "level), _share (a fraction of a whole) or _ratio (a comparison), "
                            "once and last (p10_issue_slot_util, not issue_slot_util_p10)")
    return problems


def _moving_references(view: View, stable: dict[str, str]) -> list[str]:
    """A view reads pinned `_vN` names: publishing x_v2 must not change what y_v1 returns."""
    return [f"{view.path}: reads {dep}, the name that follows the newest version; read "
            f"{stable[dep]} instead" for dep in sorted(view.depends_on) if dep in stable]


def _unguarded_divisions(view: View) -> list[str]:
    """Divisions whose denominator may be 0: DuckDB gives NaN for 0.0/0.0 and ±inf for
    x/0.0, and a view returns NULL where a value cannot be computed."""
    from sqlglot import exp

    if view.tree is None:
        return []
    return [f"{view.path}: the division by {div.expression.sql('duckdb')} is unguarded; "
            "write x / nullif(d, 0) (DuckDB's 0.0/0.0 is NaN) or divide inside CASE WHEN"
            for div in view.tree.find_all(exp.Div) if not _guarded(div)]


def _guarded(div: Any) -> bool:
    """The denominator is nullif(d, 0) or a non-zero number, or the division sits in the
    THEN of a CASE WHEN (whose condition is taken to exclude a zero denominator)."""
    from sqlglot import exp

    den = div.expression.unnest()
    if isinstance(den, exp.Nullif):
        return True
    if isinstance(den, exp.Literal) and den.is_number:
        return float(den.this) != 0
    node = div
    while node.parent is not None:
        if isinstance(node.parent, exp.If) and node.arg_key == "true":
            return True
        node = node.parent
    return False
