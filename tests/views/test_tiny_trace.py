"""A hand-built trace whose every number is worked out by hand below."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import cli, event, kernel, launch, query_json, step, write_trace

#  thread 1:  ProfilerStep#1 [0, 100 µs)                ProfilerStep#2 [100, 200 µs)
#    nn.Module: Linear_0 [0.5, 60.5) > aten::linear [1, 51) > aten::addmm [2, 42) > launch c1 @3
#    launch c2 @70 (no op), cudaMemcpyAsync c4 @55                        launch c3 @150
#  device 0:  k1 [10, 40)  k2 [30, 50) (stream 8)  memcpy [60, 65)  orphan [95, 105)  k3 [190, 230)
EVENTS = [
    step(1, 0, 100_000),
    event(cat="python_function", name="nn.Module: Linear_0", ts=500, dur=60_000),
    event(name="aten::linear", ts=1_000, dur=50_000, External_id=1),
    event(name="aten::addmm", ts=2_000, dur=40_000, External_id=2),
    launch(1, 3_000),
    launch(2, 70_000),
    launch(4, 55_000, name="cudaMemcpyAsync"),
    kernel(1, 10_000, 30_000, name="gemm"),
    kernel(2, 30_000, 20_000, stream=8, name="relu"),
    kernel(4, 60_000, 5_000, cat="gpu_memcpy", name="Memcpy HtoD"),
    kernel(99, 95_000, 10_000, name="orphan"),
    step(2, 100_000, 100_000),
    launch(3, 150_000),
    kernel(3, 190_000, 40_000, name="gemm"),
]


def ingest_tiny(root: Path, events: list[dict[str, Any]]) -> Path:
    write_trace(root / "runs" / "tiny" / "trace.json", events)
    (root / "runs" / "tiny" / "run.toml").write_text('batch_size = 10\nprecision = "fp32"\n')
    result = cli("ingest", str(root / "runs"), "--warehouse", str(root / "wh"))
    assert result.returncode == 0, result.stderr
    return root / "wh"


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return ingest_tiny(tmp_path_factory.mktemp("tiny"), EVENTS)


def test_gpu_utilization_by_hand(warehouse: Path) -> None:
    rows = query_json(warehouse, "SELECT iteration, window_start_ns, window_ns, busy_ns, "
                      "kernel_count, gpu_util, activity_busy_ns, kernel_time_ns "
                      "FROM gpu_utilization ORDER BY iteration")
    assert rows[0] == {"iteration": 1, "window_start_ns": 0, "window_ns": 100_000,
                       "busy_ns": 45_000, "kernel_count": 2, "gpu_util": 0.45,
                       "activity_busy_ns": 50_000, "kernel_time_ns": 55_000}
    # step 2's kernel runs past he: the window stretches to 230 µs; the orphan's tail counts
    assert rows[1]["window_start_ns"] == 100_000 and rows[1]["window_ns"] == 130_000
    assert rows[1]["busy_ns"] == 45_000 and rows[1]["kernel_count"] == 1
    assert rows[1]["gpu_util"] == pytest.approx(45 / 130, abs=1e-15)


def test_links_by_hand(warehouse: Path) -> None:
    rows = query_json(warehouse, "SELECT name, op_name, layer, iteration, launch_event_id "
                      "FROM kernels ORDER BY ts_ns")
    by_name = {r["name"]: r for r in reversed(rows)}  # first of each name
    assert by_name["gemm"]["op_name"] == "aten::linear"       # outermost op, not addmm
    assert by_name["gemm"]["layer"] == "nn.Module: Linear_0"
    assert by_name["gemm"]["launch_event_id"] == 4
    assert by_name["relu"]["op_name"] is None and by_name["relu"]["layer"] is None
    assert by_name["orphan"]["iteration"] is None and by_name["orphan"]["launch_event_id"] is None
    assert [r["iteration"] for r in rows if r["name"] == "gemm"] == [1, 2]


def test_parents_and_anomalies(warehouse: Path) -> None:
    parents = query_json(warehouse, "SELECT event_id, parent_event_id, iteration "
                         "FROM host_events ORDER BY event_id")
    assert [(r["event_id"], r["parent_event_id"]) for r in parents[:5]] == [
        (0, None), (1, 0), (2, 1), (3, 2), (4, 3)]
    assert parents[-1]["iteration"] == 2
    anomalies = query_json(warehouse, "SELECT kind, event_id FROM anomalies")
    assert anomalies == [{"kind": "kernel_without_launch", "event_id": 10}]


def test_run_summary_falls_back_to_closest(warehouse: Path) -> None:
    # windows 100 and 130 µs, median 115: neither within 5%; tie → earlier window
    [row] = query_json(warehouse, "SELECT selected_iteration, selection, idle_ns, "
                       "throughput_samples_per_s, median_window_ns FROM run_summary")
    assert row["selected_iteration"] == 1 and row["selection"] == "closest_to_median"
    assert row["idle_ns"] == 55_000
    assert row["throughput_samples_per_s"] == pytest.approx(10 * 1e9 / 100_000)
    assert row["median_window_ns"] == 115_000


def test_trace_without_steps_is_one_window(tmp_path: Path) -> None:
    events = [launch(1, 1_000), kernel(1, 5_000, 2_000), event(name="op", ts=0, dur=10_000),
              event(cat="Trace", name="PyTorch Profiler (0)", ts=-50_000, dur=500_000)]
    write_trace(tmp_path / "runs" / "flat" / "t.json", events)
    result = cli("ingest", str(tmp_path / "runs"), "--warehouse", str(tmp_path / "wh"))
    assert result.returncode == 0
    [row] = query_json(tmp_path / "wh", "SELECT iteration, window_ns, busy_ns, kernel_count "
                       "FROM gpu_utilization")
    # the span of all complete events, the profiler's own Trace span included: [-50, 450 µs)
    assert row == {"iteration": None, "window_ns": 500_000, "busy_ns": 2_000, "kernel_count": 1}


def test_written_as_begin_end_pairs(warehouse: Path, tmp_path: Path) -> None:
    """The same trace with its host events written as B/E pairs: the same views and links,
    and the naive oracle (which pairs B/E itself) agrees."""
    from tests.oracle.naive_kineto import gpu_utilization
    from tests.extract.kineto.test_begin_end import as_begin_end

    written = as_begin_end(EVENTS)
    assert {e["ph"] for e in written} == {"X", "B", "E"}
    paired = ingest_tiny(tmp_path, written)
    utilization = ("SELECT iteration, window_start_ns, window_ns, busy_ns, activity_busy_ns, "
                   "kernel_count, kernel_time_ns, gpu_util FROM gpu_utilization "
                   "ORDER BY iteration")
    got = query_json(paired, utilization)
    assert got == query_json(warehouse, utilization) and len(got) == 2
    oracle = gpu_utilization(tmp_path / "runs" / "tiny" / "trace.json")
    assert [{k: r[k] for k in got[0]} for r in oracle] == got
    links = ("SELECT k.name, k.ts_ns, k.op_name, k.layer, k.iteration, h.name AS launch "
             "FROM kernels k LEFT JOIN host_events h ON h.event_id = k.launch_event_id "
             "ORDER BY k.ts_ns")
    assert query_json(paired, links) == query_json(warehouse, links)
    host = ("SELECT h.name, h.ts_ns, h.dur_ns, p.name AS parent, h.iteration FROM host_events "
            "h LEFT JOIN host_events p ON p.event_id = h.parent_event_id ORDER BY h.ts_ns, "
            "h.dur_ns DESC")
    assert query_json(paired, host) == query_json(warehouse, host)
