"""Compaction into segments copies every value, keeps one copy of each run, and never
loses a run republished while it works.

Each test compares every table (all columns but the publish's own id and sequence) and two
utilization views, read through the stored views and through `etl query`, before and after
compacting; segments are made small (SEGMENT_RUNS = 2) so runs span several of them.
"""
from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from click.testing import CliRunner

from etl.warehouse import compact as compact_module
from etl.warehouse import store as warehouse_module
from etl.cli import main
from etl.warehouse.compact import SEGMENT_PREFIX, compact
from etl.load.ingest import ingest_all
from etl.views.query import run_query
from etl.core.schema import TABLES, table_schema
from etl.views.database import ensure_views
from etl.warehouse.store import Warehouse
from tests.conftest import ETL, ROOT, cli, kernel, launch, step, write_trace

RUNS = 5
KILLS = 6
VIEWS = ("gpu_utilization", "run_summary")


def run_events(seed: int) -> list[dict[str, Any]]:
    """Three steps with seed-dependent kernels, and an orphan kernel (an anomaly)."""
    events: list[dict[str, Any]] = []
    for it in range(3):
        start = it * 100_000
        events.append(step(it, start, 100_000))
        for j in range(4 + seed):
            corr = it * 100 + j + 1
            events.append(launch(corr, start + 1_000 + j * 5_000))
            events.append(kernel(corr, start + 2_000 + j * 5_000, 1_000 + 100 * seed,
                                 name=f"k{seed}_{j}"))
    events.append(kernel(99_999, 0, 500, name="orphan"))
    return events


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    root = tmp_path / "runs"
    for n in range(RUNS):
        write_trace(root / f"r{n}" / "t.json", run_events(n))
    return root


@pytest.fixture(autouse=True)
def small_segments(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compact_module, "SEGMENT_RUNS", 2)


def contents(wh: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every table and view, sorted, without the publish's id and sequence; the same
    through the stored views (as the shell reads them) and through `etl query`."""
    import duckdb

    assert ensure_views(Warehouse.at(wh))
    names = (*TABLES, *VIEWS)
    # one query, each relation's rows a list of its row structs: `etl query` opens and pins
    # a snapshot per query (~90 ms), 17 of them per call before
    sql = "SELECT " + ", ".join(f"(SELECT list(t) FROM ({select_sql(name)}) AS t) AS {name}"
                                for name in names)
    with duckdb.connect(str(wh / "warehouse.duckdb"), read_only=True) as con:
        [stored_lists] = con.execute(sql).fetchall()
    [pinned_lists] = run_query(wh, sql)[1]
    stored, pinned = ({name: sorted((tuple(row.values()) for row in rows or []), key=repr)
                       for name, rows in zip(names, lists)}
                      for lists in (stored_lists, pinned_lists))
    assert pinned == stored
    return stored


def select_sql(name: str) -> str:
    if name in TABLES:
        columns = [c for c in table_schema(name).names if c not in ("publish_id", "publish_seq")]
        return "SELECT " + ", ".join(f'"{c}"' for c in columns) + f" FROM {name}"
    return f"SELECT * FROM {name}"


def folders(wh: Path) -> list[str]:
    return sorted(p.name for p in (wh / "data").iterdir() if p.name != "_schema")


def test_compaction_copies_every_value(runs: Path, tmp_path: Path) -> None:
    wh = Warehouse.at(tmp_path / "wh")
    ingest_all(sorted(runs.iterdir()), wh)
    before = contents(wh.root)
    assert len(before["runs"]) == RUNS and len(before["kernels"]) > RUNS
    result = compact(wh)
    assert result.runs == RUNS and len(result.segments) == 3
    assert contents(wh.root) == before
    current = wh.read_runs(["publish_id"])["folder"].to_pylist()
    assert all(f.startswith(SEGMENT_PREFIX) for f in current)
    assert len(folders(wh.root)) == RUNS + 3  # the originals live out their grace
    assert compact(wh).runs == 0  # nothing left to do


def test_a_republished_run_replaces_its_segment_copy(runs: Path, tmp_path: Path) -> None:
    wh = Warehouse.at(tmp_path / "wh")
    ingest_all(sorted(runs.iterdir()), wh)
    compact(wh)
    before = contents(wh.root)
    write_trace(runs / "r1" / "t.json", run_events(7))  # same name, new content
    ingest_all([runs / "r1"], wh)
    after = contents(wh.root)
    assert len(after["runs"]) == RUNS
    changed = {row[0] for row in after["kernels"]} - {row[0] for row in before["kernels"]}
    assert len(changed) == 1  # one new run_id; its old rows are gone from every view
    assert len(after["kernels"]) == len(before["kernels"]) + 3 * (7 - 1)


def test_a_run_republished_during_compaction_keeps_its_new_publish(
        runs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    wh = Warehouse.at(tmp_path / "wh")
    ingest_all(sorted(runs.iterdir()), wh)
    original = Warehouse.publish_segment
    raced: list[str] = []

    def republish_first(self: Warehouse, staged: Path, rows: Any, stem: str,
                        expected: dict[str, str]) -> Any:
        if not raced:  # the first segment holds the two smallest run_ids
            raced.append(sorted(expected)[0])
            (runs / raced[0] / "run.toml").write_text('notes = "raced"\n')
            ingest_all([runs / raced[0]], wh)
        return original(self, staged, rows, stem, expected)

    monkeypatch.setattr(Warehouse, "publish_segment", republish_first)
    compact(wh)
    current = {r["run_name"]: r for r in wh.read_runs().to_pylist()}
    assert not current[raced[0]]["folder"].startswith(SEGMENT_PREFIX)
    assert current[raced[0]]["run_toml"] == 'notes = "raced"\n'
    assert sum(r["folder"].startswith(SEGMENT_PREFIX) for r in current.values()) == RUNS - 1
    assert len(contents(wh.root)["runs"]) == RUNS


def test_sparse_segments_are_rewritten_and_collected(runs: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compact_module, "SEGMENT_RUNS", RUNS)
    wh = Warehouse.at(tmp_path / "wh")
    ingest_all(sorted(runs.iterdir()), wh)
    [first] = compact(wh).segments
    for n in range(3):  # 3 of its 5 runs republished: 2 live < half
        (runs / f"r{n}" / "run.toml").write_text('notes = "again"\n')
    ingest_all([runs / f"r{n}" for n in range(3)], wh)
    before = contents(wh.root)
    monkeypatch.setattr(warehouse_module, "GRACE_SECONDS", 0)
    result = compact(wh)
    assert result.runs == RUNS and len(result.segments) == 1
    # no live run is left in the first segment; the compaction's own reader lease kept it
    # until it ended, and `etl query` collects it after its answer (the grace is over),
    # as would the next publish
    assert first.folder in folders(wh.root)
    assert contents(wh.root) == before
    assert first.folder in folders(wh.root)
    answer = CliRunner().invoke(main, ["query", "SELECT 1", "--warehouse", str(wh.root)])
    assert answer.exit_code == 0, answer.output
    assert folders(wh.root) == sorted(p.folder for p in result.segments)


def test_an_older_schema_is_read_into_the_current_one(runs: Path, tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    wh = Warehouse.at(tmp_path / "wh")
    ingest_all(sorted(runs.iterdir()), wh)
    folder = wh.data / wh.read_runs()["folder"][0].as_py()
    path = folder / "kernels.parquet"
    old = pq.read_table(path)
    pq.write_table(old.drop_columns(["layer"]), path)  # as if written before `layer`
    compact(wh)
    run_id = old["run_id"][0].as_py()
    layers = run_query(wh.root, f"SELECT count(*), count(layer) FROM kernels "
                                f"WHERE run_id = '{run_id}'")[1]
    assert layers == [(old.num_rows, 0)]


def test_one_compaction_at_a_time(runs: Path, tmp_path: Path) -> None:
    import fcntl

    wh = Warehouse.at(tmp_path / "wh")
    ingest_all(sorted(runs.iterdir()), wh)
    with open(wh.root / ".compact.lock", "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        assert compact(wh).busy
    assert not compact(wh).busy


def test_etl_compact_and_ingest_compact(runs: Path, tmp_path: Path) -> None:
    wh = tmp_path / "wh"
    assert cli("ingest", str(runs / "r0"), "--warehouse", str(wh)).returncode == 0
    out = cli("compact", "--warehouse", str(wh))
    assert out.returncode == 0 and "nothing to compact" in out.stdout, out.stdout
    env = {"ETL_AUTO_COMPACT_FOLDERS": "3"}
    out = cli("ingest", str(runs), "--warehouse", str(wh), env=env)
    assert out.returncode == 0 and f"compacted {RUNS} runs into" in out.stdout, out.stdout
    out = cli("compact", "--warehouse", str(tmp_path / "none"))
    assert out.returncode != 0 and "no warehouse here" in out.stderr


@pytest.mark.slow  # a kill loop: KILLS processes started and killed at random moments
def test_a_killed_compaction_changes_nothing(runs: Path, tmp_path: Path) -> None:
    """SIGKILL at random moments of `etl compact`: what readers see is unchanged, and the
    next compaction completes."""
    import random

    wh = Warehouse.at(tmp_path / "wh")
    ingest_all(sorted(runs.iterdir()), wh)
    before = contents(wh.root)
    rng = random.Random(5)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for _ in range(KILLS):
        proc = subprocess.Popen([*ETL, "compact", "--warehouse", str(wh.root)], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.3, 2.0))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert contents(wh.root) == before
    compact(wh)
    assert contents(wh.root) == before
