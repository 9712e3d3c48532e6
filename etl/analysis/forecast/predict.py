"""Every GPU activity's time on a target GPU, and the method that gave it (the ladder).

Per activity, the best evidence it has, in this order:
- communication_kept: a communication kernel keeps its measured time (with --ranks,
  etl/analysis/scale_out.py then times each collective for the target's ranks and links);
- transfer_kept: a copy between host and device (HtoD, DtoH) or between devices (PtoP)
  keeps its measured time: it runs at the link's speed, which the catalog does not hold;
- bandwidth: a device copy or set, and a kernel named as one (kernel_type memory): its
  time × the model's ratio for bandwidth-bound work (bandwidth and the elementwise curve's
  γ of each GPU);
- ncu: a kernel matched to an Nsight Compute result with FLOP and DRAM counters: its
  achieved fraction of its roofline on the source carried to the target's roofline, with
  the waves of its launch geometry and occupancy on each GPU (ncu.py);
- shape: a kernel whose launching op has shapes (inputs.py): its time × the model's ratio
  for the op's FLOPs, bytes, precision and family (model.py);
- wave_scaled: any other kernel (Habitat's form): its time × the model's ratio for its
  class from its name (GEMM-like: compute-bound at its precision, with the tile of its
  name; else bandwidth-bound), with the waves of its grid.
`predict` is the reusable entry: a graph's activities, their inputs and GPUs in, the
predicted durations with their methods out (the many-GPU forecast builds on it).
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from etl.analysis.forecast import model
from etl.analysis.forecast.inputs import ActivityInputs
from etl.core.gpus import Gpu
from etl.core.op_cost import OpCost
from etl.replay.inputs import NONE, Columns

METHODS = ("ncu", "shape", "wave_scaled", "bandwidth", "communication_kept", "transfer_kept")
ELEMENT_BYTES = {"fp64": 8, "fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp8": 1}
HOST_LINKS = frozenset({"HtoD", "DtoH", "PtoP"})
_MATRIX = re.compile(r"(?i)gemm|conv|cutlass|xmma|wgmma|hmma|matmul|flash|fmha|attention|"
                     r"implicit|winograd|dgrad|wgrad|fprop|_mma")
_TILE = re.compile(r"(?:gemm_|tilesize|_)(\d{2,3})x(\d{2,3})")
_PRECISION = (("fp8", re.compile(r"(?i)e4m3|e5m2|fp8")),
              ("bf16", re.compile(r"(?i)bf16|bfloat16")),
              ("fp16", re.compile(r"(?i)f16|fp16|half|h884|h1688|h16816|hgemm|s1688gemm_fp16")),
              ("tf32", re.compile(r"(?i)tf32")),
              ("fp64", re.compile(r"(?i)dgemm|fp64|f64|double")),
              ("fp32", re.compile(r"(?i)sgemm|f32f32|fp32")))


@dataclass(frozen=True)
class Options:
    run_precision: str | None = None    # runs.precision as a peak precision (amp → fp16)
    fallback: tuple[tuple[str, str], ...] = ()   # (precision the target lacks, stand-in)

    @property
    def tf32(self) -> bool:
        return self.run_precision == "tf32"


@dataclass
class Predicted:
    measured_ns: np.ndarray     # per activity
    predicted_ns: np.ndarray
    method: np.ndarray          # one of METHODS per activity
    notes: list[str] = field(default_factory=list)

    @property
    def factor(self) -> np.ndarray:
        """predicted / measured (1 where measured is 0)."""
        out = np.ones(len(self.measured_ns))
        nonzero = self.measured_ns > 0
        out[nonzero] = self.predicted_ns[nonzero] / self.measured_ns[nonzero]
        return out

    def shares(self) -> dict[str, float]:
        """Each method's share of the predicted time."""
        total = float(self.predicted_ns.sum()) or 1.0
        return {m: float(self.predicted_ns[self.method == m].sum()) / total for m in METHODS}


def predict(gpu: Columns, inputs: ActivityInputs, sources: list[Gpu], target: Gpu,
            options: Options = Options(), ncu_factor: np.ndarray | None = None) -> Predicted:
    """Predicted durations of the activities `gpu` (graph.events.gpu), each on its source
    GPU (`sources`, per activity) moved to `target`. `ncu_factor`: per activity the ncu
    method's factor (NaN where it has none)."""
    measured = (gpu["end_ns"] - gpu["ts_ns"]).astype(np.float64) if len(gpu) else np.zeros(0)
    method = np.empty(len(gpu), object)
    factor = np.ones(len(gpu))
    names, name_index = _names(gpu)
    kinds = [_NameKind.of(n) for n in names]  # the regular expressions once per name
    for k in range(len(gpu)):
        m, f = _one(k, gpu, inputs, sources[k], target, options, kinds[name_index[k]],
                    None if ncu_factor is None else ncu_factor[k])
        method[k], factor[k] = m, f
    predicted = measured * factor
    return Predicted(measured, predicted, method, _notes(sources, target, method))


def _names(gpu: Columns) -> tuple[list[str], np.ndarray]:
    if not len(gpu):
        return [], np.zeros(0, np.int64)
    index, values = gpu.coded("name")
    return ["" if v is None else str(v) for v in values], index


@dataclass(frozen=True)
class _NameKind:
    """What a kernel's name says: GEMM-like or not, its precision, its tile."""

    matrix: bool
    precision: str | None
    tile: tuple[int, int]

    @staticmethod
    def of(name: str) -> _NameKind:
        return _NameKind(bool(_MATRIX.search(name)), _name_precision(name), _tile(name))


def _one(k: int, gpu: Columns, inputs: ActivityInputs, source: Gpu, target: Gpu,
         options: Options, name: _NameKind, ncu: float | None) -> tuple[str, float]:
    kind, ktype = gpu["kind"][k], gpu["kernel_type"][k]
    if kind != "kernel":
        if inputs.memory_kind[k] in HOST_LINKS:
            return "transfer_kept", 1.0
        return "bandwidth", _ratio(source, target, _copy_work(None), options)
    if ktype == "communication":
        return "communication_kept", 1.0
    blocks = int(inputs.blocks[k]) if inputs.blocks[k] != NONE else None
    if ktype == "memory":
        return "bandwidth", _ratio(source, target, _copy_work(blocks), options)
    if ncu is not None and not np.isnan(ncu):
        return "ncu", float(ncu)
    cost = inputs.cost[k]
    if cost is not None:
        return "shape", _ratio(source, target, shape_work(cost, name, blocks, options), options)
    return "wave_scaled", _ratio(source, target, name_work(name, blocks, options), options)


def _copy_work(blocks: int | None) -> model.Work:
    return model.Work("copy", False, "fp32", None, None, blocks)


def shape_work(cost: OpCost, name: str | _NameKind, blocks: int | None, options: Options
               ) -> model.Work:
    """The model's Work of a kernel costed by its op's shapes."""
    precision = cost.precision or options.run_precision or "fp32"
    if cost.matrix and precision == "fp32" and options.tf32:
        precision = "tf32"
    tile = (name if isinstance(name, _NameKind) else _NameKind.of(name)).tile
    size = ELEMENT_BYTES.get(precision, 4)
    return model.Work(cost.family or "elementwise", cost.matrix, precision, cost.flops,
                      cost.bytes, blocks if blocks is not None else estimated_blocks(cost, tile),
                      tile, size, cost.gemm)


def estimated_blocks(cost: OpCost, tile: tuple[int, int]) -> int | None:
    """Blocks of a kernel whose launch is not recorded: output tiles of a GEMM-like op,
    512 elements a block otherwise (PyTorch's vectorized elementwise kernel: 128 threads
    × 4 elements)."""
    if cost.gemm is not None:
        batch, m, n, _ = cost.gemm
        return batch * -(-m // tile[0]) * -(-n // tile[1])
    if cost.elements:
        return max(1, -(-cost.elements // 512))
    return None


def name_work(name: str | _NameKind, blocks: int | None, options: Options) -> model.Work:
    """The model's Work of a kernel known by its name and grid alone (wave_scaled)."""
    kind = name if isinstance(name, _NameKind) else _NameKind.of(name)
    matrix, precision = kind.matrix, kind.precision
    if precision is None:
        precision = (options.run_precision or "fp32") if matrix else "fp32"
    if matrix and precision == "fp32" and options.tf32:
        precision = "tf32"
    return model.Work("gemm" if matrix else "elementwise", matrix, precision, None, None,
                      blocks, kind.tile, ELEMENT_BYTES.get(precision, 4))


def _name_precision(name: str) -> str | None:
    return next((p for p, pattern in _PRECISION if pattern.search(name)), None)


def _tile(name: str) -> tuple[int, int]:
    match = _TILE.search(name)
    return (int(match[1]), int(match[2])) if match else model.DEFAULT_TILE


def _ratio(source: Gpu, target: Gpu, work: model.Work, options: Options) -> float:
    return _cached_ratio(source, target, work, options.fallback)


@lru_cache(maxsize=1 << 16)
def _cached_ratio(source: Gpu, target: Gpu, work: model.Work,
                  fallback: tuple[tuple[str, str], ...]) -> float:
    return model.ratio(source, target, work, dict(fallback))


def _notes(sources: list[Gpu], target: Gpu, method: np.ndarray) -> list[str]:
    """What the prediction rests on beyond its methods, in words."""
    out = []
    for gpu in sorted({g.key: g for g in sources + [target]}.values(), key=lambda g: g.key):
        if not model.gamma("gemm", gpu)[1]:
            out.append(f"{gpu.key} is not in the fitting data: its utilization curves are "
                       "the fitted GPUs' medians (out of distribution)")
        if gpu.sm_count is None:
            out.append(f"{gpu.key}: SM count {gpu.why_missing('sm_count')}: waves not "
                       "quantized on it")
    counts = Counter(method.tolist())
    if counts.get("communication_kept"):
        out.append(f"{counts['communication_kept']} communication kernels keep their "
                   "measured time (--ranks N times them for N GPUs and their links)")
    if counts.get("transfer_kept"):
        out.append(f"{counts['transfer_kept']} host/peer copies keep their measured time "
                   "(the link, not the GPU, sets it)")
    return out
