"""Truncated traces: refusing and salvaging cost what reading the whole file costs.

A profiler killed while writing leaves a file cut anywhere. Finding that out happens at the
end of the input, where the reader looks for the array's closing `]`; that search must stay
linear in the bytes left, however many `]` (grid, block, shapes) the events hold.
"""
from __future__ import annotations

import gzip
import time
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from etl.core.errors import InputError
from etl.extract.kineto.decode import read_trace
from etl.extract.kineto.rows import build
from tests.conftest import (cli, corpus_path, event, kernel, launch, query_json, step,
                            write_trace)
from tests.extract.kineto.test_pipeline import run_pipeline

SMALL_BYTES = 3 << 20  # both sizes under one slice (16 MiB): all of it is the "end"
GROWTH = 4             # the large input is this many times the small one
MAX_RATIO = 8          # linear cost gives ~GROWTH (4.5 measured: caches); quadratic ~GROWTH²
FLOOR_S = 0.02         # times below this are noise (a gzip refusal takes ~1 ms)


@cache
def kernel_heavy_trace(size: int) -> bytes:
    """A trace of launches and kernels (each kernel with grid and block arrays, so every
    event holds `]`s) of about `size` bytes, with deviceProperties before the events."""
    head = (b'{"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "GPU"}],\n'
            b'"distributedInfo": {"rank": 3},\n"traceEvents": [\n')
    events, n, total = [], 0, len(head)
    while total < size:
        ts = 1_000 + 10 * n
        pair = (
            f'{{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, '
            f'"tid": 1, "ts": {ts}, "dur": 2, "args": {{"correlation": {n}}}}},\n'
            f'{{"ph": "X", "cat": "kernel", "name": "k[{n % 7}]", "pid": 0, "tid": 7, '
            f'"ts": {ts + 3}, "dur": 5, "args": {{"correlation": {n}, "device": 0, '
            f'"stream": 7, "grid": [{n % 100}, 1, 1], "block": [128, 1, 1], '
            f'"input dims": [[8, 3], [3]]}}}}').encode()
        events.append(pair)
        total += len(pair) + 2
        n += 1
    return head + b",\n".join(events) + b'\n], "traceName": "t"}\n'


def cut_file(folder: Path, size: int, gz: bool) -> Path:
    """The trace of `size` bytes cut at 97% of its (plain or gzip) bytes: inside an event."""
    data = kernel_heavy_trace(size)
    if gz:
        data = gzip.compress(data, compresslevel=1, mtime=0)
    path = folder / f"cut-{size}.json{'.gz' if gz else ''}"
    path.write_bytes(data[:len(data) * 97 // 100])
    return path


def cpu_seconds(path: Path, salvage: bool) -> float:
    """CPU time of this process reading the cut file (the least of three readings): the
    reading decodes in this process, and CPU time does not count other processes' load."""
    best = float("inf")
    for _ in range(3):
        started = time.process_time()
        if salvage:
            assert read_trace(path, salvage=True).truncated
        else:
            with pytest.raises(InputError, match="truncated"):
                read_trace(path)
        best = min(best, time.process_time() - started)
    return best


@pytest.mark.parametrize("gz", [False, True], ids=["json", "gz"])
@pytest.mark.parametrize("salvage", [False, True], ids=["refused", "salvaged"])
def test_cost_of_a_truncated_trace_grows_linearly(tmp_path: Path, gz: bool,
                                                  salvage: bool) -> None:
    small = cpu_seconds(cut_file(tmp_path, SMALL_BYTES, gz), salvage)
    large = cpu_seconds(cut_file(tmp_path, GROWTH * SMALL_BYTES, gz), salvage)
    assert large < MAX_RATIO * max(small, FLOOR_S), (small, large)


def test_salvage_keeps_the_members_before_the_events(tmp_path: Path) -> None:
    """deviceProperties and distributedInfo precede the events in Kineto's files: a cut
    later in the file keeps them (the GPU's name, the rank)."""
    trace = read_trace(cut_file(tmp_path, 64 << 10, gz=False), salvage=True)
    assert trace.truncated
    assert trace.device_properties == [{"id": 0, "name": "GPU"}]
    assert trace.distributed_info == {"rank": 3}


def test_cut_after_the_events_keeps_every_event(tmp_path: Path) -> None:
    data = kernel_heavy_trace(64 << 10)
    whole, cut = tmp_path / "whole.json", tmp_path / "cut.json"
    whole.write_bytes(data)
    cut.write_bytes(data[:data.rindex(b'"traceName"') + 5])
    with pytest.raises(InputError, match="truncated"):
        read_trace(cut)
    salvaged = read_trace(cut, salvage=True)
    assert salvaged.truncated and salvaged.distributed_info == {"rank": 3}
    assert salvaged.events.equals(read_trace(whole).events)


@pytest.mark.parametrize("after", [b"]}", b"] }", b"}}", b'}, "x": 1}'])
def test_text_that_cannot_follow_the_events_is_not_a_cut(tmp_path: Path,
                                                         after: bytes) -> None:
    """The events' array closes and something other than the object's end follows: a
    malformed file (refused even with --salvage), not a truncated one."""
    path = tmp_path / "t.json"
    path.write_bytes(b'{"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": 1}]'
                     + after)
    for salvage in (False, True):
        with pytest.raises(InputError, match="not valid JSON"):
            read_trace(path, salvage=salvage)


# ---- which iterations a cut leaves incomplete -----------------------------------------------
# Kineto's layout: host events first, then launch calls and their GPU activities (in time
# order since ~2023). Launch calls last 1 µs.
#   ProfilerStep#1 [0, 100 µs)  #2 [100, 200 µs)  #3 [200, 300 µs)  #4 [300, 400 µs)
#   launch c1 @10 → k1 [20, 60)   c2 @110 → k2 [120, 160)   c3 @210 → k3 [220, 260)
#   c4 @310 → k4 [320, 360)
STEPS = [step(n, 100_000 * (n - 1), 100_000) for n in (1, 2, 3, 4)]
L1, K1 = launch(1, 10_000), kernel(1, 20_000, 40_000)
L2, K2 = launch(2, 110_000), kernel(2, 120_000, 40_000)
L3, K3 = launch(3, 210_000), kernel(3, 220_000, 40_000)
L4, K4 = launch(4, 310_000), kernel(4, 320_000, 40_000)


def cut_inside_last(path: Path, events: list[dict[str, Any]]) -> Path:
    """The trace of `events` cut inside its last event (the writer killed there)."""
    data = write_trace(path, events).read_bytes()
    path.write_bytes(data[:data.rindex(b'{"ph"') + 20])
    return path


LAUNCHES_CUT, GPU_CUT = "launch_calls_cut", "gpu_activities_cut"
CUTS = {
    # k4 starts after step 3's window: steps 1-3 are whole; c4 may have had more calls
    "in the last launch call": ([*STEPS, L1, K1, L2, K2, L3, K3, L4, K4, launch(5, 350_000)],
                                [None, None, None, LAUNCHES_CUT]),
    # the cut kernel may have started anywhere after k3: step 3's window [200, 300) is open
    "in the last kernel": ([*STEPS, L1, K1, L2, K2, L3, K3, L4, K4],
                           [None, None, GPU_CUT, LAUNCHES_CUT]),
    # c3 and c4 are read, k3 and k4 are not: their correlation ids are beyond every kernel
    "before two kernels": ([*STEPS, L1, K1, L2, K2, L3, L4, K3],
                           [None, GPU_CUT, GPU_CUT, LAUNCHES_CUT]),
    # the launch calls read begin in step 2 (a batch of a later time written first)
    "in a record that begins late": ([*STEPS, L2, K2, L3, K3, L4, K4, launch(5, 390_000)],
                                     [LAUNCHES_CUT, LAUNCHES_CUT, None, LAUNCHES_CUT]),
    # 2022-era Kineto writes CUPTI buffers in no time order: anything may follow the cut
    "in records out of time order": ([*STEPS, L3, K3, L4, K4, L1, K1, L2, K2],
                                     ["records_out_of_order"] * 4),
    # cut among the host events: no launch call read, nothing is known whole
    "among the host events": ([*STEPS, event(name="aten::mm", ts=5, dur=1)],
                              [LAUNCHES_CUT] * 4),
}


@pytest.mark.parametrize("case", CUTS)
def test_iterations_a_cut_reaches_are_incomplete(tmp_path: Path, case: str) -> None:
    events, cuts = CUTS[case]
    path = cut_inside_last(tmp_path / "t.json", events)
    in_memory = build(read_trace(path, salvage=True), 0, None).iterations
    assert in_memory["cut"].to_pylist() == cuts
    assert in_memory["complete"].to_pylist() == [c is None for c in cuts]
    streamed, _ = run_pipeline(path, tmp_path / "spill", salvage=True)
    assert streamed.iterations.equals(in_memory)


def test_a_whole_trace_has_only_complete_iterations(tmp_path: Path) -> None:
    # the last step's sync call has no GPU activity, and the records are out of order:
    # neither matters in a whole file
    events = [*STEPS, L3, K3, L4, K4, L1, K1, L2, K2,
              launch(5, 390_000, name="cudaDeviceSynchronize")]
    table = build(read_trace(write_trace(tmp_path / "t.json", events)), 0, None).iterations
    assert table["complete"].to_pylist() == [True] * 4
    assert table["cut"].to_pylist() == [None] * 4


def test_a_cut_trace_without_steps_is_incomplete(tmp_path: Path) -> None:
    path = cut_inside_last(tmp_path / "t.json", [L1, K1, L2, K2])
    table = build(read_trace(path, salvage=True), 0, None).iterations
    assert table.select(["boundary", "complete", "cut"]).to_pylist() == [
        {"boundary": "whole_trace", "complete": False, "cut": "trace_cut"}]


def test_ingest_says_how_many_iterations_a_cut_left_incomplete(tmp_path: Path) -> None:
    events, _ = CUTS["before two kernels"]
    cut_inside_last(tmp_path / "runs" / "cut" / "t.json", events)
    done = cli("ingest", str(tmp_path / "runs"), "--warehouse", str(tmp_path / "wh"),
               "--salvage")
    assert done.returncode == 0, done.stderr
    assert "warning: cut/t.json: truncated: the complete events before the cut were kept " \
        "(--salvage); 3 of 4 iterations are incomplete" in done.stderr
    [summary_row] = [line for line in done.stdout.splitlines() if "│ cut " in line]
    assert "truncated, 3 of 4 iterations incomplete" in summary_row


def test_gpu_utilization_of_a_cut_iteration_is_null(tmp_path: Path) -> None:
    events, _ = CUTS["before two kernels"]
    cut_inside_last(tmp_path / "runs" / "cut" / "t.json", events)
    done = cli("ingest", str(tmp_path / "runs"), "--warehouse", str(tmp_path / "wh"),
               "--salvage")
    assert done.returncode == 0, done.stderr
    rows = query_json(tmp_path / "wh", "SELECT iteration, gpu_util, complete, cut "
                      "FROM gpu_utilization ORDER BY iteration")
    assert rows == [
        {"iteration": 1, "gpu_util": 0.4, "complete": True, "cut": None},
        {"iteration": 2, "gpu_util": None, "complete": False, "cut": GPU_CUT},
        {"iteration": 3, "gpu_util": None, "complete": False, "cut": GPU_CUT},
        {"iteration": 4, "gpu_util": None, "complete": False, "cut": LAUNCHES_CUT}]


@pytest.mark.parametrize("relative,cuts", [
    # written in time order: the iterations before the cut are complete
    ("hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
     [None, None, None, LAUNCHES_CUT, LAUNCHES_CUT]),
    # written in CUPTI-buffer batches out of time order: none can be shown whole
    ("hta/trace_diff/control/control.json.gz", ["records_out_of_order"] * 6),
], ids=["in-order", "out-of-order"])
def test_real_traces_cut_at_three_quarters(tmp_path: Path, relative: str,
                                           cuts: list[str | None]) -> None:
    """The pipeline, its slices' order joined across many slices, agrees with the
    in-memory reading."""
    data = gzip.decompress(corpus_path(relative).read_bytes())
    whole, cut = tmp_path / "whole.json", tmp_path / "cut.json"
    whole.write_bytes(data)
    cut.write_bytes(data[:len(data) * 3 // 4])
    in_memory = build(read_trace(cut, salvage=True), 0, None).iterations
    assert in_memory["cut"].to_pylist() == cuts
    streamed, _ = run_pipeline(cut, tmp_path / "spill", salvage=True, slice_bytes=256 << 10)
    assert streamed.iterations.equals(in_memory)


def test_complete_iterations_of_a_cut_trace_measure_as_in_the_whole(tmp_path: Path) -> None:
    """What `complete` promises: the utilization of a complete iteration of the salvaged
    trace is the whole trace's, by the independent oracle (tests/oracle)."""
    from tests.oracle.naive_kineto import gpu_utilization

    source = corpus_path("hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz")
    data = gzip.decompress(source.read_bytes())
    whole, cut = tmp_path / "whole.json", tmp_path / "runs" / "cut" / "t.json"
    whole.write_bytes(data)
    cut.parent.mkdir(parents=True)
    cut.write_bytes(data[:len(data) * 3 // 4])
    done = cli("ingest", str(tmp_path / "runs"), "--warehouse", str(tmp_path / "wh"),
               "--salvage")
    assert done.returncode == 0, done.stderr
    got = query_json(tmp_path / "wh", "SELECT g.iteration, g.window_ns, g.busy_ns "
                     "FROM gpu_utilization g JOIN iterations i ON i.run_id = g.run_id "
                     "AND i.source_id = g.source_id AND i.iteration = g.iteration "
                     "WHERE i.complete ORDER BY g.iteration")
    oracle = {r["iteration"]: r for r in gpu_utilization(whole)}
    assert [r["iteration"] for r in got] == [101, 102, 103]
    assert got == [{k: oracle[r["iteration"]][k] for k in r} for r in got]
