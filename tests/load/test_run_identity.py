"""Which folders are runs, what they are called, and when a name may replace a run."""
from __future__ import annotations

from pathlib import Path

import pytest

from etl.core.errors import RunError
from etl.load.runfolder import find_run_folders
from tests.conftest import cli, query_json, write_trace
from tests.views.test_tiny_trace import EVENTS


def tree(root: Path, *traces: str) -> Path:
    for rel in traces:
        write_trace(root / rel, EVENTS)
    return root


def names(found: list) -> list[tuple[str, str]]:
    return [(t.name, t.path.name) for t in found]


def test_a_parent_of_runs_is_not_a_run(tmp_path: Path) -> None:
    """hta/trace_diff holds control/ and test/: two runs, never one merged run."""
    hta = tree(tmp_path / "hta", "trace_diff/control/c.json", "trace_diff/test/t.json",
               "single/s.json")
    (tmp_path / "hta" / "logs").mkdir()
    (tmp_path / "hta" / "logs" / "notes.txt").write_text("no trace here")
    found = find_run_folders([hta])
    assert names(found) == [("logs", "logs"), ("single", "single"), ("control", "control"),
                            ("test", "test")]
    prefixed = find_run_folders([hta], prefix=True)
    assert [t.name for t in prefixed] == ["hta/logs", "hta/single", "hta/trace_diff/control",
                                          "hta/trace_diff/test"]


def test_sub_folders_of_a_run_folder_belong_to_it(tmp_path: Path) -> None:
    run = tree(tmp_path / "run", "rank0.json", "more/rank1.json")
    assert names(find_run_folders([run])) == [("run", "run")]


def test_equal_names_from_two_parents_are_refused_in_one_command(tmp_path: Path) -> None:
    runs = tree(tmp_path / "runs", "a/rank0/t.json", "b/rank0/t.json")
    with pytest.raises(RunError, match="two run folders named 'rank0'.*--prefix"):
        find_run_folders([runs])
    assert [t.name for t in find_run_folders([runs], prefix=True)] == [
        "runs/a/rank0", "runs/b/rank0"]


def test_name_names_one_run_only(tmp_path: Path) -> None:
    runs = tree(tmp_path / "runs", "a/t.json", "b/t.json")
    with pytest.raises(RunError, match="--name x: 2 run folders found"):
        find_run_folders([runs], name="x")
    assert names(find_run_folders([runs / "a"], name="x")) == [("x", "a")]


def test_empty_folder_says_what_was_looked_for(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    out = cli("ingest", str(tmp_path / "empty"), "--warehouse", str(tmp_path / "wh"))
    assert out.returncode == 1 and "Traceback" not in out.stderr
    [line] = out.stderr.splitlines()
    assert "no profiler output in this folder or its sub-folders" in line
    assert "kineto_json" in line and "run.toml" in line


def test_a_name_from_another_folder_needs_replace(tmp_path: Path) -> None:
    first = tree(tmp_path / "one" / "exp", "t.json")
    second = tree(tmp_path / "two" / "exp", "t.json")
    wh = str(tmp_path / "wh")
    assert cli("ingest", str(first), "--warehouse", wh).returncode == 0
    refused = cli("ingest", str(second), "--warehouse", wh)
    assert refused.returncode == 1
    [error] = [line for line in refused.stderr.splitlines() if line.startswith("error:")]
    assert f"ingested from {first}" in error and "--replace" in error
    [row] = query_json(Path(wh), "SELECT run_name, run_path FROM runs")
    assert row["run_path"] == str(first)
    assert cli("ingest", str(second), "--warehouse", wh, "--replace").returncode == 0
    [row] = query_json(Path(wh), "SELECT run_name, run_path FROM runs")
    assert row == {"run_name": "exp", "run_path": str(second)}
    kept = cli("ingest", str(first), "--warehouse", wh, "--name", "exp-one")
    assert kept.returncode == 0, kept.stderr
    rows = query_json(Path(wh), "SELECT run_name FROM runs ORDER BY run_name")
    assert [r["run_name"] for r in rows] == ["exp", "exp-one"]


def test_an_unchanged_run_reports_what_the_warehouse_holds(tmp_path: Path) -> None:
    from etl.load.ingest import ingest_all
    from etl.warehouse.store import Warehouse

    run = tree(tmp_path / "runs" / "r", "t.json")
    warehouse = Warehouse.at(tmp_path / "wh")
    [first] = ingest_all([run], warehouse)
    [again] = ingest_all([run], warehouse)
    assert (first.status, again.status) == ("ingested", "unchanged")
    assert first.kernels > 0 and first.events > 0
    assert (again.events, again.kernels, again.anomalies) == (
        first.events, first.kernels, first.anomalies)
    [row] = query_json(tmp_path / "wh", "SELECT kernel_count, (SELECT count(*) FROM kernels) "
                       "AS rows FROM runs")
    assert row["kernel_count"] == row["rows"] == first.kernels


def test_activities_no_view_can_use_are_reported(tmp_path: Path) -> None:
    from tests.conftest import corpus_path

    run = tmp_path / "runs" / "cupti"
    run.mkdir(parents=True)
    source = corpus_path("hta", "cupti_profiler")
    for f in source.glob("*.json.gz"):
        (run / f.name).symlink_to(f)
    out = cli("ingest", str(tmp_path / "runs"), "--warehouse", str(tmp_path / "wh"))
    assert out.returncode == 0
    [line] = [x for x in out.stderr.splitlines() if "no kernel on a device" in x]
    assert line.startswith("warning: cupti: 77 GPU activities (77 other)")
    good = tree(tmp_path / "more" / "good", "t.json")
    quiet = cli("ingest", str(good), "--warehouse", str(tmp_path / "wh"))
    assert "no kernel on a device" not in quiet.stderr


def test_a_new_run_is_read_while_its_files_are_hashed(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A run the warehouse does not hold cannot be unchanged: its traces are read while
    the hashes (a second a GB) are computed, not after. Here hashing waits until the
    trace reader starts; the other order would keep it waiting until its timeout."""
    import threading

    from etl.extract.kineto import read
    from etl.load import ingest
    from etl.load.ingest import Options, ingest_all
    from etl.warehouse.store import Warehouse

    reading = threading.Event()
    waited: list[bool] = []
    first_pass, hash_inputs = read._first_pass, ingest._hash_inputs

    def first_pass_noted(*args: object, **kwargs: object) -> object:
        reading.set()
        return first_pass(*args, **kwargs)  # type: ignore[arg-type]

    def hash_after_reading_starts(run: object) -> dict[str, str]:
        waited.append(reading.wait(timeout=5))
        return hash_inputs(run)  # type: ignore[arg-type]

    monkeypatch.setattr(read, "_first_pass", first_pass_noted)
    monkeypatch.setattr(ingest, "_hash_inputs", hash_after_reading_starts)
    run = tree(tmp_path / "run", "t.json")
    results = ingest_all([run], Warehouse.at(tmp_path / "wh"), Options(jobs=1))
    assert [r.status for r in results] == ["ingested"] and waited == [True]
    again = ingest_all([run], Warehouse.at(tmp_path / "wh"), Options(jobs=1))
    assert [r.status for r in again] == ["unchanged"]  # a known name: hashed first
