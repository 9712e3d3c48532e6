"""File and folder names that are not valid UTF-8 (legal on Linux) are data, never a crash.

A name such as b"caf\\xe9" is stored as the text `caf\\xe9` (each byte that is not UTF-8
written `\\xNN`): `runs.run_name`, `runs.sources[].path`, `runs.skipped[].path` and every
message line are valid UTF-8, names that differ in such bytes stay distinct runs, and two
names that would read the same are refused in one line. The terminal output never raises,
whatever the locale. Names are built as bytes (os.fsdecode) and the real CLI is run.
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any


from tests.conftest import ETL, ROOT, kernel, launch, query_json, step, write_trace

ONE_JOB = ("--jobs", "1")  # one extraction process: these tests are about names, not workers
# Python decodes names as ASCII here (no C.UTF-8 coercion, no UTF-8 mode): a non-UTF-8
# terminal, where printing "é" or "☃" raises unless the output is made tolerant.
ASCII_LOCALE = {"LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}


def name(raw: bytes) -> str:
    """A file name as Python hands it out: bytes that are not UTF-8 as surrogates."""
    return os.fsdecode(raw)


def good_events() -> list[dict[str, Any]]:
    return [step(1, 0, 100_000), launch(1, 1_000), kernel(1, 10_000, 40_000)]


def etl(*args: str, env: dict[str, str] | None = None,
        encoding: str = "utf-8") -> tuple[int, str, str]:
    """The real CLI; its output must decode strictly (valid UTF-8, or ASCII)."""
    full_env = {k: v for k, v in os.environ.items()
                if k not in ("PYTHONIOENCODING", "PYTHONUTF8", "LC_ALL", "LANG")}
    full_env.update(env or {}, PYTHONPATH=str(ROOT))
    proc = subprocess.run([*ETL, *args], capture_output=True, env=full_env, timeout=600)
    out, err = proc.stdout.decode(encoding), proc.stderr.decode(encoding)
    assert "Traceback" not in err and "internal error" not in err, err[-800:]
    return proc.returncode, out, err


def ingest(tmp_path: Path, *paths: Path, env: dict[str, str] | None = None,
           encoding: str = "utf-8") -> tuple[int, str, str]:
    return etl("ingest", *map(str, paths), "--warehouse", str(tmp_path / "wh"), *ONE_JOB,
               env=env, encoding=encoding)


def lines(err: str, kind: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith(f"{kind}: ")]


def runs_rows(tmp_path: Path) -> list[dict[str, Any]]:
    return query_json(tmp_path / "wh", (
        "SELECT run_name, run_path, [s.path FOR s IN sources] AS paths, "
        "[s.path FOR s IN skipped] AS skipped FROM runs ORDER BY run_name"))


def test_trace_file_names_are_stored_escaped(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "a"
    for raw in (b"caf\xe9.json", b"caf\xe8.json", b"sub\xfe/t.json", b"caf\\xe7.json"):
        write_trace(run / name(raw), good_events())
    (run / name(b"notes\xff.txt")).write_text("not a trace")
    code, out, err = ingest(tmp_path, tmp_path / "runs")
    assert code == 0, err
    [row] = runs_rows(tmp_path)
    # distinct bytes stay distinct paths; a literal backslash is kept as it is
    assert sorted(row["paths"]) == ["caf\\xe7.json", "caf\\xe8.json", "caf\\xe9.json",
                                    "sub\\xfe/t.json"]
    assert row["skipped"] == ["notes\\xff.txt"]
    assert lines(err, "warning") == ["warning: a/notes\\xff.txt: skipped (not a recognised "
                                     "profiler output)"]
    assert query_json(tmp_path / "wh", "SELECT count(*) AS n FROM kernels") == [{"n": 4}]


def test_run_folder_names_are_stored_escaped_and_stay_distinct(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    for raw in (b"run\xff", b"run\xfe", b"z-good"):
        write_trace(runs / name(raw) / "t.json", good_events())
    code, out, err = ingest(tmp_path, runs)
    assert code == 0 and lines(err, "error") == [], err
    rows = runs_rows(tmp_path)
    assert [r["run_name"] for r in rows] == ["run\\xfe", "run\\xff", "z-good"]
    assert rows[1]["run_path"] == str(runs.resolve() / "run\\xff")
    assert "run\\xff" in out and "run\\xfe" in out  # the summary table
    code, out, err = ingest(tmp_path, runs)  # unchanged files: the same runs, no new publish
    assert code == 0 and "3 unchanged" in out, out


def test_a_broken_trace_in_a_non_utf8_folder_is_refused_in_one_line(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    bad = runs / name(b"bad\xff")
    bad.mkdir(parents=True)
    (bad / name(b"t\xfe.json")).write_text("{")
    write_trace(runs / "z-good" / "t.json", good_events())
    code, out, err = ingest(tmp_path, runs)
    assert code == 1
    [error] = lines(err, "error")
    assert error.startswith("error: bad\\xff/t\\xfe.json: "), error
    assert "bad\\xff" in out and "refused" in out
    assert [r["run_name"] for r in runs_rows(tmp_path)] == ["z-good"]


def test_a_non_utf8_folder_given_as_the_argument_is_named_in_the_error(tmp_path: Path) -> None:
    bad = tmp_path / "runs" / name(b"caf\xe9")
    bad.mkdir(parents=True)
    (bad / "t.json").write_text("[")
    code, _out, err = ingest(tmp_path, bad)
    assert code == 1
    [error] = lines(err, "error")
    assert error.startswith("error: caf\\xe9/t.json: "), error


def test_files_whose_names_read_the_same_are_refused(tmp_path: Path) -> None:
    """b"x\\xe9.json" beside a file literally named `x\\xe9.json` would share one path."""
    runs = tmp_path / "runs"
    for raw in (b"x\xe9.json", b"x\\xe9.json"):
        write_trace(runs / "a" / name(raw), good_events())
    write_trace(runs / "z-good" / "t.json", good_events())
    code, _out, err = ingest(tmp_path, runs)
    assert code == 1
    [error] = lines(err, "error")
    assert error.startswith("error: a/x\\xe9.json: its name reads the same as 'x\\xe9.json'")
    assert error.endswith("rename one of the two"), error
    assert [r["run_name"] for r in runs_rows(tmp_path)] == ["z-good"]


def test_run_folders_whose_names_read_the_same_are_refused(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    for raw in (b"r\xe9", b"r\\xe9"):
        write_trace(runs / name(raw) / "t.json", good_events())
    code, _out, err = ingest(tmp_path, runs)
    assert code == 1
    [error] = lines(err, "error")
    assert error.startswith("error: two run folders named 'r\\xe9': "), error
    assert "not UTF-8" in error and "rename one)" in error


def test_run_names_are_shown_as_text_not_markup(tmp_path: Path) -> None:
    """The summary table and progress read rich markup: a name must not be obeyed."""
    runs = tmp_path / "runs"
    for folder in ("[bold]x", "a[red]b", "tab\there"):
        write_trace(runs / folder / "t.json", good_events())
    code, out, err = ingest(tmp_path, runs)
    assert code == 0, err
    assert "[bold]x" in out and "a[red]b" in out and "tab\\there" in out, out


def test_listing_under_an_ascii_locale(tmp_path: Path) -> None:
    """Names with é and ☃ are escaped on an ASCII terminal instead of raising."""
    write_trace(tmp_path / "runs" / "café ☃" / name(b"t\xff.json"), good_events())
    code, _out, err = ingest(tmp_path, tmp_path / "runs")
    assert code == 0, err
    code, out, err = etl("query", "SELECT run_name FROM runs", "--warehouse",
                         str(tmp_path / "wh"), "--format", "csv", env=ASCII_LOCALE,
                         encoding="ascii")
    assert (code, out) == (0, "run_name\ncaf\\xe9 \\u2603\n"), err


def test_ingest_under_an_ascii_locale(tmp_path: Path) -> None:
    """The stored name is the UTF-8 reading of the bytes whatever the locale: `café ☃`,
    not `caf\\xc3\\xa9 ...` (Python decodes the name as ASCII under this locale)."""
    runs = tmp_path / "runs"
    write_trace(runs / "café ☃" / name(b"t\xff.json"), good_events())
    bad = runs / name(b"bad\xff")
    bad.mkdir()
    (bad / "t.json").write_text("{")
    code, out, err = ingest(tmp_path, runs, env=ASCII_LOCALE, encoding="ascii")
    assert code == 1
    [error] = lines(err, "error")
    assert error.startswith("error: bad\\xff/t.json: "), error
    assert "caf\\xe9 \\u2603" in out  # the terminal cannot show é: escaped, not raised
    rows = runs_rows(tmp_path)
    assert [(r["run_name"], r["paths"]) for r in rows] == [("café ☃", ["t\\xff.json"])]
