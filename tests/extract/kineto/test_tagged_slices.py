"""A slice decodes to the same table whether the ph-tagged decoder (ignored phases skipped
unread) or the untagged one reads it; slices the tagged decoder refuses fall back."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from etl.extract.kineto import decode as kineto
from tests.conftest import corpus_param

KERNEL = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10.5, "dur": 2,
          "args": {"correlation": 5, "device": 0, "stream": 7, "grid": [1, 2, 3],
                   "block": [4, 1, 1], "External id": 9}}
LAUNCH = {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": "t",
          "ts": 9, "dur": 1, "args": {"correlation": 5, "external id": 9}}
INSTANT = {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1,
           "ts": 3, "s": "t", "args": {"Bytes": 5}}
FLOW = {"ph": "s", "id": 5, "pid": 1, "tid": 1, "ts": 9, "cat": "ac2g", "name": "ac2g"}

ODD_SLICES = {
    "no ph": [KERNEL, {"name": "x", "ts": 1}],
    "null ph": [KERNEL, {"ph": None, "ts": 1}],
    "unknown ph": [LAUNCH, {"ph": "Z", "ts": 1}],
    "big I": [{**INSTANT, "ph": "I"}, FLOW],
    "all skipped": [FLOW, {**FLOW, "ph": "f"}, {"ph": "M", "name": "process_name"}],
}


def _untagged(events: list[Any]) -> Any:
    _, _, typed = kineto._decoders()
    text = json.dumps(events).encode()
    return kineto._batch(kineto._typed_columns(typed.decode(text), 100), [])


def _decoded(events: list[Any]) -> kineto.DecodedSlice:
    return kineto.decode_slice(Path("t.json"), json.dumps(events).encode(), 100, 0)


def test_tagged_decoding_equals_untagged() -> None:
    events = [KERNEL, FLOW, LAUNCH, INSTANT, {**FLOW, "ph": "f", "bp": "e"}, KERNEL]
    tagged, _ = kineto._tagged_decoder()
    assert len(tagged.decode(json.dumps(events).encode())) == len(events)
    decoded = _decoded(events)
    assert decoded.table.equals(_untagged(events))
    assert decoded.with_phase == len(events)
    assert decoded.table["event_id"].to_pylist() == [100, 102, 103, 105]


def test_a_repeated_ph_reads_as_before() -> None:
    text = b'[{"ph": "s", "ph": "X", "cat": "cpu_op", "ts": 1, "dur": 1}]'
    _, _, typed = kineto._decoders()
    decoded = kineto.decode_slice(Path("t.json"), text, 0, 0)
    assert decoded.table.equals(kineto._batch(kineto._typed_columns(typed.decode(text), 0),
                                              []))
    assert decoded.table.num_rows == 1


@pytest.mark.parametrize("case", sorted(ODD_SLICES))
def test_slices_the_tagged_decoder_refuses_read_as_before(case: str) -> None:
    events = ODD_SLICES[case]
    tagged, _ = kineto._tagged_decoder()
    if case not in ("big I", "all skipped"):
        with pytest.raises(msgspec.ValidationError):
            tagged.decode(json.dumps(events).encode())
    decoded = _decoded(events)
    assert decoded.table.equals(_untagged(events))
    assert decoded.with_phase == sum(1 for e in events if e.get("ph") is not None)


def _lenient(events: list[Any]) -> tuple[Any, list[kineto.Anomaly]]:
    _, lenient, _ = kineto._decoders()
    found: list[kineto.Anomaly] = []
    cols = kineto._lenient_columns(lenient.decode(json.dumps(events).encode()), 100, found)
    assert not cols.typed
    return kineto._batch(cols, found), found


def test_typed_arguments_equal_the_general_route_whatever_their_mix() -> None:
    """Typed columns that convert to Arrow as they are skip normalising; columns with text
    or out-of-range values take the general route: same table, same anomalies in order."""
    odd = [
        {**KERNEL, "args": {**KERNEL["args"], "stream": "0x0", "grid": "grid(s0,)"}},
        {**KERNEL, "args": {**KERNEL["args"], "grid": "grid(100,)", "block": "grid(4, 8)"}},
        {**KERNEL, "args": {**KERNEL["args"], "correlation": 2**64, "block": []}},
        {**KERNEL, "args": {"device": 2**40, "bytes": "12", "registers per thread": "x"}},
        {**LAUNCH, "args": {}}, INSTANT, KERNEL,
    ]
    only_absent = [{**LAUNCH, "args": {}}, INSTANT]
    for events in (odd, only_absent, [KERNEL, LAUNCH]):
        decoded = _decoded(events)
        table, found = _lenient(events)
        assert decoded.table.equals(table)
        assert decoded.anomalies == found
    kinds = [kind for kind, _, _ in _decoded(odd).anomalies]
    assert kinds.count("bad_argument") == 5  # symbolic grid, 2^64, [], device, "x"
    grids = _decoded(odd).table.select(["grid_x", "grid_y", "grid_z", "block_x", "block_y",
                                        "block_z"]).to_pylist()
    # Inductor's grid texts are its launch grid: grid(100,) is (100, 1, 1)
    assert list(grids[1].values()) == [100, 1, 1, 4, 8, 1]


# ---- argument spellings read only in the traces that name them (_FIRST_READ) -----------

ALL_SPELLINGS = frozenset(key for keys in kineto.field_map("kineto")["args"].values()
                          for key in keys)
CORPUS = Path(__file__).resolve().parents[4] / "shared" / "corpus"
CORPUS_TRACES = sorted(p.relative_to(CORPUS).as_posix() for p in CORPUS.rglob("*.json.gz")
                       if "neusight" not in p.parts)


@pytest.fixture
def fresh_memory(monkeypatch: pytest.MonkeyPatch) -> dict[str, frozenset[str]]:
    memory: dict[str, frozenset[str]] = {}
    monkeypatch.setattr(kineto, "_ARGS_READ", memory)
    return memory


def test_first_read_spellings_are_fields_toml_spellings() -> None:
    assert kineto._FIRST_READ < ALL_SPELLINGS


def test_a_spelling_the_slice_names_is_read_from_then_on(
        fresh_memory: dict[str, frozenset[str]]) -> None:
    comms = {**KERNEL, "args": {**KERNEL["args"], "Collective name": "allreduce",
                                "Process Group ID": 3, "wait_on_stream": None}}
    events = [KERNEL, LAUNCH, INSTANT, comms]  # "external id" in the launch, the rest last
    decoded = _decoded(events)
    assert decoded.table.equals(_untagged(events))
    assert decoded.table["collective_name"].to_pylist() == [None, None, None, "allreduce"]
    assert decoded.table["external_id"].to_pylist() == [9, 9, None, 9]
    learned = fresh_memory["t.json"] - kineto._FIRST_READ
    assert learned == {"external id", "Collective name", "Process Group ID",
                       "wait_on_stream"}  # named, null or not
    again = _decoded([LAUNCH, comms])  # read with them at once: one decoding
    assert again.table.equals(_untagged([LAUNCH, comms]))


def test_a_slice_without_unread_spellings_learns_nothing(
        fresh_memory: dict[str, frozenset[str]]) -> None:
    events = [KERNEL, {**LAUNCH, "args": {"correlation": 5}}, INSTANT]
    assert _decoded(events).table.equals(_untagged(events))
    assert "t.json" not in fresh_memory


def test_a_spelling_quoted_as_a_value_is_only_read(
        fresh_memory: dict[str, frozenset[str]]) -> None:
    events = [{**KERNEL, "name": "flops"}]  # a name, not an argument
    decoded = _decoded(events)
    assert decoded.table.equals(_untagged(events))
    assert decoded.table["flops"].to_pylist() == [None]
    assert fresh_memory["t.json"] - kineto._FIRST_READ == {"flops"}


def test_a_key_written_with_escapes_is_read(
        fresh_memory: dict[str, frozenset[str]]) -> None:
    """JSON may spell a key with \\u escapes; the decoder unescapes it, so a slice with
    an escape is read with every spelling (a text search for "flops" would miss it)."""
    text = (b'[{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1, "dur": 2, '
            b'"args": {"fl\\u006fps": 12, "Input\\u0020Dims": [[2, 3]]}}]')
    decoded = kineto.decode_slice(Path("t.json"), text, 0, 0)
    assert decoded.table["flops"].to_pylist() == [12]
    assert decoded.table["input_dims"].to_pylist() == ["[[2,3]]"]
    assert "t.json" not in fresh_memory  # for that slice only


@pytest.mark.parametrize("relative", [corpus_param(t, trace=t) for t in CORPUS_TRACES])
def test_corpus_traces_read_alike_with_every_spelling_read(
        relative: str, monkeypatch: pytest.MonkeyPatch,
        fresh_memory: dict[str, frozenset[str]]) -> None:
    path = CORPUS / relative
    slices = 1 << 18  # many slices: spellings learned part way through the file
    adaptive = kineto.read_trace(path, slice_bytes=slices)
    monkeypatch.setattr(kineto, "_FIRST_READ", ALL_SPELLINGS)
    fresh_memory.clear()
    everything = kineto.read_trace(path, slice_bytes=slices)
    assert adaptive.events.equals(everything.events)
    assert adaptive.anomalies == everything.anomalies
