"""Trusted cuts: a regular file's slices are cut where the text vouches for an event
boundary and handed out neither checked nor counted; their decoders number the events
(event_ids.py). Anything wrong and the file is read again with every cut checked, so the
tables and the errors are those of the checked reading (read_trace, the reference)."""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from etl.core.errors import InputError
from etl.extract import jsonslice
from etl.extract.kineto import decode, read
from etl.extract.kineto.event_ids import FAILED, IdChain, SliceFailed
from tests.conftest import event, kernel, launch, step, write_trace
from tests.extract.kineto.test_pipeline import assert_same_as_in_memory, run_pipeline


def _trace(tmp_path: Path, last_args: dict[str, Any] | None = None) -> Path:
    events = [step(1, 0, 1_000_000)]
    for i in range(200):
        events += [event(name=f"aten::op{i}", ts=1_000 + 2_000 * i, dur=1_500),
                   launch(i, 1_100 + 2_000 * i), kernel(i, 1_200 + 2_000 * i, 300)]
    events.append(event(name="last", ts=500_000, dur=10, **(last_args or {})))
    return write_trace(tmp_path / "t.json", events)


def _passes(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """The `trusted` argument of each first pass the ingest makes."""
    made: list[bool] = []
    first_pass = read._first_pass

    def recorded(path: Path, spill: Path, options: Any, trusted: bool) -> Any:
        made.append(trusted)
        return first_pass(path, spill, options, trusted)

    monkeypatch.setattr(read, "_first_pass", recorded)
    return made


def test_a_boundary_inside_a_string_is_never_trusted() -> None:
    # a string may hold `}, {` but never an unescaped quote: the two real boundaries are
    # the only ones the text vouches for, where the untrusted rule sees four candidates
    text = bytearray(b'[{"name": "a}, {b"}, {"name": "c}, {\\"d"}, {"ph": "X"}]')
    real = [text.index(b'"}, {"name"') + 1, text.index(b'"}, {"ph"') + 1]
    assert len(jsonslice._candidates(text)) == 4
    assert jsonslice._rightmost(jsonslice._TRUSTED_SPLIT, text) == real[::-1]
    assert jsonslice._trusted_candidates(text) == real[1:]


def test_a_quote_closing_a_string_is_not_a_boundary() -> None:
    # `"a}, {"` closes a key or value at the quote; what follows it (`:` here) is what
    # JSON allows after a string, so the text does not vouch for a boundary there
    text = bytearray(b'[{"a}, {": 1}, {"ph": "X"}]')
    assert jsonslice._trusted_candidates(text) == [text.rindex(b"}, {")]


@pytest.mark.parametrize("workers", [1, 2])
def test_slices_cut_unchecked_give_the_checked_tables(tmp_path: Path, workers: int,
                                                      monkeypatch: pytest.MonkeyPatch
                                                      ) -> None:
    """One pass only, and the ingesting process never checks a slice's syntax (the
    syntax check refuses to run here); event ids are the checked reading's."""
    path = _trace(tmp_path)
    passes = _passes(monkeypatch)

    def no_syntax_check() -> Any:
        raise AssertionError("a trusted slice was checked")

    monkeypatch.setattr(decode, "_raw_items", no_syntax_check)
    result, _ = run_pipeline(path, tmp_path / "spill", slice_bytes=4096, workers=workers)
    monkeypatch.undo()  # the reference reading checks every slice
    assert passes == [True]
    assert result.info.event_count == 602
    assert_same_as_in_memory(path, tmp_path / "spill2", slice_bytes=4096, workers=workers)


@pytest.mark.parametrize("workers", [1, 2])
def test_a_cut_inside_an_event_means_reading_again(tmp_path: Path, workers: int,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The last event's args hold a list of objects: the rightmost `}, {"` is inside it,
    the slice cut there cannot decode, and the file is read again with cuts checked."""
    path = _trace(tmp_path, {"shapes": [{"a": 1}, {"b": 2}]})
    passes = _passes(monkeypatch)
    assert_same_as_in_memory(path, tmp_path / "spill", slice_bytes=4096, workers=workers)
    assert passes == [True, False]


def test_weak_boundaries_only_mean_reading_again(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Events written `{}` leave no boundary the text vouches for: read again, checked."""
    path = tmp_path / "t.json"
    path.write_text('{"traceEvents": [' + ", ".join(['{}'] * 3000) + "]}")
    passes = _passes(monkeypatch)
    result, _ = run_pipeline(path, tmp_path / "spill", slice_bytes=4096)
    assert passes == [True, False] and result.info.event_count == 3000


@pytest.mark.parametrize("workers", [1, 2])
def test_errors_are_those_of_the_checked_reading(tmp_path: Path, workers: int) -> None:
    """A syntax error past the first cut: the same line as the checked reading's."""
    path = _trace(tmp_path)
    text = path.read_text()
    at = text.index('"name": "aten::op150"')
    path.write_text(text[:at] + '"name": aten' + text[at + len('"name": "aten'):])
    with pytest.raises(InputError) as checked:
        decode.read_trace(path, slice_bytes=4096)
    with pytest.raises(InputError) as got:
        run_pipeline(path, tmp_path / "spill", slice_bytes=4096, workers=workers)
    assert got.value.line() == checked.value.line()


def test_ids_pass_along_the_chain_whatever_the_order_of_decoding(tmp_path: Path) -> None:
    chain = IdChain(tmp_path / "ids")
    chain.start()
    got: dict[int, int] = {}
    later = threading.Thread(target=lambda: got.__setitem__(1, chain.first_id(1, 5)))
    later.start()  # slice 1 is decoded first: it waits for slice 0's count
    got[0] = chain.first_id(0, 7)
    later.join(timeout=10)
    assert got == {0: 0, 1: 7}
    assert chain.first_id(2, 1) == 12
    assert chain.first_id(0, 7) == 0  # asked again: the same


def test_a_failed_slice_stops_the_slices_after_it(tmp_path: Path) -> None:
    chain = IdChain(tmp_path / "ids")
    chain.start()
    chain.fail(0)
    assert (tmp_path / "ids" / "first-000001").read_text() == FAILED
    with pytest.raises(SliceFailed, match="slice 0 failed"):
        chain.first_id(1, 3)
    chain.first_id(0, 4)  # a slice that published its count before failing
    chain.fail(0)
    assert chain.first_id(1, 3) == 4


def test_an_abort_stops_a_waiting_slice(tmp_path: Path) -> None:
    chain = IdChain(tmp_path / "ids")
    chain.start()
    failed: list[BaseException] = []

    def wait() -> None:
        try:
            chain.first_id(5, 1)
        except SliceFailed as exc:
            failed.append(exc)

    waiter = threading.Thread(target=wait)
    waiter.start()
    chain.abort()
    waiter.join(timeout=10)
    assert not waiter.is_alive() and len(failed) == 1
