"""Stream a big JSON object's event array in slices, without holding the file in memory.

A Kineto trace is one object whose `traceEvents` array holds millions of events. Decoding
it whole costs several times the file size in memory; instead the array is cut into slices
of about `target` bytes at event boundaries and each slice is decoded on its own.

Cutting rule: a boundary candidate is `}` followed by `,` and `{` (whitespace allowed). A
candidate inside a string can never produce a decodable slice, because the slice would end
inside an unterminated string (JSON strings cannot hold a raw quote), so the first
candidate, from the right, whose slice decodes is a true boundary. The same argument
validates the array's start (the text before it plus `"traceEvents": []}` must decode).
Its end is where one syntax scan of the input's last part finds the array closed (the
text after it must then close the object), or finds the input cut inside the array.

Trusted cuts (`trusted=True`) skip that decoding where the text itself vouches for the
boundary: `}`, `,`, `{`, a quote and a byte that may not follow a closed string (not
whitespace, `,`, `:`, `}` or `]`). Inside a string, that quote would close the string and
the byte after it would break the grammar, so in a valid document such a `}` is outside
every string. It may still close an object nested in an array inside an event; a slice
cut there ends inside that event, so it cannot decode, and whoever decodes the slice must
treat a failure as "cut or input wrong" (the caller reads again with every cut checked).
A trusted cut may fall one event before the checked one, where a block ends between an
event's `{` and its first key or the next event is `{}`: the events and their ids are
the same; what is counted per slice (the invalid_utf8 anomaly, one per slice holding
such bytes) follows the slices, as it does the slice size.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from typing import Generic, TypeVar
from collections.abc import Callable, Iterator

import msgspec

T = TypeVar("T")
_SPLIT = re.compile(rb"\}\s*,\s*\{")
_TRUSTED_SPLIT = re.compile(rb'\}\s*,\s*\{\s*"[^\s,:}\]]')
_WINDOW = 1 << 20
_NON_SPACE = re.compile(rb"\S")
MAX_TRIES = 16


class CutNotTrusted(Exception):
    """(trusted cuts) Event boundaries are there that only decoding could tell apart from
    text inside a string or a nested object: the caller reads again with cuts checked."""


class NotStreamable(Exception):
    """The layout is not one the slicer handles; the caller decodes the whole document."""


@dataclass
class Truncated(Exception):
    """The input ends before the array (or the object) is closed."""

    offset: int  # bytes of the document consumed by complete slices


@dataclass
class Malformed(Exception):
    """The input is complete but not valid JSON at `offset` (not a truncation)."""

    offset: int
    message: str


_BYTE = re.compile(r"\(byte (\d+)\)")


@dataclass
class Sliced(Generic[T]):
    kind: str        # "items" (a decoded slice) or "header" (the object without the array)
    value: T | bytes
    offset: int      # byte offset of the slice in the document


class ArraySlicer(Generic[T]):
    def __init__(self, blocks: Iterator[bytes], key: bytes,
                 decode: Callable[[bytes | memoryview, int], T], target: int = 16 << 20,
                 trusted: bool = False) -> None:
        self._blocks = blocks
        self._trusted = trusted
        self._key = re.compile(rb'"' + re.escape(key) + rb'"\s*:\s*\[')
        self._decode = decode
        self._target = target
        self._buf = bytearray()
        self._base = 0  # document offset of _buf[0]
        self._eof = False
        self._prefix = b""

    def _fill(self) -> bool:
        block = next(self._blocks, None)
        if block is None:
            self._eof = True
            return False
        self._buf += block
        return True

    def __iter__(self) -> Iterator[Sliced[T]]:
        # Invariant from here on: _buf[0] is the byte before the next event (first `[`, then
        # a `,` or whitespace); slices are decoded in place between _buf[0] and a `]` written
        # over the byte after the slice's last `}` (no copies of the 16 MiB slice).
        start = self._find_array()
        del self._buf[:start - 1]
        self._base += start - 1
        yield from self._items()

    # --- the array's start ----------------------------------------------------------
    def _find_array(self) -> int:
        while not bytes(self._buf).lstrip() and self._fill():
            pass
        body = bytes(self._buf).lstrip()
        if body.startswith(b"["):
            return self._buf.index(b"[") + 1
        if not body.startswith(b"{"):
            raise NotStreamable("not a JSON object or array")
        searched = 0
        while True:
            for match in self._key.finditer(self._buf, max(0, searched - 64)):
                prefix = bytes(self._buf[:match.start()])
                if _decodes(prefix + b'"traceEvents": []}'):
                    self._prefix = prefix
                    return match.end()
            searched = len(self._buf)
            if searched > 64 << 20 or not self._fill():
                raise NotStreamable("no top-level traceEvents array near the start")

    # --- the array's body -----------------------------------------------------------
    def _items(self) -> Iterator[Sliced[T]]:
        while True:
            while len(self._buf) < self._target and not self._eof:
                self._fill()
            if self._eof:
                yield from self._last()
                return
            cut = self._cut()
            if cut is None:
                if len(self._buf) > 8 * self._target:
                    raise NotStreamable("no event boundary found in a large block")
                self._target *= 2
                continue
            yield cut

    def _cut(self) -> Sliced[T] | None:
        buf = self._buf
        buf[0] = ord("[")
        for end in (_trusted_candidates(buf) if self._trusted else _candidates(buf)):
            saved, buf[end + 1] = buf[end + 1], ord("]")
            try:
                with memoryview(buf) as view:
                    value = self._decode(view[:end + 2], self._base + 1)
            except msgspec.DecodeError:
                continue
            finally:
                buf[end + 1] = saved
            rest = _SPLIT.match(buf, end)
            assert rest is not None
            consumed = rest.end() - 2  # keep one byte before the next event's `{`
            sliced = Sliced[T]("items", value, self._base + 1)
            del buf[:consumed]
            self._base += consumed
            return sliced
        if self._trusted and _SPLIT.search(buf):
            raise CutNotTrusted()
        return None

    def _last(self) -> Iterator[Sliced[T]]:
        """At end of input: the last slice, then the object's remaining members.

        One syntax scan of what is left, with `[` over _buf[0], finds the array's end: the
        array parses whole and the object's other members follow it, or the input ends
        inside the array (truncated), or breaks the grammar (malformed). Its cost is linear
        in the bytes left, whatever they hold; a search for the `]` from the right would
        try every `]` of a truncated input (each grid, block and shape of its events).
        The slice is decoded in place, `[` over _buf[0] up to that `]` (no copies).
        """
        buf = self._buf
        buf[0] = ord("[")
        end = self._array_end()
        if end is None:
            yield from self._salvage()
            return
        tail = bytes(buf[end + 1:])
        closed = self._closes(tail, self._base + end + 1)
        if _NON_SPACE.search(buf, 1, end):  # events before the `]`
            with memoryview(buf) as view:
                value = self._decode(view[:end + 1], self._base + 1)
            yield Sliced[T]("items", value, self._base + 1)
        if not closed:  # every event is complete; the members after them are cut
            yield from self._header_before_array(self._base + end)
            raise Truncated(self._base + end + 1)
        header = self._prefix + b'"traceEvents": []' + tail if self._prefix else b"{}"
        yield Sliced[T]("header", header, self._base + end)

    def _array_end(self) -> int | None:
        """Index in _buf of the `]` that closes the array; None when the input ends inside
        the array. Raises Malformed where the array breaks the JSON grammar."""
        try:
            _raw_array().decode(self._buf)
        except msgspec.DecodeError as exc:
            message = str(exc)
            if "truncated" in message.lower():
                return None
            at = _error_byte(message)
            if at is not None and "trailing characters" in message:
                # only whitespace lies between the array's `]` and the first trailing byte
                return self._buf.rfind(b"]", 0, at)
            raise Malformed(self._base + (at or 0), _BYTE.sub("", message).strip()) from None
        return self._buf.rfind(b"]")  # the array ends the input

    def _salvage(self) -> Iterator[Sliced[T]]:
        """The input ends inside the array: hand out the complete events left, then the
        members before the array, then report the cut."""
        while (cut := self._cut()) is not None:
            yield cut
        yield from self._header_before_array(self._base)
        raise Truncated(self._base)

    def _header_before_array(self, offset: int) -> Iterator[Sliced[T]]:
        """The object's members before the array (deviceProperties, distributedInfo, ...),
        for a salvaged input whose later members are cut; nothing for a bare array."""
        if self._prefix:
            yield Sliced[T]("header", self._prefix + b'"traceEvents": []}', offset)

    def _closes(self, tail: bytes, offset: int) -> bool:
        """Whether the text after the array closes the document (False: it is cut short).
        Raises Malformed for any other text (e.g. garbage after the object)."""
        opening = b'{"traceEvents": []' if self._prefix else b"[]"
        try:
            msgspec.json.decode(_utf8(opening + tail))
        except msgspec.DecodeError as exc:
            message = str(exc)
            if "truncated" in message.lower():
                return False
            at = max(0, (_error_byte(message) or 0) - len(opening))
            raise Malformed(offset + at, _BYTE.sub("", message).strip()) from None
        return True


def _error_byte(message: str) -> int | None:
    """Index of the byte a msgspec DecodeError message is about. For trailing characters
    msgspec reports the byte after the first one (it has read it), since 0.18 at least."""
    at = _BYTE.search(message)
    if at is None:
        return None
    return int(at.group(1)) - ("trailing characters" in message)


@cache
def _raw_array() -> msgspec.json.Decoder:
    """Checks a JSON array's syntax without making its items (msgspec.Raw views)."""
    return msgspec.json.Decoder(list[msgspec.Raw])


def _utf8(text: bytes) -> bytes:
    """Bytes that are not UTF-8 replaced: structure probes judge JSON syntax only (names
    with such bytes are kept and flagged by the decoder)."""
    try:
        text.decode("utf-8")
    except UnicodeDecodeError:
        return text.decode("utf-8", "replace").encode("utf-8")
    return text


def _decodes(text: bytes) -> bool:
    try:
        msgspec.json.decode(_utf8(text))
    except msgspec.DecodeError:
        return False
    return True


def _candidates(buf: bytearray) -> list[int]:
    """Positions of `}` that may end an event, right to left, at most MAX_TRIES."""
    return _rightmost(_SPLIT, buf)[:MAX_TRIES]


def _trusted_candidates(buf: bytearray) -> list[int]:
    """The rightmost `}` the text vouches for as outside every string (module notes)."""
    return _rightmost(_TRUSTED_SPLIT, buf)[:1]


def _rightmost(pattern: re.Pattern[bytes], buf: bytearray) -> list[int]:
    """Starts of `pattern`'s matches in the last part of `buf` that has any, right to left."""
    window = _WINDOW
    while True:
        start = max(0, len(buf) - window)
        found = [m.start() for m in pattern.finditer(buf, start)]
        if found or start == 0:
            return found[::-1]
        window *= 4
