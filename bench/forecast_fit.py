"""Fit the forecast's utilization curves (etl/analysis/forecast/coefficients.toml) on
NeuSight's per-op measurements of the paper's training GPUs, and write the table.

    .venv/bin/python bench/forecast_fit.py [--check]

Data: ../shared/corpus/neusight/scripts/asplos/data/dataset/test/{bmm,linear,elem,ln,
softmax}.csv, rows of A100-PCIE-40GB, P100, P4, T4 and V100 only (the paper's training
GPUs; its train/ files are not public). Never the end-to-end labels: they are the
backtest's test set. H100, L4, A100 80GB and the AMD GPUs stay out of distribution.

Model (etl/analysis/forecast/model.py): measured = R_X / (γ_{c,X}·(1 − a_c/waves_X)·s_X)
+ δ_X with R_X the roofline time with wave quantization from the row's grid, per curve c
(gemm = linear and bmm of batch 1, bmm = bmm of batch > 1, elementwise, norm = ln,
softmax): γ per GPU, a per curve, s_X = exp(θ_X·o + κ_X·d) on GEMMs (o the log2 output
size against 2048², d the log2 reduction depth beyond 4096: model.shape_terms) with θ and
κ per GPU, and δ_X a launch floor per GPU (each row's CUDA-event timing holds the call's
launch; the forecast scales kernel durations, which do not, so δ is fitted and then left
out). Least squares on log(predicted / measured) with a soft-L1 loss
(scipy.optimize.least_squares, f_scale 0.1): the residuals of plain least squares were
skewed (median log(predicted / measured) of +0.07 to +0.18 on five of the six A100, P100
and P4 GEMM files: γ pulled down by a tail of odd shapes), a robust loss centres them.
`--check` fits and prints without writing.
"""
from __future__ import annotations

import argparse
import datetime
import statistics
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import neusight_ops  # noqa: E402
from etl.analysis.forecast.model import (  # noqa: E402
    COEFFICIENTS, roofline_seconds, shape_terms, waves)

CURVES = ("gemm", "bmm", "elementwise", "norm", "softmax")


def prepared(rows: list[neusight_ops.OpRow]) -> dict[str, np.ndarray]:
    gpus = sorted({r.gpu.key for r in rows})
    terms = [shape_terms(r.work) or (0.0, 0.0) for r in rows]
    return {
        "curve": np.array([CURVES.index(r.work.curve) for r in rows]),
        "gpu": np.array([gpus.index(r.gpu.key) for r in rows]),
        "roof": np.array([roofline_seconds(r.gpu, r.work) for r in rows]),
        "waves": np.array([waves(r.work.blocks, r.gpu)[0] or np.inf for r in rows]),
        "o": np.array([t[0] for t in terms]),
        "d": np.array([t[1] for t in terms]),
        "measured": np.array([r.latency_s for r in rows]),
        "gpus": np.array(gpus, object)}


def unpack(p: np.ndarray, n_gpu: int) -> tuple[np.ndarray, ...]:
    """(γ [curve, gpu], a [curve], δ [gpu], θ [gpu], κ [gpu]) of the parameter vector."""
    c = len(CURVES)
    gamma = p[:c * n_gpu].reshape(c, n_gpu)
    a = p[c * n_gpu:c * (n_gpu + 1)]
    rest = p[c * (n_gpu + 1):]
    return gamma, a, rest[:n_gpu], rest[n_gpu:2 * n_gpu], rest[2 * n_gpu:]


def predict(p: np.ndarray, d: dict[str, np.ndarray]) -> np.ndarray:
    gamma, a, delta, theta, kappa = unpack(p, len(d["gpus"]))
    util = gamma[d["curve"], d["gpu"]] * (1.0 - a[d["curve"]] / d["waves"])
    util = util * np.exp(theta[d["gpu"]] * d["o"] + kappa[d["gpu"]] * d["d"])
    return d["roof"] / util + delta[d["gpu"]]


def fit(d: dict[str, np.ndarray]) -> np.ndarray:
    from scipy.optimize import least_squares

    n, c = len(d["gpus"]), len(CURVES)
    start = np.r_[np.full(c * n, 0.7), np.full(c, 0.3), np.full(n, 5e-6), np.zeros(2 * n)]
    low = np.r_[np.full(c * n, 0.05), np.zeros(c), np.zeros(n), np.full(2 * n, -1.0)]
    high = np.r_[np.full(c * n, 1.5), np.full(c, 0.95), np.full(n, 5e-5), np.full(2 * n, 1.0)]
    result = least_squares(lambda p: np.log(predict(p, d) / d["measured"]), start,
                           bounds=(low, high), x_scale="jac", loss="soft_l1", f_scale=0.1)
    return result.x


def errors(p: np.ndarray, d: dict[str, np.ndarray]) -> dict[tuple[str, str], float]:
    """Median |predicted / measured − 1| per curve and GPU (in-sample)."""
    rel = np.abs(predict(p, d) / d["measured"] - 1.0)
    out = {}
    for c, curve in enumerate(CURVES):
        for g, gpu in enumerate(d["gpus"]):
            mine = (d["curve"] == c) & (d["gpu"] == g)
            if mine.any():
                out[(curve, str(gpu))] = float(np.median(rel[mine]))
    return out


def toml_text(p: np.ndarray, d: dict[str, np.ndarray], rows: int) -> str:
    gamma, a, delta, theta, kappa = unpack(p, len(d["gpus"]))
    commit = subprocess.run(["git", "-C", str(neusight_ops.ROOT), "rev-parse", "--short",
                             "HEAD"], capture_output=True, text=True).stdout.strip()
    fit_error = errors(p, d)
    lines = [
        "# Fitted coefficients of the forecast's utilization curves (etl/analysis/forecast/",
        "# model.py). Written by bench/forecast_fit.py: do not edit by hand, refit.",
        "[provenance]",
        'data = "NeuSight (github.com/sitar-lab/NeuSight, commit 6945927, MIT): '
        'scripts/asplos/data/dataset/test/{bmm,linear,elem,ln,softmax}.csv"',
        f'devices = {list(neusight_ops.TRAINING)!r}'.replace("'", '"'),
        f"rows = {rows}",
        'held_out = "every end-to-end label (the backtest\'s test set); H100, L4, A100 80GB '
        'and AMD rows (out of distribution)"',
        'script = "bench/forecast_fit.py"',
        f'fitted = "{datetime.date.today().isoformat()} at checkout {commit}"',
        'loss = "soft-L1 (f_scale 0.1) on log(predicted / measured), '
        'scipy.optimize.least_squares: robust, the residuals have heavy tails"',
        "",
        "# a per-GPU launch floor the fit needs (a row's timing holds its launch); the",
        "# forecast scales kernel durations, which hold none, and leaves it out",
        "[launch_floor_us]"]
    lines += [f'"{g}" = {delta[i] * 1e6:.3f}' for i, g in enumerate(d["gpus"])]
    shape = {"theta": theta, "kappa": kappa}
    lines += ["", "# a GEMM's size terms: s_X = exp(theta_X·o + kappa_X·d), o = log2 of its",
              "# output elements against 2^22, d = log2 of its reduction depth beyond 4096",
              "# (model.shape_terms); a GPU not listed takes the fitted GPUs' median",
              "[shape]"]
    for name, values in shape.items():
        fitted = {str(g): round(float(values[i]), 4) for i, g in enumerate(d["gpus"])}
        lines += [f"{name}_default = {statistics.median(fitted.values()):.4f}",
                  f"{name} = {{ " + ", ".join(f'"{g}" = {v}' for g, v in fitted.items())
                  + " }"]
    for c, curve in enumerate(CURVES):
        fitted = {str(g): round(float(gamma[c, i]), 4) for i, g in enumerate(d["gpus"])}
        lines += ["", f"[curve.{curve}]", f"a = {a[c]:.4f}",
                  "# γ of a GPU not listed: the median of the fitted GPUs'",
                  f"gamma_default = {statistics.median(fitted.values()):.4f}",
                  "gamma = { " + ", ".join(f'"{g}" = {v}' for g, v in fitted.items()) + " }",
                  "# in-sample median |predicted / measured - 1| per GPU",
                  "fit_error = { " + ", ".join(
                      f'"{g}" = {fit_error[(curve, g)]:.3f}' for g in fitted
                      if (curve, g) in fit_error) + " }"]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="fit and print, write nothing")
    args = parser.parse_args()
    rows = neusight_ops.read()
    d = prepared(rows)
    p = fit(d)
    text = toml_text(p, d, len(rows))
    if args.check:
        print(text)
        return
    COEFFICIENTS.write_text(text)
    print(f"wrote {COEFFICIENTS} from {len(rows)} rows")
    counts: dict[str, int] = defaultdict(int)
    for r in rows:
        counts[r.file] += 1
    print(", ".join(f"{k} {v}" for k, v in sorted(counts.items())))


if __name__ == "__main__":
    main()
