"""SYNTHETIC TensorFlow-format demo runs for `etl demo`: XSpace (xplane.pb) profiles of a
BERT-like model, eager and XLA, at several batch sizes, and the XSpace encoder they (and
the tests' and bench's writers) use.

Nothing here was measured. Each step is made from a small cost model (`_Config`): the host
launches every kernel (eager: many small kernels and a high per-launch cost; XLA: fewer,
fused kernels and a cheaper launch), a kernel starts when it is launched and its stream is
free, and its duration is a fixed part plus a part per sample; device memory is
weights plus activations per sample. So throughput rises with batch size and flattens once
the GPU, not the host, bounds the step and the fixed part of each kernel is amortised (the
paper's saturation, Figs. 1, 3, 4), and XLA is faster than eager. The run.toml files say
`synthetic = true`; the GPU is "synthetic-V100".

The encoder writes the protobuf wire format directly (field numbers of xplane.proto, as
listed in etl/extract/xplane/decode.py), independently of the reader's decoder.
"""
from __future__ import annotations

import random
import struct
from dataclasses import dataclass, field
from pathlib import Path

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
    parts = [vfield(1, ids.event(event.name))]
    if event.offset_ps:
        parts.append(vfield(2, event.offset_ps))
    if event.duration_ps:
        parts.append(vfield(3, event.duration_ps))
    parts += [lfield(4, _stat(ids, name, value)) for name, value in event.stats.items()]
    return b"".join(parts)


def _line(ids: _PlaneIds, line: Line) -> bytes:
    head = vfield(1, line.id) + lfield(2, line.name) + vfield(3, line.timestamp_ns)
    return head + b"".join(lfield(4, _event(ids, e)) for e in line.events)


def plane_bytes(plane: Plane) -> bytes:
    ids = _PlaneIds()
    parts = [vfield(1, plane.id), lfield(2, plane.name)]
    parts += [lfield(3, _line(ids, line)) for line in plane.lines]
    stats = b"".join(lfield(6, _stat(ids, n, v)) for n, v in plane.stats.items())
    for name, number in ids.events.items():
        parts.append(lfield(4, vfield(1, number) + lfield(2, vfield(1, number)
                                                          + lfield(2, name))))
    for name, number in list(ids.stats.items()):
        parts.append(lfield(5, vfield(1, number) + lfield(2, vfield(1, number)
                                                          + lfield(2, name))))
    return b"".join(parts) + stats


def xspace(planes: list[Plane], errors: tuple[str, ...] = (), hostnames: tuple[str, ...] = ()
           ) -> bytes:
    out = b"".join(lfield(1, plane_bytes(p)) for p in planes)
    out += b"".join(lfield(2, e) for e in errors)
    return out + b"".join(lfield(4, h) for h in hostnames)


# ---- the synthetic TF runs ------------------------------------------------------------

GPU_NAME = "synthetic-V100"
V100_STATS: dict[str, StatValue] = {
    "clock_rate": 1530000, "core_count": 80, "memory_size": 16945512448,
    "compute_cap_major": 7, "compute_cap_minor": 0, "device_name": GPU_NAME}
BATCH_SIZES = (8, 16, 32, 64)
STEPS = 4
BASE_NS = 1_712_188_800_000_000_000  # 2024-04-04T00:00:00Z, as the PyTorch demo


@dataclass(frozen=True)
class _Config:
    exec_mode: str
    kernels: int            # kernels per step
    launch_ns: int          # host time per launch
    fixed_ns: int           # kernel time whatever the batch (latency, tails)
    per_sample_ns: int      # kernel time per sample
    activations: int        # device bytes per sample


CONFIGS = (_Config("eager", 60, 30_000, 8_000, 2_400, 150 << 20),
           _Config("xla", 20, 9_000, 20_000, 5_200, 100 << 20))
WEIGHTS = 1_300 << 20


def write_tf_demo(dest: Path, seed: int = 0) -> list[Path]:
    """Write one run folder per configuration and batch size under `dest`."""
    folders = []
    for config in CONFIGS:
        for batch in BATCH_SIZES:
            folder = dest / f"tf_bert_{config.exec_mode}_b{batch}"
            profile = folder / "plugins" / "profile" / "2024_04_04_00_00_00"
            profile.mkdir(parents=True)
            rng = random.Random(f"{seed}:{folder.name}")
            data = xspace(_planes(config, batch, rng), hostnames=("synthetic-host",))
            (profile / "synthetic-host.xplane.pb").write_bytes(data)
            (folder / "run.toml").write_text(_run_toml(config, batch), encoding="utf-8")
            folders.append(folder)
    return folders


def _run_toml(config: _Config, batch: int) -> str:
    return "\n".join([
        "# SYNTHETIC run written by `etl demo` (etl/demo/xplane.py): generated, not measured.",
        "# No GPU was used; these numbers say nothing about any real hardware.",
        'model = "bert-synthetic"', 'framework = "tensorflow"', 'framework_version = "2.15.0"',
        f'exec_mode = "{config.exec_mode}"', 'precision = "fp32"', f"batch_size = {batch}",
        f'gpu = "{GPU_NAME}"', 'tags = ["synthetic", "demo"]', "synthetic = true", ""])


def _planes(config: _Config, batch: int, rng: random.Random) -> list[Plane]:
    main = Line(1, "python3", BASE_NS)
    executor = Line(2, "tf_Compute/2", BASE_NS)
    stream = Line(7, "Stream #7(Compute)", BASE_NS)
    now, correlation = 1_000_000, 1
    for step in range(STEPS):
        start, gpu_free = now, now
        for k in range(config.kernels):
            op = f"bert/encoder/layer_{k % 12}/{'fusion' if config.exec_mode == 'xla' else 'dense'}"
            launch = now + 2_000
            dur = (config.fixed_ns + config.per_sample_ns * batch) * rng.uniform(0.9, 1.1)
            begin = max(launch + 5_000, gpu_free)
            executor.events.append(Event(f"{op}/MatMul:MatMul", _ps(now),
                                         _ps(config.launch_ns), {"group_id": step}))
            executor.events.append(Event("cuLaunchKernel", _ps(launch), _ps(4_000),
                                         {"correlation_id": correlation, "group_id": step}))
            stream.events.append(Event(_kernel_name(config, k), _ps(begin), _ps(int(dur)), {
                "correlation_id": correlation, "level 0": Ref(f"{op}/MatMul:MatMul"),
                "kernel_details": Ref("regs:64 shm:16384 grid:80,4,1 block:256,1,1"),
                "group_id": step}))
            gpu_free, now, correlation = begin + int(dur), now + config.launch_ns, correlation + 1
        end = max(now, gpu_free) + 20_000          # the step waits for the GPU
        main.events += _allocations(config, batch, step, start)
        main.events.append(Event("train", _ps(start - 1_000), _ps(end - start + 1_000),
                                 {"step_num": step, "group_id": step}))
        now = end + int(rng.uniform(30_000, 60_000))  # input pipeline between steps
    host = Plane(1, "/host:CPU", [main, executor])
    return [host, Plane(2, "/device:GPU:0", [stream], dict(V100_STATS))]


def _kernel_name(config: _Config, k: int) -> str:
    if config.exec_mode == "xla":
        return f"fusion_{k}"
    return "volta_sgemm_128x64_nn" if k % 3 else "void tensorflow::BiasNHWCKernel<float>"


def _allocations(config: _Config, batch: int, step: int, start: int) -> list[Event]:
    activations = config.activations * batch
    common: dict[str, StatValue | Ref] = {"allocator_name": "GPU_0_bfc",
                                          "bytes_reserved": 0}
    return [Event("MemoryAllocation", _ps(start + 500), 0, {
                **common, "bytes_allocated": WEIGHTS + activations,
                "allocation_bytes": activations}),
            Event("MemoryDeallocation", _ps(start + 900), 0, {
                **common, "bytes_allocated": WEIGHTS, "allocation_bytes": activations})]


def _ps(ns: int) -> int:
    return ns * 1000
