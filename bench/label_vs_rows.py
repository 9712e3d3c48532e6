"""Do NeuSight's end-to-end labels agree with its per-op rows, GPU by GPU?

The forecast may fit only on the per-op rows (dataset/test/*.csv) and is tested on the
labels. Where a label's GEMM node has a row of the same shape on the same GPU model, both
time the same forward call (CUDA events), so their ratio should be near 1 whatever model
is fitted. Prints, per GPU with rows, the label/row time ratio (median, min-max over the
matched nodes) and the TFLOP/s the label's and the row's times imply.

    python bench/label_vs_rows.py            # ../shared/corpus/neusight must be there
"""
from __future__ import annotations

import csv
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import neusight_trace  # noqa: E402
from neusight_ops import TEST  # noqa: E402

Shape = tuple[int, int, int, int]   # (batch, M, N, K): (batch, M, N) @ (N, K)


def row_times() -> dict[tuple[str, Shape], float]:
    """(device, GEMM shape) → the row's latency in ms; linear rows as one flat GEMM."""
    times: dict[tuple[str, Shape], float] = {}
    for name in ("linear", "bmm"):
        with open(TEST / f"{name}.csv", newline="") as fh:
            for row in csv.DictReader(fh):
                b, m, n, k = (int(row[c]) for c in "BMNK")
                shape = (1, b * m, n, k) if name == "linear" else (b, m, n, k)
                times[(row["Device"], shape)] = float(row["Latency"])
    return times


def node_shape(row: dict[str, str]) -> Shape | None:
    """The GEMM of a label node, read as the converter reads it (neusight_trace.forward_op):
    aten::linear of (..., N) by (K, N), or aten::matmul/bmm of (..., M, N) @ (..., N, K);
    None for any other node."""
    op = neusight_trace.forward_op(row, {})
    if op is None or op[0] not in ("aten::linear", "aten::matmul", "aten::bmm"):
        return None
    dims = op[1]
    if op[0] == "aten::linear":
        return (1, _product(dims[0][:-1]), dims[0][-1], dims[1][0])
    a, b = dims[0], dims[1]
    if len(a) < 2 or len(b) < 2 or a[-1] != b[-2]:
        return None
    return (_product(a[:-2]), a[-2], a[-1], b[-1])


def _product(values: list[int]) -> int:
    out = 1
    for value in values:
        out *= value
    return out


def ratios() -> dict[str, list[tuple[float, float, float]]]:
    """GPU folder → (label/row time ratio, label TFLOP/s, row TFLOP/s) per matched node."""
    rows = row_times()
    found: dict[str, list[tuple[float, float, float]]] = {}
    for path in neusight_trace.labels():
        label = neusight_trace.read_label(path)
        device = label.folder.replace("_", " ")
        for node in label.rows:
            shape = node_shape(node)
            ms = float(node["fw_latency"] or 0)
            if shape is None or ms <= 0 or (device, shape) not in rows:
                continue
            flop = 2.0 * shape[0] * shape[1] * shape[2] * shape[3]
            row_ms = rows[(device, shape)]
            found.setdefault(label.folder, []).append(
                (ms / row_ms, flop / ms / 1e9, flop / row_ms / 1e9))
    return found


def main() -> None:
    print("| GPU | matched GEMM nodes | label time / row time, median (min-max) "
          "| label TFLOP/s, median | row TFLOP/s, median |")
    print("|---|---|---|---|---|")
    for folder, values in sorted(ratios().items()):
        ratio = [v[0] for v in values]
        print(f"| {folder} | {len(values)} | {statistics.median(ratio):.2f} "
              f"({min(ratio):.2f}-{max(ratio):.2f}) "
              f"| {statistics.median(v[1] for v in values):.2f} "
              f"| {statistics.median(v[2] for v in values):.2f} |")


if __name__ == "__main__":
    main()
