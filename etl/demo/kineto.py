"""SYNTHETIC demo runs for `etl demo`: PyTorch profiler (Kineto) traces of a small ResNet.

Nothing here was measured. Every trace is generated from `random.Random(seed)` so that the
ingest path can be exercised end to end on a machine with no GPU; the run.toml files say
`synthetic = true`, the GPU is named "synthetic-A100" and the numbers are not results.

What the three runs exercise:
- Kineto JSON as PyTorch 2.x writes it: `ts`/`dur` in microseconds with exactly three
  decimals (integer nanoseconds underneath), relative to `baseTimeNanoseconds`; host events
  (cpu_op, python_function "nn.Module: ...", user_annotation, cuda_runtime) linked to GPU
  activities (kernel, gpu_memcpy, gpu_memset) by `correlation`, and to ops by `External id`;
  CUPTI's synchronization records (cuda_sync: the stream a cudaStreamSynchronize waits for,
  the event record a cudaStreamWaitEvent waits for), as with enable_cuda_sync_events, so
  that `etl whatif` can follow the waits.
- Iterations: five `ProfilerStep#N` spans on the main thread. The first is a slow warm-up;
  in the others kernels keep the GPU busy ~86-93% of the step (the generator sizes the
  data-loading gap at the start of each step to hit a target, see `STEADY_BUSY_TARGETS`).
- fp32 vs amp: amp GEMM/conv kernels take ~0.6x as long and carry tensor-core names.
- DDP: two ranks (one gzipped file, one plain), `distributedInfo`, an NCCL all-reduce per
  step on a second stream overlapping the backward pass (its record_param_comms op says
  what it carried: a 25 MiB fp32 bucket; each rank's steps are drawn on their own, so the
  ranks' all-reduces do not end together and the views do not pair their waits), and two
  files the ingest must skip (`train.log`, `config.json`).
- resnet_amp_nsys: the run as Nsight Systems and two GPU monitors see it (etl/demo/nsys.py):
  an nsys SQLite export on the wall clock, nvidia-smi in local time (run.toml timezone) and
  DCGM exporter scrapes, so that instrument_comparison shows "~100% busy, tensor cores
  active ~3%".
- TensorFlow-format runs (etl/demo/xplane.py): XSpace profiles of a BERT-like model, eager
  and XLA, at batch sizes 8-64, for `batch_scaling`.
"""
from __future__ import annotations

import gzip
import json
import random
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple


ITERATIONS = 5
# The step the ncu exports profile: the one run_summary selects (the first steady step), so
# that run_summary and the ncu levels describe the same step; run.toml says so too.
NCU_STEP = 2
# PyTorch >= 2.1 writes ts relative to this epoch-aligned base; any value works for the demo.
BASE_TIME_NS = 1_712_188_800_000_000_000  # 2024-04-04T00:00:00Z
# One process per rank, each seeing one GPU (e.g. one node per rank): every rank's host
# events are on pid 100 / main thread 100 and its GPU is device 0; distributedInfo tells
# the ranks apart.
HOST_PID = 100
DEVICE = 0
COMPUTE_STREAM = 7
NCCL_STREAM = 20
GPU_NAME = "synthetic-A100"
# CUPTI callback ids of the runtime calls used, as real traces report them.
CBID = {"cudaLaunchKernel": 211, "cudaMemcpyAsync": 41, "cudaMemsetAsync": 51,
        "cudaStreamSynchronize": 131, "cudaStreamWaitEvent": 147, "cudaEventRecord": 135}
A100_PROPERTIES: dict[str, Any] = {
    "name": GPU_NAME, "totalGlobalMem": 85899345920, "computeMajor": 8, "computeMinor": 0,
    "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048, "regsPerBlock": 65536,
    "regsPerMultiprocessor": 65536, "warpSize": 32, "sharedMemPerBlock": 49152,
    "sharedMemPerMultiprocessor": 167936, "numSms": 108, "sharedMemPerBlockOptin": 166912}
# Share of each ProfilerStep during which at least one kernel runs (level 1 of the paper,
# the warehouse's gpu_util). Counting memcpy/memset too adds about one point.
WARMUP_BUSY_TARGET = 0.60
STEADY_BUSY_TARGETS = {"resnet_fp32_eager": 0.92, "resnet_amp_eager": 0.89,
                       "resnet_amp_ddp": 0.87}
STEADY_BUSY_JITTER = 0.01
MIN_DATA_LOADING_NS = 150_000
# Relative size of each stage of the model: scales its kernels' durations.
STEM_SCALE = 0.6
BLOCK_SCALES = (1.1, 1.0, 0.9, 0.85)  # layer1 .. layer4
IMAGE_BYTES = 64 * 3 * 32 * 32 * 4    # batch 64 of 32x32 RGB float32
LABEL_BYTES = 64 * 8
LOGIT_BYTES = 64 * 1000 * 4


class KernelSpec(NamedTuple):
    fp32_us: float      # steady-state duration at scale 1.0
    amp_factor: float   # amp duration / fp32 duration
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    registers: int
    shared_memory: int
    name: str
    amp_name: str = ""  # empty: the same kernel runs under amp

    def name_for(self, precision: str) -> str:
        return self.amp_name if precision == "amp" and self.amp_name else self.name


def _xmma(kind: str) -> str:
    """A cuDNN tensor-core (fp16 in, fp32 accumulate) convolution kernel of sm80."""
    return (f"sm80_xmma_{kind}_implicit_gemm_f16f16_f16f32_f32_nhwckrsc_nhwc_tilesize128x128x32"
            "_stage4_warpsize2x2x1_g1_tensor16x8x16_kernel")


_NS = "at::native::(anonymous namespace)::"
_ELEMENTWISE = ("void at::native::vectorized_elementwise_kernel<4, {}, "
                "at::detail::Array<char*, {}> >")
_FOREACH = ("void " + _NS + "multi_tensor_apply_kernel<" + _NS + "TensorListMetadata<{}>, "
            + _NS + "{}>")
_BN_FWD = ("void cudnn::bn_fw_tr_1C11_singleread<{0}, 512, true, 1, 2, 0>"
           "(cudnn::bn_fw_tr_1C11_args<{0}>)")
_BN_BWD = "void cudnn::bn_bw_1C11_singleread<{0}, 512, true, 1, 2, 0>(cudnn::bn_bw_1C11_args<{0}>)"
_RELU = (_NS + "launch_clamp_scalar(at::TensorIteratorBase&, c10::Scalar, c10::Scalar, "
         "at::native::detail::ClampLimits)::{{lambda()#1}}::operator()() const::{{lambda()#7}}"
         "::operator()() const::{{lambda({})#1}}")
_RELU_BWD = (_NS + "threshold_kernel_impl<{0}>(at::TensorIteratorBase&, {0}, {0})"
             "::{{lambda({0}, {0})#1}}")
_CAST = ("at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}"
         "::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}")
_SGD_ADD = _FOREACH.format(2, "BinaryOpListAlphaFunctor<float, 2, 2, 0>, std::plus<float>, float")

KERNELS: dict[str, KernelSpec] = {
    "conv_fprop": KernelSpec(700, 0.6, (196, 2, 1), (256, 1, 1), 128, 24576,
                             "ampere_scudnn_128x64_relu_interior_nn_v1", _xmma("fprop")),
    "conv_dgrad": KernelSpec(700, 0.6, (98, 4, 1), (512, 1, 1), 64, 12288,
                             "void cudnn::detail::dgrad_engine<float, 512, 6, 5, 3, 3, 3, false>"
                             "(int, int, int, float const*, int, float const*, int, float*, "
                             "kernel_grad_params, unsigned long long, int, unsigned long long, "
                             "int, float, int, int, int)", _xmma("dgrad")),
    "conv_wgrad": KernelSpec(840, 0.6, (16, 8, 4), (256, 1, 1), 168, 33792,
                             "ampere_scudnn_128x128_stridedB_splitK_medium_nn_v1", _xmma("wgrad")),
    "bn_fwd": KernelSpec(140, 0.85, (64, 16, 1), (512, 1, 1), 40, 4096,
                         _BN_FWD.format("float"), _BN_FWD.format("__half")),
    "bn_bwd": KernelSpec(230, 0.85, (64, 16, 1), (512, 1, 1), 56, 8192,
                         _BN_BWD.format("float"), _BN_BWD.format("__half")),
    "relu": KernelSpec(70, 0.85, (6272, 1, 1), (128, 1, 1), 24, 0,
                       _ELEMENTWISE.format(_RELU.format("float"), 2),
                       _ELEMENTWISE.format(_RELU.format("c10::Half"), 2)),
    "relu_bwd": KernelSpec(95, 0.85, (6272, 1, 1), (128, 1, 1), 26, 0,
                           _ELEMENTWISE.format(_RELU_BWD.format("float"), 3),
                           _ELEMENTWISE.format(_RELU_BWD.format("c10::Half"), 3)),
    "gemm_fwd": KernelSpec(60, 0.6, (16, 1, 1), (128, 1, 1), 86, 16384,
                           "ampere_sgemm_64x32_sliced1x4_tn",
                           "ampere_fp16_s16816gemm_fp16_64x64_sliced1x2_ldg8_f2f_tn"),
    "gemm_bwd": KernelSpec(60, 0.6, (8, 16, 1), (128, 1, 1), 122, 32768,
                           "ampere_sgemm_128x64_nn",
                           "ampere_fp16_s16816gemm_fp16_128x64_ldg8_f2f_stages_64x4_nn"),
    # the loss runs in fp32 under autocast, so its kernels are the same in both precisions
    "log_softmax": KernelSpec(12, 1.0, (64, 1, 1), (1024, 1, 1), 38, 128,
                              "void (anonymous namespace)::cunn_SoftMaxForward<4, float, float, "
                              "float, (anonymous namespace)::LogSoftMaxForwardEpilogue>"
                              "(float*, float const*, int)"),
    "log_softmax_bwd": KernelSpec(14, 1.0, (64, 1, 1), (1024, 1, 1), 40, 128,
                                  "void (anonymous namespace)::cunn_SoftMaxBackward<4, float, "
                                  "float, float, (anonymous namespace)::LogSoftMaxBackwardEpilogue>"
                                  "(float*, float const*, float const*, long)"),
    "nll": KernelSpec(8, 1.0, (1, 1, 1), (32, 1, 1), 30, 2048,
                      "void " + _NS + "nll_loss_forward_reduce_cuda_kernel_2d<float, float, long>"
                      "(float*, float*, float const*, long const*, float const*, bool, long, "
                      "long, long, long)"),
    "nll_bwd": KernelSpec(6, 1.0, (1, 1, 1), (32, 1, 1), 24, 0,
                          "void " + _NS + "nll_loss_backward_reduce_cuda_kernel_2d<float, long>"
                          "(float*, float const*, long const*, float const*, float const*, bool, "
                          "int, int, long, long)"),
    # the optimizer updates fp32 master weights in both precisions
    "sgd_momentum": KernelSpec(260, 1.0, (320, 1, 1), (512, 1, 1), 32, 0, _SGD_ADD),
    "sgd_update": KernelSpec(240, 1.0, (320, 1, 1), (512, 1, 1), 32, 0, _SGD_ADD),
    "amp_cast": KernelSpec(18, 1.0, (288, 1, 1), (128, 1, 1), 30, 0,
                           _ELEMENTWISE.format(_CAST, 2)),
    "amp_unscale": KernelSpec(45, 1.0, (320, 1, 1), (512, 1, 1), 30, 0,
                              _FOREACH.format(1, "UnscaleFunctor<float, float>, float*, float*")),
    "all_reduce": KernelSpec(1150, 1.0, (2, 1, 1), (512, 1, 1), 96, 0,
                             "ncclKernel_AllReduce_RING_LL_Sum_float"
                             "(ncclDevComm*, unsigned long, ncclWork*)"),
}


@dataclass(frozen=True)
class RunSpec:
    name: str
    precision: str  # "fp32" or "amp"
    world_size: int
    gzipped_ranks: tuple[int, ...] = ()


DEMO_RUNS = (RunSpec("resnet_fp32_eager", "fp32", 1),
             RunSpec("resnet_amp_eager", "amp", 1),
             RunSpec("resnet_amp_ddp", "amp", 2, gzipped_ranks=(0,)))


def write_trace(folder: Path, run: RunSpec, rank: int, seed: int) -> None:
    # a string seed is hashed deterministically (not with PYTHONHASHSEED)
    rng = random.Random(f"{seed}:{run.name}:{rank}")
    start_ns = 3_600_000_000_000 + rng.randrange(1_000_000_000)  # ~1 h after BASE_TIME_NS
    trace = _Trace(rng, run.precision, run.world_size, host_ns=start_ns, rank=rank)
    profiler_start = trace.host_ns
    trace.advance_host(150, 300)
    for step in range(1, ITERATIONS + 1):
        _write_step(trace, step, _busy_target(run, step, rng))
    text = _trace_text(trace, run, rank, profiler_start)
    data = text.encode("utf-8")
    name = f"rank{rank}.pt.trace.json"
    if rank in run.gzipped_ranks:
        # mtime=0 keeps the bytes, and so the warehouse's run_id, identical across runs
        (folder / f"{name}.gz").write_bytes(gzip.compress(data, mtime=0))
    else:
        (folder / name).write_bytes(data)


def _busy_target(run: RunSpec, step: int, rng: random.Random) -> float:
    if step == 1:
        return WARMUP_BUSY_TARGET
    return STEADY_BUSY_TARGETS[run.name] + rng.uniform(-STEADY_BUSY_JITTER, STEADY_BUSY_JITTER)


@dataclass
class _Trace:
    """One rank's trace being generated: a host clock, per-stream GPU queues, id counters."""

    rng: random.Random
    precision: str
    world_size: int
    host_ns: int
    rank: int = 0
    events: list[dict[str, Any]] = field(default_factory=list)
    stream_free_ns: dict[int, int] = field(default_factory=dict)
    next_correlation: int = 1000
    next_external_id: int = 1
    next_python_id: int = 1
    open_ops: list[int] = field(default_factory=list)      # External ids, innermost last
    open_modules: list[int] = field(default_factory=list)  # Python ids, innermost last
    module_counts: dict[str, int] = field(default_factory=dict)
    host_slowdown: float = 1.0
    conv_slowdown: float = 1.0

    def advance_host(self, low_us: float, high_us: float) -> None:
        """Spend a random amount of CPU time; warm-up steps are slower."""
        self.host_ns += round(self.rng.uniform(low_us, high_us) * 1000 * self.host_slowdown)

    def new_external_id(self) -> int:
        self.next_external_id += 1
        return self.next_external_id - 1

    def new_correlation(self) -> int:
        self.next_correlation += 1
        return self.next_correlation - 1

    def add(self, cat: str, name: str, pid: int, tid: int, start_ns: int, dur_ns: int,
            args: dict[str, Any]) -> None:
        self.events.append({"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid,
                            "ts": start_ns, "dur": dur_ns, "args": args})

    def add_host(self, cat: str, name: str, start_ns: int, args: dict[str, Any]) -> None:
        """A main-thread event from start_ns until now."""
        self.add(cat, name, HOST_PID, HOST_PID, start_ns, self.host_ns - start_ns, args)

    @contextmanager
    def op(self, name: str, cat: str = "cpu_op", args: dict[str, Any] | None = None
           ) -> Iterator[None]:
        """A host op (or record_function annotation) enclosing whatever runs inside it."""
        start, external_id = self.host_ns, self.new_external_id()
        self.open_ops.append(external_id)
        self.advance_host(2, 6)
        yield
        self.advance_host(1, 3)
        self.open_ops.pop()
        self.add_host(cat, name, start, {"External id": external_id, **(args or {})})

    @contextmanager
    def ops(self, *names: str) -> Iterator[None]:
        """Nested cpu_ops, outermost first: aten::conv2d > aten::convolution > ..."""
        with ExitStack() as stack:
            for name in names:
                stack.enter_context(self.op(name))
            yield

    @contextmanager
    def module(self, class_name: str) -> Iterator[None]:
        """A forward nn.Module call; names count per class (Conv2d_0, Conv2d_1, ...)."""
        index = self.module_counts.get(class_name, 0)
        self.module_counts[class_name] = index + 1
        start, python_id = self.host_ns, self.next_python_id
        self.next_python_id += 1
        args = {"Python parent id": self.open_modules[-1]} if self.open_modules else {}
        args |= {"Python id": python_id, "Python module id": index}
        self.open_modules.append(python_id)
        self.advance_host(8, 15)
        yield
        self.advance_host(2, 4)
        self.open_modules.pop()
        self.add_host("python_function", f"nn.Module: {class_name}_{index}", start, args)

    def runtime_call(self, api: str, low_us: float = 4, high_us: float = 8) -> tuple[int, int]:
        """A CUDA runtime call on the host; returns (start_ns, correlation)."""
        start, correlation = self.host_ns, self.new_correlation()
        self.advance_host(low_us, high_us)
        self.add_host("cuda_runtime", api, start, {"External id": self.open_ops[-1],
                                                   "cbid": CBID[api], "correlation": correlation})
        return start, correlation

    def enqueue(self, api: str, cat: str, name: str, dur_ns: int, stream: int,
                extra_args: dict[str, Any]) -> int:
        """Launch one GPU activity: it runs after the stream's earlier work; returns its end."""
        launch_ns, correlation = self.runtime_call(api)
        # a launch takes a few microseconds to reach an idle GPU
        gpu_start = max(launch_ns + round(self.rng.uniform(3, 7) * 1000),
                        self.stream_free_ns.get(stream, 0))
        self.stream_free_ns[stream] = gpu_start + dur_ns
        args = {"External id": self.open_ops[-1], "device": DEVICE, "context": 1,
                "stream": stream, "correlation": correlation, **extra_args}
        self.add(cat, name, DEVICE, stream, gpu_start, dur_ns, args)
        return gpu_start + dur_ns

    def launch(self, kind: str, scale: float = 1.0, stream: int = COMPUTE_STREAM) -> None:
        spec = KERNELS[kind]
        amp = self.precision == "amp"
        slowdown = self.conv_slowdown if kind.startswith("conv") else 1.0
        us = spec.fp32_us * scale * (spec.amp_factor if amp else 1.0) * slowdown
        dur_ns = max(1000, round(us * 1000 * self.rng.gauss(1.0, 0.03)))
        self.enqueue("cudaLaunchKernel", "kernel", spec.name_for(self.precision), dur_ns, stream,
                     _kernel_args(spec))

    def memcpy(self, name: str, num_bytes: int, bytes_per_ns: float,
               blocking: bool = True) -> None:
        """A copy. From pageable host memory CUDA runs it synchronously: the call returns
        only once the copy is done (blocking); loss.item()'s copy returns at once and a
        synchronize waits for it."""
        dur_ns = round(1200 + num_bytes / bytes_per_ns * self.rng.gauss(1.0, 0.03))
        args = {"bytes": num_bytes, "memory bandwidth (GB/s)": round(num_bytes / dur_ns, 6)}
        call = len(self.events)  # enqueue records the call, then the copy
        gpu_end = self.enqueue("cudaMemcpyAsync", "gpu_memcpy", name, dur_ns, COMPUTE_STREAM, args)
        if blocking:
            self.host_ns = max(self.host_ns, gpu_end + round(self.rng.uniform(1, 3) * 1000))
            self.events[call]["dur"] = self.host_ns - self.events[call]["ts"]

    def memset(self, num_bytes: int) -> None:
        dur_ns = round(1500 + num_bytes / 800 * self.rng.gauss(1.0, 0.03))
        args = {"bytes": num_bytes, "memory bandwidth (GB/s)": round(num_bytes / dur_ns, 6)}
        self.enqueue("cudaMemsetAsync", "gpu_memset", "Memset (Device)", dur_ns, COMPUTE_STREAM,
                     args)

    def wait_stream(self, waiting: int, on: int) -> None:
        """cudaEventRecord on `on`, then cudaStreamWaitEvent: later work on `waiting` starts
        after `on`'s queued work (CUPTI's record of the wait names both)."""
        _, record = self.runtime_call("cudaEventRecord", 1, 3)
        start, correlation = self.runtime_call("cudaStreamWaitEvent", 1, 3)
        self.add("cuda_sync", "Stream Wait Event", DEVICE, waiting, start + 500, 1000,
                 {"External id": self.open_ops[-1], "cuda_sync_kind": "Stream Wait Event",
                  "wait_on_stream": on, "wait_on_cuda_event_record_corr_id": record,
                  "wait_on_cuda_event_id": 1, "stream": waiting, "correlation": correlation,
                  "device": DEVICE, "context": 1})
        self.stream_free_ns[waiting] = max(self.stream_free_ns.get(waiting, 0),
                                           self.stream_free_ns.get(on, 0))

    def synchronize(self) -> None:
        """cudaStreamSynchronize on the compute stream: the host blocks until the GPU has
        drained it (the DDP runs' all-reduce stream has been waited for by then). CUPTI's
        synchronization record (cuda_sync, as PyTorch writes it with enable_cuda_sync_events)
        says which stream."""
        start, correlation = self.runtime_call("cudaStreamSynchronize", 1, 2)
        call = self.events[-1]
        drained = max(self.stream_free_ns.values(), default=start)
        wait_start = start + 1000
        self.host_ns = max(self.host_ns, drained + round(self.rng.uniform(1, 3) * 1000))
        call["dur"] = self.host_ns - start  # the call just recorded lasts until then
        self.add("cuda_sync", "Stream Sync", DEVICE, COMPUTE_STREAM, wait_start,
                 max(0, self.host_ns - 500 - wait_start),
                 {"External id": call["args"]["External id"], "cuda_sync_kind": "Stream Sync",
                  "stream": COMPUTE_STREAM, "correlation": correlation, "device": DEVICE,
                  "context": 1})


def _kernel_args(spec: KernelSpec) -> dict[str, Any]:
    return {"queued": 0, "registers per thread": spec.registers,
            "shared memory": spec.shared_memory, "grid": list(spec.grid),
            "block": list(spec.block)}


# ---- one training step ---------------------------------------------------------------------

def _write_step(trace: _Trace, step: int, busy_target: float) -> None:
    """ProfilerStep#N: data loading, then the GPU work; the loading time sets the GPU busy share.

    The body (copy, forward, backward, optimizer, loss.item()) is generated first, then
    shifted later by the data-loading time that makes busy / step length = busy_target.
    """
    warm_up = step == 1
    # first step: lazy CUDA/cuDNN initialisation on the host, cudnn.benchmark trying algorithms
    trace.host_slowdown, trace.conv_slowdown = (3.0, 1.8) if warm_up else (1.0, 1.0)
    step_start, step_id = trace.host_ns, trace.new_external_id()
    loader_id = trace.new_external_id()
    trace.open_ops.append(step_id)
    trace.advance_host(5, 10)
    loading_start, first_body_event = trace.host_ns, len(trace.events)
    # the previous step ended in a synchronize, so every stream is idle here
    trace.stream_free_ns = {COMPUTE_STREAM: loading_start}
    trace.advance_host(2, 5)  # the training loop's own Python between next(loader) and the body
    _step_body(trace)
    trace.advance_host(3, 8)
    body_events = trace.events[first_body_event:]
    loading_ns = max(MIN_DATA_LOADING_NS, round(_kernel_busy_ns(body_events) / busy_target)
                     - (trace.host_ns - step_start))
    for event in body_events:
        event["ts"] += loading_ns
    trace.host_ns += loading_ns
    trace.add("user_annotation", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
              HOST_PID, HOST_PID, loading_start, loading_ns, {"External id": loader_id})
    trace.open_ops.pop()
    trace.add_host("cpu_op", f"ProfilerStep#{step}", step_start, {"External id": step_id})


def _kernel_busy_ns(events: list[dict[str, Any]]) -> int:
    """Time covered by at least one kernel (streams may overlap)."""
    intervals = sorted((e["ts"], e["ts"] + e["dur"]) for e in events if e["cat"] == "kernel")
    busy, covered_until = 0, 0
    for start, end in intervals:
        if end > covered_until:
            busy += end - max(start, covered_until)
            covered_until = end
    return busy


def _step_body(trace: _Trace) -> None:
    with trace.op("Optimizer.zero_grad#SGD.zero_grad", cat="user_annotation"):
        pass  # set_to_none: host work only
    for num_bytes in (IMAGE_BYTES, LABEL_BYTES):
        with trace.ops("aten::to", "aten::_to_copy", "aten::copy_"):
            trace.memcpy("Memcpy HtoD (Pageable -> Device)", num_bytes, bytes_per_ns=6.5)
    _forward(trace)
    _backward(trace)
    if trace.world_size > 1:
        # DDP's finalize: the optimizer must see the all-reduced gradients
        trace.wait_stream(COMPUTE_STREAM, on=NCCL_STREAM)
    _optimizer_step(trace)
    with trace.ops("aten::item", "aten::_local_scalar_dense"):
        trace.memcpy("Memcpy DtoH (Device -> Pageable)", 4, bytes_per_ns=0.5, blocking=False)
        trace.synchronize()


def _forward(trace: _Trace) -> None:
    trace.module_counts.clear()  # module names restart every forward pass, as in real traces
    with trace.module("ResNet"):
        _conv_bn_relu(trace, STEM_SCALE)
        for scale in BLOCK_SCALES:
            with trace.module("Sequential"), trace.module("Bottleneck"):
                _conv_bn_relu(trace, scale)
        with trace.module("Linear"):
            _autocast_weight(trace)
            with trace.ops("aten::linear", "aten::addmm"):
                trace.launch("gemm_fwd")
    with trace.module("CrossEntropyLoss"), trace.op("aten::cross_entropy_loss"):
        with trace.ops("aten::log_softmax", "aten::_log_softmax"):
            trace.launch("log_softmax")
        with trace.ops("aten::nll_loss_nd", "aten::nll_loss", "aten::nll_loss_forward"):
            trace.launch("nll")


def _autocast_weight(trace: _Trace) -> None:
    """Under autocast every conv/linear first casts its fp32 weight to fp16."""
    if trace.precision == "amp":
        with trace.ops("aten::to", "aten::_to_copy", "aten::copy_"):
            trace.launch("amp_cast")


def _conv_bn_relu(trace: _Trace, scale: float) -> None:
    with trace.module("Conv2d"):
        _autocast_weight(trace)
        with trace.ops("aten::conv2d", "aten::convolution", "aten::cudnn_convolution"):
            trace.launch("conv_fprop", scale)
    with trace.module("BatchNorm2d"), trace.ops("aten::batch_norm", "aten::cudnn_batch_norm"):
        trace.launch("bn_fwd", scale)
    with trace.module("ReLU"), trace.ops("aten::relu_", "aten::clamp_min_"):
        trace.launch("relu", scale)


@contextmanager
def _grad_fn(trace: _Trace, node: str, aten_op: str) -> Iterator[None]:
    """An autograd node as the engine records it, around the aten op doing the work."""
    with trace.ops(f"autograd::engine::evaluate_function: {node}", node, aten_op):
        yield


def _backward(trace: _Trace) -> None:
    with _grad_fn(trace, "NllLossBackward0", "aten::nll_loss_backward"):
        with trace.ops("aten::zero_", "aten::fill_"):
            trace.memset(LOGIT_BYTES)
        trace.launch("nll_bwd")
    with _grad_fn(trace, "LogSoftmaxBackward0", "aten::_log_softmax_backward_data"):
        trace.launch("log_softmax_bwd")
    with _grad_fn(trace, "AddmmBackward0", "aten::mm"):
        trace.launch("gemm_bwd")  # grad of the input
        trace.launch("gemm_bwd")  # grad of the weight
    for layer in (4, 3, 2, 1):
        _conv_bn_relu_backward(trace, BLOCK_SCALES[layer - 1], input_grad=True)
        if layer == 3 and trace.world_size > 1:
            _all_reduce(trace)  # the first DDP bucket (fc, layer4, layer3) is ready here
    # the stem's input is the image batch: no gradient to compute for it
    _conv_bn_relu_backward(trace, STEM_SCALE, input_grad=False)


def _conv_bn_relu_backward(trace: _Trace, scale: float, input_grad: bool) -> None:
    with _grad_fn(trace, "ReluBackward0", "aten::threshold_backward"):
        trace.launch("relu_bwd", scale)
    with _grad_fn(trace, "CudnnBatchNormBackward0", "aten::cudnn_batch_norm_backward"):
        trace.launch("bn_bwd", scale)
    with _grad_fn(trace, "ConvolutionBackward0", "aten::convolution_backward"):
        if input_grad:
            trace.launch("conv_dgrad", scale)
        trace.launch("conv_wgrad", scale)


# c10d's record_param_comms args as torch 2.5-2.11 writes them for DDP's gradient bucket
# all-reduce (no Seq before 2.12): 25 MiB buckets of fp32 gradients
BUCKET_ELEMENTS = 25 * 2**20 // 4


def _all_reduce(trace: _Trace) -> None:
    comms = {"Collective name": "allreduce", "dtype": "Float",
             "In msg nelems": BUCKET_ELEMENTS, "Out msg nelems": BUCKET_ELEMENTS,
             "In split size": "[]", "Out split size": "[]", "Global rank start": 0,
             "Global rank stride": 1, "Group size": trace.world_size,
             "Process Group Name": "0", "Process Group Description": "default_pg",
             "Process Group Ranks": str(list(range(trace.world_size))), "Rank": trace.rank}
    with trace.op("nccl:all_reduce", cat="user_annotation"), \
            trace.op("record_param_comms", args=comms):
        # NCCL's stream waits for the gradients already queued on the compute stream
        trace.wait_stream(NCCL_STREAM, on=COMPUTE_STREAM)
        trace.launch("all_reduce", stream=NCCL_STREAM)


def _optimizer_step(trace: _Trace) -> None:
    if trace.precision == "amp":
        with trace.op("aten::_amp_foreach_non_finite_check_and_unscale_"):  # GradScaler.unscale_
            trace.launch("amp_unscale")
    with trace.op("Optimizer.step#SGD.step", cat="user_annotation"):
        with trace.op("aten::_foreach_add_"):
            trace.launch("sgd_momentum")
        with trace.op("aten::_foreach_add_"):
            trace.launch("sgd_update")


# ---- serialisation -------------------------------------------------------------------------

def _trace_text(trace: _Trace, run: RunSpec, rank: int, profiler_start_ns: int) -> str:
    """The trace file's text; written by hand so ts/dur keep exactly three decimals."""
    header: dict[str, Any] = {"schemaVersion": 1,
                              "deviceProperties": [{"id": DEVICE, **A100_PROPERTIES}]}
    if run.world_size > 1:
        header["distributedInfo"] = {"backend": "nccl", "rank": rank,
                                     "world_size": run.world_size}
    events = sorted(trace.events, key=lambda e: (e["ts"], -e["dur"]))
    events += _metadata_events(trace, run, profiler_start_ns)
    footer = {"traceName": f"/tmp/synthetic_demo/{run.name}/rank{rank}.pt.trace.json",
              "displayTimeUnit": "ms", "baseTimeNanoseconds": BASE_TIME_NS}
    members = [f"{_json(key)}: {_json(value)}" for key, value in header.items()]
    members.append('"traceEvents": [\n' + ",\n".join(map(_event_text, events)) + "\n]")
    members += [f"{_json(key)}: {_json(value)}" for key, value in footer.items()]
    return "{\n" + ",\n".join(members) + "\n}\n"


def _event_text(event: dict[str, Any]) -> str:
    fields = (f"{_json(key)}:{_micros(value) if key in ('ts', 'dur') else _json(value)}"
              for key, value in event.items())
    return "{" + ",".join(fields) + "}"


def _json(value: Any) -> str:
    # compact separators keep each five-step trace under 300 KB
    return json.dumps(value, separators=(",", ":"))


def _micros(ns: int) -> str:
    """Integer nanoseconds as Kineto prints microseconds: always three decimals."""
    return f"{ns // 1000}.{ns % 1000:03d}"


def _metadata_events(trace: _Trace, run: RunSpec, profiler_start_ns: int) -> list[dict[str, Any]]:
    """Process/thread names and the profiler's own span, as Kineto appends them."""
    streams = (COMPUTE_STREAM, NCCL_STREAM) if run.world_size > 1 else (COMPUTE_STREAM,)
    named = [(HOST_PID, 0, "process_name", {"name": "python"}),
             (HOST_PID, 0, "process_labels", {"labels": "CPU"}),
             (HOST_PID, HOST_PID, "thread_name", {"name": f"thread {HOST_PID} (python)"}),
             (DEVICE, 0, "process_name", {"name": "python"}),
             (DEVICE, 0, "process_labels", {"labels": f"GPU {DEVICE}"})]
    named += [(DEVICE, stream, "thread_name", {"name": f"stream {stream} "})
              for stream in streams]
    events: list[dict[str, Any]] = [
        {"name": name, "ph": "M", "ts": profiler_start_ns, "pid": pid, "tid": tid, "args": args}
        for pid, tid, name, args in named]
    end_ns = trace.host_ns + 200_000
    events.append({"ph": "X", "cat": "Trace", "ts": profiler_start_ns,
                   "dur": end_ns - profiler_start_ns, "pid": "Spans", "tid": "PyTorch Profiler",
                   "name": "PyTorch Profiler (0)", "args": {"Op count": 0}})
    return events
