"""The streaming pipeline (spilled slices, out-of-core sort, chunked linking) gives exactly
the tables of the in-memory reading (trace_tables.build over read_trace), which
tests/extract/kineto/test_stream_oracle.py ties to a naive stdlib reading."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from etl.extract.kineto.decode import read_trace
from etl.extract.kineto.read import SourceResult
from etl.extract.kineto.read import read as ingest_trace
from etl.extract.trace_role import PipelineOptions, Sinks
from etl.extract.kineto.rows import build
from tests.conftest import (CORPUS, corpus_param, corpus_path, event, kernel, launch, step,
                            write_trace)

TRACES = sorted(str(p.relative_to(CORPUS)) for p in CORPUS.rglob("*.json.gz")) or [
    "hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"]


def run_pipeline(path: Path, spill: Path, **options: Any
                 ) -> tuple[SourceResult, dict[str, pa.Table | None]]:
    parts: dict[str, list[pa.Table]] = {"host_events": [], "kernels": [], "anomalies": []}
    sinks = Sinks(parts["host_events"].append, parts["kernels"].append,
                  parts["anomalies"].append,
                  table=lambda name, rows: parts.setdefault(name, []).append(rows))
    result = ingest_trace(path, 0, None, spill, sinks, PipelineOptions(**options))
    assert not spill.exists(), "the spill folder is removed"
    return result, {k: pa.concat_tables(v) if v else None for k, v in parts.items()}


def _rows(table: pa.Table | None, key: str) -> list[dict[str, Any]]:
    return [] if table is None else table.sort_by(key).to_pylist()


def _anomalies(table: pa.Table | None) -> list[str]:
    return [] if table is None else sorted(map(repr, table.to_pylist()))


# the in-memory reading's tables as they are compared: host events and kernels as sorted
# rows, anomalies as sorted reprs, iterations, devices
Expected = tuple[list[dict[str, Any]], list[dict[str, Any]], list[str], pa.Table, pa.Table]


def in_memory(path: Path) -> Expected:
    want = build(read_trace(path), 0, None)
    return (_rows(want.host_events, "event_id"), _rows(want.kernels, "kernel_id"),
            _anomalies(want.anomalies), want.iterations, want.devices)


def assert_same_as_in_memory(path: Path, spill: Path, expected: Expected | None = None,
                             **options: Any) -> SourceResult:
    """The pipeline's tables of `path` (with `options`) equal the in-memory reading's
    (`expected` when the caller has it already)."""
    result, got = run_pipeline(path, spill, **options)
    assert_tables_as_in_memory(path, result, got, expected)
    return result


def assert_tables_as_in_memory(path: Path, result: SourceResult,
                               got: dict[str, pa.Table | None],
                               expected: Expected | None = None) -> None:
    """What run_pipeline gave for `path` equals the in-memory reading's tables."""
    host, kernels, anomalies, iterations, devices = expected or in_memory(path)
    assert _rows(got["host_events"], "event_id") == host
    assert _rows(got["kernels"], "kernel_id") == kernels
    assert _anomalies(got["anomalies"]) == anomalies
    assert result.iterations.equals(iterations)
    assert result.devices.equals(devices)


@pytest.mark.parametrize("relative", [corpus_param(t, trace=t) for t in TRACES])
def test_pipeline_equals_in_memory_reading(relative: str, tmp_path: Path) -> None:
    # small slices and chunks: many spill files, and stacks carried across chunk borders
    assert_same_as_in_memory(corpus_path(relative), tmp_path / "spill",
                             slice_bytes=256 << 10, chunk_rows=997)


@pytest.fixture(scope="module")
def control() -> tuple[Path, Expected]:
    """A corpus trace and its in-memory reading (1.5 CPU s), the reference of the worker
    and partition tests below, read once for the three."""
    path = corpus_path("hta/trace_diff/control/control.json.gz")
    return path, in_memory(path)


def test_worker_processes_give_the_same_tables(tmp_path: Path,
                                               control: tuple[Path, Expected]) -> None:
    path, expected = control
    assert_same_as_in_memory(path, tmp_path / "spill", expected, slice_bytes=1 << 20,
                             chunk_rows=5000, workers=2)


def test_workers_reading_a_plain_file_give_the_same_tables(
        tmp_path: Path, control: tuple[Path, Expected]) -> None:
    """Workers read the slices of a plain (not gzip) file themselves, by offset; the file
    is the gzip one's bytes, so its in-memory reading is the gzip one's."""
    import gzip

    source, expected = control
    path = tmp_path / "control.json"
    path.write_bytes(gzip.decompress(source.read_bytes()))
    assert_same_as_in_memory(path, tmp_path / "spill", expected, slice_bytes=1 << 20,
                             chunk_rows=5000, workers=2)


def test_workers_reading_odd_bytes_give_the_same_tables(tmp_path: Path) -> None:
    """Slices re-read by workers hold what any slice may: multi-byte names, bytes that are
    not UTF-8 (replaced and flagged), pid/tid mixing numbers and strings."""
    events = [step(1, 0, 1_000_000)]
    for i in range(300):
        events += [event(name=f"aten::NAME_{i}", ts=1_000 + 2_000 * i, dur=1_500,
                         tid="stream 7" if i % 50 == 0 else 1),
                   launch(i, 1_100 + 2_000 * i), kernel(i, 1_200 + 2_000 * i, 300, name=f"k{i}")]
    path = write_trace(tmp_path / "t.json", events)
    text = path.read_bytes().replace(b"aten::NAME_150", b"aten::\xffNAME_150")
    path.write_bytes(text.replace(b"NAME_", "ünïcödé_".encode()))  # raw UTF-8, not escapes
    result = assert_same_as_in_memory(path, tmp_path / "spill", slice_bytes=8 << 10,
                                      chunk_rows=100, workers=2)
    assert result.anomalies > 0  # the bad byte was seen and flagged


@pytest.mark.parametrize("change", ["byte", "shorter"])
def test_a_slice_changed_after_validation_is_refused(tmp_path: Path, change: str) -> None:
    """A worker re-reads its slice from the file: bytes other than the validated ones
    (the profiler still writing, a copy over the file) refuse the trace."""
    from etl.core.errors import InputError
    from etl.extract.rawio import read_slice, slice_checksum

    path = tmp_path / "t.json"
    path.write_bytes(b'{"traceEvents": [{"ph": "X", "ts": 1}, {"ph": "X", "ts": 2}]}')
    offset = path.read_bytes().index(b"{", 1)
    validated = b'[{"ph": "X", "ts": 1}, {"ph": "X", "ts": 2}]'
    checksum = slice_checksum(validated)
    assert read_slice(path, offset, len(validated), checksum) == validated
    text = path.read_bytes()
    path.write_bytes(text.replace(b'"ts": 2', b'"ts": 3') if change == "byte"
                     else text[:offset + 10])
    with pytest.raises(InputError, match="changed while it was being ingested"):
        read_slice(path, offset, len(validated), checksum)


def _odd_events() -> list[dict[str, Any]]:
    """Deep nests across chunk borders, a partial overlap, a duplicate launch, an orphan
    kernel, instant and untimed events, two threads and a second process."""
    events = [step(1, 0, 100_000), step(2, 100_000, 100_000)]
    for depth in range(12):  # one deep nest: the carried stack spans many tiny chunks
        events.append(event(name=f"aten::op{depth}", cat="cpu_op", ts=1_000 + depth,
                            dur=50_000 - 2 * depth))
    events += [launch(1, 2_000), kernel(1, 3_000, 500, name="k1"), launch(1, 2_100),
               kernel(2, 4_000, 100, name="k2"),  # no launch
               event(name="aten::half", cat="cpu_op", ts=40_000, dur=30_000),  # overlaps
               event(name="nn.Module: Lin", cat="python_function", ts=110_000, dur=900,
                     tid=7),
               launch(3, 110_100, tid=7), kernel(3, 111_000, 40, name="k3"),
               event(name="marker", cat="cpu_instant_event", ph="i", ts=5_000),
               event(name="untimed", cat="cpu_op", ts=6_000, dur=None),
               event(name="other-process", cat="cpu_op", ts=1_000, dur=10, pid=2)]
    return events


def test_odd_nests_equal_in_memory_reading(tmp_path: Path) -> None:
    path = write_trace(tmp_path / "t.json", _odd_events())
    for chunk_rows in (1, 2, 3, 1000):
        assert_same_as_in_memory(path, tmp_path / f"spill{chunk_rows}", slice_bytes=64,
                                 chunk_rows=chunk_rows)


def test_hand_checked_links(tmp_path: Path) -> None:
    path = write_trace(tmp_path / "t.json", _odd_events())
    _, got = run_pipeline(path, tmp_path / "spill", slice_bytes=64, chunk_rows=2)
    kernels = {k["name"]: k for k in _rows(got["kernels"], "kernel_id")}
    first = kernels["k1"]
    assert first["op_name"] == "aten::op0"  # the outermost cpu_op around the launch
    assert first["iteration"] == 1 and first["launch_event_id"] is not None
    assert kernels["k2"]["launch_event_id"] is None
    assert kernels["k3"]["layer"] == "nn.Module: Lin"
    kinds = {a["kind"] for a in got["anomalies"].to_pylist()}  # type: ignore[union-attr]
    assert {"duplicate_correlation", "kernel_without_launch", "overlapping_events"} <= kinds


def test_partitioned_kernel_join_gives_the_same_tables(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch,
                                                       control: tuple[Path, Expected]) -> None:
    from etl.extract.kineto import kernel_join

    monkeypatch.setattr(kernel_join, "PART_ROWS", 500)  # dozens of partitions
    path, expected = control
    assert_same_as_in_memory(path, tmp_path / "spill", expected, chunk_rows=5000)


def test_input_errors_cross_process_boundaries() -> None:
    """A slice worker's InputError reaches the ingest whole (file, place, remedy)."""
    import pickle

    from etl.core.errors import InputError

    error = InputError("/runs/a/t.json", "not valid JSON", "slice at byte 5", "re-export it")
    copy = pickle.loads(pickle.dumps(error))
    assert isinstance(copy, InputError) and copy.line() == error.line()


def _huge_pid_trace(tmp_path: Path) -> Path:
    """Valid JSON whose slice 3 holds a pid of 5 000 digits (msgspec: out of range)."""
    events = [kernel(i, 1_000 * i, 10, name=f"k{i}") for i in range(400)]
    path = write_trace(tmp_path / "t.json", events)
    text = path.read_text()
    at = text.index('"pid":', len(text) // 2)
    path.write_text(text[:at] + '"pid": 1' + "0" * 5000 + ", " + text[at:])
    return path


@pytest.mark.parametrize("workers", [1, 2])
def test_a_slice_that_cannot_be_decoded_refuses_the_trace(tmp_path: Path,
                                                          workers: int) -> None:
    """Not a silently dropped or re-cut slice: the whole trace is refused, in one line."""
    from etl.core.errors import InputError

    path = _huge_pid_trace(tmp_path)
    with pytest.raises(InputError, match="slice at byte"):
        run_pipeline(path, tmp_path / "spill", slice_bytes=4096, workers=workers)
