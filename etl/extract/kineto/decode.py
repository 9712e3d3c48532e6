"""PyTorch profiler (Kineto) Chrome-trace JSON → an Arrow table of its events.

The file is streamed: decompressed in blocks, its `traceEvents` array cut into slices of
~16 MiB (jsonslice.py), each slice decoded with msgspec typed structs generated from
`fields.toml` and turned into Arrow columns at once, so memory follows the slice,
not the file. Only the needed fields are materialised; `ts`/`dur` stay raw text until they
are converted in bulk to exact integer nanoseconds. A slice whose fields have unexpected
types is decoded again leniently, event by event, and every oddity is recorded as an
anomaly instead of failing or guessing. Layouts the slicer does not recognise are decoded
whole (same code after decoding).
"""
from __future__ import annotations

import decimal
import functools
import itertools
import operator
import re
import struct
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from collections.abc import Sequence
from typing import Any, Protocol
from collections.abc import Callable

import msgspec

import pyarrow as pa
import pyarrow.compute as pc

from etl.extract.fields import field_map
from etl.core.errors import InputError
from etl.extract.registry import NotThisFormat
from etl.extract.kineto.arg_values import (absent_arg_array, arg_array, arg_kinds,
                                            decoder_field, raw_texts)
from etl.extract.jsonslice import ArraySlicer, Malformed, NotStreamable, Truncated
from etl.extract.rawio import BlockReader, read_all
from etl.extract.timeconv import us_texts_to_ns
from etl.extract.trace_role import SLICE_BYTES

Anomaly = tuple[str, int | None, str]
# a slice's first event id, or what gives it once the slice's events are counted (its
# decoder calls it once, with their number: etl/extract/kineto/event_ids.py)
FirstId = int | Callable[[int], int]

ARG_COLUMNS = ("correlation", "external_id", "device", "stream", "registers_per_thread",
               "shared_memory_bytes", "bytes", "sequence_number", "fwd_thread_id")
MEMORY_COLUMNS = ("memory_total_allocated", "memory_total_reserved", "memory_bytes",
                  "memory_device_id", "memory_device_type")  # [memory] events' args
SYNC_COLUMNS = ("wait_stream", "wait_record_correlation", "wait_cuda_event")  # cuda_sync args
COLLECTIVE_INT_COLUMNS = ("in_msg_nelems", "out_msg_nelems", "group_size", "comm_rank",
                          "comm_seq", "global_rank_start", "global_rank_stride", "src_rank",
                          "dst_rank")  # record_param_comms args
DIM_COLUMNS = ("grid", "block")


@cache
def _decoders() -> tuple[msgspec.json.Decoder, msgspec.json.Decoder, msgspec.json.Decoder]:
    """(typed document decoder, lenient decoder keeping floats exact, typed slice decoder)."""
    event: Any = msgspec.defstruct("Event", [("ph", str | None, None), *_event_fields()],
                                   gc=False)
    header = msgspec.defstruct("Header", [
        ("traceEvents", list[event]), ("deviceProperties", Any, None),
        ("distributedInfo", Any, None), ("displayTimeUnit", Any, None),
        ("baseTimeNanoseconds", Any, None)])
    typed = msgspec.json.Decoder(header | list[event])
    lenient = msgspec.json.Decoder(float_hook=decimal.Decimal)
    return typed, lenient, msgspec.json.Decoder(list[event])


@cache
def _event_fields(read: frozenset[str] | None = None) -> list[tuple[str, Any, Any]]:
    """The fields read from an event besides `ph` (the typed decoders' shared layout).

    `read`: the argument spellings (fields.toml [args] values) decoded; the others have
    no field, so the decoder skips them (_slice_columns reads them in a file once a slice
    names them). None: all of them.
    """
    aliases = field_map("kineto")["args"]
    arg_fields: list[tuple[str, Any, Any]] = []
    for column, keys in aliases.items():
        # strings are accepted here and normalised later (ROCm writes stream "0x0"; Triton
        # cpu_ops carry grid "grid(100,)"), so one odd field never forces the slow path
        kind = (list[int] | str) if column in DIM_COLUMNS else (int | str)
        for n, key in enumerate(keys):
            if read is not None and key not in read:
                continue
            if column in arg_kinds():
                arg_fields.append((f"{column}__{n}", *decoder_field(arg_kinds()[column], key)))
            else:
                spec = msgspec.field(default=None, name=key)
                arg_fields.append((f"{column}__{n}", kind | None, spec))
    args = msgspec.defstruct("Args", arg_fields, gc=False)  # acyclic: skip GC tracking
    raw = msgspec.Raw
    return [("cat", str | None, None), ("name", str | None, None),
            ("pid", int | str | None, None), ("tid", int | str | None, None),
            ("ts", raw, msgspec.field(default_factory=lambda: raw(b""))),
            ("dur", raw, msgspec.field(default_factory=lambda: raw(b""))),
            ("args", args | None, None)]


# The argument spellings a slice is first decoded with: what most GPU traces carry (kernel,
# runtime and memory events, the autograd link). Each other one would cost a field in every
# decoded event and a pass over every event of every slice, so it is read only in a trace
# that has it: from the first slice whose text names it, that process reads it for the
# rest of the file (_ARGS_READ).
_FIRST_READ = frozenset((
    "correlation", "External id", "device", "stream", "grid", "block",
    "registers per thread", "shared memory", "bytes", "Total Allocated", "Total Reserved",
    "Bytes", "Device Id", "Device Type", "Sequence number", "Fwd thread id",
    "est. achieved occupancy %", "blocks per SM", "warps per SM"))
_ARGS_READ: dict[str, frozenset[str]] = {}  # per file: the spellings its slices need


# Chrome-trace phases besides the kept ones (X, i, I, B, E): events of these (counters,
# metadata, flows, async and object events, ...) carry no host or GPU time for this tool and
# are skipped unread
_SKIPPED_PHASES = ("C", "b", "n", "e", "s", "t", "f", "P", "O", "N", "D", "M",
                   "R", "c", "(", ")", "S", "T", "F", "p", "v", "V")


@functools.lru_cache(maxsize=16)
def _tagged_decoder(read: frozenset[str] | None = None
                    ) -> tuple[msgspec.json.Decoder, dict[type, str]]:
    """A slice decoder tagged by `ph`, and the phase of each kept event type.

    Kept phases decode to full structs; every other known phase to an empty struct, so a
    flow event (a third of a Kineto trace) costs a syntax scan, not a Python object per
    field. An event whose ph is missing, null or unknown fails validation: the caller then
    decodes untagged, exactly as before. `read`: as in _event_fields.
    """
    fields = _event_fields(read)
    kept = {msgspec.defstruct(f"Event{ord(ph)}", fields, gc=False,
                              tag_field="ph", tag=ph): ph for ph in sorted(_KEPT_PHASES)}
    skipped = [msgspec.defstruct(f"Skipped{ord(ph)}", [], gc=False, tag_field="ph", tag=ph)
               for ph in _SKIPPED_PHASES]
    event = functools.reduce(operator.or_, [*kept, *skipped])  # their union
    return msgspec.json.Decoder(list[event]), kept  # type: ignore[valid-type]


class NotATrace(NotThisFormat):
    """Valid JSON that is not a trace (a config.json): the file is skipped, not refused."""


@dataclass
class SourceColumns:
    """Every kept event (complete, instant, begin, end) of one slice as plain column lists
    (event order kept)."""

    event_id: list[int] = field(default_factory=list)
    ph: list[str | None] = field(default_factory=list)
    cat: list[str | None] = field(default_factory=list)
    name: list[str | None] = field(default_factory=list)
    pid: list[str | None] = field(default_factory=list)
    tid: list[str | None] = field(default_factory=list)
    ts_text: list[bytes] = field(default_factory=list)
    dur_text: list[bytes] = field(default_factory=list)
    args: dict[str, list[Any]] = field(default_factory=dict)
    with_phase: int = 0     # events of the slice with a `ph` (kept or not)
    # from the typed decoders: args hold only int | str | None (lists of int for grid and
    # block), never the floats, bools or Decimals of the lenient reading
    typed: bool = False
    # argument columns no event of the slice has (their spellings were typed null)
    absent: frozenset[str] = frozenset()


@dataclass
class KinetoTrace:
    path: Path
    events: pa.Table          # kept events (complete, instant, B and E unpaired), _batch()
    event_count: int          # all events of traceEvents, metadata and flows included
    device_properties: list[dict[str, Any]]
    distributed_info: dict[str, Any] | None
    display_time_unit: str | None
    anomalies: list[Anomaly]
    truncated: bool = False   # salvaged: the file ended early, complete events kept
    base_time_ns: Any = None  # baseTimeNanoseconds as written (ts are relative to it)


def read_trace(path: Path, salvage: bool = False, slice_bytes: int = SLICE_BYTES
               ) -> KinetoTrace:
    """The whole trace as one Arrow table of kept events (for tests and small inputs).

    Unreadable input raises InputError, non-traces NotATrace. With `salvage`, a file that
    ends early keeps its complete events (truncated = True).
    """
    sink = CollectingSink(path)
    info = stream_trace(path, sink, salvage, slice_bytes)
    events = pa.concat_tables(sink.batches) if sink.batches else _batch(
        SourceColumns(args={c: [] for c in field_map("kineto")["args"]}), [])
    trace = KinetoTrace(path, events, info.event_count, info.device_properties,
                        info.distributed_info, info.display_time_unit,
                        sink.anomalies + info.anomalies, info.truncated, info.base_time_ns)
    return trace


class SliceSink(Protocol):
    """Where stream_trace hands its slices, in document order."""

    def text(self, text: bytes | memoryview, first_id: int | None, offset: int) -> None:
        """A validated slice `[...]` to decode (here or in a worker): a view of the
        slicer's buffer, valid only during the call. Its bytes between the brackets are
        the document's from `offset` on. `first_id` None: a trusted cut, neither checked
        nor counted (stream_trace)."""

    def batch(self, table: pa.Table, anomalies: list[Anomaly], with_phase: int) -> None:
        """Events already decoded (the whole-document fallback)."""

    def with_phase(self) -> int:
        """Events seen so far that have a `ph` (after every slice has been decoded)."""

    def events(self) -> int:
        """Events of the slices seen so far, kept or not (after every slice is decoded)."""

    def reset(self) -> None:
        """Forget every slice handed over so far: the document is read whole instead."""


@dataclass
class CollectingSink:
    """Decodes each slice here and keeps the batches: the in-memory reading."""

    path: Path
    batches: list[pa.Table] = field(default_factory=list)
    anomalies: list[Anomaly] = field(default_factory=list)
    phased: int = 0
    counted: int = 0

    def text(self, text: bytes | memoryview, first_id: int | None, offset: int) -> None:
        decoded = decode_slice(self.path, bytes(text), self._first_id(first_id), offset)
        self.batch(decoded.table, decoded.anomalies, decoded.with_phase)
        self.counted += decoded.events

    def _first_id(self, first_id: int | None) -> int:
        return self.counted if first_id is None else first_id

    def reset(self) -> None:
        self.batches, self.anomalies, self.phased, self.counted = [], [], 0, 0

    def batch(self, table: pa.Table, anomalies: list[Anomaly], with_phase: int) -> None:
        self.batches.append(table)
        self.anomalies += anomalies
        self.phased += with_phase

    def with_phase(self) -> int:
        return self.phased

    def events(self) -> int:
        return self.counted


@dataclass
class TraceInfo:
    """Everything about a streamed trace except its events (which went to the sink)."""

    event_count: int          # all events of traceEvents, metadata and flows included
    device_properties: list[dict[str, Any]]
    distributed_info: dict[str, Any] | None
    display_time_unit: str | None
    anomalies: list[Anomaly]  # about the document as a whole (header, time unit, cut)
    truncated: bool = False
    base_time_ns: Any = None  # baseTimeNanoseconds as written; None when absent


def stream_trace(path: Path, sink: SliceSink, salvage: bool = False,
                 slice_bytes: int = SLICE_BYTES, trusted: bool = False) -> TraceInfo:
    """Cut the file's events into validated slices and hand them to `sink`, in order.

    Slices are only checked for JSON syntax and counted here (a fraction of decoding, but
    a scan of every byte), so the sink may decode them elsewhere. Unreadable input raises
    InputError, non-traces NotATrace. `trusted`: slices are cut where the text vouches
    for the boundary and handed out neither checked nor counted (first id None); the
    sink's decoders number the events. A slice that fails to decode, or CutNotTrusted,
    then means reading again untrusted; an error of this reading stands once the slices
    handed out have decoded (etl/extract/kineto/read.py, _spilled_slices).
    """
    reader = BlockReader(path, salvage)
    counter = _Counter(path, sink, None if trusted else 0)
    header: bytes | None = None
    cut = False
    try:
        for piece in ArraySlicer(iter(reader), b"traceEvents", counter.validate, slice_bytes,
                                 trusted):
            if piece.kind == "header":
                header = piece.value  # type: ignore[assignment]
    except NotStreamable:
        sink.reset()  # slices handed out before a block without a boundary are read again
        return _stream_whole(path, sink)
    except Truncated as truncated:
        if not salvage:
            raise _truncated(path, truncated.offset) from None
        cut = True
    except Malformed as bad:
        raise InputError(path, f"not valid JSON ({bad.message})", f"byte {bad.offset}",
                         "check that the file is a PyTorch profiler trace") from None
    except msgspec.DecodeError as exc:
        raise InputError(path, f"not valid JSON ({exc})", None,
                         "check that the file is a PyTorch profiler trace") from None
    except RecursionError:  # from the slicer's syntax scan of the input's end
        raise _too_deep(path, None) from None
    if header == b"{}" and sink.with_phase() == 0:
        raise NotATrace("JSON array without trace events (no event has a ph)")
    anomalies: list[Anomaly] = []
    info = _info(sink.events(), _header_fields(path, header, anomalies), anomalies)
    info.truncated = cut or reader.truncated
    return info


def _stream_whole(path: Path, sink: SliceSink) -> TraceInfo:
    whole = _read_whole(path, read_all(path))
    sink.batch(whole.events, [], 0)  # with_phase only decides about streamed bare arrays
    return TraceInfo(whole.event_count, whole.device_properties, whole.distributed_info,
                     whole.display_time_unit, whole.anomalies, base_time_ns=whole.base_time_ns)


@dataclass
class _Counter:
    """The slicer's decode step: syntax check and count, then the slice goes to the sink.
    `count` None: trusted cuts, handed over unchecked and uncounted."""

    path: Path
    sink: SliceSink
    count: int | None

    def validate(self, text: bytes | memoryview, offset: int) -> int:
        if self.count is None:
            self._hand_over(text, None, offset)
            return 0
        # Raw items are checked for syntax like full decoding (not for UTF-8: decode_slice
        # replaces and flags such bytes, keys included)
        items = len(_guarded(self.path, offset, _raw_items().decode, text))
        self._hand_over(text, self.count, offset)
        self.count += items
        return items

    def _hand_over(self, text: bytes | memoryview, first_id: int | None, offset: int) -> None:
        try:
            self.sink.text(text, first_id, offset)
        except msgspec.DecodeError as exc:  # from decoding, not from this cut
            raise _slice_error(self.path, offset, exc) from None


@cache
def _raw_items() -> msgspec.json.Decoder:
    return msgspec.json.Decoder(list[msgspec.Raw])


def _truncated(path: Path, offset: int) -> InputError:
    return InputError(path, "JSON ends early (truncated trace)",
                      f"after byte {offset} (last complete slice)",
                      "the writer was probably killed; re-copy or re-record the trace, or "
                      "ingest with --salvage to keep the complete events")


# a slice's bytes: bytes, or the bytearray a worker read the slice into
SliceText = bytes | bytearray


@dataclass
class DecodedSlice:
    table: pa.Table
    anomalies: list[Anomaly]
    with_phase: int
    events: int  # all of the slice's events, kept or not


def decode_slice(path: Path, text: SliceText, first_id: FirstId, offset: int) -> DecodedSlice:
    """One slice → Arrow (typed decoding; lenient, event by event, if a field has an
    unexpected type). Bytes that are not UTF-8 are replaced and flagged first. The slice
    was checked by the slicer, or cut trusted (stream_trace): decoding checks it then."""
    anomalies: list[Anomaly] = []
    text = _valid_utf8(text, offset, anomalies)
    try:
        cols, events = _slice_columns(path, text, first_id, offset)
    except msgspec.ValidationError:
        decoded = _lenient_slice(path, text, offset)
        cols = _lenient_columns(decoded, _first(first_id, len(decoded)), anomalies)
        cols.with_phase = sum(1 for ev in decoded if isinstance(ev, dict) and "ph" in ev)
        events = len(decoded)
    except msgspec.DecodeError as exc:
        raise _slice_error(path, offset, exc) from None
    return DecodedSlice(_batch(cols, anomalies), anomalies, cols.with_phase, events)


def _first(first_id: FirstId, events: int) -> int:
    """The slice's first event id, once its `events` are counted."""
    return first_id if isinstance(first_id, int) else first_id(events)


def _slice_columns(path: Path, text: SliceText, first_id: FirstId, offset: int
                   ) -> tuple[SourceColumns, int]:
    """Typed decoding, tagged by ph first, with the argument spellings this file has
    needed so far and those the slice names; untagged when some event's ph is not a
    known phase (a ValidationError from here means a field has an unexpected type).
    Returns the columns and the number of events."""
    read = _ARGS_READ.get(str(path), _FIRST_READ)
    named, escaped = _unread_in(text, read)
    if named:
        read = _ARGS_READ[str(path)] = read | named
    if escaped:
        read = _ALL_SPELLINGS  # for this slice only
    tagged, kept_types = _tagged_decoder(read)
    try:
        events = _guarded(path, offset, tagged.decode, text)
    except msgspec.ValidationError:
        _, _, typed = _decoders()
        events = _guarded(path, offset, typed.decode, text)
        return _typed_columns(events, _first(first_id, len(events))), len(events)
    return (_tagged_columns(events, kept_types, _first(first_id, len(events)), read),
            len(events))


_ALL_SPELLINGS = frozenset(key for keys in field_map("kineto")["args"].values()
                           for key in keys)


def _unread_in(text: SliceText, read: frozenset[str]) -> tuple[frozenset[str], bool]:
    """(the spellings not in `read` that `text` holds as a quoted string, whether it holds
    a backslash escape): what the decoder must read so that no argument is skipped. The
    text is searched as written; a key spelled with an escape ("Input\\u0020Dims") is the
    same key to the decoder, so a slice with an escape (rare: JSON writers escape quotes,
    backslashes and control characters) is decoded with every spelling. One RE2 scan
    (~12 ms for 16 MiB) and one memchr; a spelling quoted as a value, not a key, only
    costs reading it."""
    escaped = b"\\" in text and b"\\u" in text
    pattern = _unread_pattern(read)
    if escaped or pattern is None or not _matches(text, pattern):
        return frozenset(), escaped
    return frozenset(k for k in _ALL_SPELLINGS - read if f'"{k}"'.encode() in text), False


def _matches(text: SliceText, pattern: str) -> bool:
    """Whether the RE2 `pattern` matches somewhere in `text` (read in place)."""
    data = pa.py_buffer(text)
    offsets = pa.py_buffer(struct.pack("<qq", 0, len(data)))
    whole = pa.Array.from_buffers(pa.large_binary(), 1, [None, offsets, data])
    return bool(pc.any(pc.match_substring_regex(whole, pattern)).as_py())


@functools.lru_cache(maxsize=16)
def _unread_pattern(read: frozenset[str]) -> str | None:
    """An RE2 pattern of the spellings not in `read`, each between quotes."""
    unread = sorted(_ALL_SPELLINGS - read)
    if not unread:
        return None
    return '"(?:' + "|".join(re.sub(r"([\\.^$|?*+()\[\]{}])", r"\\\1", k)
                             for k in unread) + ')"'


def _lenient_slice(path: Path, text: SliceText, offset: int) -> list[Any]:
    _, lenient, _ = _decoders()
    try:
        return _guarded(path, offset, lenient.decode, text)  # type: ignore[no-any-return]
    except msgspec.DecodeError as exc:  # e.g. an integer of thousands of digits
        raise _slice_error(path, offset, exc) from None


def _slice_error(path: Path, offset: int, exc: Exception) -> InputError:
    """Never a msgspec error out of a validated slice: the slicer would take it for a bad
    cut and cut again."""
    return InputError(path, f"not valid JSON ({exc})", f"slice at byte {offset}",
                      "check that the file is a PyTorch profiler trace")


def _valid_utf8(text: SliceText, offset: int, anomalies: list[Anomaly]) -> SliceText:
    """The slice itself if it is UTF-8 (ASCII is checked at memory speed), else a copy with
    U+FFFD in place of bad bytes and an anomaly. Checking here also covers keys, which the
    typed decoder skips unread when it does not know them."""
    if text.isascii():
        return text
    try:
        text.decode("utf-8")
    except UnicodeDecodeError as exc:
        return _replace_invalid_utf8(text, offset, exc, anomalies)
    return text


def _guarded(path: Path, offset: int, decode: Any, text: SliceText | memoryview) -> Any:
    """Decode, turning msgspec's RecursionError on absurd nesting into one clear line."""
    try:
        return decode(text)
    except RecursionError:
        raise _too_deep(path, f"after byte {offset}") from None


def _too_deep(path: Path, place: str | None) -> InputError:
    return InputError(path, "JSON nested too deeply to be a trace", place,
                      "check that the file is a PyTorch profiler trace")


def _replace_invalid_utf8(text: SliceText | memoryview, offset: int, exc: UnicodeDecodeError,
                          anomalies: list[Anomaly]) -> bytes:
    """Names with bytes that are not UTF-8 are kept, with U+FFFD in place, and flagged."""
    anomalies.append(("invalid_utf8", None, f"bytes that are not UTF-8 near byte "
                      f"{offset + exc.start}; replaced with U+FFFD in names"))
    return bytes(text).decode("utf-8", "replace").encode("utf-8")


Header = tuple[Any, Any, Any, Any]
NO_HEADER: Header = (None, None, None, None)


def _header_of(doc: dict[str, Any]) -> Header:
    """(deviceProperties, distributedInfo, displayTimeUnit, baseTimeNanoseconds): the keys
    read from the object around the events (Kineto writes the last one after them)."""
    return (doc.get("deviceProperties"), doc.get("distributedInfo"),
            doc.get("displayTimeUnit"), doc.get("baseTimeNanoseconds"))


def _header_fields(path: Path, header: bytes | None, anomalies: list[Anomaly]) -> Header:
    """The header (_header_of) of the object around the events.

    Bytes that are not UTF-8 (in a key or a value) are replaced and flagged, as in events.
    """
    if not header:
        return NO_HEADER
    try:
        doc = msgspec.json.decode(header)
    except (UnicodeDecodeError, msgspec.DecodeError) as exc:
        bad = _invalid_utf8(header, exc)
        if bad is None:
            raise
        doc = msgspec.json.decode(_replace_invalid_utf8(header, 0, bad, anomalies))
    return _header_of(doc) if isinstance(doc, dict) else NO_HEADER


def _invalid_utf8(data: bytes | memoryview, exc: Exception) -> UnicodeDecodeError | None:
    """Where `data` is not UTF-8, when that is what msgspec's error `exc` says: msgspec
    raised UnicodeDecodeError (at a place in the string) before 0.23, DecodeError("Invalid
    UTF-8 encoded string") since; Python's decoder places the byte in `data`. None: `exc`
    is another error."""
    if not isinstance(exc, UnicodeDecodeError) and not (
            isinstance(exc, msgspec.DecodeError) and "UTF-8" in str(exc)):
        return None
    try:
        bytes(data).decode("utf-8")
    except UnicodeDecodeError as found:
        return found
    return exc if isinstance(exc, UnicodeDecodeError) else None


def _read_whole(path: Path, data: bytes) -> KinetoTrace:
    """The whole document at once: for layouts the slicer does not handle."""
    if not data.strip():
        raise InputError(path, "file is empty", None, "re-export the trace from the profiler")
    typed, lenient, _ = _decoders()
    try:
        doc = _guarded(path, 0, typed.decode, data)
    except msgspec.ValidationError:
        try:  # the lenient decoder may meet a byte that is not UTF-8 the typed one skipped
            whole = _guarded(path, 0, _decode_any_of(path, lenient), data)
        except UnicodeDecodeError as exc:
            return _reread_valid_utf8(path, data, exc)
        return _read_lenient(path, whole)
    except (UnicodeDecodeError, msgspec.DecodeError) as exc:
        bad = _invalid_utf8(data, exc)
        if bad is not None:
            return _reread_valid_utf8(path, data, bad)
        raise _decode_error(path, data, exc) from None
    events = doc if isinstance(doc, list) else doc.traceEvents
    header = NO_HEADER if isinstance(doc, list) else (
        doc.deviceProperties, doc.distributedInfo, doc.displayTimeUnit, doc.baseTimeNanoseconds)
    found: list[Anomaly] = []
    table = _batch(_typed_columns(events, 0), found)
    return _finish(path, table, len(events), header, found)


def _reread_valid_utf8(path: Path, data: bytes, exc: UnicodeDecodeError) -> KinetoTrace:
    anomalies: list[Anomaly] = []
    trace = _read_whole(path, _replace_invalid_utf8(data, 0, exc, anomalies))
    trace.anomalies[:0] = anomalies
    return trace


def _decode_any_of(path: Path, decoder: msgspec.json.Decoder) -> Any:
    return lambda data: _decode_any(path, data, decoder)


def _decode_any(path: Path, data: bytes, decoder: msgspec.json.Decoder) -> Any:
    try:
        return decoder.decode(data)
    except msgspec.DecodeError as exc:
        bad = _invalid_utf8(data, exc)
        if bad is not None:
            raise bad from None  # read again with the bytes replaced
        raise _decode_error(path, data, exc) from None


_BYTE_RE = re.compile(r"byte (\d+)")


def _decode_error(path: Path, data: bytes, exc: Exception) -> InputError:
    message = str(exc)
    match = _BYTE_RE.search(message)
    place = f"byte {match.group(1)}" if match else None
    at_end = match is not None and int(match.group(1)) >= len(data.rstrip()) - 1
    if at_end or "truncated" in message.lower():
        return InputError(path, "JSON ends early (truncated trace)", place,
                          "the writer was probably killed; re-copy or re-record the trace, or "
                          "ingest with --salvage to keep the complete events")
    return InputError(path, f"not valid JSON ({message})", place,
                      "check that the file is a PyTorch profiler trace")


_FIELDS = ("cat", "name", "pid", "tid", "ts", "dur", "args")


def _typed_columns(events: list[Any], first_id: int) -> SourceColumns:
    """Columns of the kept events (complete, instant, begin, end) of untagged structs."""
    ph = list(map(operator.attrgetter("ph"), events))
    kept = [i for i, p in enumerate(ph) if p in _KEPT_PHASES]
    return _struct_columns(_picked(events, kept), _picked(ph, kept),
                           [first_id + i for i in kept], len(ph) - ph.count(None))


def _tagged_columns(events: list[Any], kept_types: dict[type, str], first_id: int,
                    read: frozenset[str] | None = None) -> SourceColumns:
    """Columns of the kept events of a tagged decoding (every event there has a ph)."""
    is_kept = map(kept_types.__contains__, map(type, events))
    kept = list(itertools.compress(range(len(events)), is_kept))
    kept_events = _picked(events, kept)
    ph: list[str | None] = list(map(kept_types.__getitem__, map(type, kept_events)))
    return _struct_columns(kept_events, ph, list(map(first_id.__add__, kept)), len(events),
                           read)


def _picked(values: list[Any], rows: list[int]) -> list[Any]:
    if len(rows) == len(values):
        return values
    if len(rows) == 1:  # itemgetter returns a bare item, not a 1-tuple, for one index
        return [values[rows[0]]]
    return list(operator.itemgetter(*rows)(values)) if rows else []


def _struct_columns(events: list[Any], ph: list[str | None], event_id: list[int],
                    with_phase: int, read: frozenset[str] | None = None) -> SourceColumns:
    """Plain columns of decoded event structs: one C-level map per field (no per-event
    Python code, no intermediate row tuples)."""
    cat, name, pid, tid, ts, dur, args = (
        list(map(operator.attrgetter(f), events)) for f in _FIELDS)
    cols = SourceColumns(event_id=event_id, ph=ph, cat=cat, name=name, pid=_id_texts(pid),
                         tid=_id_texts(tid), ts_text=ts, dur_text=dur)
    cols.args = _arg_columns(args, read)
    if read is not None:
        cols.absent = frozenset(column for column, keys in field_map("kineto")["args"].items()
                                if read.isdisjoint(keys))
    cols.with_phase = with_phase
    cols.typed = True
    return cols


def _id_texts(values: Sequence[Any]) -> Any:
    """pid/tid as text: integers are converted in bulk by Arrow; mixed values (a few
    distinct ones: "Spans", stream names) through a table of their texts."""
    try:
        return pc.cast(pa.array(values, pa.int64()), pa.string())
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        texts = {v: None if v is None else str(v) for v in set(values)}
        return pa.array(list(map(texts.__getitem__, values)), pa.string())


# complete, instant, and begin/end events (B/E rows are paired into complete events by
# trace_tables.pair_begin_end, or out of core by the pipeline)
_KEPT_PHASES = frozenset(("X", "i", "I", "B", "E"))


def _arg_columns(args: list[Any], read: frozenset[str] | None = None
                 ) -> dict[str, list[Any]]:
    """All argument columns, one C-level map per spelling read (`read`: as in
    _event_fields; the others were typed null, so they hold None for every event).

    With several spellings of one argument the first present one wins.
    """
    aliases = field_map("kineto")["args"]
    if not args:
        return {column: [] for column in aliases}
    empty = _empty_args()
    present = [a if a is not None else empty for a in args]
    out = {}
    for column, keys in aliases.items():
        values: list[Any] | None = None
        for n, key in enumerate(keys):
            if read is not None and key not in read:
                continue
            other = _arg_values(present, column, n)
            values = other if values is None else [
                v if v is not None else o for v, o in zip(values, other)]
        out[column] = [None] * len(args) if values is None else values
    return out


def _arg_values(args: list[Any], column: str, n: int) -> list[Any]:
    """The values of spelling n of `column` (raw JSON arguments as text, None if absent)."""
    values = list(map(operator.attrgetter(f"{column}__{n}"), args))
    return raw_texts(values) if arg_kinds().get(column) == "json" else values


@cache
def _empty_args() -> Any:
    """An Args struct with every field None, standing in for events without args."""
    _, _, typed = _decoders()
    return typed.decode(b'[{"args": {}}]')[0].args


def _append_common(cols: SourceColumns, i: int, ph: Any, cat: Any, name: Any, pid: Any,
                   tid: Any) -> None:
    cols.event_id.append(i)
    cols.ph.append(ph)
    cols.cat.append(cat)
    cols.name.append(name)
    cols.pid.append(None if pid is None else str(pid))
    cols.tid.append(None if tid is None else str(tid))


def _finish(path: Path, events: pa.Table, count: int, header: Header,
            anomalies: list[Anomaly]) -> KinetoTrace:
    info = _info(count, header, anomalies)
    return KinetoTrace(path, events, count, info.device_properties, info.distributed_info,
                       info.display_time_unit, info.anomalies, base_time_ns=info.base_time_ns)


def _info(count: int, header: Header, anomalies: list[Anomaly]) -> TraceInfo:
    props, dist, unit, base_time = header
    props_list = [p for p in props if isinstance(p, dict)] if isinstance(props, list) else []
    dist_info = dist if isinstance(dist, dict) else None
    known = field_map("kineto")["known_display_time_units"]["units"]
    if unit is not None and unit not in known:
        anomalies.append(("unknown_display_time_unit", None,
                          f"displayTimeUnit {unit!r} is not one of {known}; ts/dur read as µs "
                          "(the Chrome trace format's unit whatever the display unit)"))
    return TraceInfo(count, props_list, dist_info, unit if isinstance(unit, str) else None,
                     anomalies, base_time_ns=base_time)


# ---- lenient path: any JSON shape, every oddity recorded ------------------------------

def _read_lenient(path: Path, doc: Any) -> KinetoTrace:
    events = _events_of(path, doc)
    header = _header_of(doc) if isinstance(doc, dict) else NO_HEADER
    anomalies: list[Anomaly] = []
    table = _batch(_lenient_columns(events, 0, anomalies), anomalies)
    return _finish(path, table, len(events), header, anomalies)


def _events_of(path: Path, doc: Any) -> list[Any]:
    if not isinstance(doc, (dict, list)):
        raise NotATrace("JSON that is not an object or an array: not a profiler trace")
    if isinstance(doc, dict) and "traceEvents" not in doc:
        raise NotATrace("JSON without traceEvents: not a profiler trace")
    if isinstance(doc, list) and not any(isinstance(e, dict) and "ph" in e for e in doc):
        raise NotATrace("JSON array without trace events")
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc
    if not isinstance(events, list):
        raise InputError(path, "traceEvents is not a list", None,
                         "check that the file is a PyTorch profiler trace")
    return events


def _lenient_columns(events: list[Any], first_id: int, anomalies: list[Anomaly]
                     ) -> SourceColumns:
    cols = SourceColumns(args={c: [] for c in field_map("kineto")["args"]})
    for i, ev in enumerate(events):
        _lenient_event(cols, first_id + i, ev, anomalies)
    return cols


def _lenient_event(cols: SourceColumns, i: int, ev: Any,
                   anomalies: list[tuple[str, int | None, str]]) -> None:
    if not isinstance(ev, dict):
        anomalies.append(("malformed_event", i, f"event is a {type(ev).__name__}, not an object"))
        return
    phase = ev.get("ph")
    if phase is not None and not isinstance(phase, str):
        anomalies.append(("malformed_event", i, f"ph {str(phase)[:40]!r} is not a string; "
                          "the event is not read"))
        return
    if phase not in _KEPT_PHASES:
        return
    _append_common(cols, i, ev.get("ph"), _text(ev.get("cat")), _text(ev.get("name")),
                   ev.get("pid"), ev.get("tid"))
    cols.ts_text.append(_number_text(ev.get("ts")))
    cols.dur_text.append(_number_text(ev.get("dur")))
    args: dict[str, Any] = ev["args"] if isinstance(ev.get("args"), dict) else {}
    for column, keys in field_map("kineto")["args"].items():
        value = next((args[k] for k in keys if args.get(k) is not None), None)
        cols.args[column].append(value)


def _text(value: Any) -> str | None:
    return None if value is None else value if isinstance(value, str) else str(value)


def _number_text(value: Any) -> bytes:
    """Back to the JSON text the fast path sees (non-numbers are flagged there): a list
    stays `[]`, a string `"x"`, so both paths word the anomaly alike."""
    if value is None:
        return b""
    if isinstance(value, bool) or not isinstance(value, (int, decimal.Decimal)):
        try:
            return msgspec.json.encode(value)[:200]
        except (TypeError, ValueError, OverflowError):  # lone surrogates, odd objects
            return b'"' + str(value).encode("utf-8", "replace")[:60] + b'"'
    return str(value).encode()


def _normalised_args(cols: SourceColumns, anomalies: list[Anomaly]
                     ) -> tuple[dict[str, list[Any]], dict[str, pa.Array]]:
    """(argument values normalised, Arrow arrays already made of some of them).

    From a typed decoder, a column that converts to Arrow as it is holds no text, so it
    needs no normalising; the array is kept for the next step (the conversion is the type
    check, not a second pass over the values). Anomalies come in column order either way.
    """
    args: dict[str, list[Any]] = {}
    arrays: dict[str, pa.Array] = {}
    for column, values in cols.args.items():
        if column in arg_kinds():
            continue  # arg_values.py makes their columns
        if column in cols.absent:
            args[column] = values
            arrays[column] = pa.nulls(len(values), _arrow_type(column))
            continue
        array = _as_arrow(column, values) if cols.typed else None
        if array is None:
            args[column] = _normalise_arg(column, values, cols.event_id, anomalies)
        else:
            args[column], arrays[column] = values, array
    return args, arrays


def _arrow_type(column: str) -> pa.DataType:
    return pa.list_(pa.int64()) if column in DIM_COLUMNS else pa.int64()


def _as_arrow(column: str, values: list[Any]) -> pa.Array | None:
    try:
        return pa.array(values, _arrow_type(column))
    except (OverflowError, pa.ArrowInvalid, pa.ArrowTypeError):
        return None  # text, or an integer beyond int64: the general path decides


def _normalise_arg(column: str, values: list[Any], ids: list[int],
                   anomalies: list[tuple[str, int | None, str]]) -> list[Any]:
    """Integers (or int lists) stay; integer text ("7", "0x0") is parsed; the rest → NULL."""
    if set(map(type, values)) <= ({type(None), list} if column in DIM_COLUMNS
                                  else {type(None), int}):
        return values
    return [_coerce_arg(column, v, ids[i], anomalies) for i, v in enumerate(values)]


def _coerce_arg(column: str, value: Any, event_id: int,
                anomalies: list[tuple[str, int | None, str]]) -> Any:
    if value is None:
        return None
    if column in DIM_COLUMNS:
        if isinstance(value, list) and all(type(v) is int for v in value):
            return value
        grid = _INDUCTOR_GRID.match(value.strip()) if isinstance(value, str) else None
        if grid is not None:
            return [int(g) if g else 1 for g in grid.groups()]
    elif type(value) is int:
        return value
    elif isinstance(value, str) and _INT_TEXT.match(value.strip()):
        return int(value.strip(), 0)
    anomalies.append(("bad_argument", event_id, f"args {column} = {str(value)[:60]!r} is not "
                      f"{'a list of integers' if column in DIM_COLUMNS else 'an integer'}; "
                      "stored as NULL"))
    return None


# Inductor writes the launch grid of a Triton kernel's op as text, "grid(100,)" or
# "grid(4, 8, 1)" (torch/_inductor/runtime/triton_heuristics.py); a symbolic one
# ("grid(s0,)") is not a number and stays a bad argument
_INDUCTOR_GRID = re.compile(r"^grid\((\d+)(?:,\s*(\d+))?(?:,\s*(\d+))?,?\s*\)$")
_INT_TEXT = re.compile(r"^-?(0x[0-9a-fA-F]+|[1-9][0-9]*|0)$")


def _batch(cols: SourceColumns, anomalies: list[Anomaly]) -> pa.Table:
    """One slice's columns as Arrow, with exact ns times and normalised arguments."""
    ids = cols.event_id
    args, arrays = _normalised_args(cols, anomalies)
    grid, block = (_dims(c, args[c], ids, anomalies, arrays.get(c)) for c in DIM_COLUMNS)
    ints = {c: _int_column(c, args[c], ids, anomalies, arrays.get(c))
            for c in (*ARG_COLUMNS, *MEMORY_COLUMNS, *SYNC_COLUMNS, *COLLECTIVE_INT_COLUMNS,
                      "flops")}
    return pa.table({
        "event_id": pa.array(ids, pa.int64()), "ph": _strings(cols.ph),
        "category": _strings(cols.cat), "name": _strings(cols.name),
        "ts_ns": _times("ts", cols.ts_text, ids, anomalies),
        "dur_ns": _times("dur", cols.dur_text, ids, anomalies),
        "pid": _strings(cols.pid), "tid": _strings(cols.tid),
        "correlation_id": ints["correlation"], "external_id": ints["external_id"],
        "device_id": ints["device"], "stream_id": ints["stream"],
        "grid_x": grid[0], "grid_y": grid[1], "grid_z": grid[2],
        "block_x": block[0], "block_y": block[1], "block_z": block[2],
        "registers_per_thread": ints["registers_per_thread"],
        "shared_memory_bytes": ints["shared_memory_bytes"], "bytes": ints["bytes"],
        **{c: ints[c] for c in MEMORY_COLUMNS}, **{c: ints[c] for c in SYNC_COLUMNS},
        **{c: ints[c] for c in COLLECTIVE_INT_COLUMNS},
        "flops": ints["flops"],
        "sequence_number": ints["sequence_number"], "fwd_thread_id": ints["fwd_thread_id"],
        **{c: absent_arg_array(c, len(ids)) if c in cols.absent
           else arg_array(c, cols.args[c], ids, anomalies, cols.typed) for c in arg_kinds()},
    })


def _strings(values: Any) -> pa.Array:
    return values if isinstance(values, pa.Array) else pa.array(values, pa.string())


# device ids become int32 columns; everything else int64
_RANGES = {"device": (-(1 << 31), (1 << 31) - 1),
           "memory_device_id": (-(1 << 31), (1 << 31) - 1)}
_INT64 = (-(1 << 63), (1 << 63) - 1)


def _int_column(column: str, values: Sequence[Any], ids: Sequence[int],
                anomalies: list[Anomaly], array: pa.Array | None = None) -> pa.Array:
    """An int64 column; a value out of range is NULL with an anomaly, never an error.

    `values` hold only ints and None here (see _normalise_arg); `array`: them as Arrow,
    if already made.
    """
    low, high = _RANGES.get(column, _INT64)
    try:
        array = pa.array(values, pa.int64()) if array is None else array
    except (OverflowError, pa.ArrowInvalid):
        return _int_column_slow(column, values, ids, anomalies, low, high)
    bounds = pc.min_max(array).as_py()
    if bounds["min"] is not None and (bounds["min"] < low or bounds["max"] > high):
        return _int_column_slow(column, values, ids, anomalies, low, high)
    return array


def _int_column_slow(column: str, values: Sequence[Any], ids: Sequence[int],
                     anomalies: list[Anomaly], low: int, high: int) -> pa.Array:
    out = []
    for value, event_id in zip(values, ids):
        if value is not None and not low <= value <= high:
            anomalies.append(("bad_argument", event_id, f"args {column} = {value} is out of "
                              "range; stored as NULL"))
            value = None
        out.append(value)
    return pa.array(out, pa.int64())


def _dims(column: str, values: Sequence[Any], ids: Sequence[int], anomalies: list[Anomaly],
          lists: pa.Array | None = None) -> list[pa.Array]:
    """x, y, z columns; a list that is not three in-range integers is NULL and flagged.

    Fast path: Arrow infers list<int64> (so no float, bool or huge value slipped in), or
    `lists` is the typed decoder's lists already converted, and every present list has
    three items.
    """
    if lists is None:
        try:
            lists = pa.array(values)
        except (OverflowError, pa.ArrowInvalid, pa.ArrowTypeError):
            lists = None
    if lists is not None and lists.type in (pa.list_(pa.int64()), pa.null()):
        lengths = pc.list_value_length(lists) if lists.type != pa.null() else lists
        if pc.all(pc.equal(lengths, 3)).as_py() in (True, None):
            if lists.type == pa.null():
                return [pa.nulls(len(values), pa.int64()) for _ in range(3)]
            return [pc.list_element(lists, axis) for axis in range(3)]
    return _dims_slow(column, values, ids, anomalies)


def _dims_slow(column: str, values: Sequence[Any], ids: Sequence[int],
               anomalies: list[Anomaly]) -> list[pa.Array]:
    clean: list[Any] = []
    for value, event_id in zip(values, ids):
        if value is not None and (len(value) != 3 or not all(
                type(v) is int and _INT64[0] <= v <= _INT64[1] for v in value)):
            anomalies.append(("bad_argument", event_id, f"args {column} = {str(value)[:60]} "
                              "is not three int64 values; stored as NULL"))
            value = None
        clean.append(value)
    return [pa.array([v[axis] if v is not None else None for v in clean], pa.int64())
            for axis in range(3)]


def _times(column: str, texts: list[bytes], ids: list[int], anomalies: list[Anomaly]
           ) -> pa.Array:
    converted = us_texts_to_ns(texts)
    for row, problem in converted.problems:
        anomalies.append((f"bad_{column}", ids[row], f"{column} {problem}; stored as NULL"))
    for row in converted.rounded:
        anomalies.append((f"sub_ns_{column}", ids[row],
                          f"{column} has more precision than 1 ns; rounded to ns"))
    return converted.ns
