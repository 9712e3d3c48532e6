"""NeuSight's per-op measurements (../shared/corpus/neusight/scripts/asplos/data/dataset/
test/*.csv, commit 6945927, MIT) as rows the forecast model reads: one op, its shapes
written as a PyTorch trace would (Input Dims, Input type), its cost (etl/core/op_cost.py),
its launch geometry and tile, the GPU's catalog row, and the measured time.

What a row is (NeuSight's neusight/Dataset/collect.py): the op run 25 times under
torch.no_grad(), `Latency` the mean of the fastest 5 CUDA-event timings, in ms, around
the whole call (launch gap included); then one profiled run for the kernel name and grid.
All fp32 on CUDA cores (no TF32, no tensor cores). bmm is (B,M,N) @ (B,N,K) with N the
reduction; linear is nn.Linear(N, K) on a (B,M,N) input; vec ops are on (B,H) tensors.
"""
from __future__ import annotations

import csv
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from etl.analysis.forecast.model import DEFAULT_TILE, MATRIX_FAMILIES, Work  # noqa: E402
from etl.core.gpus import Gpu, trace_name_row  # noqa: E402
from etl.core.op_cost import op_cost  # noqa: E402

NEUSIGHT = ROOT.parent / "shared" / "corpus" / "neusight" / "scripts" / "asplos"
TEST = NEUSIGHT / "data" / "dataset" / "test"
FILES = ("bmm", "linear", "elem", "ln", "softmax")
# the paper's training GPUs (NeuSight §6: A100-40GB, P100, P4, T4, V100)
TRAINING = ("NVIDIA A100-PCIE-40GB", "Tesla P100-PCIE-16GB", "Tesla P4", "Tesla T4",
            "Tesla V100-PCIE-32GB")
BINARY = {"add", "div", "mul", "pow"}
UNARY = {"gelu", "relu", "tanh"}
TILE = re.compile(r"(?:sgemm_|tilesize)(\d+)x(\d+)")


@dataclass(frozen=True)
class OpRow:
    file: str
    op: str
    device: str
    gpu: Gpu
    shape: tuple[int, ...]
    work: Work
    kernel: str
    latency_s: float


def op_signature(file: str, op: str, dims: dict[str, int]) -> tuple[str, list, list[str]]:
    """(aten name, Input Dims, Input type) of a NeuSight op as PyTorch would record it."""
    f = "float"
    if file == "bmm":
        b, m, n, k = dims["B"], dims["M"], dims["N"], dims["K"]
        return "aten::bmm", [[b, m, n], [b, n, k]], [f, f]
    if file == "linear":
        b, m, n, k = dims["B"], dims["M"], dims["N"], dims["K"]
        return "aten::linear", [[b, m, n], [k, n], [k]], [f, f, f]
    b, h = dims["B"], dims["H"]
    if file == "ln":
        return "aten::layer_norm", [[b, h], [], [h], [h], [], []], [f, "ScalarList", f, f,
                                                                    "Scalar", "Scalar"]
    if file == "softmax":
        return "aten::softmax", [[b, h], [], []], [f, "Scalar", ""]
    name = op.rstrip("u")
    if op in BINARY:
        return f"aten::{name}", [[b, h], [b, h]], [f, f]
    if op.endswith("u") and name in BINARY:
        return f"aten::{name}", [[b, h], []], [f, "Scalar"]
    if op in UNARY:
        return f"aten::{op}", [[b, h]], [f]
    raise ValueError(f"unknown NeuSight op {op!r}")


def work_of(name: str, dims: list, types: list[str], blocks: int | None,
            kernel: str | None) -> Work:
    """The model's Work for an op (fp32 on CUDA cores, as NeuSight measured)."""
    cost = op_cost(name, json.dumps(dims), types)
    if cost.family is None or cost.flops is None:
        raise ValueError(f"{name} {dims}: {cost.reason}")
    match = TILE.search(kernel or "")
    tile = (int(match[1]), int(match[2])) if match else DEFAULT_TILE
    return Work(cost.family, cost.family in MATRIX_FAMILIES, cost.precision or "fp32",
                cost.flops, cost.bytes, blocks, tile, 4, cost.gemm)


def read(files: tuple[str, ...] = FILES, devices: tuple[str, ...] | None = TRAINING
         ) -> list[OpRow]:
    """Every row of the files on the devices named (None: every device)."""
    out = []
    for file in files:
        with open(TEST / f"{file}.csv", newline="") as fh:
            for row in csv.DictReader(fh):
                if devices is not None and row["Device"] not in devices:
                    continue
                out.append(_row(file, row))
    return out


def _row(file: str, row: dict[str, str]) -> OpRow:
    keys = ("B", "M", "N", "K") if file in ("bmm", "linear") else ("B", "H")
    dims = {k: int(row[k]) for k in keys}
    name, input_dims, types = op_signature(file, row["OPName"], dims)
    blocks = int(row["Grid x"]) * int(row["Grid y"]) * int(row["Grid z"])
    gpu = trace_name_row(row["Device"])
    if gpu is None:
        raise ValueError(f"{row['Device']!r} is not in the GPU catalog")
    return OpRow(file, row["OPName"], row["Device"], gpu, tuple(dims.values()),
                 work_of(name, input_dims, types, blocks, row["Kernel Name"]),
                 row["Kernel Name"], float(row["Latency"]) / 1e3)
