"""One xplane.pb (XSpace) → rows of host_events, kernels, iterations, devices,
memory_events and anomalies.

Planes (fields.toml [planes]): the host plane's lines are host threads; each
`/device:GPU:N` plane's stream lines (`Stream #S...`) hold the GPU activities of device N;
the derived lines (TensorFlow Ops, XLA Ops, Steps, ...) are not activities. Every other
plane (TPU, metadata) is not read and is named in an anomaly.

Links, as for Kineto (etl/extract/link.py): a GPU activity's launch is the host event with its
correlation_id; a launch's op is the innermost TF op (`name/scope:OpType`) enclosing it on
its thread. A kernel's op_name and layer come from the op stat the profiler puts on the GPU
event (`tf_op` or `level 0`, else the annotation): op_name is the op type, layer its name
scope; JAX's name stack (`jit(f)/jit(main)/Dense_0/dot_general`: stat tf_op, or the name
of the kernel's annotation when only that is written) splits the same way, into its last
component and the rest. An XLA kernel without an op (TF's _XlaRun) takes op_name
from `hlo_op` and layer from `hlo_module`, stats or the annotation's `#...#` metadata.
Iterations: see schemas/iterations.toml (xplane_pb).
"""
from __future__ import annotations

import re
from array import array
from collections import Counter
from dataclasses import dataclass, field
from functools import cache

import numpy as np
import pyarrow as pa

from etl.extract import link
from etl.extract.xplane.decode import Plane, Stats
from etl.extract.fields import field_map

Anomaly = tuple[str, int | None, str]
NONE = link.NONE
_TF_OP = re.compile(r"^(?P<name>[^:#]+):(?P<type>[A-Za-z_][A-Za-z0-9_]*)$")


def as_numpy(values: array[int]) -> np.ndarray:
    dtype = np.int32 if values.typecode == "i" else np.int64
    return np.frombuffer(values, dtype=dtype) if len(values) else np.zeros(0, dtype)


class Strings:
    """Interned strings: rows hold an index, the table a dictionary."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {}
        self.values: list[str] = []

    def of(self, text: str | None) -> int:
        if text is None:
            return NONE
        found = self.index.get(text)
        if found is None:
            found = self.index[text] = len(self.values)
            self.values.append(text)
        return found

    def column(self, codes: array[int]) -> pa.Array:
        indices = as_numpy(codes).astype(np.int64)
        if not self.values:
            return pa.nulls(len(indices), pa.string())
        dictionary = pa.array(self.values, pa.string())
        missing = indices == NONE
        return dictionary.take(pa.array(np.maximum(indices, 0), pa.int64(), mask=missing))


# Columns of codes (interned strings, device ids, details) are int32; the rest int64
SMALL = frozenset(("name", "tid", "category", "kind", "op_name", "layer", "device_id",
                   "details", "allocator"))


@dataclass
class Columns:
    """Rows of one table as typed arrays (4 or 8 bytes a value: a 100 MB file stays
    small)."""

    names: tuple[str, ...]
    data: dict[str, array[int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.data = {n: array("i" if n in SMALL else "q") for n in self.names}

    def __len__(self) -> int:
        return len(self.data[self.names[0]])

    def numpy(self, name: str) -> np.ndarray:
        return as_numpy(self.data[name])


HOST = ("event_id", "ts_ns", "dur_ns", "name", "tid", "category", "correlation_id",
        "group_id", "step_num")
GPU = ("event_id", "device_id", "stream_id", "name", "ts_ns", "dur_ns", "correlation_id",
       "kind", "details", "op_name", "layer")
DETAILS = ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z",
           "registers_per_thread", "shared_memory_bytes", "bytes")
MEMORY = ("device_id", "allocator", "ts_ns", "allocated", "reserved", "delta", "event_id")


class Collector:
    """Receives decoded events plane by plane, line by line."""

    def __init__(self) -> None:
        self.host, self.gpu, self.memory = Columns(HOST), Columns(GPU), Columns(MEMORY)
        self.host_appends = [self.host.data[c].append for c in HOST]
        self.gpu_appends = [self.gpu.data[c].append for c in GPU]
        self.strings = Strings()
        self.details: dict[Details, int] = {}   # a kernel's DETAILS, interned
        self.next_id = 0
        self.steps_line_groups: set[int] = set()
        self.derived_lines: Counter[str] = Counter()
        self.anomalies: list[Anomaly] = []
        events = field_map("xplane")["events"]
        self.allocation, self.deallocation = events["allocation"], events["deallocation"]

    def host_event(self, plane: Plane, thread: int, metadata_id: int, ts: int, dur: int,
                   stats: Stats) -> None:
        name = plane.event_names.get(metadata_id, "")
        event_id = self._id()
        corr = stats.get("correlation_id")
        category = _host_category(name, stats, self.allocation, self.deallocation)
        row = (event_id, ts, dur, self.strings.of(name), thread, self.strings.of(category),
               _int(corr), _int(stats.get("group_id")), _int(stats.get("step_num")))
        for append, value in zip(self.host_appends, row):
            append(value)
        if category == "memory":
            self._memory(event_id, ts, name == self.deallocation, stats)

    def _memory(self, event_id: int, ts: int, freed: bool, stats: Stats) -> None:
        allocator = str(stats.get("allocator_name", ""))
        size = _int(stats.get("allocation_bytes"))
        row = (_allocator_device(allocator), self.strings.of(allocator), ts,
               _int(stats.get("bytes_allocated")), _int(stats.get("bytes_reserved")),
               NONE if size == NONE else (-size if freed else size), event_id)
        for column, value in zip(MEMORY, row):
            self.memory.data[column].append(value)

    def gpu_event(self, plane: Plane, device: int, stream: int, metadata_id: int, ts: int,
                  dur: int, stats: Stats) -> None:
        name = plane.event_names.get(metadata_id, "")
        kind, details = _kind(name, stats)
        op_name, layer = _op_and_layer(stats)
        code = self.details.setdefault(details, len(self.details))
        row = (self._id(), device, stream, self.strings.of(name), ts, dur,
               _int(stats.get("correlation_id")), self.strings.of(kind), code,
               self.strings.of(op_name), self.strings.of(layer))
        for append, value in zip(self.gpu_appends, row):
            append(value)

    def _id(self) -> int:
        self.next_id += 1
        return self.next_id - 1


def _int(value: object) -> int:
    return value if isinstance(value, int) and NONE < value < (1 << 63) else NONE


def _host_category(name: str, stats: Stats, allocation: str, deallocation: str) -> str:
    if "correlation_id" in stats:
        return "launch"
    if name == allocation or name == deallocation:
        return "memory"
    if "step_num" in stats:
        return "step"
    return "tf_op" if _TF_OP.match(name) else "trace_me"


@cache
def _allocator_device_cached(allocator: str) -> int:
    found = re.match(r"^GPU_(\d+)_", allocator)  # TF's BFC allocators: GPU_0_bfc
    return int(found.group(1)) if found and int(found.group(1)) < 1 << 31 else NONE


def _allocator_device(allocator: str) -> int:
    return _allocator_device_cached(allocator)


# kind, grid xyz, block xyz, registers, shared memory, bytes
Details = tuple[int, int, int, int, int, int, int, int, int]
_NO_DETAILS: Details = (NONE,) * 9  # type: ignore[assignment]


def _kind(name: str, stats: Stats) -> tuple[str, Details]:
    if "memcpy_details" in stats or name.startswith("Memcpy"):
        return "memcpy", _sized(str(stats.get("memcpy_details", "")))
    if "memset_details" in stats or name.startswith("Memset"):
        return "memset", _sized(str(stats.get("memset_details", "")))
    if "kernel_details" in stats:
        return "kernel", _kernel_details(str(stats["kernel_details"]))
    return "kernel", _NO_DETAILS


@cache
def _details(text: str) -> dict[str, str]:
    return dict(part.split(":", 1) for part in text.split() if ":" in part)


@cache
def _kernel_details(text: str) -> Details:
    """"regs:38 shm:0 grid:160,1,1 block:1024,1,1" (TF 2.x); newer profilers write
    static_shared / dynamic_shared instead of shm (their sum is the shared memory)."""
    parts = _details(text)
    grid = _triple(parts.get("grid"))
    block = _triple(parts.get("block"))
    shared = _number(parts.get("shm"))
    if shared == NONE and ("static_shared" in parts or "dynamic_shared" in parts):
        shared = max(_number(parts.get("static_shared")), 0) + max(
            _number(parts.get("dynamic_shared")), 0)
    return (*grid, *block, _number(parts.get("regs")), shared, NONE)  # type: ignore[return-value]


@cache
def _sized(text: str) -> Details:
    return (*_NO_DETAILS[:8], _number(_details(text).get("size")))  # type: ignore[return-value]


def _triple(text: str | None) -> tuple[int, int, int]:
    values = (text or "").split(",")
    if len(values) != 3:
        return NONE, NONE, NONE
    a, b, c = (_number(v) for v in values)
    return a, b, c


def _number(text: str | None) -> int:
    try:
        value = int(text) if text is not None else NONE
    except ValueError:
        return NONE
    return value if 0 <= value < (1 << 63) else NONE


# current XLA runs each module under the annotation "XlaModule:#hlo_module=...#", and its
# collectors write the outermost annotation as tf_op: the module run, not an op
XLA_MODULE = "XlaModule:"


def _op_and_layer(stats: Stats) -> tuple[str | None, str | None]:
    annotation = stats.get("annotation_op")
    text = stats.get("op")
    if text is not None and str(text).startswith(XLA_MODULE):
        text = stats.get("name_stack")  # the instruction's own name stack, if written
    if text is None and annotation is not None:
        text = _innermost(str(annotation))
    op = split_op(str(text)) if text is not None else None
    if op is None or op[0] == "_XlaRun":
        # the HLO names: stats of their own (CUPTI collector), else the annotation's
        # metadata (`name#hlo_op=...,hlo_module=...#`, all the ROCm collector may give)
        written = _annotation_metadata(str(annotation)) if annotation is not None else {}
        hlo_op = stats.get("hlo_op", written.get("hlo_op"))
        module = stats.get("hlo_module", written.get("hlo_module"))
        if hlo_op is not None:
            return str(hlo_op), str(module) if module is not None else None
    return op if op is not None else (None, None)


@cache
def _innermost(annotation: str) -> str | None:
    """The innermost op of a TF annotation stack `outer::inner` (metadata in #...#)."""
    for part in reversed(annotation.split("::")):
        name = part.split("#", 1)[0]
        if name:
            return name
    return None


@cache
def _annotation_metadata(annotation: str) -> dict[str, str]:
    """key=value pairs of the innermost annotation's `#...#` metadata."""
    innermost = annotation.rsplit("::", 1)[-1]
    _, _, metadata = innermost.partition("#")
    pairs = (item.split("=", 1) for item in metadata.rstrip("#").split(","))
    return {pair[0]: pair[1] for pair in pairs if len(pair) == 2}


@cache
def split_op(text: str) -> tuple[str, str | None] | None:
    """`scope/name:OpType` (TF) → (OpType, scope); a name stack without a type (JAX:
    `jit(f)/jit(main)/Dense_0/dot_general`) → (its last component, the rest); a name
    without either → (name, None)."""
    name = text.split("#", 1)[0]
    found = _TF_OP.match(name)
    if found:
        scope, _, _ = found.group("name").rpartition("/")
        return found.group("type"), scope or None
    scope, last = _last_component(name)
    return (last, scope) if last else ((text, None) if text else None)


def _last_component(stack: str) -> tuple[str | None, str]:
    """(scope, last) of a `/`-separated name stack; a `/` inside parentheses (JAX's
    `transpose(jvp(...))` transforms) does not separate."""
    depth = 0
    for i in range(len(stack) - 1, -1, -1):
        ch = stack[i]
        depth += (ch == ")") - (ch == "(")
        if ch == "/" and depth == 0:
            return stack[:i] or None, stack[i + 1:]
    return None, stack
