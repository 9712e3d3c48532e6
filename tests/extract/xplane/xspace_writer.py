"""A small XSpace (xplane.pb) writer for tests: what the corpus's one real file lacks
(several steps, several GPUs, XLA kernels, a kernel without a launch, CPU-only profiles,
allocator events). The encoder (etl/demo/xplane.py, shared with `etl demo` and bench/)
writes the protobuf wire format directly, independently of the reader's decoder.
"""
from __future__ import annotations

from dataclasses import dataclass

from etl.demo.xplane import Event, Line, Plane, Ref, StatValue, xspace

__all__ = ["Event", "Line", "Plane", "Ref", "StatValue", "xspace", "Profile", "profile_bytes"]


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
    memory_steps: int | None = None  # allocator events in the first N steps only (None: all)
    device_stats: dict[str, StatValue] | None = None  # the device planes' (None: V100)

    def planes(self) -> list[Plane]:
        host = Plane(1, "/host:CPU")
        stats = dict(V100 if self.device_stats is None else self.device_stats)
        devices = [Plane(2 + g, f"/device:GPU:{g}", stats=dict(stats)) for g in range(self.gpus)]
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
            if self.memory and (self.memory_steps is None or step < self.memory_steps):
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
