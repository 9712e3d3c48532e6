"""Stream a big JSON object's event array in slices, without holding the file in memory.

A Kineto trace is one object whose `traceEvents` array holds millions of events. Decoding
it whole costs several times the file size in memory; instead the array is cut into slices
of about `target` bytes at event boundaries and each slice is decoded on its own.

Cutting rule: a boundary candidate is `}` followed by `,` and `{` (whitespace allowed). A
candidate inside a string can never produce a decodable slice, because the slice would end
inside an unterminated string (JSON strings cannot hold a raw quote), so the first
candidate, from the right, whose slice decodes is a true boundary. The same argument
validates the array's start (the text before it plus `"traceEvents": []}` must decode) and
its end (the text after it must close the object).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Generic, TypeVar
from collections.abc import Callable, Iterator

import msgspec

T = TypeVar("T")
_SPLIT = re.compile(rb"\}\s*,\s*\{")
_WINDOW = 1 << 20
_NON_SPACE = re.compile(rb"\S")
MAX_TRIES = 16


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
                 decode: Callable[[bytes | memoryview, int], T], target: int = 16 << 20) -> None:
        self._blocks = blocks
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
        for end in _candidates(buf):
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
        return None

    def _last(self) -> Iterator[Sliced[T]]:
        """At end of input: the last slice, then the object's remaining members.

        The array's `]` is the rightmost one after which the object closes and before which
        the events decode; a `]` of a later member (e.g. "INFO": [...]) fails the second test.
        The slice is decoded in place, `[` over _buf[0] up to that `]` (no copies).
        """
        buf = self._buf
        self._base += 1  # document offset of buf[1]
        end, decode_tries = len(buf), 0
        while decode_tries < MAX_TRIES and (end := buf.rfind(b"]", 1, end)) >= 1:
            tail = bytes(buf[end + 1:])
            if not self._closes(tail):
                continue
            decode_tries += 1
            try:
                if _NON_SPACE.search(buf, 1, end):  # events before the `]`
                    buf[0] = ord("[")
                    with memoryview(buf) as view:
                        value = self._decode(view[:end + 1], self._base)
                    yield Sliced[T]("items", value, self._base)
            except msgspec.DecodeError:
                continue
            header = self._prefix + b'"traceEvents": []' + tail if self._prefix else b"{}"
            yield Sliced[T]("header", header, self._base + end - 1)
            return
        yield from self._salvage()

    def _salvage(self) -> Iterator[Sliced[T]]:
        """No closing found: hand out the complete events left, then report the cut."""
        self._base -= 1  # _last stepped over _buf[0], which _cut still expects
        self._refuse_if_malformed()
        while (cut := self._cut()) is not None:
            yield cut
        raise Truncated(self._base)

    def _refuse_if_malformed(self) -> None:
        """A document that ends inside the array is truncated; one that breaks the JSON
        grammar before its end (NaN, garbage, trailing bytes) is malformed, not cut."""
        try:
            msgspec.json.decode(_utf8(b"[" + bytes(self._buf[1:])))
        except msgspec.DecodeError as exc:
            message = str(exc)
            if "truncated" in message.lower():
                return
            match = _BYTE.search(message)
            where = self._base + int(match.group(1)) if match else self._base
            raise Malformed(where, _BYTE.sub("", message).strip()) from None

    def _closes(self, tail: bytes) -> bool:
        if not self._prefix:
            return not tail.strip()
        return _decodes(b'{"traceEvents": []' + tail)


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
    window = _WINDOW
    while True:
        start = max(0, len(buf) - window)
        found = [m.start() for m in _SPLIT.finditer(buf, start)]
        if found or start == 0:
            return found[::-1][:MAX_TRIES]
        window *= 4
