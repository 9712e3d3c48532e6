"""Kineto trace clocks → UTC (etl/extract/kineto/clock.py): the rules on tiny cases, and the
corpus traces against a naive reading of each file and the local times in their logs."""
from __future__ import annotations

import gzip
import json
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from etl.extract.kineto.clock import kineto_clock
from etl.extract.kineto.decode import read_trace
from etl.extract.kineto.rows import complete_span
from etl.extract.trace_role import TraceClock, clock_of_times
from tests.conftest import CORPUS, corpus_path, event, write_trace

BASE = 1_711_964_646_000_000_000       # nccl_data's baseTimeNanoseconds
EPOCH_TS = 1_695_835_542_481_129_000   # alexnet's first ts (µs since 1970), in ns
UPTIME_TS = 4_458_676_388_068_751  # nccl_data's first ts (relative), in ns


@pytest.mark.parametrize(("base", "first", "truncated", "kind", "offset", "reason"), [
    (BASE, UPTIME_TS, False, "base_time", BASE, None),
    (None, EPOCH_TS, False, "epoch", 0, None),
    (None, UPTIME_TS, False, "unmapped", None, "no baseTimeNanoseconds"),
    (None, UPTIME_TS, True, "unmapped", None, "the file is cut"),
    (BASE, EPOCH_TS, False, "unmapped", None, "which clock is meant"),
    ("1711964646000000000", UPTIME_TS, False, "unmapped", None, "not an integer"),
    (1.7e18, UPTIME_TS, False, "unmapped", None, "not an integer"),
    (-BASE, UPTIME_TS, False, "unmapped", None, "between 2000 and 2100"),
])
def test_kineto_clock_rules(base: object, first: int, truncated: bool, kind: str,
                            offset: int | None, reason: str | None) -> None:
    clock = kineto_clock(base, (first, first + 1000), truncated)
    assert (clock.kind, clock.utc_offset_ns) == (kind, offset)
    assert (clock.reason is None) if reason is None else (reason in (clock.reason or ""))


def test_no_timed_event_is_unmapped() -> None:
    assert kineto_clock(BASE, None, False).utc_offset_ns is None


def test_a_reader_without_a_clock_is_read_from_its_times() -> None:
    assert clock_of_times(EPOCH_TS, "nsys_sqlite reader") == TraceClock("epoch", 0)
    unmapped = clock_of_times(5_000_000, "nsys_gpu_trace_csv reader")
    assert unmapped.utc_offset_ns is None and "nsys_gpu_trace_csv" in (unmapped.reason or "")


def test_the_reader_keeps_base_time_after_the_events(tmp_path: Path) -> None:
    """Kineto writes baseTimeNanoseconds after traceEvents: the streamed header has it."""
    path = write_trace(tmp_path / "t.json", [event(ts=1000, dur=10)])
    path.write_text(path.read_text()[:-1] + f', "baseTimeNanoseconds": {BASE}}}')
    assert read_trace(path).base_time_ns == BASE


def _kineto_traces() -> list[Path]:
    small = [p for p in sorted(CORPUS.rglob("*.json*")) if p.stat().st_size < 1_200_000]
    return [p for p in small if b"traceEvents" in _open(p).read(4096)] if small else []


def _open(path: Path):  # type: ignore[no-untyped-def]
    return gzip.open(path) if path.suffix == ".gz" else open(path, "rb")


def _naive_first_utc_ns(path: Path) -> tuple[int | None, float]:
    """(baseTimeNanoseconds, first complete event's ts in µs), by json.load."""
    with _open(path) as fh:
        doc = json.load(fh)
    first = min(e["ts"] for e in doc["traceEvents"] if e.get("ph") == "X" and "ts" in e
                and e.get("dur", 0) >= 0)
    return doc.get("baseTimeNanoseconds"), first


@pytest.mark.parametrize("path", _kineto_traces(), ids=lambda p: p.name)
def test_corpus_traces_against_a_naive_reading(path: Path) -> None:
    trace = read_trace(path)
    clock = kineto_clock(trace.base_time_ns, complete_span(trace.events), trace.truncated)
    base, first_us = _naive_first_utc_ns(path)
    assert clock.kind == ("base_time" if base is not None else "epoch"), clock.reason
    utc_s = (base or 0) / 1e9 + first_us / 1e6
    assert 2020 <= datetime.fromtimestamp(utc_s, UTC).year <= 2026
    span = complete_span(trace.events)
    assert span is not None and clock.utc_offset_ns is not None
    assert abs((span[0] + clock.utc_offset_ns) / 1e9 - utc_s) < 1e-3


_INFO = re.compile(r"INFO:(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) ")
_PROFILED_AT = re.compile(r"_(\d{10})_trace\.json")


@pytest.mark.parametrize("path", _kineto_traces(), ids=lambda p: p.name)
def test_corpus_clock_agrees_with_the_times_the_trace_logs(path: Path) -> None:
    """Independent evidence of the wall clock: the profiler's INFO lines (local time, so a
    whole number of hours off UTC) or the epoch second in the benchmark's file name."""
    trace = read_trace(path)
    span = complete_span(trace.events)
    clock = kineto_clock(trace.base_time_ns, span, trace.truncated)
    assert span is not None and clock.utc_offset_ns is not None
    utc_s = (span[0] + clock.utc_offset_ns) / 1e9
    with _open(path) as fh:
        info = _INFO.search(str(json.load(fh).get("INFO", "")))  # a list of log lines
    named = _PROFILED_AT.search(path.name)
    if info is None and named is None:
        pytest.skip("the trace logs no time of its own")
    if info is not None:
        local = datetime.fromisoformat(info.group(1)).replace(tzinfo=None)
        off_s = utc_s - (local - datetime(1970, 1, 1)).total_seconds()
        assert abs(off_s - round(off_s / 3600) * 3600) < 5 and abs(off_s) <= 14 * 3600
    if named is not None:  # the benchmark names its trace when it starts: seconds before
        assert 0 <= utc_s - int(named.group(1)) < 120


def test_corpus_has_both_clocks() -> None:
    corpus_path("hta")
    kinds = {kineto_clock(t.base_time_ns, complete_span(t.events), False).kind
             for t in map(read_trace, _kineto_traces())}
    assert kinds == {"base_time", "epoch"}
