"""Table output of `etl query`: the first rows, the total, the columns that fit."""
from __future__ import annotations

from pathlib import Path

import pytest

from etl.cli.plain_table import cell_text, render
from tests.conftest import cli


@pytest.mark.parametrize("value,text", [
    (0.123456789, "0.123457"), (123456.789, "123457"), (123450.0, "123450.0"),
    (0.5, "0.5"), (2.0, "2.0"), (1e-7, "1.00000e-07"), (None, "NULL"), (-0.0381, "-0.0381"),
    (1234567.5, "1234568"), ("a\nb", "a\\nb"),
])
def test_cells(value: object, text: str) -> None:
    assert cell_text(value) == text


class Counted:
    """A value that counts how often it is turned into text."""

    calls = 0

    def __str__(self) -> str:
        Counted.calls += 1
        return "x"


def test_only_the_shown_rows_are_formatted() -> None:
    from etl.cli import output as report

    rows = [(Counted(), Counted()) for _ in range(50_000)]
    Counted.calls = 0
    report.print_rows(["a", "b"], rows, "table", limit=40)
    assert Counted.calls == 80


def test_footer_and_elided_columns() -> None:
    columns = ["run_name", "a_long_column_name", "b", "c"]
    rows = [("r1", 1.5, 2, "x" * 60), ("r2", None, 3, "y")]
    lines = render(columns, rows, total=1000, width=40)
    assert lines[0].split() == ["run_name", "a_long_column_name", "b"]
    assert lines[2].split() == ["r1", "1.5", "2"] and lines[3].split() == ["r2", "NULL", "3"]
    assert lines[4] == "(1,000 rows, first 2 shown; --limit N or --all for more)"
    assert lines[5].startswith("1 column(s) not shown to fit 40 characters: c ")
    assert all(len(line) <= 40 for line in lines[:4])


def test_etl_query_limits_table_output(tmp_path: Path) -> None:
    sql = "SELECT range AS i, range / 3 AS third FROM range(100)"
    assert cli("views", "--warehouse", str(tmp_path / "wh")).returncode == 0
    out = cli("query", sql, "--warehouse", str(tmp_path / "wh"), env={"COLUMNS": "80"})
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert len(lines) == 2 + 40 + 1 and lines[-1].startswith("(100 rows, first 40 shown")
    assert lines[3].split() == ["1", "0.333333"]
    every = cli("query", sql, "--all", "--warehouse", str(tmp_path / "wh"))
    assert every.stdout.splitlines()[-1] == "(100 rows)"
    csv = cli("query", sql, "--format", "csv", "--warehouse", str(tmp_path / "wh"))
    assert csv.stdout.splitlines()[2] == "1,0.3333333333333333"


def test_duckdb_errors_reach_the_user_whole(tmp_path: Path) -> None:
    wh = str(tmp_path / "wh")
    assert cli("views", "--warehouse", wh).returncode == 0
    out = cli("query", "SELECT run_nam FROM runs", "--warehouse", wh)
    assert out.returncode == 1 and "Traceback" not in out.stderr
    lines = out.stderr.splitlines()
    assert lines[0].startswith('error: query failed: Binder Error: Referenced column "run_nam"')
    assert any(line.startswith("Candidate bindings:") and '"run_name"' in line for line in lines)
    assert "LINE 1: SELECT run_nam FROM runs" in lines and sum(
        line.startswith("error:") for line in lines) == 1
    empty = cli("query", "", "--warehouse", wh)
    assert empty.returncode == 1 and empty.stderr.startswith("error: no SQL given")
    assert len(empty.stderr.splitlines()) == 1


def test_etl_query_writes_files_only_when_asked(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    wh = str(tmp_path / "wh")
    assert cli("views", "--warehouse", wh).returncode == 0
    target = tmp_path / "x.csv"
    copy = cli("query", f"COPY (SELECT 1 AS x) TO '{target}'", "--warehouse", wh)
    assert copy.returncode == 1 and "COPY statements are not run" in copy.stderr
    assert not target.exists()
    out = tmp_path / "r.parquet"
    done = cli("query", "SELECT range AS i FROM range(5)", "--format", "parquet", "-o",
               str(out), "--warehouse", wh)
    assert done.returncode == 0 and done.stdout.strip() == f"wrote 5 rows to {out}"
    assert pq.read_table(out).column("i").to_pylist() == [0, 1, 2, 3, 4]


def test_the_suffix_of_o_says_the_format(tmp_path: Path) -> None:
    import json

    import pyarrow.parquet as pq

    wh = str(tmp_path / "wh")
    assert cli("views", "--warehouse", wh).returncode == 0
    sql = "SELECT range AS i FROM range(3)"
    for name in ("r.parquet", "r.csv", "r.json"):
        done = cli("query", sql, "-o", str(tmp_path / name), "--warehouse", wh)
        assert done.returncode == 0, done.stderr
    assert pq.read_table(tmp_path / "r.parquet").column("i").to_pylist() == [0, 1, 2]
    assert (tmp_path / "r.csv").read_text().splitlines() == ["i", "0", "1", "2"]
    assert json.loads((tmp_path / "r.json").read_text()) == [{"i": 0}, {"i": 1}, {"i": 2}]
    unknown = cli("query", sql, "-o", str(tmp_path / "r.txt"), "--warehouse", wh)
    assert unknown.returncode == 1 and unknown.stderr.splitlines() == [
        f"error: -o {tmp_path / 'r.txt'}: no format for the suffix '.txt'; name the file "
        ".parquet, .csv or .json, or add --format parquet (or csv, json)"]
    told = cli("query", sql, "-o", str(tmp_path / "r.txt"), "--format", "csv", "--warehouse", wh)
    assert told.returncode == 0 and (tmp_path / "r.txt").read_text().startswith("i\n0")


def test_line_format_shows_every_column_of_a_row(tmp_path: Path) -> None:
    wh = str(tmp_path / "wh")
    assert cli("views", "--warehouse", wh).returncode == 0
    out = cli("query", "SELECT range AS i, 'x' || repeat('y', 200) AS long_text FROM range(2)",
              "--format", "line", "--warehouse", wh, env={"COLUMNS": "40"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "        i = 0", "long_text = x" + "y" * 200, "",
        "        i = 1", "long_text = x" + "y" * 200, "", "(2 rows)"]


def test_text_is_cut_only_as_far_as_the_width_needs() -> None:
    columns, rows = ["name", "n"], [("k" * 100, 1)]
    wide = render(columns, rows, total=1, width=200)
    assert wide[2].split() == ["k" * 100, "1"]
    narrow = render(columns, rows, total=1, width=40)
    assert narrow[2].split() == ["k" * 36 + "…", "1"] and len(narrow[2]) == 40


def test_durations_have_units_one_per_column() -> None:
    lines = render(["window_ns", "window_start_ns", "tiny_ns"],
                   [(2_124_456, 1_712_188_800_003_134_367, 12), (500, 5, None)], 2, 120)
    assert lines[2].split() == ["2.124", "ms", "1712188800003134367", "12"]
    assert lines[3].split() == ["0.001", "ms", "5", "NULL"]


def test_select_star_shows_a_views_meaningful_columns_first(demo_warehouse: Path) -> None:
    out = cli("query", "SELECT * FROM run_summary WHERE run_name = 'resnet_amp_eager'",
              "--warehouse", str(demo_warehouse), env={"COLUMNS": "100"})
    header = out.stdout.splitlines()[0].split()
    assert header[:3] == ["run_name", "rank", "device_id"] and "gpu_util" in header
    assert "run_id" not in header and "source_id" not in header
    named = cli("query", "SELECT run_id, gpu_util FROM run_summary", "--warehouse",
                str(demo_warehouse))
    assert named.stdout.splitlines()[0].split() == ["run_id", "gpu_util"]
