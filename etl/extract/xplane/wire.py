"""A minimal reader of the protobuf wire format, for the few XSpace messages.

Field numbers are those of `xplane.proto` (package tensorflow.profiler; today in
openxla/xla `xla/tsl/profiler/protobuf/xplane.proto`, before that
tensorflow/core/profiler/protobuf/xplane.proto), listed in `messages.toml` beside this
file. Only what the reader needs is decoded: varints, fixed64 doubles and
length-delimited fields (strings, bytes, sub-messages); groups (wire types 3 and 4) are
refused as malformed, as no XSpace field uses them.

Every function takes the buffer and a [start, end) range and raises `WireError` with the
byte offset where the data stops making sense.
"""
from __future__ import annotations

import struct
from collections.abc import Iterator

VARINT, FIXED64, LEN, FIXED32 = 0, 1, 2, 5
_DOUBLE = struct.Struct("<d")
_TWO_64 = 1 << 64
_SIGN_64 = 1 << 63


class WireError(Exception):
    """Bytes that are not a valid protobuf message; `offset` is where it goes wrong."""

    def __init__(self, offset: int, problem: str) -> None:
        super().__init__(f"byte {offset}: {problem}")
        self.offset, self.problem = offset, problem


def varint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    """(value, next position) of the unsigned varint at pos."""
    result = shift = 0
    start = pos
    while pos < end:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise WireError(start, "varint longer than 10 bytes")
    raise WireError(start, "varint cut off by the end of its message")


def signed(value: int) -> int:
    """A varint read as int64 (two's complement in 64 bits)."""
    value &= _TWO_64 - 1
    return value - _TWO_64 if value >= _SIGN_64 else value


def double(buf: bytes, pos: int) -> float:
    return float(_DOUBLE.unpack_from(buf, pos)[0])


def fields(buf: bytes, start: int, end: int) -> Iterator[tuple[int, int, int, int]]:
    """(field number, wire type, value or start, end) of each field in [start, end).

    VARINT: value is the integer, end is unused (= value's next position); FIXED64 and
    FIXED32: value is the start of the bytes; LEN: [value, end) is the payload.
    """
    pos = start
    while pos < end:
        key, pos = varint(buf, pos, end)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise WireError(pos, "field number 0")
        if wire == VARINT:
            value, pos = varint(buf, pos, end)
            yield number, wire, value, pos
        elif wire == LEN:
            size, pos = varint(buf, pos, end)
            stop = pos + size
            if stop > end:
                raise WireError(pos, f"a field of {size} bytes runs past the end of its "
                                     f"message ({end - pos} bytes left)")
            yield number, wire, pos, stop
            pos = stop
        elif wire == FIXED64 or wire == FIXED32:
            width = 8 if wire == FIXED64 else 4
            if pos + width > end:
                raise WireError(pos, "fixed-width field cut off")
            yield number, wire, pos, pos + width
            pos += width
        else:
            raise WireError(pos, f"wire type {wire} (groups are not used by XSpace)")
    if pos != end:
        raise WireError(pos, "message overruns its length")
