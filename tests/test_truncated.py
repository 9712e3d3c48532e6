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

import pytest

from etl.errors import InputError
from etl.extract.kineto.reader import read_trace

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
