"""Hostile names, values, paths and gzip bombs: stored verbatim or refused, never obeyed.

Run names (folder names) and run.toml values with quotes, semicolons, `..`, newlines,
shell and format syntax and 200+ characters are data: stored verbatim, and nothing is
written outside the warehouse folder (the tmp tree is compared before and after). Gzip
bombs are generated here, never stored: inflation is capped (ETL_MAX_INFLATE_RATIO).
"""
from __future__ import annotations

import os
import re
import subprocess
import zlib
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ETL, ROOT, cli, kernel, launch, query_json, step, write_trace

HOSTILE_NAMES = [
    "it's \"quoted\"; DROP TABLE runs; --",
    "line1\nline2",
    "tab\there\rcarriage",
    "x" * 250,
    "-rf --warehouse",
    "back\\slash %s %(x)s {0} $HOME `id` $(id)",
    "ünïcødé ☃ 𝔘 \u202eRTL",
    " leading and trailing spaces ",
    "*?[a-z]",
]
HOSTILE_VALUES = {
    "model": "a\"; DROP TABLE runs; --",
    "framework": "../../../../etc/passwd",
    "exec_mode": "line1\nline2\n",
    "precision": "' OR '1'='1",
    "gpu": "/tmp/../" + "G" * 300,
    "notes": "\u0000 NUL, \u001b[31m ANSI, {jinja} {{ 7*7 }} ${HOME}",
}
HOSTILE_TAGS = ["a,b", "\"q\"", "'; --", "../x", "\n"]
WAREHOUSE_FILES = {"data", "catalog", "staging", "derived", "warehouse.duckdb", "views.sha256",
                   ".publish.lock", "warehouse.duckdb.wal"}
BOMB_MEMBER_MIB = 64
# One extraction process where a command ingests several runs: with workers, a worker's
# read of the manifest races the publisher (xfail in test_concurrent.py) and would make
# these tests flaky; their subject is what is stored, not parallelism.
ONE_JOB = ("--jobs", "1")


def good_events() -> list[dict[str, Any]]:
    return [step(1, 0, 100_000), launch(1, 1_000), kernel(1, 10_000, 40_000)]


def tree(root: Path, skip: Path) -> dict[str, tuple[int, int]]:
    """Every path under root except `skip` and root's own entry: (size, mtime_ns)."""
    out = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if Path(folder, d) != skip]
        for name in dirs + files:
            path = Path(folder, name)
            if path != skip:
                st = path.lstat()
                out[str(path.relative_to(root))] = (st.st_size, st.st_mtime_ns)
    return out


def ingest_guarded(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`etl ingest` from an empty working folder; asserts nothing outside wh changed."""
    wh = tmp_path / "wh"
    (tmp_path / "cwd").mkdir(exist_ok=True)
    before = tree(tmp_path, wh)
    result = cli("ingest", *args, "--warehouse", str(wh), *ONE_JOB, cwd=tmp_path / "cwd")
    assert tree(tmp_path, wh) == before, "something outside the warehouse changed"
    assert {p.name for p in wh.iterdir()} <= WAREHOUSE_FILES
    # names are data, never paths: the warehouse's own file names are plain identifiers
    assert all(re.fullmatch(r"[\w.-]+", p.name, re.ASCII) for p in wh.rglob("*"))
    return result


def connect(wh: Path) -> Any:
    import duckdb

    return duckdb.connect(str(wh / "warehouse.duckdb"), read_only=True)


def test_hostile_run_names_are_data(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    for name in HOSTILE_NAMES:
        write_trace(runs / name / "t.json", good_events())
    result = ingest_guarded(tmp_path, str(runs))
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr[-800:]
    with connect(tmp_path / "wh") as con:
        rows = con.execute("SELECT r.run_name, r.run_path, g.busy_ns FROM runs r "
                           "JOIN gpu_utilization g USING (run_id)").fetchall()
    assert sorted(rows) == sorted((n, str(runs / n), 40_000) for n in HOSTILE_NAMES)
    again = cli("ingest", str(runs), "--warehouse", str(tmp_path / "wh"), *ONE_JOB)
    assert f"{len(HOSTILE_NAMES)} unchanged" in again.stdout  # names round-trip exactly


def test_hostile_run_toml_values_are_data(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "r"
    write_trace(run / "t.json", good_events())
    toml = "".join(f"{k} = {_toml_string(v)}\n" for k, v in HOSTILE_VALUES.items())
    toml += "tags = [" + ", ".join(_toml_string(t) for t in HOSTILE_TAGS) + "]\n"
    (run / "run.toml").write_text(toml)
    result = ingest_guarded(tmp_path, str(run))
    assert result.returncode == 0, result.stderr[-800:]
    columns = [k for k in HOSTILE_VALUES if k != "notes"]  # notes stays in run_toml only
    with connect(tmp_path / "wh") as con:
        row = con.execute(f"SELECT {', '.join(columns)}, tags, run_toml FROM runs").fetchone()
    assert list(row) == [HOSTILE_VALUES[k] for k in columns] + [HOSTILE_TAGS, toml]


def _toml_string(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + "".join(c if c.isprintable() or c == " " else f"\\u{ord(c):04x}"
                         for c in escaped) + '"'


def test_hostile_trace_file_names_are_data(tmp_path: Path) -> None:
    names = ["rank 0; DROP TABLE kernels.json", "it's.pt.trace.json", "new\nline.json",
             "..\u2215x.json", "-" + "n" * 240 + ".json"]
    run = tmp_path / "runs" / "r"
    for name in names:
        write_trace(run / name, good_events())
    result = ingest_guarded(tmp_path, str(run))
    assert result.returncode == 0, result.stderr[-800:]
    [row] = query_json(tmp_path / "wh", "SELECT [s.path FOR s IN sources] AS paths, "
                       "(SELECT count(*) FROM kernels) AS kernels FROM runs")
    assert sorted(row["paths"]) == sorted(names) and row["kernels"] == len(names)


def test_run_name_of_dot_paths_is_the_folder_name(tmp_path: Path) -> None:
    """`.` and `x/..` name the run after the folder (they stored '' and '..' before 4219b53)."""
    run = tmp_path / "runs" / "myrun"
    write_trace(run / "t.json", good_events())
    (run / "sub").mkdir()
    wh = str(tmp_path / "wh")
    for arg, cwd in ((".", run), ("sub/..", run), (str(run), tmp_path)):
        result = cli("ingest", arg, "--warehouse", wh, cwd=cwd)
        assert result.returncode == 0, result.stderr[-800:]
    assert query_json(tmp_path / "wh", "SELECT run_name FROM runs") == [{"run_name": "myrun"}]


def test_error_for_a_name_with_a_newline_is_one_line(tmp_path: Path) -> None:
    """Control characters in a run name are escaped: the error stays one line."""
    run = tmp_path / "runs" / "bad\nrun"
    run.mkdir(parents=True)
    (run / "t.json").write_text("{")
    result = cli("ingest", str(tmp_path / "runs"), "--warehouse", str(tmp_path / "wh"))
    assert result.returncode == 1
    lines = [line for line in result.stderr.splitlines() if not line.startswith((" ", "┏"))]
    errors = [i for i, line in enumerate(lines) if line.startswith("error:")]
    assert len(errors) == 1 and "t.json" in lines[errors[0]], lines


@pytest.mark.parametrize("where", ["run folder", "trace file"])  # xfail until 2bc84f5 + run_path
def test_non_utf8_names_do_not_crash(tmp_path: Path, where: str) -> None:
    runs = tmp_path / "runs"
    odd = os.fsdecode(b"caf\xe9")
    path = runs / odd / "t.json" if where == "run folder" else runs / "a" / f"{odd}.json"
    write_trace(path, good_events())
    write_trace(runs / "z-good" / "t.json", good_events())
    proc = subprocess.run([*ETL, "ingest", str(runs), "--warehouse", str(tmp_path / "wh"),
                           *ONE_JOB], capture_output=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    stdout, stderr = proc.stdout.decode(errors="replace"), proc.stderr.decode(errors="replace")
    assert "Traceback" not in stderr and "internal error" not in stderr, stderr[-600:]
    assert "\ufffd" not in stdout + stderr  # the terminal output is valid UTF-8
    names = [r["run_name"] for r in query_json(tmp_path / "wh", "SELECT run_name FROM runs")]
    assert "z-good" in names
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(names) == 2 or (len(errors) == 1 and "caf" in errors[0]), errors


@pytest.mark.parametrize("folder", [
    "wh 'quoted' $HOME", "wh;semi", "wh*star", "wh[1]", "wh?x", "wh]", "[!a-z]", "wh{a,b}",
    "wh%3F", "wh#x",
])
def test_warehouse_folder_with_odd_characters(tmp_path: Path, folder: str) -> None:
    """Glob and URI characters in the warehouse path are literal (wh[1] and wh?x crashed
    ensure_views until the path was escaped in the views and the WAL skipped)."""
    write_trace(tmp_path / "runs" / "a" / "t.json", good_events())
    wh = tmp_path / folder
    result = cli("ingest", str(tmp_path / "runs"), "--warehouse", str(wh))
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr[-600:]
    assert query_json(wh, "SELECT run_name, busy_ns FROM gpu_utilization") == [
        {"run_name": "a", "busy_ns": 40_000}]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["runs", folder])
    with connect(wh) as con:  # the shell's views, not only `etl query`
        assert con.execute("SELECT run_name FROM run_summary").fetchall() == [("a",)]


@pytest.mark.parametrize("folder,neighbour", [
    ("wh[1]", "wh1"), ("wh?x", "whax"), ("wh*", "wh-other"), ("wh[a-z]", "wha")])
def test_warehouse_path_does_not_glob_its_neighbours(tmp_path: Path, folder: str,
                                                     neighbour: str) -> None:
    """An unescaped pattern would also match the neighbour folder and read its runs."""
    for name, wh in (("mine", folder), ("theirs", neighbour)):
        write_trace(tmp_path / f"runs-{name}" / name / "t.json", good_events())
        result = cli("ingest", str(tmp_path / f"runs-{name}"), "--warehouse",
                     str(tmp_path / wh))
        assert result.returncode == 0, result.stderr[-600:]
    for wh, name in ((folder, "mine"), (neighbour, "theirs")):
        assert query_json(tmp_path / wh, "SELECT r.run_name, count(*) AS kernels FROM runs r "
                          "JOIN kernels k USING (run_id) GROUP BY ALL") == [
            {"run_name": name, "kernels": 1}]
        with connect(tmp_path / wh) as con:
            assert con.execute("SELECT run_name FROM gpu_utilization").fetchall() == [(name,)]


def test_warehouse_path_with_a_backslash_is_refused_in_one_line(tmp_path: Path) -> None:
    """DuckDB's glob splits paths on backslashes too, and has no escape for one."""
    write_trace(tmp_path / "runs" / "a" / "t.json", good_events())
    result = cli("ingest", str(tmp_path / "runs"), "--warehouse", str(tmp_path / "wh\\x"))
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-600:]
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "backslash" in errors[0], result.stderr[-600:]


# ---- gzip bombs ----------------------------------------------------------------------------

def write_bomb(path: Path, members: int) -> int:
    """A valid trace padded with members x 64 MiB of spaces, as concatenated gzip members.

    ~65 KB per member, ~1000x inflation. Returns the inflated size. If it were read whole
    it would be a valid trace of no events, so only the cap can refuse it.
    """
    def gz(data: bytes) -> bytes:
        co = zlib.compressobj(9, zlib.DEFLATED, 31)
        return co.compress(data) + co.flush()

    padding = gz(b" " * (BOMB_MEMBER_MIB << 20))
    head, tail = b'{"schemaVersion": 1, "traceEvents": [', b"]}"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gz(head) + padding * members + gz(tail))
    return len(head) + len(tail) + members * (BOMB_MEMBER_MIB << 20)


# A child started by subprocess (vfork + exec) reports in ru_maxrss the high-water mark of
# the process that started it: Linux keeps the old memory's peak across exec. Under
# pytest-xdist the worker had once grown to 777 MiB, and the ingest "peaked" there. This
# launcher is small and forks the measured process, so the peak is the ingest's own.
MEASURE = """\
import os, sys
pid = os.fork()
if pid == 0:
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    os.execv(sys.argv[1], sys.argv[1:])
_, status, usage = os.wait4(pid, 0)
print(os.waitstatus_to_exitcode(status), usage.ru_maxrss * 1024)
"""


def ingest_measured(runs: Path, wh: Path, env: dict[str, str]) -> tuple[int, str, int]:
    """(exit code, stderr, peak RSS in bytes) of one `etl ingest` process."""
    import sys

    proc = subprocess.run([sys.executable, "-c", MEASURE, *ETL, "ingest", str(runs),
                           "--warehouse", str(wh), *ONE_JOB],
                          env={**os.environ, "PYTHONPATH": str(ROOT), **env},
                          capture_output=True, text=True)
    code, peak = proc.stdout.split()
    return int(code), proc.stderr, int(peak)


def assert_bomb_refused(code: int, stderr: str, tmp_path: Path) -> None:
    assert "Traceback" not in stderr, stderr[-600:]
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert code == 1 and len(errors) == 1, stderr[-600:]
    assert "bomb/t.json.gz" in errors[0] and "gzip bomb" in errors[0], errors[0]
    names = query_json(tmp_path / "wh", "SELECT run_name FROM runs")
    assert names == [{"run_name": "good"}]


def test_gzip_bomb_beyond_the_default_cap_is_refused(tmp_path: Path) -> None:
    """17 x 64 MiB from a 1.1 MB file: beyond 1000x and beyond the 1 GiB floor."""
    runs = tmp_path / "runs"
    write_bomb(runs / "bomb" / "t.json.gz", 17)
    write_trace(runs / "good" / "t.json", good_events())
    code, stderr, _ = ingest_measured(runs, tmp_path / "wh", {})
    assert_bomb_refused(code, stderr, tmp_path)


def test_gzip_bomb_beyond_a_configured_ratio_is_refused(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    write_bomb(runs / "bomb" / "t.json.gz", 1)
    write_trace(runs / "good" / "t.json", good_events())
    code, stderr, _ = ingest_measured(runs, tmp_path / "wh", {"ETL_MAX_INFLATE_RATIO": "10"})
    assert_bomb_refused(code, stderr, tmp_path)


def test_gzip_bomb_is_refused_before_it_is_in_memory(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    inflated = write_bomb(runs / "bomb" / "t.json.gz", 17)
    write_trace(runs / "good" / "t.json", good_events())
    code, stderr, peak = ingest_measured(runs, tmp_path / "wh", {"ETL_MAX_INFLATE_RATIO": "10"})
    assert_bomb_refused(code, stderr, tmp_path)
    assert peak < inflated // 2, f"peak RSS {peak >> 20} MiB"
