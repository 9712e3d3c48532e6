"""JAX's XSpace on NVIDIA and ROCm GPUs, and TPU-only / CPU-only profiles, written as JAX's
profiler (XLA's CUPTI and ROCm collectors) writes them; numbers worked by hand.

What differs from TF's: the host plane holds Python-tracer events (`$file.py:N function`),
PjitFunction / XlaModule TraceMes and cuLaunchKernel (NVIDIA) or hipModuleLaunchKernel
(ROCm) calls; the device plane has 'XLA Modules' and 'XLA Ops' lines beside its streams;
a kernel carries the annotation XLA set around it (`name#hlo_op=...,hlo_module=...#`),
whose name (JAX's op name stack, `jit(f)/jit(main)/dot_general`) the collector writes as
stat tf_op and whose metadata as stats of their keys (hlo_op, hlo_module, program_id).
The ROCm collector names its stream lines by the activity types on them
(`Stream #1(Kernel,MemcpyH2D)`), writes device_vendor AMD, compute units as core_count and
kernel_details with static_shared / dynamic_shared; the ROCm profile here carries the op
and HLO names in the annotation only, the leanest form a collector may write.
These spellings are from XLA's collectors as we know them: the corpus has no JAX or ROCm
xplane to check them against.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa

from tests.extract.xplane.test_xplane import ingest
from tests.extract.xplane.xspace_writer import Event, Line, Plane, Ref, StatValue, xspace

BASE_NS = 2_000_000_000
STEP_PS = 1_000_000_000             # 1 ms
ANNOTATION = "{op}#hlo_op={hlo},hlo_module=jit_train_step,program_id=7#"
# (JAX op name stack, HLO instruction, kernel name) of one training step's kernels
KERNELS = [("jit(train_step)/jit(main)/Dense_0/dot_general", "dot.3", "sm80_xmma_gemm_f32"),
           ("jit(train_step)/jit(main)/Dense_0/add", "fusion.1", "loop_add_fusion"),
           ("jit(train_step)/jit(main)/transpose(jvp(Dense_0))/dot_general", "dot.5",
            "sm80_xmma_gemm_f32")]
AMD = {"device_vendor": "AMD", "core_count": 104, "memory_size": 68702699520,
       "compute_cap_major": 9, "compute_cap_minor": 0, "clock_rate": 1700000}
A100 = {"device_vendor": "Nvidia", "core_count": 108, "memory_size": 42298834944,
        "compute_cap_major": 8, "compute_cap_minor": 0, "clock_rate": 1410000}


def jax_xspace(rocm: bool = False, steps: int = 2, module_tf_op: bool = False) -> bytes:
    """`steps` steps of KERNELS on one GPU, launched from Python's main thread.
    `module_tf_op`: as current XLA writes them (see _kernel_stats)."""
    main = Line(1, "python3", BASE_NS)
    device_lines = [Line(14, "Stream #1(Kernel,MemcpyH2D)" if rocm else "Stream #14(Compute)",
                         BASE_NS), Line(2, "XLA Modules", BASE_NS), Line(3, "XLA Ops", BASE_NS)]
    stream, modules, ops = device_lines
    launch = "hipModuleLaunchKernel" if rocm else "cuLaunchKernel"
    for step in range(steps):
        start = step * STEP_PS + 1_000_000          # 1 µs into the step
        main.events += [
            Event("train", start, STEP_PS - 2_000_000, {"step_num": step}),
            Event("$train.py:42 train_step", start + 1_000_000, STEP_PS - 4_000_000),
            Event("PjitFunction(train_step)", start + 2_000_000, STEP_PS - 6_000_000)]
        modules.events.append(Event("jit_train_step(7)", start + 5_000_000, 600_000_000))
        for k, (op, hlo, name) in enumerate(KERNELS):
            at = start + 10_000_000 + k * 200_000_000
            correlation = 100 * step + k + 1
            main.events.append(Event(launch, at, 5_000_000, {"correlation_id": correlation}))
            stream.events.append(Event(name, at + 20_000_000, 150_000_000,
                                       _kernel_stats(op, hlo, correlation, rocm,
                                                     module_tf_op)))
            ops.events.append(Event(hlo, at + 20_000_000, 150_000_000, {"hlo_op": hlo}))
    host = Plane(1, "/host:CPU", [main])
    gpu = Plane(2, "/device:GPU:0", device_lines, dict(AMD if rocm else A100))
    return xspace([host, gpu])


def _kernel_stats(op: str, hlo: str, correlation: int, rocm: bool,
                  module_tf_op: bool = False) -> dict[str, StatValue | Ref]:
    """`module_tf_op`: current XLA runs each module under "XlaModule:#hlo_module=..#" and
    its collectors write the outermost annotation as tf_op, the op name stack as stat
    `name` (AMD-AGI/TraceLens' 2026 JAX profiles on MI300, decoded)."""
    shared = "static_shared:0 dynamic_shared:49152" if rocm else "shm:49152"
    if module_tf_op:
        return {"correlation_id": correlation,
                "kernel_details": Ref(f"regs:128 {shared} grid:64,2,1 block:256,1,1"),
                "tf_op": Ref("XlaModule:"), "name": Ref(op), "hlo_op": Ref(hlo),
                "hlo_module": Ref("jit_train_step"), "program_id": 7}
    stats: dict[str, StatValue | Ref] = {
        "correlation_id": correlation,
        "kernel_details": Ref(f"regs:128 {shared} grid:64,2,1 block:256,1,1"),
        "kernel_annotation": Ref(ANNOTATION.format(op=op, hlo=hlo))}
    if not rocm:  # the CUPTI collector also writes the annotation's name and metadata
        stats |= {"tf_op": Ref(op), "hlo_op": Ref(hlo), "hlo_module": Ref("jit_train_step"),
                  "program_id": 7}
    return stats


def _kernels(tables: dict[str, pa.Table]) -> list[dict[str, Any]]:
    return tables["kernels"].sort_by("kernel_id").to_pylist()


def _check_jax_run(tables: dict[str, pa.Table], stream: int) -> None:
    kernels = _kernels(tables)
    assert len(kernels) == 6 and {k["kind"] for k in kernels} == {"kernel"}
    first = kernels[0]
    # step 0 starts 1 µs after the line's timestamp; its first kernel 10 + 20 µs later
    assert (first["ts_ns"], first["dur_ns"], first["stream_id"]) == (
        BASE_NS + 1_000 + 30_000, 150_000, stream)
    assert (first["grid_x"], first["grid_y"], first["block_x"], first["shared_memory_bytes"],
            first["registers_per_thread"]) == (64, 2, 256, 49152, 128)
    assert [(k["op_name"], k["layer"], k["iteration"]) for k in kernels] == [
        ("dot_general", "jit(train_step)/jit(main)/Dense_0", s) if k == 0 else
        ("add", "jit(train_step)/jit(main)/Dense_0", s) if k == 1 else
        ("dot_general", "jit(train_step)/jit(main)/transpose(jvp(Dense_0))", s)
        for s in range(2) for k in range(3)]
    host = {h["event_id"]: h for h in tables["host_events"].to_pylist()}
    assert all(host[k["launch_event_id"]]["category"] == "launch" for k in kernels)
    iterations = tables["iterations"].to_pylist()
    assert [(i["iteration"], i["start_ns"], i["end_ns"]) for i in iterations] == [
        (s, BASE_NS + s * 1_000_000 + 1_000, BASE_NS + s * 1_000_000 + 999_000)
        for s in range(2)]
    kinds = {a["kind"]: a["detail"] for a in tables["anomalies"].to_pylist()}
    assert "no_gpu_activity" not in kinds and "xplane_steps" not in kinds
    assert "XLA Modules (2)" in kinds["xplane_lines_not_read"]
    assert "XLA Ops (6)" in kinds["xplane_lines_not_read"]


def test_jax_on_nvidia(tmp_path: Path) -> None:
    result, tables = ingest(tmp_path, {"h": jax_xspace()})
    assert result.status == "ingested", result.error
    _check_jax_run(tables, 14)
    [device] = tables["devices"].to_pylist()
    assert (device["compute_capability"], device["sm_count"], device["memory_bytes"]) == (
        "8.0", 108, 42298834944)


def test_current_xla_module_annotation_is_not_the_op(tmp_path: Path) -> None:
    """tf_op "XlaModule:" is the module run: each kernel's op and layer come from its
    own name stack, as before."""
    result, tables = ingest(tmp_path, {"h": jax_xspace(module_tf_op=True)})
    assert result.status == "ingested", result.error
    _check_jax_run(tables, 14)


def test_jax_on_rocm(tmp_path: Path) -> None:
    """ROCm: the op and HLO names come from the annotation alone."""
    result, tables = ingest(tmp_path, {"h": jax_xspace(rocm=True)})
    assert result.status == "ingested", result.error
    _check_jax_run(tables, 1)
    host = tables["host_events"].to_pylist()
    assert {h["name"] for h in host if h["category"] == "launch"} == {"hipModuleLaunchKernel"}
    [device] = tables["devices"].to_pylist()
    # an AMD GPU has no CUDA compute capability; core_count is its compute units
    assert (device["compute_capability"], device["sm_count"], device["memory_bytes"]) == (
        None, 104, 68702699520)


def test_tpu_only_profile_reads_the_host_side(tmp_path: Path) -> None:
    tpu_lines = [Line(1, "XLA Modules", BASE_NS, [Event("jit_train_step(7)", 0, 900_000)]),
                 Line(2, "XLA Ops", BASE_NS, [Event("fusion.1", 10_000, 400_000)]),
                 Line(3, "Steps", BASE_NS, [Event("0", 0, 1_000_000)])]
    host = Plane(1, "/host:CPU", [Line(1, "python3", BASE_NS, [
        Event("train", 1_000, 998_000_000, {"step_num": 0}),
        Event("$train.py:42 train_step", 2_000, 990_000_000)])])
    planes = [host, Plane(2, "/device:TPU:0", tpu_lines, {"core_count": 2}),
              Plane(3, "/device:TPU_SYSTEM:0")]
    result, tables = ingest(tmp_path, {"h": xspace(planes)})
    assert result.status == "ingested", result.error
    assert tables["host_events"].num_rows == 2 and tables["kernels"].num_rows == 0
    assert tables["devices"].num_rows == 0
    assert [(i["iteration"], i["start_ns"]) for i in tables["iterations"].to_pylist()] == [
        (0, BASE_NS + 1)]
    anomalies = tables["anomalies"].to_pylist()
    [no_gpu] = [a["detail"] for a in anomalies if a["kind"] == "no_gpu_activity"]
    assert "/device:TPU:0" in no_gpu and "only its host side was read" in no_gpu
    not_read = sorted(a["detail"] for a in anomalies if a["kind"] == "xplane_plane_not_read")
    assert len(not_read) == 2 and "'/device:TPU:0' (3 lines)" in not_read[0]


def test_host_only_profile_says_it_has_no_gpu_plane(tmp_path: Path) -> None:
    host = Plane(1, "/host:CPU", [Line(1, "python3", BASE_NS, [
        Event("$train.py:42 train_step", 2_000, 5_000_000)])])
    result, tables = ingest(tmp_path, {"h": xspace([host])})
    assert result.status == "ingested", result.error
    assert tables["host_events"].to_pylist()[0]["category"] == "trace_me"
    kinds = [a["kind"] for a in tables["anomalies"].to_pylist()]
    assert "no_gpu_activity" in kinds and "xplane_plane_not_read" not in kinds


def test_name_stacks_split_outside_parentheses() -> None:
    from etl.extract.xplane.rows import split_op

    assert split_op("jit(f)/vmap(a/b)/mul") == ("mul", "jit(f)/vmap(a/b)")
    assert split_op("model/dense/MatMul:MatMul") == ("MatMul", "model/dense")
    assert split_op("dot_general#hlo_op=dot.1#") == ("dot_general", None)
