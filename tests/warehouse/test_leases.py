"""Reader leases: a folder that a running `etl query` may read outlives the grace period.

Garbage collection runs at each publish; here the grace is set to zero so that only the
lease can keep a superseded folder.
"""
from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

import pytest

from etl.warehouse import store as warehouse_module
from etl.load.ingest import ingest_all
from etl.views.query import run_query
from etl.warehouse.store import Warehouse
from tests.conftest import kernel, launch, publish_folder, publish_id_of, step, write_trace


@pytest.fixture
def run(tmp_path: Path) -> Path:
    folder = tmp_path / "runs" / "r0"
    write_trace(folder / "t.json", [step(1, 0, 100_000), launch(1, 1_000),
                                    kernel(1, 10_000, 40_000)])
    return folder


def republish(run: Path, wh: Warehouse, version: int) -> str:
    """Publish a new version of the run; its publish id."""
    (run / "run.toml").write_text(f'notes = "v{version}"\n')
    [result] = ingest_all([run], wh)
    assert result.status == "ingested", result
    return wh.read_runs(["publish_id"])["publish_id"][0].as_py()


def publish_ids(wh: Warehouse) -> set[str]:
    return {publish_id_of(p) for p in wh.data.iterdir() if p.name != "_schema"}


def test_a_lease_keeps_what_its_reader_may_read(run: Path, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(warehouse_module, "GRACE_SECONDS", 0)
    wh = Warehouse.at(tmp_path / "wh")
    first = republish(run, wh, 0)
    with wh.reader_lease():
        second = republish(run, wh, 1)
        third = republish(run, wh, 2)
        assert publish_ids(wh) == {first, second, third}  # all superseded while it reads
    fourth = republish(run, wh, 3)
    assert publish_ids(wh) == {fourth}
    assert list(wh.readers.iterdir()) == []


def test_a_lease_does_not_keep_what_was_superseded_before_it(
        run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    wh = Warehouse.at(tmp_path / "wh")
    first = republish(run, wh, 0)
    second = republish(run, wh, 1)  # supersedes the first, which has its grace
    folder = publish_folder(wh.root, first)
    assert folder is not None
    long_ago = time.time() - 5
    os.utime(folder, (long_ago, long_ago))  # superseded 5 s before the lease below
    monkeypatch.setattr(warehouse_module, "GRACE_SECONDS", 0)
    with wh.reader_lease():
        third = republish(run, wh, 2)
        assert publish_ids(wh) == {second, third}


def test_a_dead_readers_lease_is_removed(tmp_path: Path) -> None:
    wh = Warehouse.at(tmp_path / "wh")
    wh.init()
    wh.readers.mkdir()
    stale = wh.readers / "999999.dead.lease"
    stale.touch()  # nobody holds its lock
    with wh.reader_lease():
        [live] = [p for p in wh.readers.glob("*.lease") if p != stale]
        with open(live) as fh, pytest.raises(BlockingIOError):
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)  # held by this reader
        assert len(wh.live_lease_starts()) == 1
    assert not stale.exists()


def test_etl_query_leaves_no_lease(run: Path, tmp_path: Path) -> None:
    wh = Warehouse.at(tmp_path / "wh")
    ingest_all([run], wh)
    columns, rows = run_query(wh.root, "SELECT count(*) AS n FROM kernels")
    assert rows == [(1,)]
    assert list(wh.readers.iterdir()) == []


def test_leases_taken_at_once_by_one_process_are_all_counted(tmp_path: Path) -> None:
    """Two readers in one process (threads) hold two leases: ending one keeps the other."""
    wh = Warehouse.at(tmp_path / "wh")
    wh.init()
    with wh.reader_lease():
        with wh.reader_lease():
            assert len(wh.live_lease_starts()) == 2
        assert len(wh.live_lease_starts()) == 1
    assert wh.live_lease_starts() == []


def test_a_lease_named_while_listed_does_not_stop_the_collector(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A reader renames its .tmp to .lease between the collector's listing and its stat:
    the publish that collects garbage must go on (it failed with FileNotFoundError)."""
    wh = Warehouse.at(tmp_path / "wh")
    wh.init()
    wh.readers.mkdir()
    gone = wh.readers / "123-abc.tmp"  # listed, then renamed away before the stat
    listed = Path.glob

    def glob_with_vanished(self: Path, pattern: str):  # type: ignore[no-untyped-def]
        found = list(listed(self, pattern))
        return found + [gone] if pattern == "*.tmp" else found

    monkeypatch.setattr(Path, "glob", glob_with_vanished)
    assert wh.live_lease_starts() == []


def test_collection_reads_the_runs_once_and_only_when_a_folder_is_due(
        run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """collect_garbage (the end of every query) lists the folders first: while all are
    younger than their grace it reads no runs; when one is due it reads them once, and
    the due folders go (a superseded publish, a dead writer's staging folder)."""
    wh = Warehouse.at(tmp_path / "wh")
    first = republish(run, wh, 0)
    second = republish(run, wh, 1)  # supersedes the first, which has its grace
    stale_stage = wh.staging / "0123456789abcdef-000000000000.999999999"
    stale_stage.mkdir(parents=True)
    reads: list[list[str] | None] = []
    read_runs = Warehouse.read_runs
    monkeypatch.setattr(Warehouse, "read_runs",
                        lambda self, columns=None: reads.append(columns) or read_runs(self,
                                                                                     columns))
    wh.collect_garbage()
    assert reads == [] and publish_ids(wh) == {first, second} and stale_stage.exists()
    folder = publish_folder(wh.root, first)
    assert folder is not None
    long_ago = time.time() - warehouse_module.GRACE_SECONDS - 5
    for due in (folder, stale_stage):
        os.utime(due, (long_ago, long_ago))
    wh.collect_garbage()
    assert reads == [["publish_id"]]
    assert publish_ids(wh) == {second} and not stale_stage.exists()


def test_a_publish_collects_with_the_runs_it_read_under_the_lock(
        run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A publish reads the runs twice (to skip unchanged runs, then under the writers'
    lock) and collects with the second reading: a superseded publish's derived rows go,
    another run's stay."""
    monkeypatch.setattr(warehouse_module, "GRACE_SECONDS", 0)
    other = run.parent / "r1"
    write_trace(other / "t.json", [step(1, 0, 100_000), launch(1, 1_000),
                                   kernel(1, 10_000, 30_000)])
    wh = Warehouse.at(tmp_path / "wh")
    ingest_all([run, other], wh)
    ids = dict(zip(*(wh.read_runs(["publish_id"])[c].to_pylist()
                     for c in ("run_name", "publish_id"))))
    for publish_id in ids.values():  # as `etl critical-path` leaves them
        (wh.derived / publish_id).mkdir(parents=True)
    reads: list[list[str] | None] = []
    read_runs = Warehouse.read_runs
    monkeypatch.setattr(Warehouse, "read_runs",
                        lambda self, columns=None: reads.append(columns) or read_runs(self,
                                                                                     columns))
    (run / "run.toml").write_text('notes = "v1"\n')
    [result] = ingest_all([run], wh)
    assert result.status == "ingested" and len(reads) == 2
    assert {p.name for p in wh.derived.iterdir() if p.name != "_schema"} == {ids["r1"]}


@pytest.mark.parametrize("lost", ["0", "", None])
def test_a_sequence_file_that_lags_its_publishes_still_numbers_the_newest(
        run: Path, tmp_path: Path, lost: str | None) -> None:
    """The sequence file is replaced without an fsync: after a power loss it may hold an
    older number, nothing, or be gone. The next publish is still numbered above every
    run's, so it is the current one."""
    wh = Warehouse.at(tmp_path / "wh")
    republish(run, wh, 0)
    second = republish(run, wh, 1)
    if lost is None:
        wh.sequence.unlink()
    else:
        wh.sequence.write_text(lost)
    third = republish(run, wh, 2)
    runs = wh.read_runs(["publish_id"])
    assert third != second and runs["publish_seq"].to_pylist() == [3]
    assert wh.sequence.read_text() == "3"
