"""kernel_type, memory_kind and tc_estimate of GPU activities, from `kind` and `name` only.

The rules are data (etl/extract/kernel_types.toml); this module applies them to each batch
of kernels rows at ingest, whatever the trace format (etl/load/ingest.py wraps the kernels
sink), so TF xplane and nsys kernels get the same columns as Kineto's. Computed at ingest
rather than in a view: a regular expression per row over a 1 GB trace's million kernels
would cost every query; stored, the views group on a dictionary-encoded column.

    kind     name                                   kernel_type    memory_kind  tc_estimate
    kernel   ncclKernel_AllReduce_RING_LL_Sum_float communication  NULL         NULL
    kernel   ampere_h16816gemm_128x128_ldg8         computation    NULL         true
    kernel   at::native::vectorized_elementwise_... computation    NULL         false
    memcpy   Memcpy HtoD (Pinned -> Device)         memory         HtoD         NULL
    memset   Memset (Device)                        memory         memset       NULL
    other    ProfilerStep#3                         other          NULL         NULL
"""
from __future__ import annotations

import re
import tomllib
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

RULES_PATH = Path(__file__).with_name("kernel_types.toml")
COLUMNS = ("kernel_type", "memory_kind", "tc_estimate")
TYPES = ("string", "string", "bool_")


@cache
def rules() -> dict[str, Any]:
    with open(RULES_PATH, "rb") as fh:
        return tomllib.load(fh)


@cache
def _compiled(section: str) -> re.Pattern[str]:
    return _union(rules()[section]["patterns"])


def _union(patterns: list[str]) -> re.Pattern[str]:
    # each pattern keeps its own flags: (?i) applies inside its group only
    return re.compile("|".join(_scoped(p) for p in patterns))


def _scoped(pattern: str) -> str:
    if pattern.startswith("(?i)"):
        return f"(?i:{pattern[4:]})"
    return f"(?:{pattern})"


@cache
def _directions() -> list[tuple[str, re.Pattern[str]]]:
    return [(kind, _union(patterns)) for kind, patterns in rules()["memory_kind"].items()]


@cache
def classify(kind: str | None, name: str | None) -> tuple[str | None, str | None, bool | None]:
    """(kernel_type, memory_kind, tc_estimate) of one activity."""
    text = name or ""
    if kind == "kernel":
        if _compiled("communication").search(text):
            return "communication", None, None
        if not _compiled("memory").search(text):
            return "computation", None, bool(_compiled("tensor_core").search(text))
    elif kind not in ("memcpy", "memset"):
        return rules()["kinds"].get(kind or "", "other"), None, None
    return "memory", _memory_kind(kind, text), None


def _memory_kind(kind: str | None, name: str) -> str:
    if kind == "memset":
        return "memset"
    for direction, pattern in _directions():
        if pattern.search(name):
            return direction
    return "unknown"


def with_kernel_types(kernels: pa.Table) -> pa.Table:
    """The batch with the three columns appended; each distinct (kind, name) is
    classified once (a batch of 65 536 kernels holds a few hundred names), and rows find
    their pair by Arrow's hashing, not a Python object per row."""
    import numpy as np
    import pyarrow as pa

    kinds, kind_at = _distinct(kernels["kind"])
    names, name_at = _distinct(kernels["name"])
    width = len(names)  # never 0: null is among the names
    pairs, index = np.unique(kind_at.astype(np.int64) * width + name_at, return_inverse=True)
    values = [classify(kinds[pair // width], names[pair % width]) for pair in pairs.tolist()]
    rows = pa.array(index.astype(np.int32))
    out = kernels
    for position, (column, arrow_type) in enumerate(zip(COLUMNS, TYPES)):
        distinct = pa.array([v[position] for v in values], getattr(pa, arrow_type)())
        out = out.append_column(column, distinct.take(rows))
    return out


def _distinct(column: pa.ChunkedArray) -> tuple[list[Any], Any]:
    """The column's distinct values (null among them) and each row's position in that list."""
    import pyarrow as pa

    array = column.combine_chunks()  # one dictionary for the whole batch
    encoded = (array if pa.types.is_dictionary(array.type)
               else array.dictionary_encode(null_encoding="encode"))
    positions = encoded.indices.fill_null(len(encoded.dictionary))  # a null index: null
    return [*encoded.dictionary.to_pylist(), None], positions.to_numpy()
