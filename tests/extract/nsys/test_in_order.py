"""Pass 2 without the sort (in_order.py) and with it (DuckDB) link the host rows as the
obvious stack sweep does: threads interleaved, runtime calls with driver calls inside
them, NVTX layers and steps, rows that start together, rows that cannot be linked."""
from __future__ import annotations

import random
import sqlite3
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from etl.extract.kineto import kernel_join
from etl.extract.nsys import passes, spill
from etl.extract.nsys.decode import Export
from etl.extract.nsys.read import step_patterns
from etl.extract.removal import Removal
from tests.extract.nsys.test_nsys_stream import _ingest
from tests.oracle import naive_nsys
from tests.oracle.stack_sweep import sweep

THREADS = (11, 22, 33)
STEP = "ProfilerStep#"


def _timeline(rng: random.Random) -> dict[str, list[tuple[Any, ...]]]:
    """Per thread: steps (thread 11 only) holding NVTX layers holding runtime calls, each
    with a driver call inside that may start with it; a layer may start with its first
    call, an empty call with the next. Every call but the empty ones launches a kernel
    (the driver call shares the runtime call's id)."""
    rows: dict[str, list[tuple[Any, ...]]] = {"runtime": [], "driver": [], "nvtx": [],
                                               "kernel": []}
    corr = 0
    for thread in THREADS:
        t = rng.randrange(5)
        for step in range(8):
            step_start = t
            for layer in range(rng.randrange(1, 4)):
                layer_start = t if rng.random() < 0.5 else t + 1
                t = layer_start
                for _ in range(rng.randrange(1, 5)):
                    corr += 1
                    start, end = t, t + rng.randrange(3, 9)
                    if rng.random() < 0.3:   # an empty call where the next one starts
                        rows["runtime"].append((start, start, thread, None))
                    rows["runtime"].append((start, end, thread, corr))
                    driver_start = start if rng.random() < 0.5 else start + 1
                    rows["driver"].append((driver_start, end - 1, thread, corr))
                    rows["kernel"].append((end + 5, end + 9, corr))
                    t = end + rng.randrange(0, 3)   # the next call may start where it ends
                rows["nvtx"].append((layer_start, t + 1, thread, f"layer{thread}.{layer}"))
                t += 2
            if thread == THREADS[0]:
                rows["nvtx"].append((step_start, t, thread, f"{STEP}{step}"))
            t += 1
    rows["runtime"] += [(t + 50, None, 22, None), (t + 60, t + 55, 33, None)]  # unlinkable
    return rows


def _export(path: Path, rows: dict[str, list[tuple[Any, ...]]], order: str,
            rng: random.Random) -> Path:
    """Each table's rows "in order" of start (rows that start together in any order),
    "by thread" (each thread's rows in start order, one thread after another, as nsys
    writes a multi-process export; the first thread's in two runs), or "shuffled"."""
    def ordered(table: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        table = list(table)
        rng.shuffle(table)
        if order == "shuffled":
            return table
        table.sort(key=lambda r: r[0])
        if order == "in order" or len(table[0]) < 4:
            return table
        first = [r for r in table if r[2] == THREADS[0]]
        runs = [first[1::2], first[::2]] + [[r for r in table if r[2] == t]
                                            for t in THREADS[1:]]
        return [r for run in runs for r in run]

    con = sqlite3.connect(path)
    con.executescript("""
        CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT);
        INSERT INTO StringIds VALUES (1, 'cudaLaunchKernel'), (2, 'cuLaunchKernel'), (3, 'k');
        CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INT, end INT, globalTid INT,
            correlationId INT, nameId INT);
        CREATE TABLE CUPTI_ACTIVITY_KIND_DRIVER (start INT, end INT, globalTid INT,
            correlationId INT, nameId INT);
        CREATE TABLE NVTX_EVENTS (start INT, end INT, eventType INT, text TEXT,
            globalTid INT, textId INT);
        CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INT, end INT, deviceId INT,
            streamId INT, correlationId INT, shortName INT);
    """)
    con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?, ?, ?, 1)",
                    ordered(rows["runtime"]))
    con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_DRIVER VALUES (?, ?, ?, ?, 2)",
                    ordered(rows["driver"]))
    con.executemany("INSERT INTO NVTX_EVENTS VALUES (?, ?, 59, ?, ?, NULL)",
                    [(s, e, text, thread) for s, e, thread, text in ordered(rows["nvtx"])])
    con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?, ?, 0, 7, ?, 3)",
                    ordered(rows["kernel"]))
    con.commit()
    con.close()
    return path


def _by_sweep(path: Path) -> tuple[dict[int, int | None], dict[int, str | None]]:
    """Parents of the host rows and layers of the calls, by event id, from the naive
    reading: the linkable rows (an end not before the start) swept; steps are no layers."""
    host = naive_nsys.host_rows(path)
    linkable = [h for h in host if h[4] is not None and h[4] >= 0]
    is_layer = [h[1] == "nvtx" and not h[2].startswith(STEP) for h in linkable]
    parent, _, layer, _ = sweep([h[5] for h in linkable], [h[3] for h in linkable],
                                [h[3] + h[4] for h in linkable], [False] * len(linkable),
                                is_layer)
    parents: dict[int, int | None] = {h[0]: None for h in host}
    layers: dict[int, str | None] = {}
    for row, h in enumerate(linkable):
        parents[h[0]] = linkable[parent[row]][0] if parent[row] >= 0 else None
        layers[h[0]] = linkable[layer[row]][2] if layer[row] >= 0 else None
    return parents, layers


@pytest.mark.parametrize(("case", "workers"), [("in order", 1), ("in order", 2),
                                               ("by thread", 1), ("runtime calls only", 1),
                                               ("shuffled", 1), ("too many runs", 1),
                                               ("many ranges", 1)])
def test_host_rows_link_as_the_sweep_with_and_without_the_sort(
        case: str, workers: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks of 7 rows: every thread and stream is cut many times. "many ranges": the
    calls are in start order but the NVTX ranges are more than pass 2 holds, so the calls
    written so far move to the sorted path's Parquet. "runtime calls only": no other
    stream to merge with, rows that start together are in one table. "by thread": runs
    of calls merged; "too many runs": more than pass 2 merges, so they are sorted."""
    if case == "many ranges":
        monkeypatch.setattr(spill, "NVTX_IN_MEMORY", 3)
    if case == "too many runs":
        monkeypatch.setattr(spill, "MAX_RUNS", 5)
    merged: list[bool] = []
    real = passes.rows_in_start_order
    monkeypatch.setattr(passes, "rows_in_start_order",
                        lambda *a: merged.append(True) or real(*a))
    rng = random.Random(7)
    rows = _timeline(rng)
    if case == "runtime calls only":
        rows["driver"], rows["nvtx"] = [], []
    order = {"shuffled": "shuffled", "by thread": "by thread", "too many runs": "by thread"}
    path = _export(tmp_path / "threads.sqlite", rows, order.get(case, "in order"), rng)
    _, got = _ingest(path, tmp_path, chunk_rows=7, workers=workers)
    assert merged == ([True] if case in ("in order", "runtime calls only", "by thread")
                      else [])
    parents, layers = _by_sweep(path)
    assert {h["event_id"]: h["parent_event_id"] for h in got["host_events"]} == parents
    nested = sum(p is not None for p in parents.values())    # the sweep found nesting
    assert nested > (10 if case == "runtime calls only" else len(parents) // 2)
    launches = {k["launch_event_id"]: k["layer"] for k in got["kernels"]}
    assert launches == {event: layers[event] for event in launches}
    assert len(launches) == len(got["kernels"])
    assert len(set(launches.values()) - {None}) > 3 or case == "runtime calls only"


def test_driver_calls_after_the_runtime_calls_are_merged_by_start(tmp_path: Path) -> None:
    """Each table in start order, the driver table after the runtime table in the file:
    both are in order, so pass 2 merges them instead of sorting."""
    rows = _timeline(random.Random(3))
    path = _export(tmp_path / "threads.sqlite", rows, "in order", random.Random(3))
    con = sqlite3.connect(path)
    first_driver = con.execute("SELECT min(start) FROM CUPTI_ACTIVITY_KIND_DRIVER").fetchone()
    last_runtime = con.execute("SELECT max(start) FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()
    con.close()
    assert first_driver[0] < last_runtime[0]   # the two tables overlap in time
    _, got = _ingest(path, tmp_path, chunk_rows=5)
    parents, _ = _by_sweep(path)
    assert {h["event_id"]: h["parent_event_id"] for h in got["host_events"]} == parents


def test_the_spill_is_removed_as_it_is_read(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Pass 2's files are given to the removal thread once pass 2 ends, each partition
    once pass 3 has read it (before the next is read); the folder is gone at the end."""
    asked: list[str] = []
    monkeypatch.setattr(kernel_join, "PART_ROWS", 40)
    real_remove, real_rows = Removal.remove, passes._kernel_rows
    monkeypatch.setattr(Removal, "remove", lambda self, *paths: (
        asked.extend(p.name for p in paths), real_remove(self, *paths))[1])
    monkeypatch.setattr(passes, "_kernel_rows",
                        lambda *a: asked.append("read") or real_rows(*a))
    path = _export(tmp_path / "threads.sqlite", _timeline(random.Random(5)), "in order",
                   random.Random(5))
    _ingest(path, tmp_path, chunk_rows=7)
    assert asked[:5] == ["calls-0-000.arrow", "calls-1-001.arrow", "host.parquet",
                         "nvtx.parquet", "duckdb"]
    partitions = [name for name in asked if name.isdigit()]
    assert len(partitions) > 3 and partitions == sorted(partitions, key=int)
    assert "".join("r" if name == "read" else "p" for name in asked[5:]).replace(
        "rp", "") == ""    # each partition read, then removed
    assert sorted(p.name for p in tmp_path.iterdir()) == ["threads.sqlite"]


def test_calls_moved_to_parquet_after_the_ranges_are_counted_are_a_whole_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """In start order, but more NVTX ranges than pass 2 holds: the calls move to Parquet
    once the ranges are counted, and the file is complete when pass 1 returns (not when
    the spill object is collected: it is kept alive here)."""
    monkeypatch.setattr(spill, "NVTX_IN_MEMORY", 3)
    kept: list[spill.CallSpill] = []
    real_init = spill.CallSpill.__init__

    def init(self: spill.CallSpill, folder: Path) -> None:
        kept.append(self)
        real_init(self, folder)

    monkeypatch.setattr(spill.CallSpill, "__init__", init)
    path = _export(tmp_path / "threads.sqlite", _timeline(random.Random(5)), "in order",
                   random.Random(5))
    export = Export(path)
    folder = tmp_path / "spill"
    folder.mkdir()
    found = spill.Spilled(parts=spill.partitioning(export, kernel_join.PART_ROWS))
    spill._spill_host(export, spill.Names(export.strings()),
                      spill.StepRanges(step_patterns(None)), folder, found)
    export.close()
    assert kept and not found.in_start_order
    rows = pq.read_table(folder / spill.HOST_FILE).num_rows
    assert rows == found.host_rows - found.nvtx_rows and not list(folder.glob("calls-*"))
