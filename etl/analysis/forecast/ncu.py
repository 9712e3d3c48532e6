"""The ncu method: a kernel's achieved fraction of its roofline on the source, measured by
Nsight Compute, carried to the target's roofline with the waves of its launch geometry
and occupancy on each GPU.

Counters (etl/extract/ncu/metrics.toml [roofline]) of the result matched to the kernel
(kernel_match, status matched): FLOPs of vector work per precision (FFMA 2, FADD and FMUL
1, ...), FLOPs of tensor work per precision, DRAM bytes read and written. On a GPU X:

    t_roof,X = max(Σ_p vector_p / vector peak_X(p) + Σ_p tensor_p / matrix peak_X(p),
                   dram_bytes / bandwidth_X)
    r_X      = blocks of the kernel resident per SM (occupancy from its threads, registers
               and shared memory; 1 where unknown)
    Q_X      = ceil(B / (SMs_X · r_X)) · SMs_X · r_X / B      (the last wave's idle slots)
    factor   = (t_roof,T · Q_T) / (t_roof,S · Q_S)

that is, the kernel keeps its achieved fraction t_roof / t of the roofline, and each GPU
pays for its partial last wave. Vector peaks: fp64 for fp64, fp32 for fp32 and fp16 (the
catalog has no vector half-precision rate); matrix peaks: the precision's (a precision the
target lacks is refused, or read as the stated fallback). A kernel without counters, or
whose counters count no work, takes the next method.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from etl.analysis.forecast import model
from etl.analysis.forecast.inputs import ActivityInputs
from etl.core.gpus import Gpu, blocks_per_sm
from etl.replay.inputs import NONE, Columns

if TYPE_CHECKING:
    import duckdb

MATCHED_SQL = """
SELECT m.source_id, m.kernel_id, x.metric_name, x.value
FROM kernel_match AS m
JOIN ncu_metrics AS x
  ON x.run_id = m.run_id AND x.ncu_source_id = m.ncu_source_id AND x.ncu_id = m.ncu_id
WHERE m.run_id = $run AND m.match_status = 'matched' AND x.value IS NOT NULL
  AND x.metric_name IN (SELECT unnest($names))
"""


@dataclass
class Counters:
    """Per activity (the order of the graph's GPU activities): FLOPs per (kind, precision),
    kind vector or tensor, and DRAM bytes its matched result counted; NaN where none."""

    flops: dict[tuple[str, str], np.ndarray]
    dram_bytes: np.ndarray

    @property
    def counted(self) -> np.ndarray:
        """Activities with a DRAM count or any FLOP count."""
        out = ~np.isnan(self.dram_bytes)
        for values in self.flops.values():
            out |= ~np.isnan(values)
        return out


def catalog() -> dict[str, Any]:
    from etl.extract.ncu.export import catalog as ncu_catalog

    return dict(ncu_catalog()["roofline"])


def read(con: duckdb.DuckDBPyConnection, run_id: str, gpu: Columns) -> Counters:
    """The roofline counters of every activity in `gpu` that a ncu result was matched to."""
    table = catalog()
    names = sorted({c for group in ("vector", "tensor") for per in table[group].values()
                    for c in per} | {c for alt in table["dram_bytes"] for c in alt})
    values: dict[tuple[int, int], dict[str, float]] = {}
    for source, kernel, metric, value in con.execute(
            MATCHED_SQL, {"run": run_id, "names": names}).fetchall():
        values.setdefault((int(source), int(kernel)), {})[metric] = float(value)
    keys = list(zip(gpu["source_id"].tolist(), gpu["kernel_id"].tolist())) if len(gpu) else []
    return _counters(table, [values.get(k) for k in keys])


def _counters(table: dict[str, Any], per_activity: list[dict[str, float] | None]) -> Counters:
    n = len(per_activity)
    flops: dict[tuple[str, str], np.ndarray] = {}
    for kind in ("vector", "tensor"):
        for precision, weights in table[kind].items():
            column = np.full(n, np.nan)
            for k, found in enumerate(per_activity):
                if found is not None and any(c in found for c in weights):
                    column[k] = sum(found.get(c, 0.0) * w for c, w in weights.items())
            flops[(kind, precision)] = column
    dram = np.full(n, np.nan)
    for k, found in enumerate(per_activity):
        dram[k] = _dram(table["dram_bytes"], found or {})
    return Counters(flops, dram)


def _dram(alternatives: list[list[str]], found: dict[str, float]) -> float:
    """The first alternative whose counters are all present, added up; NaN when none."""
    for alternative in alternatives:
        if all(c in found for c in alternative):
            return float(sum(found[c] for c in alternative))
    return float("nan")


def roofline_seconds(gpu: Gpu, flops: dict[tuple[str, str], float], dram: float,
                     fallback: dict[str, str] | None = None) -> float:
    """t_roof on a GPU (the module docstring)."""
    compute = 0.0
    for (kind, precision), count in flops.items():
        if count > 0:
            work = model.Work("counted", kind == "tensor",
                              precision if kind == "tensor" else _vector(precision))
            compute += count / model.peak(gpu, work, fallback)
    bw = gpu.bytes_per_s
    memory = dram / bw if bw and dram > 0 else 0.0
    return max(compute, memory)


def _vector(precision: str) -> str:
    return "fp64" if precision == "fp64" else "fp32"


def quantization(gpu: Gpu, blocks: int | None, threads: int | None, regs: int | None,
                 smem: int | None) -> float:
    """Q of the module docstring: 1 when the grid or the SM count is unknown."""
    if blocks is None or blocks <= 0 or gpu.sm_count is None:
        return 1.0
    resident = blocks_per_sm(gpu.limits, threads, regs, smem) or 1
    slots = gpu.sm_count * resident
    return math.ceil(blocks / slots) * slots / blocks


def factors(counters: Counters, acts: ActivityInputs, sources: list[Gpu], target: Gpu,
            fallback: dict[str, str] | None = None) -> np.ndarray:
    """Per activity the ncu method's factor (predicted / measured); NaN where it has none."""
    out = np.full(len(counters.dram_bytes), np.nan)
    for k in np.flatnonzero(counters.counted).tolist():
        flops = {key: float(v[k]) for key, v in counters.flops.items() if not np.isnan(v[k])}
        dram = 0.0 if np.isnan(counters.dram_bytes[k]) else float(counters.dram_bytes[k])
        before = roofline_seconds(sources[k], flops, dram, fallback)
        if before <= 0:
            continue
        launch = [None if v == NONE else int(v) for v in (
            acts.blocks[k], acts.threads[k], acts.registers[k], acts.smem[k])]
        out[k] = (roofline_seconds(target, flops, dram, fallback)
                  * quantization(target, *launch)) / (before * quantization(sources[k], *launch))
    return out


def kernel_counts(con: duckdb.DuckDBPyConnection, run_id: str, kernels: Columns
                  ) -> list[dict[str, Any]]:
    """kernel_costs rows (cost_source ncu) of the kernels whose matched result counted
    FLOPs or DRAM bytes."""
    counters = read(con, run_id, kernels)
    rows = []
    for k in np.flatnonzero(counters.counted).tolist():
        flops = {key: float(v[k]) for key, v in counters.flops.items() if not np.isnan(v[k])}
        total = sum(flops.values())
        top = max(flops, key=lambda key: flops[key]) if flops and total > 0 else None
        rows.append({
            "source_id": int(kernels["source_id"][k]), "kernel_id": int(kernels["kernel_id"][k]),
            "precision": None if top is None else top[1],
            "matrix": any(kind == "tensor" and v > 0 for (kind, _), v in flops.items()),
            "flops": total if flops else None,
            "bytes": None if np.isnan(counters.dram_bytes[k]) else float(counters.dram_bytes[k]),
            "cost_source": "ncu", "cost_note": _note(flops)})
    return rows


def _note(flops: dict[tuple[str, str], float]) -> str | None:
    caveats = catalog()["caveats"]
    notes = [caveats["tensor"]] if any(k == "tensor" and v > 0 for (k, _), v in flops.items()) \
        else []
    if flops.get(("vector", "fp16"), 0) > 0:
        notes.append(caveats["vector_fp16"])
    return "; ".join(notes) or None
