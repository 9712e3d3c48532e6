"""A warehouse folder copied or moved (cp -r, rsync) works where it lands, through the DuckDB
shell, a Python connection and `etl query`, and never reads the original's files."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import duckdb
import pytest

from tests.conftest import cli, duckdb_shell, kernel, launch, query_json, step, write_trace

QUERY = "SELECT run_name, busy_ns FROM gpu_utilization ORDER BY run_name"
EXPECTED = [("a", 40_000), ("b", 10_000)]


def ingest_run(warehouse: Path, runs: Path, name: str, busy_ns: int) -> None:
    events = [step(1, 0, 100_000), launch(1, 1_000), kernel(1, 10_000, busy_ns)]
    write_trace(runs / name / "t.json", events)
    # --replace: a test republishes a run from another folder under the same name
    result = cli("ingest", str(runs / name), "--warehouse", str(warehouse), "--replace")
    assert result.returncode == 0, result.stderr


@pytest.fixture
def original(tmp_path: Path) -> Path:
    warehouse = tmp_path / "wh"
    ingest_run(warehouse, tmp_path / "runs", "a", 40_000)
    ingest_run(warehouse, tmp_path / "runs", "b", 10_000)
    return warehouse


def shell(database: Path | str, sql: str, cwd: Path | str = "/", *before: str
          ) -> subprocess.CompletedProcess[str]:
    options = [arg for command in before for arg in ("-cmd", command)]
    return subprocess.run([str(duckdb_shell()), "-readonly", "-csv", "-noheader", *options,
                           str(database), "-c", sql], capture_output=True, text=True,
                          cwd=cwd, timeout=120)


def shell_rows(database: Path | str, cwd: Path | str = "/") -> list[tuple[str, int]]:
    out = shell(database, QUERY, cwd)
    assert out.returncode == 0, out.stderr
    return [(name, int(busy)) for name, busy in (line.split(",") for line in out.stdout.split())]


def answers(warehouse: Path) -> dict[str, list[tuple[str, int]]]:
    """The query through every reader: the shell (from elsewhere and from inside the folder,
    by a relative path), a Python connection, and `etl query`."""
    with duckdb.connect(str(warehouse / "warehouse.duckdb"), read_only=True) as con:
        python = [tuple(row) for row in con.execute(QUERY).fetchall()]
    etl = [(r["run_name"], r["busy_ns"]) for r in query_json(warehouse, QUERY)]
    return {"shell": shell_rows(warehouse / "warehouse.duckdb"),
            "shell inside": shell_rows("warehouse.duckdb", cwd=warehouse),
            "python": python, "etl query": etl}


def everywhere(rows: list[tuple[str, int]]) -> dict[str, list[tuple[str, int]]]:
    return dict.fromkeys(("shell", "shell inside", "python", "etl query"), rows)


def test_a_copy_reads_its_own_files_only(original: Path, tmp_path: Path) -> None:
    copy = Path(shutil.copytree(original, tmp_path / "elsewhere" / "copy", symlinks=True))
    # the original lives on: run a is republished, run c added
    ingest_run(original, tmp_path / "runs2", "a", 5_000)
    ingest_run(original, tmp_path / "runs2", "c", 1_000)
    assert answers(original) == everywhere([("a", 5_000), *EXPECTED[1:], ("c", 1_000)])
    assert answers(copy) == everywhere(EXPECTED)
    shutil.rmtree(original)
    assert answers(copy) == everywhere(EXPECTED)


def test_a_moved_warehouse_works_where_it_lands(original: Path, tmp_path: Path) -> None:
    moved = Path(shutil.move(original, tmp_path / "moved" / "wh2"))
    assert not original.exists()
    assert answers(moved) == everywhere(EXPECTED)
    ingest_run(moved, tmp_path / "runs2", "c", 1_000)  # and it takes new runs
    assert answers(moved) == everywhere([*EXPECTED, ("c", 1_000)])


def test_attached_or_with_another_temp_directory_it_asks_for_its_folder(
        original: Path) -> None:
    database = original / "warehouse.duckdb"
    with duckdb.connect() as con:
        con.execute(f"ATTACH '{database}' AS wh (READ_ONLY)")
        with pytest.raises(duckdb.Error, match="SET VARIABLE warehouse_root = "):
            con.execute("SELECT * FROM wh.gpu_utilization").fetchall()
        con.execute(f"SET VARIABLE warehouse_root = '{original}'")
        assert con.execute(QUERY.replace("FROM ", "FROM wh.")).fetchall() == EXPECTED
    out = shell(database, QUERY, "/", "SET temp_directory = '/tmp/elsewhere'")
    assert "SET VARIABLE warehouse_root = " in out.stderr + out.stdout
    out = shell(database, QUERY, "/", "SET temp_directory = '/tmp/elsewhere'",
                f"SET VARIABLE warehouse_root = '{original}'")
    assert out.returncode == 0 and out.stdout.split() == ["a,40000", "b,10000"], out.stderr
