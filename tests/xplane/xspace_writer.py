"""A small XSpace (xplane.pb) writer for tests: what the corpus's one real file lacks
(several steps, several GPUs, XLA kernels, a kernel without a launch, CPU-only profiles,
allocator events). It encodes the protobuf wire format directly, independently of the
reader's decoder; field numbers from xplane.proto (see etl/extract/xplane/decode.py).
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

StatValue = int | float | str


@dataclass(frozen=True)
class Ref:
    """A stat whose value is a string stored as a stat metadata name (ref_value)."""

    text: str


@dataclass
class Event:
    name: str
    offset_ps: int
    duration_ps: int = 0
    stats: dict[str, StatValue | Ref] = field(default_factory=dict)


@dataclass
class Line:
    id: int
    name: str
    timestamp_ns: int
    events: list[Event] = field(default_factory=list)


@dataclass
class Plane:
    id: int
    name: str
    lines: list[Line] = field(default_factory=list)
    stats: dict[str, StatValue] = field(default_factory=dict)


def varint(value: int) -> bytes:
    value &= (1 << 64) - 1          # int64 negatives: ten bytes of two's complement
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def tag(number: int, wire: int) -> bytes:
    return varint(number << 3 | wire)


def vfield(number: int, value: int) -> bytes:
    return tag(number, 0) + varint(value)


def lfield(number: int, payload: bytes | str) -> bytes:
    data = payload.encode() if isinstance(payload, str) else payload
    return tag(number, 2) + varint(len(data)) + data


class _PlaneIds:
    def __init__(self) -> None:
        self.events: dict[str, int] = {}
        self.stats: dict[str, int] = {}

    def event(self, name: str) -> int:
        return self.events.setdefault(name, len(self.events) + 1)

    def stat(self, name: str) -> int:
        return self.stats.setdefault(name, len(self.stats) + 1)


def _stat(ids: _PlaneIds, name: str, value: StatValue | Ref) -> bytes:
    body = vfield(1, ids.stat(name))
    if isinstance(value, Ref):
        body += vfield(7, ids.stat(value.text))
    elif isinstance(value, bool) or isinstance(value, int):
        body += vfield(4, int(value)) if value < 0 else vfield(3, int(value))
    elif isinstance(value, float):
        body += tag(2, 1) + struct.pack("<d", value)
    else:
        body += lfield(5, value)
    return body


def _event(ids: _PlaneIds, event: Event) -> bytes:
    body = vfield(1, ids.event(event.name))
    if event.offset_ps:
        body += vfield(2, event.offset_ps)
    if event.duration_ps:
        body += vfield(3, event.duration_ps)
    for name, value in event.stats.items():
        body += lfield(4, _stat(ids, name, value))
    return body


def _line(ids: _PlaneIds, line: Line) -> bytes:
    body = vfield(1, line.id) + lfield(2, line.name) + vfield(3, line.timestamp_ns)
    for event in line.events:
        body += lfield(4, _event(ids, event))
    return body


def plane_bytes(plane: Plane) -> bytes:
    ids = _PlaneIds()
    body = vfield(1, plane.id) + lfield(2, plane.name)
    for line in plane.lines:
        body += lfield(3, _line(ids, line))
    stats = b"".join(lfield(6, _stat(ids, n, v)) for n, v in plane.stats.items())
    for name, number in ids.events.items():
        entry = vfield(1, number) + lfield(2, vfield(1, number) + lfield(2, name))
        body += lfield(4, entry)
    for name, number in list(ids.stats.items()):
        entry = vfield(1, number) + lfield(2, vfield(1, number) + lfield(2, name))
        body += lfield(5, entry)
    return body + stats


def xspace(planes: list[Plane], errors: tuple[str, ...] = (), hostnames: tuple[str, ...] = ()
           ) -> bytes:
    out = b"".join(lfield(1, plane_bytes(p)) for p in planes)
    out += b"".join(lfield(2, e) for e in errors)
    return out + b"".join(lfield(4, h) for h in hostnames)


# ---- a TF-like profile -----------------------------------------------------------------

V100 = {"clock_rate": 1530000, "core_count": 80, "memory_size": 16945512448,
        "compute_cap_major": 7, "compute_cap_minor": 0}


@dataclass
class Profile:
    """A TF 2.x-like training profile: `steps` steps of `kernels` kernels on each GPU."""

    gpus: int = 1
    steps: int = 3
    kernels: int = 2
    xla: bool = False
    step_ns: int = 1_000_000
    base_ns: int = 1_000_000_000
    orphan: bool = False            # one kernel whose launch is missing
    step_markers: bool = True       # host events with step_num (else group_id only)
    memory: bool = True

    def planes(self) -> list[Plane]:
        host = Plane(1, "/host:CPU")
        devices = [Plane(2 + g, f"/device:GPU:{g}", stats=dict(V100)) for g in range(self.gpus)]
        thread = Line(7, "tf_Compute/7", self.base_ns)
        main = Line(3, "python3", self.base_ns)
        streams = [Line(10 + g, f"Stream #{10 + g}(Compute)", self.base_ns)
                   for g in range(self.gpus)]
        correlation = 1
        for step in range(self.steps):
            start_ps = (step * self.step_ns + 1000) * 1000 + 7  # not a whole ns: floored
            if self.step_markers:
                main.events.append(Event("train", start_ps, (self.step_ns - 2000) * 1000,
                                         {"step_num": step, "_r": 1, "group_id": step}))
            for g in range(self.gpus):
                for k in range(self.kernels):
                    correlation = self._kernel(thread, streams[g], step, g, k, start_ps,
                                               correlation)
            if self.memory:
                for g in range(self.gpus):
                    main.events += self._allocations(g, step, start_ps)
        host.lines = [main, thread]
        for g, device in enumerate(devices):
            device.lines = [streams[g], Line(99, "TensorFlow Ops", self.base_ns, [
                Event("x", e.offset_ps, e.duration_ps) for e in streams[g].events])]
        return [host, *devices]

    def _kernel(self, thread: Line, stream: Line, step: int, gpu: int, k: int, start_ps: int,
                correlation: int) -> int:
        op = f"model/layer_{k}/dense/MatMul:MatMul"
        at = start_ps + (gpu * self.kernels + k) * 100_000_000
        thread.events.append(Event(op, at, 50_000_000, {"group_id": step}))
        orphan = self.orphan and step == 0 and k == 0 and gpu == 0
        if not orphan:
            thread.events.append(Event("cuLaunchKernel", at + 1_000_000, 5_000_000,
                                       {"correlation_id": correlation, "group_id": step}))
        stats: dict[str, StatValue | Ref] = {
            "correlation_id": correlation,
            "kernel_details": Ref("regs:32 shm:1024 grid:80,2,1 block:256,1,1"),
            "level 0": Ref(op), "group_id": step, "context_id": "$$1"}
        name = "volta_sgemm_128x64_nn"
        if self.xla:
            stats["level 0"] = Ref("cluster_0_1/xla_run:_XlaRun")
            stats["hlo_op"] = f"fusion.{k}"
            stats["hlo_module"] = "cluster_0__XlaCompiledKernel_true"
            name = f"fusion_{k}"
        stream.events.append(Event(name, at + 10_000_000, 200_000_000 + 999, stats))
        return correlation + 1

    def _allocations(self, gpu: int, step: int, start_ps: int) -> list[Event]:
        held = 1 << 30
        peak = held + (step + 1) * (64 << 20)
        common = {"allocator_name": f"GPU_{gpu}_bfc", "bytes_reserved": 2 << 30}
        return [
            Event("MemoryAllocation", start_ps + 2_000_000, 0, {
                **common, "bytes_allocated": peak, "allocation_bytes": peak - held}),
            Event("MemoryDeallocation", start_ps + 400_000_000, 0, {
                **common, "bytes_allocated": held, "allocation_bytes": peak - held})]


def profile_bytes(**options: object) -> bytes:
    return xspace(Profile(**options).planes())  # type: ignore[arg-type]
