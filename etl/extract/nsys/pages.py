"""Numeric columns of a SQLite table read straight from its b-tree pages, vectorized.

Python's sqlite3 module makes one Python object per value (~150 ns each): a 1 GB nsys
export holds ~200 M of them. This reader decodes the leaf pages of a table with numpy
instead, a batch of pages at a time, in rowid order (the order of `SELECT * FROM t`).
Layout: https://www.sqlite.org/fileformat2.html (B-tree pages, record format).

It reads only integer and real values; a value of another type (text, blob) in a
numeric column reads as NULL, as the sqlite3 path does. Anything it does not handle
raises NotDecodable and the caller reads the table through sqlite3 instead: a database
with a WAL or a hot journal (the main file alone may be stale), a record whose payload
spills to overflow pages, a column with a DEFAULT (records written before an ALTER TABLE
lack it), a page that is not a table b-tree page.
"""
from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

BATCH_PAGES = 256             # leaf pages decoded at once (1 MiB of 4 KiB pages: stays in cache)
_LEAF, _INTERIOR = 0x0D, 0x05


class NotDecodable(Exception):
    """The pages hold something this reader does not decode: use sqlite3."""


@dataclass(frozen=True)
class Column:
    index: int                # position in the table's records (PRAGMA table_info cid)
    is_float: bool = False    # float64 (integers convert) rather than int64
    is_rowid: bool = False    # INTEGER PRIMARY KEY: the record holds NULL, the value is the rowid


class PageFile:
    """An open database file, read with pread (no mmap: mapped pages would count as the
    process's resident memory)."""

    def __init__(self, path: Path) -> None:
        for suffix in ("-wal", "-journal"):
            if Path(f"{path}{suffix}").exists():
                raise NotDecodable(f"a {suffix[1:]} file beside the database")
        self.fd = os.open(path, os.O_RDONLY)
        header = os.pread(self.fd, 100, 0)
        if len(header) < 100 or header[18] != 1 or header[19] != 1:
            os.close(self.fd)
            raise NotDecodable("not a rollback-journal database (WAL or unknown format)")
        size = int.from_bytes(header[16:18], "big")
        self.page_size = 65536 if size == 1 else size
        self.usable = self.page_size - header[20]
        self.pages = os.fstat(self.fd).st_size // self.page_size

    def close(self) -> None:
        os.close(self.fd)

    def read(self, numbers: np.ndarray) -> np.ndarray:
        """Pages `numbers` (1-based) as a (len, page_size) uint8 array, in that order;
        runs of consecutive pages are read with one call."""
        if len(numbers) and (numbers.min() < 1 or numbers.max() > self.pages):
            raise NotDecodable("a page number beyond the file")
        out = np.empty((len(numbers), self.page_size), np.uint8)
        breaks = np.flatnonzero(np.diff(numbers) != 1) + 1
        for lo, hi in zip(np.r_[0, breaks], np.r_[breaks, len(numbers)]):
            data = os.pread(self.fd, int(hi - lo) * self.page_size,
                            (int(numbers[lo]) - 1) * self.page_size)
            out[lo:hi] = np.frombuffer(data, np.uint8).reshape(hi - lo, self.page_size)
        return out

    def leaf_pages(self, root: int) -> np.ndarray:
        """The leaf pages of the table b-tree at `root`, in key (rowid) order. A b-tree is
        balanced: the kind of a level's first page is the kind of the level."""
        level = np.array([root], np.int64)
        while True:
            kind = self.read(level[:1])[0, _header_at(level[:1])[0]]
            if kind == _LEAF:
                return level
            if kind != _INTERIOR:
                raise NotDecodable("a page that is not a table b-tree page")
            pages = self.read(level)
            if not (pages[np.arange(len(level)), _header_at(level)] == _INTERIOR).all():
                raise NotDecodable("an unbalanced table b-tree")
            level = _children(pages, level)

    def batches(self, root: int, columns: list[Column]
                ) -> Iterator[tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray]]]]:
        """Per batch of leaf pages, the rowids and (values, valid) per column, in rowid
        order."""
        leaves = self.leaf_pages(root)
        batch_pages = BATCH_PAGES
        for lo in range(0, len(leaves), batch_pages):
            numbers = leaves[lo:lo + batch_pages]
            yield _decode(self.read(numbers), numbers, columns, self.usable)


def _header_at(numbers: np.ndarray) -> np.ndarray:
    """Offset of the b-tree page header: page 1 starts with the 100-byte file header."""
    return np.where(numbers == 1, 100, 0)


def _u16(flat: np.ndarray, at: np.ndarray) -> np.ndarray:
    return (flat[at].astype(np.int64) << 8) | flat[at + 1]


def _u32(flat: np.ndarray, at: np.ndarray) -> np.ndarray:
    return (_u16(flat, at) << 16) | _u16(flat, at + 2)


def _cells(pages: np.ndarray, numbers: np.ndarray, pointer_base: int
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Flat page bytes, and per cell its page (row in `pages`) and flat offset, in order."""
    flat = pages.reshape(-1)
    size = pages.shape[1]
    header = _header_at(numbers) + np.arange(len(numbers)) * size
    counts = _u16(flat, header + 3)
    page = np.repeat(np.arange(len(numbers)), counts)
    first = np.cumsum(counts) - counts
    slot = np.arange(len(page)) - first[page]
    pointers = _u16(flat, header[page] + pointer_base + 2 * slot)
    if len(pointers) and (pointers.max() >= size):
        raise NotDecodable("a cell pointer beyond its page")
    return flat, page, page * size + pointers


def _children(pages: np.ndarray, numbers: np.ndarray) -> np.ndarray:
    """Child pages of interior table pages, each page's cells in order then its right-most
    pointer."""
    flat, page, cell = _cells(pages, numbers, 12)
    header = _header_at(numbers) + np.arange(len(numbers)) * pages.shape[1]
    right = _u32(flat, header + 8)
    children = np.concatenate([_u32(flat, cell), right])
    owner = np.concatenate([page, np.arange(len(numbers))])
    is_right = np.r_[np.zeros(len(cell), bool), np.ones(len(numbers), bool)]
    return children[np.lexsort((is_right, owner))]


def _varint(flat: np.ndarray, at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """SQLite varints (big-endian 7-bit groups, the 9th byte whole) at `at`: values and
    byte lengths. Loops over byte positions, not over cells."""
    value = np.zeros(len(at), np.int64)
    length = np.zeros(len(at), np.int64)
    going = np.ones(len(at), bool)
    for k in range(9):
        rows = np.flatnonzero(going)
        if len(rows) == 0:
            break
        byte = flat[at[rows] + k].astype(np.int64)
        if k == 8:
            value[rows] = (value[rows] << 8) | byte
            length[rows] = 9
            break
        value[rows] = (value[rows] << 7) | (byte & 0x7F)
        ended = byte < 0x80
        length[rows[ended]] = k + 1
        going[rows[ended]] = False
    return value, length


# content bytes of serial types 0..9 (NULL, ints of 1/2/3/4/6/8 bytes, real, 0, 1)
_SIZES = np.array([0, 1, 2, 3, 4, 6, 8, 8, 0, 0], np.int64)


def _content_size(serial: np.ndarray) -> np.ndarray:
    """Bytes of the value of each serial type (blobs 12, 14, ...; texts 13, 15, ...)."""
    if serial.size and serial.max() < len(_SMALL_SIZES):
        return _SMALL_SIZES[serial]
    return np.where(serial >= 12, (serial - 12) // 2, _SIZES[np.minimum(serial, 9)])


_SMALL_SIZES = np.where(np.arange(128) >= 12, (np.arange(128) - 12) // 2,
                        _SIZES[np.minimum(np.arange(128), 9)])


def _decode(pages: np.ndarray, numbers: np.ndarray, columns: list[Column], usable: int
            ) -> tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray]]]:
    kinds = pages[np.arange(len(numbers)), _header_at(numbers)]
    if not (kinds == _LEAF).all():
        raise NotDecodable("a leaf page that is not a table leaf page")
    flat, _, cell = _cells(pages, numbers, 8)
    width = max((c.index for c in columns), default=-1) + 1
    flat = np.concatenate([flat, np.zeros(16 + width, np.uint8)])  # reads past the end
    payload, n1 = _varint(flat, cell)
    rowid, n2 = _varint(flat, cell + n1)
    if len(payload) and payload.max() > usable - 35:
        raise NotDecodable("a record spills to overflow pages")
    start = cell + n1 + n2
    header_size, n3 = _varint(flat, start)
    serial = _serial_types(flat, start + n3, start + header_size, width)
    sizes = _content_size(serial)
    offsets = np.cumsum(sizes, axis=1) - sizes
    value_at = (start + header_size)[:, None] + offsets
    return rowid, [_values(flat, value_at[:, c.index], serial[:, c.index], c, rowid)
                   for c in columns]


def _serial_types(flat: np.ndarray, first: np.ndarray, end: np.ndarray, width: int
                  ) -> np.ndarray:
    """(cells, width) serial types of the first `width` columns; 0 (NULL) for columns a
    record lacks. Fast path: every type is one byte (< 128: numbers and short strings)."""
    at = first[:, None] + np.arange(width)
    present = at < end[:, None]
    types = np.where(present, flat[at], 0).astype(np.int64)
    if not (types >= 0x80).any():
        return types
    types = np.zeros((len(first), width), np.int64)
    for index in range(width):
        here = first < end
        value, length = _varint(flat, np.where(here, first, 0))
        types[:, index] = np.where(here, value, 0)
        first = first + np.where(here, length, 0)
    return types


# by serial type (12 and up: blobs and texts, not numbers; np.take clips to 12): is an
# integer, is a real, the shift that leaves an integer's bytes of the 8 read (sign-
# extended), 1 where those bytes are the value (0: the value is a constant or NULL), the
# constant of types 8 and 9
_TYPES = np.arange(13)
_IS_INT = ((_TYPES >= 1) & (_TYPES <= 6)) | (_TYPES == 8) | (_TYPES == 9)
_IS_REAL = _TYPES == 7
_SIZED = ((_TYPES >= 1) & (_TYPES <= 6)).astype(np.int64)
_SHIFT = np.where(_SIZED == 1, 64 - 8 * _SIZES[np.minimum(_TYPES, 9)], 0)
_CONSTANT = (_TYPES == 9).astype(np.int64)


def _values(flat: np.ndarray, at: np.ndarray, serial: np.ndarray, column: Column,
            rowid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(values, valid) of one column: big-endian integers sign-extended from their size,
    IEEE doubles, the constants 0 and 1; NULL for anything else. The 8 bytes from each
    value's start are read as one big-endian word (`flat` is padded past its end): an
    arithmetic shift right by the bytes that are not the value's sign-extends it."""
    if column.is_rowid:
        return rowid, np.ones(len(rowid), bool)
    is_int = np.take(_IS_INT, serial, mode="clip")
    word = _words(flat, at)
    value = word >> np.take(_SHIFT, serial, mode="clip")
    value *= np.take(_SIZED, serial, mode="clip")
    value += np.take(_CONSTANT, serial, mode="clip")
    if not column.is_float:
        return value, is_int
    is_real = np.take(_IS_REAL, serial, mode="clip")
    values = np.where(is_real, word.view(np.float64), value.astype(np.float64))
    return values, is_int | is_real


def _words(flat: np.ndarray, at: np.ndarray) -> np.ndarray:
    """The 8 bytes from each of `at`, as a signed big-endian number: a view of `flat` whose
    item i is the 8 bytes from byte i (a stride of one byte), indexed once (4x faster
    than gathering 8 single bytes per value)."""
    if len(at) == 0:
        return np.zeros(0, np.int64)
    words = np.ndarray(shape=(len(flat) - 7,), dtype=">i8", buffer=flat, strides=(1,))
    return words[at].astype(np.int64)
