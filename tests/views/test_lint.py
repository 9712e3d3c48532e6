"""The SQL house rules are enforced: documented columns, one SELECT, known dependencies."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from etl.core.sql_files import ViewError, discover, load_view, order_views
from etl.views.catalog import lint

GOOD = """-- demo: a view [project]. Grain: one row per run.
SELECT run_id, count(*) AS n FROM kernels GROUP BY run_id
-- run_id: run
-- n: kernels
"""


def test_shipped_views_pass_lint() -> None:
    views = discover()
    assert lint(views) == []
    assert {"gpu_utilization_v1", "run_summary_v1", "kernel_summary_v1", "op_time_v1"} <= {
        v.name for v in views}


def test_undocumented_column_fails(tmp_path: Path) -> None:
    path = tmp_path / "demo_v1.sql"
    path.write_text(GOOD.replace("-- n: kernels\n", ""))
    problems = lint([load_view(path)])
    assert problems == [f"{path}: column n is not documented in the trailing comment"]


def test_missing_grain_comment_fails(tmp_path: Path) -> None:
    path = tmp_path / "demo_v1.sql"
    path.write_text(GOOD.split("\n", 1)[1])
    assert "no leading comment" in lint([load_view(path)])[0]


def test_leading_comment_says_where_definitions_come_from(tmp_path: Path) -> None:
    path = tmp_path / "demo_v1.sql"
    path.write_text(GOOD.replace(" [project]", ""))
    assert lint([load_view(path)]) == [f"{path}: the leading comment does not say where the "
                                       "definitions come from: [paper §/Table/Fig.] or [project]"]
    path.write_text(GOOD.replace("[project]", "[paper Fig. 5]"))
    assert lint([load_view(path)]) == []


@pytest.mark.parametrize("body,fragment", [
    ("-- x\nSELECT * FROM kernels\n", "SELECT *"),
    ("-- x\nDROP VIEW runs\n", "single SELECT"),
    ("-- x\nSELECT a FROM nowhere\n-- a: b\n", "unknown table"),
])
def test_rules(tmp_path: Path, body: str, fragment: str) -> None:
    path = tmp_path / "bad_v1.sql"
    path.write_text(body)
    with pytest.raises(ViewError, match=fragment):
        order_views([load_view(path)])


def write_views(folder: Path, files: dict[str, str]) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    for name, body in files.items():
        (folder / name).write_text(body)
    return [folder / name for name in files]


def test_a_view_reads_pinned_versions_not_the_moving_name(tmp_path: Path) -> None:
    base = GOOD.replace("demo", "base")
    reader = ("-- reader: a view [project]. Grain: one row per run.\n"
              "SELECT run_id FROM {}\n-- run_id: run\n")
    write_views(tmp_path, {"base_v1.sql": base, "base_v2.sql": base,
                           "pinned_v1.sql": reader.format("base_v1"),
                           "moving_v1.sql": reader.format("base")})
    problems = lint(discover(tmp_path))
    assert problems == [f"{tmp_path / 'moving_v1.sql'}: reads base, the name that follows the "
                        "newest version; read base_v2 instead"]


@pytest.mark.parametrize("expression,guarded", [
    ("sum(n) / count(*)", False),
    ("sum(n) / (count(*))", False),
    ("sum(n) / nullif(count(*), 0)", True),
    ("sum(n) / (nullif(count(*), 0))", True),
    ("sum(n) * 1e9 / 2", True),
    ("sum(n) / 0", False),
    ("CASE WHEN count(*) > 0 THEN sum(n) / count(*) END", True),
    ("CASE WHEN sum(n) / count(*) > 1 THEN 1 END", False),
])
def test_every_division_guards_its_denominator(tmp_path: Path, expression: str,
                                               guarded: bool) -> None:
    [path] = write_views(tmp_path, {"demo_v1.sql": (
        f"-- demo: a view [project]. Grain: one row per run.\nSELECT run_id, {expression} AS x "
        "FROM kernels GROUP BY run_id\n-- run_id: run\n-- x: a ratio\n")})
    problems = lint([load_view(path)])
    assert (problems == []) == guarded, problems
    assert guarded or "unguarded; write x / nullif(d, 0)" in problems[0]


def test_dependencies_come_first() -> None:
    names = [v.name for v in discover()]
    assert names.index("_busy_intervals_v1") < names.index("gpu_utilization_v1")
    assert names.index("gpu_utilization_v1") < names.index("run_summary_v1")


# make check runs the same two (its lint: ruff check etl tests bench, mypy) before its tests;
# make test, which has no lint step, runs them here
@pytest.mark.slow
def test_code_passes_ruff_and_mypy() -> None:
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    bin_dir = Path(sys.executable).parent
    for cmd in ([str(bin_dir / "ruff"), "check", "etl", "tests"], [str(bin_dir / "mypy")]):
        result = subprocess.run(cmd, cwd=root, capture_output=True, text=True, check=False)
        assert result.returncode == 0, result.stdout[-2000:]


# ---- fingerprints: a released view keeps its definition ----------------------------------

BASE = """-- base: a view [project]. Grain: one row per run.
SELECT run_id, count(*) AS n FROM kernels GROUP BY run_id
-- run_id: run
-- n: kernels
"""


def contract(tmp_path: Path, changelog: str = "- `base_v1` released\n") -> Any:
    from etl.views.fingerprints import Paths

    write_views(tmp_path / "views", {"base_v1.sql": BASE})
    (tmp_path / "CHANGELOG.md").write_text(changelog)
    return Paths(tmp_path / "fingerprints.toml", tmp_path / "CHANGELOG.md",
                 tmp_path / "rewrites.toml")


def test_shipped_views_match_their_fingerprints() -> None:
    from click.testing import CliRunner

    from etl.cli import main

    result = CliRunner().invoke(main, ["lint-sql"])
    assert result.exit_code == 0, result.output
    assert f"{len(discover())} views keep the house rules" in result.output


def test_record_then_check(tmp_path: Path) -> None:
    from etl.views.fingerprints import check, record

    paths = contract(tmp_path)
    [view] = discover(tmp_path / "views")
    assert check([view], paths) == [f"{view.path}: base_v1 has no recorded fingerprint; run "
                                    "`etl lint-sql --record` once the view is final"]
    assert record([view], paths) == ["base_v1"]
    assert check([view], paths) == [] and record([view], paths) == []


@pytest.mark.parametrize("edit", [
    lambda sql: sql.replace("count(*) AS n", "COUNT( * )   AS n").replace(" GROUP", "\nGROUP"),
    lambda sql: sql.replace("FROM kernels", "FROM KERNELS -- kernels of the run\n"),
    lambda sql: sql.replace("-- n: kernels", "-- n: kernels of the run, any kind"),
])
def test_formatting_and_comments_are_not_changes(tmp_path: Path, edit: Any) -> None:
    from etl.views.fingerprints import check, record

    paths = contract(tmp_path)
    record(discover(tmp_path / "views"), paths)
    path = tmp_path / "views" / "base_v1.sql"
    path.write_text(edit(BASE))
    assert check(discover(tmp_path / "views"), paths) == []


def test_a_released_view_that_changes_fails_until_it_is_a_new_version(tmp_path: Path) -> None:
    from etl.views.fingerprints import check, record

    paths = contract(tmp_path)
    record(discover(tmp_path / "views"), paths)
    changed = BASE.replace("count(*) AS n", "count(*) - 1 AS n")
    (tmp_path / "views" / "base_v1.sql").write_text(changed)
    views = discover(tmp_path / "views")
    assert record(views, paths) == []  # --record does not bless a released view's change
    [problem] = check(views, paths)
    assert "base_v1 is released and its SQL changed; put the change in base_v2.sql" in problem
    # the way out: v1 as it was, the change in v2, named in the CHANGELOG, recorded
    (tmp_path / "views" / "base_v1.sql").write_text(BASE)
    (tmp_path / "views" / "base_v2.sql").write_text(changed)
    views = discover(tmp_path / "views")
    assert record(views, paths) == ["base_v2"]
    assert check(views, paths) == [f"{tmp_path / 'views' / 'base_v2.sql'}: {paths.changelog} "
                                   "does not name base_v2; add an entry (date, symptom, "
                                   "context, migration)"]
    with open(paths.changelog, "a") as fh:
        fh.write("- `base_v2`: n counts one less\n")
    assert check(views, paths) == []


def test_a_view_not_yet_released_is_recorded_again(tmp_path: Path) -> None:
    from etl.views.fingerprints import check, record

    paths = contract(tmp_path, changelog="nothing yet\n")
    record(discover(tmp_path / "views"), paths)
    (tmp_path / "views" / "base_v1.sql").write_text(BASE.replace("count(*)", "count(run_id)"))
    views = discover(tmp_path / "views")
    assert "changed since its fingerprint was recorded" in check(views, paths)[0]
    assert record(views, paths) == ["base_v1"]
    assert [p for p in check(views, paths) if "fingerprint" in p] == []


def test_a_released_view_may_not_vanish(tmp_path: Path) -> None:
    from etl.views.fingerprints import check, record

    paths = contract(tmp_path)
    record(discover(tmp_path / "views"), paths)
    (tmp_path / "views" / "base_v1.sql").unlink()
    assert check([], paths) == [f"{paths.fingerprints}: base_v1 is recorded but its file is "
                                "gone; a released view is kept (restore it), or its removal "
                                "is a CHANGELOG entry and this line goes"]


def test_rebase_only_under_another_sqlglot(tmp_path: Path) -> None:
    from etl.views.fingerprints import check, read_recorded, record, write_recorded

    paths = contract(tmp_path)
    views = discover(tmp_path / "views")
    record(views, paths)
    with pytest.raises(ViewError, match="--rebase is for an upgrade of sqlglot alone"):
        record(views, paths, rebase=True)
    old = read_recorded(paths.fingerprints)
    old.sqlglot, old.views["base_v1"] = "0.1", "0" * 64  # as another sqlglot printed it
    write_recorded(paths.fingerprints, old)
    assert "take them again with `etl lint-sql --record --rebase`" in check(views, paths)[0]
    assert record(views, paths, rebase=True) == ["base_v1"]
    assert check(views, paths) == []


@pytest.mark.parametrize("column,good", [
    ("gpu_util", True), ("matched_time_share", True), ("throughput_vs_best_ratio", True),
    ("p10_issue_slot_util", True), ("issue_slot_util_source", True), ("busy_ns", True),
    ("busy_share_ratio", False), ("issue_slot_util_p10", False), ("util_share", False),
])
def test_ratio_columns_follow_one_naming_scheme(tmp_path: Path, column: str, good: bool) -> None:
    body = GOOD.replace("AS n", f"AS {column}").replace("-- n:", f"-- {column}:")
    write_views(tmp_path, {"demo_v1.sql": body.replace("count(*)", "0.5")})
    problems = lint(discover(tmp_path))
    assert (problems == []) == good, problems
    # a superseded version keeps the names it was released with
    write_views(tmp_path, {"demo_v2.sql": GOOD})
    assert lint(discover(tmp_path)) == []


# ---- macros: shared pieces of SQL in sql/macros/ -------------------------------------------

MACRO = """{% macro kernel_count(table, alias='n') -%}
SELECT run_id, count(*) AS {{ alias }} FROM {{ table }} GROUP BY run_id
{%- endmacro %}
"""
USES_MACRO = """{% from 'counts.sql' import kernel_count -%}
-- base: a view [project]. Grain: one row per run.
{{ kernel_count('kernels') }}
-- run_id: run
-- n: kernels
"""


def test_a_view_renders_the_macros_beside_its_folder(tmp_path: Path) -> None:
    """sql/macros/ is read by every view of sql/views/; a refactor into a macro that renders
    the same SQL keeps the fingerprint, and the lint reads the rendered view."""
    from etl.views.fingerprints import check, record

    paths = contract(tmp_path)
    record(discover(tmp_path / "views"), paths)
    write_views(tmp_path / "macros", {"counts.sql": MACRO})
    (tmp_path / "views" / "base_v1.sql").write_text(USES_MACRO)
    [view] = discover(tmp_path / "views")
    assert view.macros == tmp_path / "macros"
    assert view.columns == ("run_id", "n") and view.doc.startswith("base: a view")
    assert check([view], paths) == [] and lint([view]) == []
    # the macro renders otherwise: the released view changed, and the lint says where to look
    write_views(tmp_path / "macros", {"counts.sql": MACRO.replace("count(*)", "count(name)")})
    [problem] = check(discover(tmp_path / "views"), paths)
    assert "base_v1 is released and its SQL changed" in problem
    assert f"the macros of {tmp_path / 'macros'} it imports" in problem


@pytest.mark.parametrize("body,fragment", [
    (USES_MACRO.replace("counts.sql", "nowhere.sql"), "imports 'nowhere.sql', which is not in"),
    (USES_MACRO.replace("kernel_count('kernels')", "kernel_count()"), "does not render: "),
    (USES_MACRO.replace("kernel_count('kernels')", "kernel_count(tabel='kernels')"),
     "does not render: macro 'kernel_count' takes no keyword argument 'tabel'"),
    (USES_MACRO.replace("{{ kernel_count('kernels') }}", "{{ undefined_name }}"),
     "does not render: 'undefined_name' is undefined"),
    (USES_MACRO.replace("{% from", "{% frm"), "jinja syntax error (line 1)"),
])
def test_a_view_that_does_not_render_names_its_file(tmp_path: Path, body: str,
                                                    fragment: str) -> None:
    write_views(tmp_path / "macros", {"counts.sql": MACRO})
    [path] = write_views(tmp_path / "views", {"base_v1.sql": body})
    with pytest.raises(ViewError, match=re.escape(f"{path}: {fragment}")):
        discover(tmp_path / "views")


def test_a_broken_macro_file_is_named(tmp_path: Path) -> None:
    write_views(tmp_path / "macros", {"counts.sql": MACRO.replace("{%- endmacro %}", "")})
    [path] = write_views(tmp_path / "views", {"base_v1.sql": USES_MACRO})
    with pytest.raises(ViewError, match=re.escape(
            f"{path}: jinja syntax error ({tmp_path / 'macros' / 'counts.sql'}, line")):
        discover(tmp_path / "views")


def test_a_dialect_override_renders_the_same_macros(tmp_path: Path) -> None:
    from etl.views.dialects import override_path, view_select

    write_views(tmp_path / "macros", {"counts.sql": MACRO})
    write_views(tmp_path / "views", {"base_v1.sql": USES_MACRO})
    [view] = discover(tmp_path / "views")
    override_path(view, "trino").write_text(
        USES_MACRO.replace("kernel_count('kernels')", "kernel_count('kernels', alias='m')"))
    assert "AS m" in view_select(view, "trino") and "AS n" in view_select(view, "spark")


def test_the_views_inputs_cover_every_macro(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A macro edit re-creates the views of every warehouse (views.sha256 changes), whatever
    the macro file's suffix."""
    from etl.core.sql_files import MACRO_DIR
    from etl.views import database

    macros = sorted(MACRO_DIR.iterdir())
    assert macros and set(macros) <= set(database.input_files())
    write_views(tmp_path / "sql" / "macros", {"counts.j2": MACRO})
    monkeypatch.setattr(database, "SQL_DIR", tmp_path / "sql" / "views")
    assert tmp_path / "sql" / "macros" / "counts.j2" in database.input_files()


# ---- rewrites: a released view's SQL changes, its rows do not ------------------------------

SAME_ROWS = BASE.replace("count(*) AS n", "count(1) AS n")  # another spelling, the same rows


def released_then_edited(tmp_path: Path, edited: str = SAME_ROWS) -> tuple[Any, list[Any],
                                                                         list[Any]]:
    """base_v1 released and recorded, then edited: (paths, views as released, as edited)."""
    from etl.views.fingerprints import record

    paths = contract(tmp_path)
    base = discover(tmp_path / "views")
    record(base, paths)
    (tmp_path / "views" / "base_v1.sql").write_text(edited)
    return paths, base, discover(tmp_path / "views")


def test_a_rewrite_with_the_same_rows_is_recorded_with_its_released_sql(tmp_path: Path
                                                                        ) -> None:
    from etl.views import rewrites
    from etl.views.fingerprints import check, fingerprint

    paths, base, views = released_then_edited(tmp_path)
    assert "is released and its SQL changed" in check(views, paths)[0]
    assert "etl lint-sql --same-rows base_v1" in check(views, paths)[0]
    [entry] = rewrites.record(views, base, ["base_v1"], paths, today="2026-11-28")
    assert (entry.before, entry.after) == (fingerprint(base[0]), fingerprint(views[0]))
    assert check(views, paths) == [] and rewrites.check(views, paths) == []
    # the released SQL is kept as its fingerprint reads it, and runs
    [kept] = rewrites.read_rewrites(paths.rewrites)
    assert kept == entry and "COUNT(*) AS n" in kept.released_sql
    assert rewrites.sql_fingerprint(kept.released_sql) == fingerprint(base[0])


def test_an_edited_rewrite_entry_fails_the_lint(tmp_path: Path) -> None:
    from etl.views import rewrites

    paths, base, views = released_then_edited(tmp_path)
    rewrites.record(views, base, ["base_v1"], paths)
    text = paths.rewrites.read_text()
    paths.rewrites.write_text(text.replace("COUNT(*) AS n", "COUNT(1) AS n"))
    [problem] = rewrites.check(views, paths)
    assert "rewrite 1 (base_v1): its released_sql is not the SQL whose fingerprint" in problem


def test_rewrites_chain_to_the_recorded_fingerprint(tmp_path: Path) -> None:
    from etl.views import rewrites
    from etl.views.fingerprints import check

    paths, base, views = released_then_edited(tmp_path)
    rewrites.record(views, base, ["base_v1"], paths)
    # edited again: the lint refuses until the second step is recorded, against the first
    (tmp_path / "views" / "base_v1.sql").write_text(SAME_ROWS.replace("count(1)", "count(2)"))
    again = discover(tmp_path / "views")
    assert "is released and its SQL changed" in check(again, paths)[0]
    with pytest.raises(ViewError, match="the base revision does not hold it as"):
        rewrites.record(again, base, ["base_v1"], paths)
    rewrites.record(again, views, ["base_v1"], paths)
    assert check(again, paths) == [] and rewrites.check(again, paths) == []
    first, second = rewrites.read_rewrites(paths.rewrites)
    assert first.after == second.before
    # a hand-edited fingerprints.toml breaks the chain
    paths.fingerprints.write_text(paths.fingerprints.read_text().replace(second.after, "0" * 64))
    assert "is neither the next rewrite's `from` nor the recorded" in rewrites.check(
        again, paths)[0]


@pytest.mark.parametrize("edit,changelog,fragment", [
    (SAME_ROWS, "nothing yet\n", "not a released view"),
    (BASE, "- `base_v1` released\n", "renders as recorded; nothing to record"),
    (BASE.replace("AS n", "AS kernels").replace("-- n:", "-- kernels:"),
     "- `base_v1` released\n", "returns other columns than released (run_id, n)"),
])
def test_a_rewrite_is_refused(tmp_path: Path, edit: str, changelog: str, fragment: str
                              ) -> None:
    from etl.views import rewrites

    paths, base, views = released_then_edited(tmp_path, edit)
    paths.changelog.write_text(changelog)
    with pytest.raises(ViewError, match=re.escape(fragment)):
        rewrites.record(views, base, ["base_v1"], paths)
    assert not paths.rewrites.exists()


def test_rows_apart_counts_rows_and_columns_both_ways() -> None:
    import duckdb

    from etl.views.rewrites import rows_apart

    con = duckdb.connect()
    con.execute("CREATE TABLE t AS FROM (VALUES (1, 'a'), (1, 'a'), (2, 'b')) AS v(x, y)")
    assert rows_apart(con, "SELECT x, y FROM t", "FROM t ORDER BY x DESC").same
    distinct = rows_apart(con, "SELECT DISTINCT x, y FROM t", "SELECT x, y FROM t")
    assert (distinct.only_before, distinct.only_after, distinct.same) == (0, 1, False)
    retyped = rows_apart(con, "SELECT x, y FROM t", "SELECT x::DOUBLE AS x, y FROM t")
    assert (retyped.only_before, retyped.only_after, retyped.same) == (0, 0, False)
    renamed = rows_apart(con, "SELECT x, y FROM t", "SELECT x AS z, y FROM t")
    assert not renamed.same


def test_rows_apart_compares_floats_bit_for_bit_unless_told_digits() -> None:
    import duckdb

    from etl.views.rewrites import rows_apart

    con = duckdb.connect()
    sum_of = "SELECT 1 AS x, 0.1::DOUBLE + 0.2::DOUBLE AS y"  # 0.30000000000000004
    assert not rows_apart(con, sum_of, "SELECT 1 AS x, 0.3::DOUBLE AS y").same
    assert rows_apart(con, sum_of, "SELECT 1 AS x, 0.3::DOUBLE AS y", digits=12).same
    assert not rows_apart(con, sum_of, "SELECT 1 AS x, 0.31::DOUBLE AS y", digits=12).same
    assert con.execute("SELECT current_setting('threads')").fetchone() != (1,)  # restored


def test_the_released_sql_is_read_from_a_git_revision(tmp_path: Path) -> None:
    import subprocess

    from etl.views.rewrites import views_at

    write_views(tmp_path / "sql" / "views", {"base_v1.sql": USES_MACRO})
    write_views(tmp_path / "sql" / "macros", {"counts.sql": MACRO})
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "sql"], check=True)
    subprocess.run([*git, "commit", "-qm", "released"], check=True)
    write_views(tmp_path / "sql" / "macros", {"counts.sql": MACRO.replace("count(*)", "count(1)")})
    [then] = views_at("HEAD", tmp_path / "sql" / "views")
    [now] = discover(tmp_path / "sql" / "views")
    assert "count(*)" in then.select and "count(1)" in now.select
    with pytest.raises(ViewError, match="git archive nowhere sql failed"):
        views_at("nowhere", tmp_path / "sql" / "views")
