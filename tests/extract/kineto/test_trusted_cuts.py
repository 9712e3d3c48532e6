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


def _with_a_name_unquoted(path: Path, name: str) -> Path:
    """The trace with one event's name written without its opening quote (bad JSON)."""
    text = path.read_text()
    at = text.index(f'"name": "{name}"')
    path.write_text(text[:at] + '"name": ' + text[at + len('"name": "'):])
    return path


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
    syntax check refuses to run here; the last slice is scanned for the array's end in
    both readings); event ids are the checked reading's."""
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
    path = _with_a_name_unquoted(_trace(tmp_path), "aten::op150")
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


def test_a_slice_failing_after_its_count_leaves_the_count(tmp_path: Path) -> None:
    chain = IdChain(tmp_path / "ids")
    chain.start()
    chain.first_id(0, 4)  # counted, then its spill failed: the next slice's ids stand
    chain.fail(0)
    assert chain.first_id(1, 3) == 4


def _stops_waiting(chain: IdChain, stop: Any) -> bool:
    """Whether a slice waiting for its first id raises SliceFailed after `stop()`."""
    failed: list[BaseException] = []

    def wait() -> None:
        try:
            chain.first_id(5, 1)
        except SliceFailed as exc:
            failed.append(exc)

    waiter = threading.Thread(target=wait, daemon=True)  # daemon: a hang fails, not blocks
    waiter.start()
    stop()
    waiter.join(timeout=10)
    return not waiter.is_alive() and len(failed) == 1


def test_a_removed_folder_stops_a_waiting_slice(tmp_path: Path) -> None:
    import shutil

    chain = IdChain(tmp_path / "ids")
    chain.start()
    assert _stops_waiting(chain, lambda: shutil.rmtree(tmp_path / "ids"))


def test_an_abort_stops_a_waiting_slice(tmp_path: Path) -> None:
    chain = IdChain(tmp_path / "ids")
    chain.start()
    assert _stops_waiting(chain, chain.abort)


@pytest.fixture
def small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """The file is read in 8 KiB blocks: with 4 KiB slices, a small trace makes many."""
    from etl.extract import rawio

    monkeypatch.setattr(rawio, "BLOCK_BYTES", 8 << 10)


def _slices_handed_out(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    handed: list[int] = []
    text = read.SpillSink.text

    def counted(self: Any, *args: Any) -> None:
        handed.append(1)
        text(self, *args)

    monkeypatch.setattr(read.SpillSink, "text", counted)
    return handed


def test_many_slices_numbered_across_workers(tmp_path: Path, small_blocks: None,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Two workers decode slices side by side, each waiting for the count before its own."""
    path = _trace(tmp_path)
    passes, handed = _passes(monkeypatch), _slices_handed_out(monkeypatch)
    result = assert_same_as_in_memory(path, tmp_path / "spill", slice_bytes=4096,
                                      chunk_rows=200, workers=2)
    assert passes == [True] and len(handed) > 10
    assert result.info.event_count == 602


def test_a_bad_slice_among_many_gives_the_checked_error(tmp_path: Path, small_blocks: None,
                                                        monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    """Slices after the bad one wait in the other worker: told it failed, they stop."""
    path = _with_a_name_unquoted(_trace(tmp_path), "aten::op100")
    with pytest.raises(InputError) as checked:
        decode.read_trace(path, slice_bytes=4096)
    passes = _passes(monkeypatch)
    with pytest.raises(InputError) as got:
        run_pipeline(path, tmp_path / "spill", slice_bytes=4096, workers=2)
    assert got.value.line() == checked.value.line() and passes == [True, False]


@pytest.mark.parametrize("workers", [1, 2])
def test_a_truncated_file_is_refused_without_reading_it_again(
        tmp_path: Path, workers: int, small_blocks: None,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The slices before the cut decode: the cut is the checked reading's error, at the
    same byte, and one reading finds it."""
    path = _trace(tmp_path)
    path.write_bytes(path.read_bytes()[:-5000])
    with pytest.raises(InputError, match="truncated") as checked:
        decode.read_trace(path, slice_bytes=4096)
    passes = _passes(monkeypatch)
    with pytest.raises(InputError) as got:
        run_pipeline(path, tmp_path / "spill", slice_bytes=4096, workers=workers)
    assert got.value.line() == checked.value.line() and passes == [True]


def test_a_block_without_a_boundary_reads_the_file_whole_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Slices are handed out, then a block holds no event boundary (an event far longer
    than the slices): the document is read whole instead, the slices before forgotten,
    not read twice."""
    from etl.extract import rawio

    # a first block of 256 KiB: a slice up to the long event, then 8 slices' worth of
    # its name, where no boundary is
    monkeypatch.setattr(rawio, "BLOCK_BYTES", 256 << 10)
    events = [event(name=f"op{i}", ts=1_000 * i, dur=10) for i in range(800)]
    events += [event(name="x" * 300_000, ts=900_000, dur=10)]
    events += [event(name=f"late{i}", ts=1_000_000 + i, dur=1) for i in range(10)]
    path = write_trace(tmp_path / "t.json", events)
    trace = decode.read_trace(path, slice_bytes=4096)
    ids = trace.events.column("event_id").to_pylist()
    assert trace.event_count == trace.events.num_rows == len(set(ids)) == 811
    assert_same_as_in_memory(path, tmp_path / "spill", slice_bytes=4096)
