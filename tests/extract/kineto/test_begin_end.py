"""Duration events written as begin/end pairs (ph B ... ph E on one pid/tid) read as the
complete events (ph X) they describe, in the in-memory reading and in the pipeline.

Each trace below is compared with the same trace written with X events (`as_complete`, a
naive stack per thread, independent of etl/): a B becomes the X at the B's place, its E a
metadata event the reader skips, so every event keeps its event id and the whole tables
must be equal.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from etl.extract.kineto.decode import read_trace
from etl.extract.kineto.rows import SourceTables, build
from tests.conftest import Raw, event, kernel, launch, us, write_trace
from tests.extract.kineto.test_pipeline import (assert_same_as_in_memory,
                                                 assert_tables_as_in_memory, run_pipeline)

PLACEHOLDER = {"ph": "M", "name": "thread_name", "pid": 0, "tid": 0, "args": {"name": "x"}}


def begin(name: str | None, ts: int, cat: str | None = "cpu_op", tid: Any = 1, pid: Any = 1,
          **args: Any) -> dict[str, Any]:
    ev = event(ph="B", cat=cat or "", name=name or "", ts=ts, dur=None, pid=pid, tid=tid,
               **args)
    for key, value in (("cat", cat), ("name", name)):
        if value is None:
            del ev[key]
    return ev


def end(ts: int | None, tid: Any = 1, pid: Any = 1, **fields: Any) -> dict[str, Any]:
    """An E as most writers write it: no name, no category."""
    ev: dict[str, Any] = {"ph": "E", "pid": pid, "tid": tid, **fields}
    if ts is not None:
        ev["ts"] = Raw(us(ts))
    return ev


def as_complete(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The same trace written with X events (event ids kept, see the module docstring)."""
    out = [dict(e) for e in events]
    stacks: dict[tuple[str, str], list[int]] = {}
    for i, ev in enumerate(events):
        if ev.get("ph") not in ("B", "E"):
            continue
        stack = stacks.setdefault((str(ev.get("pid", "")), str(ev.get("tid", ""))), [])
        if ev["ph"] == "B":
            stack.append(i)
            continue
        b = stack.pop()
        start, stop = _ns(events[b]["ts"]), _ns(ev["ts"])
        out[b] = {**events[b], "ph": "X", "dur": Raw(us(stop - start))}
        if "args" in ev:
            out[b]["args"] = {**events[b].get("args", {}), **ev["args"]}
        out[i] = PLACEHOLDER
    assert not any(stacks.values()), "as_complete needs every B closed"
    return out


def _ns(text: str) -> int:
    whole, _, frac = str(text).partition(".")
    return int(whole) * 1000 + int((frac + "000")[:3])


def step_pair(n: int, ts: int, stop: int) -> list[dict[str, Any]]:
    return [begin(f"ProfilerStep#{n}", ts, cat="user_annotation"), end(stop)]


# ---- traces ---------------------------------------------------------------------------

def nested() -> list[dict[str, Any]]:
    """Step > module > op > op > launch, all B/E, with the kernel they launch."""
    return [begin("ProfilerStep#1", 0, cat="user_annotation"),
            begin("nn.Module: Linear_0", 500, cat="python_function"),
            begin("aten::linear", 1_000, External_id=1),
            begin("aten::addmm", 2_000, External_id=2),
            begin("cudaLaunchKernel", 3_000, cat="cuda_runtime", correlation=1),
            kernel(1, 10_000, 30_000, name="gemm"),
            end(4_000), end(42_000), end(51_000), end(60_500),
            end(100_000)]


def interleaved_threads() -> list[dict[str, Any]]:
    """Two threads whose B's and E's alternate in the file; one thread is a label."""
    return [*step_pair(1, 0, 100_000)[:1],
            begin("aten::a", 1_000, tid=2), begin("aten::b", 1_000, tid="worker"),
            begin("cudaLaunchKernel", 2_000, cat="cuda_runtime", tid=2, correlation=1),
            begin("aten::c", 3_000, tid="worker"), end(2_500, tid=2),
            kernel(1, 4_000, 1_000, name="k"),
            end(4_000, tid="worker"), end(9_000, tid=2), end(9_500, tid="worker"),
            end(100_000)]


def mixed_with_complete() -> list[dict[str, Any]]:
    """X inside B/E, B/E inside X, and an X launch beside a B/E launch on one thread."""
    return [event(name="ProfilerStep#1", cat="user_annotation", ts=0, dur=100_000),
            begin("aten::conv2d", 1_000),
            event(name="aten::convolution", ts=1_500, dur=20_000),
            launch(1, 2_000),
            begin("cudaLaunchKernel", 5_000, cat="cuda_runtime", correlation=2),
            end(6_000),
            end(30_000),
            event(name="nn.Module: Block", cat="python_function", ts=40_000, dur=30_000),
            begin("aten::relu", 41_000),
            end(50_000),
            kernel(1, 3_000, 2_000, name="conv"), kernel(2, 7_000, 2_000, name="bias")]


def launch_args_on_end() -> list[dict[str, Any]]:
    """The correlation id written on the E only (its args merge into the B's), an E that
    repeats the B's name, and a GPU activity written as B/E."""
    return [*step_pair(1, 0, 100_000)[:1],
            begin("aten::mm", 1_000),
            begin("cudaLaunchKernel", 2_000, cat="cuda_runtime"),
            end(3_000, args={"correlation": 7}),
            end(10_000, name="aten::mm", cat="cpu_op"),
            begin("gemm", 20_000, cat="kernel", pid=0, tid=7, correlation=7, device=0,
                  stream=7),
            end(25_000, pid=0, tid=7),
            end(100_000)]


TRACES = {"nested": nested, "interleaved_threads": interleaved_threads,
          "mixed_with_complete": mixed_with_complete,
          "launch_args_on_end": launch_args_on_end}


def tables(path: Path) -> SourceTables:
    return build(read_trace(path), 0, None)


def assert_same_tables(got: SourceTables, want: SourceTables) -> None:
    for table in ("host_events", "kernels", "iterations", "devices"):
        assert getattr(got, table).to_pylist() == getattr(want, table).to_pylist(), table


@pytest.mark.parametrize("name", sorted(TRACES))
def test_pairs_read_as_the_complete_events_they_describe(tmp_path: Path, name: str) -> None:
    events = TRACES[name]()
    paired = tables(write_trace(tmp_path / "be.json", events))
    complete = tables(write_trace(tmp_path / "x.json", as_complete(events)))
    assert_same_tables(paired, complete)
    assert paired.anomalies.to_pylist() == complete.anomalies.to_pylist() == []


@pytest.mark.parametrize("name", sorted(TRACES))
def test_pipeline_pairs_as_the_in_memory_reading(tmp_path: Path, name: str) -> None:
    path = write_trace(tmp_path / "be.json", TRACES[name]())
    for chunk_rows in (1, 3, 1000):  # open B's carried across chunk borders
        assert_same_as_in_memory(path, tmp_path / f"spill{chunk_rows}", slice_bytes=64,
                                 chunk_rows=chunk_rows)


def test_links_by_hand(tmp_path: Path) -> None:
    got = tables(write_trace(tmp_path / "be.json", nested()))
    host = {r["name"]: r for r in got.host_events.to_pylist()}
    assert host["aten::addmm"]["dur_ns"] == 40_000
    assert host["aten::addmm"]["parent_event_id"] == 2
    assert host["cudaLaunchKernel"]["correlation_id"] == 1
    [gemm] = got.kernels.to_pylist()
    assert (gemm["launch_event_id"], gemm["op_name"], gemm["layer"], gemm["iteration"]) == (
        4, "aten::linear", "nn.Module: Linear_0", 1)


def test_args_of_the_end_and_gpu_pairs(tmp_path: Path) -> None:
    got = tables(write_trace(tmp_path / "be.json", launch_args_on_end()))
    [gemm] = got.kernels.to_pylist()
    assert (gemm["kernel_id"], gemm["dur_ns"], gemm["launch_event_id"], gemm["op_name"]) == (
        5, 5_000, 2, "aten::mm")


def _far_apart(n: int) -> list[dict[str, Any]]:
    """A step and an op whose E's come thousands of events (many slices) after their B's,
    with launches and kernels in between."""
    events = [begin("ProfilerStep#1", 0, cat="user_annotation"),
              begin("aten::big", 10, tid=3), begin("nn.Module: Net", 500, cat="python_function")]
    for i in range(n):
        events += [launch(i, 1_000 + 100 * i), kernel(i, 2_000 + 100 * i, 50, name=f"k{i}")]
    return [*events, end(1_000 + 100 * n), end(2_000 + 100 * n, tid=3),
            end(3_000 + 100 * n)]


@pytest.mark.parametrize("workers", [1, 2])
def test_begin_and_end_slices_apart(tmp_path: Path, workers: int) -> None:
    events = _far_apart(1500)
    path = write_trace(tmp_path / "be.json", events)
    result, got = run_pipeline(path, tmp_path / "spill", slice_bytes=4096, chunk_rows=7,
                               workers=workers)
    assert_tables_as_in_memory(path, result, got)
    complete = tables(write_trace(tmp_path / "x.json", as_complete(events)))
    assert _sorted(got["host_events"], "event_id") == _sorted(complete.host_events, "event_id")
    assert _sorted(got["kernels"], "kernel_id") == _sorted(complete.kernels, "kernel_id")
    kernels = got["kernels"].to_pylist()  # type: ignore[union-attr]
    assert {(k["layer"], k["iteration"]) for k in kernels} == {("nn.Module: Net", 1)}


def _sorted(table: pa.Table | None, key: str) -> list[dict[str, Any]]:
    assert table is not None
    return table.sort_by(key).to_pylist()


# ---- oddities: each one anomaly row, nothing dropped silently ---------------------------

def odd() -> list[dict[str, Any]]:
    return [begin("ProfilerStep#1", 0, cat="user_annotation"),  # 0
            end(500, tid=9),                                     # 1 unmatched: tid 9 has no B
            begin("aten::backwards", 2_000),                     # 2 E before its B
            end(1_000),                                          # 3
            begin("aten::untimed_end", 3_000),                   # 4 E without ts
            end(None),                                           # 5
            begin("aten::renamed", 4_000),                       # 6
            end(5_000, name="aten::other"),                      # 7 E contradicts its B
            begin("aten::conflict", 6_000, correlation=1),       # 8
            end(7_000, args={"correlation": 2}),                 # 9 E contradicts its B
            end(100_000),                                        # 10 closes the step
            begin("aten::open", 200_000, tid=2)]                 # 11 never closed


def begin_end_anomalies(got: Any) -> list[tuple[str, int | None]]:
    """(kind, event_id) of the anomalies, but no_gpu_activity, which every one of these
    host-only traces also has (tests/load/test_no_gpu_activity.py)."""
    return [(a["kind"], a["event_id"]) for a in got.anomalies.to_pylist()
            if a["kind"] != "no_gpu_activity"]


def test_oddities_are_rows_in_anomalies(tmp_path: Path) -> None:
    got = tables(write_trace(tmp_path / "be.json", odd()))
    anomalies = sorted(begin_end_anomalies(got))
    assert anomalies == [("end_before_begin", 2), ("end_contradicts_begin", 7),
                         ("end_contradicts_begin", 9), ("missing_dur", 4),
                         ("unclosed_begin", 11), ("unmatched_end", 1)]
    host = {r["event_id"]: r for r in got.host_events.to_pylist()}
    assert sorted(host) == [0, 2, 4, 6, 8, 11]
    assert host[2]["dur_ns"] == -1_000 and host[2]["parent_event_id"] is None  # not linked
    assert host[4]["dur_ns"] is None and host[11]["dur_ns"] is None
    assert host[6]["name"] == "aten::renamed" and host[8]["correlation_id"] == 2
    assert host[0]["dur_ns"] == 100_000 and host[6]["parent_event_id"] == 0


def test_oddities_in_the_pipeline(tmp_path: Path) -> None:
    path = write_trace(tmp_path / "be.json", odd())
    for workers in (1, 2):
        assert_same_as_in_memory(path, tmp_path / f"spill{workers}", slice_bytes=64,
                                 chunk_rows=2, workers=workers)


def test_a_begin_without_ts(tmp_path: Path) -> None:
    events = [begin("aten::a", 0), end(10)]
    del events[0]["ts"]
    got = tables(write_trace(tmp_path / "be.json", events))
    assert begin_end_anomalies(got) == [("missing_ts", 0)]
    assert got.host_events.select(["ts_ns", "dur_ns"]).to_pylist() == [
        {"ts_ns": None, "dur_ns": None}]


# ---- the other way round: for the hand-worked tiny trace (tests/views/test_tiny_trace.py) ------

def as_begin_end(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Host X events → B/E pairs in time order (an E before a B at the same time, inner
    E's first); GPU activities stay X, first."""
    host = [e for e in events if e["cat"] not in ("kernel", "gpu_memcpy")]
    marks = []
    for i, ev in enumerate(host):
        start, stop = _ns(ev["ts"]), _ns(ev["ts"]) + _ns(ev["dur"])
        b = {k: v for k, v in ev.items() if k != "dur"}
        marks += [((start, 1, -stop, i), {**b, "ph": "B"}),
                  ((stop, 0, -start, -i), end(stop, pid=ev["pid"], tid=ev["tid"]))]
    return [e for e in events if e not in host] + [m for _, m in sorted(
        marks, key=lambda mark: mark[0])]


def test_a_duration_out_of_range(tmp_path: Path) -> None:
    """Each ts is in range (|ts| ≤ 2^62 ns), E.ts - B.ts is not (nor within int64): dur
    NULL and bad_dur, nothing else."""
    late, early = 1 << 62, -(1 << 62)
    events = [begin("aten::a", late), end(early)]
    got = tables(write_trace(tmp_path / "be.json", events))
    assert begin_end_anomalies(got) == [("bad_dur", 0)]
    assert got.host_events.select(["ts_ns", "dur_ns"]).to_pylist() == [
        {"ts_ns": late, "dur_ns": None}]

