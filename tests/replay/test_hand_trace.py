"""A hand-made trace whose critical path and what-ifs are worked out below.

One step on one thread, two kernels on stream 7, the step ending in a stream synchronize
that CUPTI's record names (µs):

    host   |step 0 ................................................................. 100|
           |  launch1 10-15   launch2 20-25   cudaStreamSynchronize 30 ............. 95 |
    stream 7                 K1 18 ............ 50  K2 50 ...................... 90

Window = [min(hs 0, first kernel 18), max(he 100, last kernel end 90)] = [0, 100].
Critical path, back from the step's end: host 95-100 (after the sync), sync_wait 90-95
(the sync returns 5 µs after K2), gpu K2 50-90, K2 waits for K1 (queue 0: no segment),
gpu K1 18-50, launch 10-18 (launch1's start to K1's start), host 0-10: 100 µs in all.

What-ifs by hand:
- all:0.5: K1 16 µs (18-34), K2 20 µs (max(launch2 20, 34) = 34 to 54), the sync ends at
  54 + 5 = 59, the step at 59 + 5 = 64: 64 µs, speedup 100 / 64 = 1.5625.
- host:0: every gap and the launch calls' own time gone: launch1 starts at 0, K1 8-40,
  K2 40-80, the sync (it waited: no time of its own) ends at 85, the step at 85: 85 µs.
- kernel=K2:0: K2 takes nothing: K1 18-50, K2 50-50, the sync ends at 55, the step at 60.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import etl
from tests.conftest import event, kernel, launch, step, write_trace

US = 1000


def hand_trace() -> list[dict[str, Any]]:
    sync_call = event(cat="cuda_runtime", name="cudaStreamSynchronize", ts=30 * US,
                      dur=65 * US, correlation=3)
    sync_record = event(cat="cuda_sync", name="Stream Sync", ts=31 * US, dur=63 * US,
                        pid=0, tid=7, correlation=3, stream=7, device=0)
    return [step(1, 0, 100 * US),
            launch(1, 10 * US, 5 * US), launch(2, 20 * US, 5 * US), sync_call,
            kernel(1, 18 * US, 32 * US, name="K1"), kernel(2, 50 * US, 40 * US, name="K2"),
            sync_record]


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hand")
    write_trace(root / "runs" / "hand" / "trace.json", hand_trace())
    [result] = etl.ingest(root / "runs", root / "wh", jobs=1)
    assert result.status == "ingested", result.error
    assert etl.api.critical_path(warehouse=root / "wh").runs == ["hand"]
    return root / "wh"


def test_the_critical_path_is_the_one_worked_by_hand(warehouse: Path) -> None:
    con = etl.connect(warehouse)
    rows = con.execute("SELECT segment_kind, name, start_ns, dur_ns FROM critical_path "
                       "ORDER BY seq").fetchall()
    assert [(k, n, s // US, d // US) for k, n, s, d in rows] == [
        ("host", "cudaLaunchKernel", 0, 10), ("launch", "K1", 10, 8), ("gpu", "K1", 18, 32),
        ("gpu", "K2", 50, 40), ("sync_wait", "cudaStreamSynchronize", 90, 5),
        ("host", "step 1", 95, 5)]


def test_the_summary_shares_add_up_by_kind(warehouse: Path) -> None:
    con = etl.connect(warehouse)
    shares = dict(con.execute("SELECT segment_kind, sum(path_share) FROM critical_path_summary "
                              "GROUP BY ALL").fetchall())
    assert shares == pytest.approx({"host": 0.15, "launch": 0.08, "gpu": 0.72,
                                    "sync_wait": 0.05})


@pytest.mark.parametrize(("scale", "whatif_us"), [
    ("all:0.5", 64), ("host:0", 85), ("kernel=K2:0", 60), ("kernel=K1:1", 100)])
def test_what_ifs_worked_by_hand(warehouse: Path, scale: str, whatif_us: int) -> None:
    [row] = etl.api.whatif("hand", [scale], warehouse).rows
    assert (row["measured_ns"], row["replayed_ns"]) == (100 * US, 100 * US)
    assert row["whatif_ns"] == whatif_us * US
    assert row["speedup_ratio"] == pytest.approx(100 / whatif_us)


def test_without_the_synchronization_record_the_wait_stays_as_measured(tmp_path: Path) -> None:
    """The same trace without CUPTI's record: which stream the host waited for is not
    written anywhere, so the wait is kept (and said), never guessed."""
    events = [e for e in hand_trace() if e["cat"] != "cuda_sync"]
    write_trace(tmp_path / "runs" / "hand" / "trace.json", events)
    etl.ingest(tmp_path / "runs", tmp_path / "wh", jobs=1)
    result = etl.api.whatif("hand", ["all:0.5"], tmp_path / "wh")
    assert result.rows[0]["whatif_ns"] == 100 * US  # the step still ends when it did
    assert result.unlinked == {"stream_sync": 1}
    assert any("do not say which stream" in note for note in result.notes())
    computed = etl.api.critical_path(warehouse=tmp_path / "wh")
    assert computed.unlinked == {"hand": {"stream_sync": 1}}
    assert "do not say which stream" in computed.notes()[0]
    con = etl.connect(tmp_path / "wh")
    waits = con.execute("SELECT name, dur_ns FROM critical_path WHERE "
                        "segment_kind = 'sync_wait'").fetchall()
    assert waits == [("cudaStreamSynchronize", 65 * US)]
