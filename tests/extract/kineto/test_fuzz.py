"""Fuzzing the Kineto extractor: any bytes give tables or a clean refusal, never a crash.

Property: `read_trace(path)` then `build(trace, 0, None)` returns tables, or raises
InputError (refused, one line) or NotATrace (skipped); never another exception, never a
hang (each example runs under an alarm of EXAMPLE_SECONDS). Inputs: random JSON, random
trace-shaped documents, and mutations of valid traces (truncation at a random byte, byte
flips, deleted/duplicated/swapped events, fields given another type).

Examples are derandomized (no example database); hypothesis also mixes in literals of the
local modules loaded in the process, so they vary with the tests run before. No input is
filtered out: the bug classes once skipped here (non-UTF-8 bytes in the header or in a
broken string, GPU-only traces) are fixed, so every drawn example is checked. Each
property asserts it ran exactly its FUZZ_EXAMPLES count (tests/report_trust.py reports the
sum).
"""
from __future__ import annotations

import copy
import gzip
import inspect
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from etl.core.errors import InputError
from etl.extract.kineto.decode import NotATrace, read_trace
from etl.extract.fields import field_map
from etl.extract.kineto.rows import build
from tests.conftest import Raw, _dump, event, kernel, launch, step
from tests.views.test_tiny_trace import EVENTS as TINY_TRACE_EVENTS

FUZZ_EXAMPLES = {  # examples per property; about 250 in all, well under a minute
    "random_json": 40,
    "random_trace_documents": 40,
    "truncated_at_a_random_byte": 30,
    "ascii_byte_flips": 30,
    "high_byte_flips": 25,
    "event_list_edits": 30,
    "field_type_changes": 30,
    "wide_integer_arguments": 25,
    "slicing_is_invisible": 25,
}
EXAMPLE_SECONDS = 10

SEEDS = {
    "tiny": [step(1, 0, 100_000), launch(1, 1_000), kernel(1, 10_000, 40_000)],
    "hand-worked": TINY_TRACE_EVENTS,
    "with-header": [event(ph="M", name="process_name", pid=0, tid=0),
                    event(cat="Trace", name="PyTorch Profiler", ts=0, dur=10**9),
                    *TINY_TRACE_EVENTS],
}
HEADER = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "GPU", "numSms": 108}],
          "distributedInfo": {"rank": 0}, "displayTimeUnit": "ms"}
ARG_KEYS = [k for keys in field_map("kineto")["args"].values() for k in keys]


def document(events: list[Any], header: dict[str, Any] | None = None) -> bytes:
    return _dump({**(HEADER if header is None else header), "traceEvents": events}).encode()


def fuzz_settings(name: str) -> Callable[[Any], Any]:
    return settings(max_examples=FUZZ_EXAMPLES[name], derandomize=True, database=None,
                    deadline=None, suppress_health_check=list(HealthCheck))


@contextmanager
def alarm(seconds: int) -> Iterator[None]:
    def hang(signum: int, frame: Any) -> None:
        raise TimeoutError(f"extraction ran longer than {seconds} s: a hang")

    previous = signal.signal(signal.SIGALRM, hang)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def extract(path: Path, data: bytes, **read_options: Any) -> tuple[str, Any]:
    """("tables", SourceTables) or ("refused"|"skipped", message); anything else raises."""
    path.write_bytes(data)
    with alarm(EXAMPLE_SECONDS):
        try:
            trace = read_trace(path, **read_options)
            tables = build(trace, 0, None)
        except InputError as exc:
            assert "\n" not in exc.line() and str(path) in exc.line()
            return "refused", exc.line()
        except NotATrace as exc:
            return "skipped", str(exc)
    check_tables(tables, trace.event_count)
    return "tables", tables


def check_tables(tables: Any, event_count: int) -> None:
    """Keys unique and within the trace; every anomaly about a real event."""
    for table, key in ((tables.host_events, "event_id"), (tables.kernels, "kernel_id")):
        ids = table[key].to_pylist()
        assert None not in ids and len(set(ids)) == len(ids), (table, key)
        assert all(0 <= i < event_count for i in ids)
    anomaly_ids = [i for i in tables.anomalies["event_id"].to_pylist() if i is not None]
    assert all(0 <= i < event_count for i in anomaly_ids)
    assert None not in tables.anomalies["kind"].to_pylist()


def run_property(tmp_path: Path, name: str, strategy: st.SearchStrategy[bytes],
                 **read_options: Any) -> int:
    """Run the extractor over `strategy`; returns the number of examples run."""
    ran = []
    path = tmp_path / "fuzz.json"

    @fuzz_settings(name)
    @given(strategy)
    def prop(data: bytes) -> None:
        ran.append(1)
        extract(path, data, **read_options)

    prop()
    return len(ran)


# ---- strategies ------------------------------------------------------------------------

json_scalars = (st.none() | st.booleans() | st.integers(-(2**31), 2**31 - 1)
                | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=12))
json_values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                           max_leaves=12)
number_texts = st.one_of(
    st.integers(-(10**6), 10**12).map(str),
    st.decimals(-(10**9), 10**12, places=3, allow_nan=False, allow_infinity=False).map(str),
    st.sampled_from(["0", "-0", "1e3", "1.5E-2", "0.0001", "12345678901234567890", "1.",
                     "00", "-"]),
).map(Raw)
trace_events = st.fixed_dictionaries({}, optional={
    "ph": st.sampled_from(["X", "i", "I", "M", "B", "E", "s", "f", ""]) | json_scalars,
    "cat": st.sampled_from([*field_map("kineto")["categories"], "mystery"]) | json_scalars,
    "name": st.sampled_from(["ProfilerStep#1", "aten::mm", "nn.Module: L", "k"])
    | json_scalars,
    "pid": st.integers(0, 3) | json_scalars, "tid": st.integers(0, 9) | json_scalars,
    "ts": number_texts | json_scalars, "dur": number_texts | json_scalars,
    "args": st.dictionaries(st.sampled_from(ARG_KEYS), st.integers(0, 50) | json_values,
                            max_size=4) | json_values,
})
seeds = st.sampled_from(sorted(SEEDS))


@st.composite
def flipped(draw: st.DrawFn, byte_values: st.SearchStrategy[int]) -> bytes:
    data = bytearray(document(SEEDS[draw(seeds)]))
    for _ in range(draw(st.integers(1, 4))):
        data[draw(st.integers(0, len(data) - 1))] = draw(byte_values)
    return bytes(data)


@st.composite
def truncated(draw: st.DrawFn) -> bytes:
    data = document(SEEDS[draw(seeds)])
    if draw(st.booleans()):
        data = gzip.compress(data, mtime=0)
    return data[:draw(st.integers(0, len(data) - 1))]


@st.composite
def edited_events(draw: st.DrawFn) -> bytes:
    events = list(SEEDS[draw(seeds)])
    for _ in range(draw(st.integers(1, 5))):
        i = draw(st.integers(0, len(events) - 1)) if events else 0
        action = draw(st.sampled_from(["delete", "duplicate", "swap", "append_any"]))
        if action == "delete" and events:
            del events[i]
        elif action == "duplicate" and events:
            events.insert(draw(st.integers(0, len(events))), events[i])
        elif action == "swap" and events:
            j = draw(st.integers(0, len(events) - 1))
            events[i], events[j] = events[j], events[i]
        else:
            events.append(draw(json_values))
    bare = draw(st.booleans())
    return _dump(events).encode() if bare and events else document(events)


@st.composite
def retyped(draw: st.DrawFn, values: st.SearchStrategy[Any]) -> bytes:
    """One to three fields (of the event or its args) given a value of another type."""
    events = copy.deepcopy(SEEDS[draw(seeds)])
    for _ in range(draw(st.integers(1, 3))):
        ev = events[draw(st.integers(0, len(events) - 1))]
        if draw(st.booleans()):
            if not isinstance(ev.get("args"), dict):
                ev["args"] = {}
            ev["args"][draw(st.sampled_from(ARG_KEYS))] = draw(values)
        else:
            fields = ["ph", "cat", "name", "pid", "tid", "ts", "dur", "args"]
            ev[draw(st.sampled_from(fields))] = draw(values)
    return document(events)


# ---- properties --------------------------------------------------------------------------

def test_random_json(tmp_path: Path) -> None:
    name = "random_json"
    shapes = st.one_of(json_values, st.lists(json_values, max_size=5),
                       st.dictionaries(st.sampled_from(["traceEvents", "schemaVersion",
                                                        "deviceProperties", "x"]),
                                       json_values, max_size=4))
    assert run_property(tmp_path, name, shapes.map(lambda v: _dump(v).encode())) == \
        FUZZ_EXAMPLES[name]


def test_random_trace_documents(tmp_path: Path) -> None:
    name = "random_trace_documents"
    docs = st.builds(document, st.lists(trace_events, max_size=12),
                     st.just(HEADER) | st.dictionaries(st.sampled_from(list(HEADER)),
                                                       json_values, max_size=3))
    assert run_property(tmp_path, name, docs) == FUZZ_EXAMPLES[name]


def test_truncated_at_a_random_byte(tmp_path: Path) -> None:
    """A cut file is refused (or salvaged with --salvage), never half-read silently."""
    name = "truncated_at_a_random_byte"
    ran = []

    @fuzz_settings(name)
    @given(truncated())
    def prop(data: bytes) -> None:
        ran.append(1)
        outcome, _ = extract(tmp_path / "cut.json", data)
        assert outcome in ("refused", "skipped")  # a strict prefix is never a whole trace

    prop()
    assert len(ran) == FUZZ_EXAMPLES[name]


def test_ascii_byte_flips(tmp_path: Path) -> None:
    name = "ascii_byte_flips"
    assert run_property(tmp_path, name, flipped(st.integers(0x20, 0x7E))) == \
        FUZZ_EXAMPLES[name]


def test_high_byte_flips(tmp_path: Path) -> None:
    """Bytes that are not UTF-8 in names and values: invalid_utf8 anomalies or a refusal."""
    name = "high_byte_flips"
    assert run_property(tmp_path, name, flipped(st.integers(0x80, 0xFF))) == FUZZ_EXAMPLES[name]


def test_event_list_edits(tmp_path: Path) -> None:
    name = "event_list_edits"
    assert run_property(tmp_path, name, edited_events()) == FUZZ_EXAMPLES[name]


def test_field_type_changes(tmp_path: Path) -> None:
    """Fields given values of other types (integers kept within int32)."""
    name = "field_type_changes"
    assert run_property(tmp_path, name, retyped(json_values)) == FUZZ_EXAMPLES[name]


def test_wide_integer_arguments(tmp_path: Path) -> None:
    """Integer arguments beyond int64: bad_argument and NULL (a crash before 4219b53)."""
    name = "wide_integer_arguments"
    wide = st.integers(2**63, 2**70) | st.integers(-(2**70), -(2**63) - 1)
    assert run_property(tmp_path, name, retyped(wide)) == FUZZ_EXAMPLES[name]


@pytest.mark.skipif("slice_bytes" not in inspect.signature(read_trace).parameters,
                    reason="read_trace has no slice_bytes")
def test_slicing_is_invisible(tmp_path: Path) -> None:
    """Edited traces read in 64-byte slices give the same answer as one whole read."""
    name = "slicing_is_invisible"
    ran = []

    @fuzz_settings(name)
    @given(edited_events() | retyped(json_values))
    def prop(data: bytes) -> None:
        ran.append(1)
        whole, whole_value = extract(tmp_path / "a.json", data)
        sliced, sliced_value = extract(tmp_path / "a.json", data, slice_bytes=64)
        assert sliced == whole
        if whole == "tables":
            for table in ("host_events", "kernels", "iterations", "devices"):
                assert getattr(sliced_value, table).equals(getattr(whole_value, table)), table
            assert anomaly_rows(sliced_value) == anomaly_rows(whole_value)

    prop()
    assert len(ran) == FUZZ_EXAMPLES[name]


def anomaly_rows(tables: Any) -> list[tuple[Any, ...]]:
    """Anomalies as a sorted list: slices may record them in another order."""
    rows = tables.anomalies.select(["kind", "event_id", "detail"]).to_pylist()
    return sorted((r["kind"], r["event_id"] if r["event_id"] is not None else -1, r["detail"])
                  for r in rows)


def test_anomalies_of_an_event_do_not_depend_on_other_events(tmp_path: Path) -> None:
    """`"ts": null` is flagged alike on the typed and the lenient decoder path (found by
    fuzzing the slice size; differed before 4219b53)."""
    null_ts = {**step(1, 0, 100_000), "ts": None}
    alone = [null_ts, launch(1, 1_000), kernel(1, 10_000, 40_000)]
    odd_neighbour = copy.deepcopy(alone)
    odd_neighbour[2]["args"]["stream"] = [7]  # a list where an integer belongs
    kinds = []
    for n, events in enumerate((alone, odd_neighbour)):
        _, tables = extract(tmp_path / f"t{n}.json", document(events))
        rows = tables.anomalies.to_pylist()
        kinds.append(sorted(r["kind"] for r in rows if r["event_id"] == 0))
    assert kinds[0] == kinds[1]


def test_bytes_that_are_not_utf8_are_found_whatever_msgspec_says() -> None:
    """msgspec raised UnicodeDecodeError for a byte that is not UTF-8 before 0.23 and
    DecodeError("Invalid UTF-8 encoded string") since: both are placed by Python's decoder
    in the document (the header and whole-document readers replace and flag the bytes)."""
    import msgspec

    from etl.extract.kineto.decode import _invalid_utf8

    data = b'{"deviceProperties": [], "na\xffme": 1}'
    for said in (msgspec.DecodeError("Invalid UTF-8 encoded string"),
                 UnicodeDecodeError("utf-8", b"na\xffme", 2, 3, "invalid start byte")):
        found = _invalid_utf8(data, said)
        assert found is not None and (found.start, found.end) == (data.index(b"\xff"),
                                                                   data.index(b"\xff") + 1)
    assert _invalid_utf8(data, msgspec.DecodeError("Input data was truncated")) is None
    assert _invalid_utf8(b'{"ok": 1}', msgspec.DecodeError("Invalid UTF-8 encoded string")) \
        is None
