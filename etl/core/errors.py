"""The project's own exceptions: every input problem becomes one clear line."""
from __future__ import annotations

import os
import re
from pathlib import Path

# Python hands out file names that are not valid UTF-8 with each undecodable byte as a lone
# surrogate U+DC80..U+DCFF (PEP 383); such a str cannot be encoded for Arrow or a terminal.
_ESCAPED_BYTES = re.compile("[\udc80-\udcff]+")
_SURROGATE = re.compile("[\ud800-\udfff]")


def name_text(name: str) -> str:
    """A file name from the OS as UTF-8 text: each byte that is not UTF-8 written `\\xNN`.

    Valid names come back unchanged; b"caf\\xe9" becomes `caf\\xe9`, so names that differ
    in invalid bytes stay distinct. The name's bytes are decoded as UTF-8 whatever the
    locale, so a run keeps one name under LANG=C (where Python decodes names as ASCII).
    """
    try:
        raw = os.fsencode(name)
    except UnicodeEncodeError:  # not a name the OS gave us (e.g. a lone U+D800)
        return escape_undecodable(name)
    return raw.decode("utf-8", "backslashreplace")


def escape_undecodable(text: str) -> str:
    """Any text (a message quoting names) made encodable: escaped bytes re-read as UTF-8,
    what stays invalid as `\\xNN`, other lone surrogates as `\\uNNNN`. Never raises."""
    text = _ESCAPED_BYTES.sub(_reread_bytes, text)
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _reread_bytes(match: re.Match[str]) -> str:
    raw = bytes(ord(c) - 0xDC00 for c in match.group())
    return raw.decode("utf-8", "backslashreplace")


IRREGULAR = {"anomaly": "anomalies"}


def counted(n: int, noun: str) -> str:
    """`1 run`, `2 runs`, `1 anomaly`, `3 anomalies`: messages read as sentences."""
    if n == 1:
        return f"{n:,} {noun}"
    return f"{n:,} {IRREGULAR.get(noun, noun + 's')}"


def one_line(text: str) -> str:
    """A message for the terminal: encodable, control characters escaped, one line.

    Names may hold newlines and control characters; users grep these lines and tests
    count them, so a message never spans two.
    """
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in escape_undecodable(text))


class EtlError(Exception):
    """Base class: an error the CLI reports in one line, without a traceback."""


class InputError(EtlError):
    """An input file that claims to be profiler output but cannot be read.

    Carries the file, the place inside it (byte, line or event index) and what to do, so
    the CLI can print `path: place: problem. remedy` on one line.
    """

    def __init__(self, path: Path | str, problem: str, place: str | None = None,
                 remedy: str | None = None) -> None:
        self.path = str(path)
        self.problem = problem
        self.place = place
        self.remedy = remedy
        super().__init__(self.line())

    def __reduce__(self) -> tuple[type[InputError], tuple[str, str, str | None, str | None]]:
        # raised in slice worker processes: must come back whole through pickle
        return (type(self), (self.path, self.problem, self.place, self.remedy))

    def line(self) -> str:
        parts = [self.path]
        if self.place:
            parts.append(self.place)
        text = ": ".join(parts) + ": " + self.problem
        if self.remedy:
            text += ". " + self.remedy
        return escape_undecodable(text)  # the path, or a name quoted, may not be UTF-8


class RunError(EtlError):
    """A run folder that cannot be ingested as a whole (e.g. no profiler output in it)."""


class WarehouseError(EtlError):
    """The warehouse cannot be read or written (locked, corrupt, wrong path)."""
