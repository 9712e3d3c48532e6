"""The window of a trace without steps: the span of all complete events (README, schemas/
iterations.toml), the profiler's own session span (`cat` Trace) included."""
from __future__ import annotations

from pathlib import Path

from tests.conftest import cli, event, kernel, launch, query_json, write_trace

#  Trace "PyTorch Profiler (0)" [0, 1000 µs)      (the profiler's session, wider than the job)
#  aten::mm [100, 150)  > launch c1 @120
#  device 0: k1 [200, 300)
#  window = [0, 1000 µs), busy = 100 µs → gpu_util = 0.1 (leaving the session out: [100, 300)
#  µs and 0.5)
EVENTS = [
    event(cat="Trace", name="PyTorch Profiler (0)", ts=0, dur=1_000_000, pid="Spans",
          tid="PyTorch Profiler"),
    event(name="aten::mm", ts=100_000, dur=50_000),
    launch(1, 120_000),
    kernel(1, 200_000, 100_000),
]


def test_whole_trace_window_includes_the_profiler_session_span(tmp_path: Path) -> None:
    write_trace(tmp_path / "runs" / "nosteps" / "trace.json", EVENTS)
    done = cli("ingest", str(tmp_path / "runs"), "--warehouse", str(tmp_path / "wh"))
    assert done.returncode == 0, done.stderr
    iterations = query_json(tmp_path / "wh", "SELECT boundary, start_ns, end_ns FROM iterations")
    assert iterations == [{"boundary": "whole_trace", "start_ns": 0, "end_ns": 1_000_000}]
    rows = query_json(tmp_path / "wh", "SELECT iteration, window_start_ns, window_ns, busy_ns, "
                      "gpu_util FROM gpu_utilization")
    assert rows == [{"iteration": None, "window_start_ns": 0, "window_ns": 1_000_000,
                     "busy_ns": 100_000, "gpu_util": 0.1}]
    # the session span is still no event of the job
    names = query_json(tmp_path / "wh", "SELECT name FROM host_events ORDER BY event_id")
    assert [r["name"] for r in names] == ["aten::mm", "cudaLaunchKernel"]


def test_in_memory_reading_agrees_on_the_session_span(tmp_path: Path) -> None:
    from etl.extract.kineto.decode import read_trace
    from etl.extract.kineto.rows import build

    iterations = build(read_trace(write_trace(tmp_path / "t.json", EVENTS)), 0, None).iterations
    assert iterations.select(["start_ns", "end_ns"]).to_pylist() == [
        {"start_ns": 0, "end_ns": 1_000_000}]


def test_oracle_agrees_on_the_session_span(tmp_path: Path) -> None:
    from tests.oracle.naive_kineto import gpu_utilization

    path = write_trace(tmp_path / "trace.json", EVENTS)
    [row] = gpu_utilization(path)
    assert (row["window_start_ns"], row["window_ns"], row["busy_ns"]) == (0, 1_000_000, 100_000)
