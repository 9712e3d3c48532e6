"""The time model a forecast scales by: a roofline with wave quantization and an achieved
utilization curve per op family (NeuSight's form) with a GEMM's size terms, fitted on
public cross-GPU measurements (coefficients.toml, refitted by bench/forecast_fit.py).

For work of `flops` FLOPs and `bytes` bytes in B thread blocks on a GPU X:

    waves_X = ceil(B / SMs_X)                      one block per SM per wave (NeuSight's rule)
    Q_X     = waves_X · SMs_X / B                  the last wave's idle SMs (≥ 1)
    u_X     = γ_{c,X} · (1 − a_c / waves_X) · s_X  utilization rising with waves towards γ
    t_X     = Q_X · max(flops / peak_X, bytes / bw_X) / u_X

The curve c is the op family's (gemm for GEMMs, convolutions and attention; bmm for a
GEMM of batch > 1, a batched matmul; elementwise, norm, softmax). s_X is 1 but for a GEMM
whose shape (batch, M, N, K) is known (`shape_factor`):

    o   = clamp(log2(batch · M · N / 2^22), −6, 6)     output size against 2048 × 2048
    d   = clamp(log2(K / 4096), 0, 6)                 reduction depth beyond 4096
    s_X = exp(θ_X · o + κ_X · d)

peak_X is the dense peak of the work's precision: on matrix units for GEMM-like work (an
fp32 GEMM on the FP32 lanes a GEMM kernel uses: `fp32_gemm_share` of the FP32 peak on
the architectures whose FP32 lanes are half shared with INT32, gpus.toml; the MFMA FP32
peak on AMD CDNA), the FP32 vector peak otherwise; bw_X the memory bandwidth. γ, θ and κ
are fitted per GPU for the GPUs of the fitting data; other GPUs take the median over those
(`gamma_default`, `theta_default`, `kappa_default`), which the forecast's notes say.

A forecast never uses t_X alone: a measured duration is scaled by t_target / t_source
(`ratio`), so what the model gets wrong on both GPUs alike cancels.
"""
from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from etl.core.errors import EtlError
from etl.core.gpus import Gpu

COEFFICIENTS = Path(__file__).with_name("coefficients.toml")
DEFAULT_TILE = (128, 128)   # the commonest sgemm tile in NeuSight's kernel names
MIN_UTIL = 0.02             # a curve is never read below this (few waves, large α)
MATRIX_FAMILIES = frozenset({"gemm", "conv", "attention"})
CURVE_OF = {"gemm": "gemm", "conv": "gemm", "attention": "gemm", "norm": "norm",
            "softmax": "softmax"}   # every other family reads the elementwise curve
OUTPUT_REF = 22             # log2 of the output elements where o = 0 (2048 × 2048)
DEPTH_REF = 4096            # the reduction depth beyond which d counts
TERM_CLAMP = 6.0            # |o| and d are read no further than this


class PrecisionError(EtlError):
    """The target GPU lacks a precision the run computes in (and no fallback was stated)."""


@dataclass(frozen=True)
class Work:
    """What one GPU activity does, as the model reads it. flops/bytes None: not known
    (the ratio then uses the family's rate alone: compute for matrix work, bandwidth else)."""

    family: str
    matrix: bool
    precision: str          # fp64, fp32, tf32, fp16, bf16, fp8
    flops: float | None = None
    bytes: float | None = None
    blocks: int | None = None
    tile: tuple[int, int] = DEFAULT_TILE
    element_bytes: int = 4
    gemm: tuple[int, int, int, int] | None = None   # (batch, M, N, K) of a GEMM-like op

    @property
    def curve(self) -> str:
        """The utilization curve: the family's, bmm for a GEMM of batch > 1."""
        if self.family == "gemm" and self.gemm is not None and self.gemm[0] > 1:
            return "bmm"
        return CURVE_OF.get(self.family, "elementwise")


@cache
def coefficients() -> dict[str, Any]:
    with open(COEFFICIENTS, "rb") as fh:
        return tomllib.load(fh)


def _curve_table(curve: str) -> dict[str, Any]:
    """A curve's coefficients; a curve the table lacks (bmm in a table fitted before it)
    reads the gemm curve's."""
    curves = coefficients()["curve"]
    table: dict[str, Any] = curves[curve] if curve in curves else curves["gemm"]
    return table


def gamma(curve: str, gpu: Gpu) -> tuple[float, bool]:
    """(γ of the curve on this GPU, whether the GPU was in the fitting data)."""
    table = _curve_table(curve)
    fitted = table.get("gamma", {})
    if gpu.key in fitted:
        return float(fitted[gpu.key]), True
    return float(table["gamma_default"]), False


def utilization(curve: str, gpu: Gpu, waves: float | None) -> float:
    """u = γ·(1 − a/waves): NeuSight's γ − α/waves with α = a·γ, so that it stays positive
    (a < 1) however few the waves; γ alone when the waves are not known."""
    g, _ = gamma(curve, gpu)
    a = float(_curve_table(curve)["a"])
    value = g if waves is None else g * (1.0 - a / waves)
    return max(value, MIN_UTIL)


def shape_terms(work: Work) -> tuple[float, float] | None:
    """(o, d) of a GEMM of known shape, None for other work: o the log2 of its output
    elements against 2^22, d the log2 of its reduction depth K beyond 4096, clamped."""
    if work.family != "gemm" or work.gemm is None:
        return None
    batch, m, n, k = work.gemm
    if batch * m * n <= 0 or k <= 0:
        return None
    o = math.log2(batch * m * n) - OUTPUT_REF
    d = math.log2(k / DEPTH_REF)
    return max(-TERM_CLAMP, min(TERM_CLAMP, o)), max(0.0, min(TERM_CLAMP, d))


def shape_factor(work: Work, gpu: Gpu) -> float:
    """s_X = exp(θ_X·o + κ_X·d): 1 without a [shape] table or for work that is not a GEMM
    of known shape."""
    table = coefficients().get("shape")
    terms = shape_terms(work)
    if table is None or terms is None:
        return 1.0
    o, d = terms
    theta = float(table.get("theta", {}).get(gpu.key, table["theta_default"]))
    kappa = float(table.get("kappa", {}).get(gpu.key, table["kappa_default"]))
    return math.exp(theta * o + kappa * d)


def waves(blocks: int | None, gpu: Gpu) -> tuple[float | None, float]:
    """(waves, quantization Q) of B blocks, one block per SM per wave; (None, 1) when B or
    the GPU's SM count is unknown."""
    if blocks is None or blocks <= 0 or gpu.sm_count is None:
        return None, 1.0
    count = math.ceil(blocks / gpu.sm_count)
    return float(count), count * gpu.sm_count / blocks


def peak(gpu: Gpu, work: Work, fallback: dict[str, str] | None = None) -> float:
    """FLOP/s the work's precision runs at on the GPU; PrecisionError when it has none."""
    precision = work.precision if work.matrix else ("fp64" if work.precision == "fp64" else "fp32")
    wanted = precision
    if work.matrix and precision in (fallback or {}) and gpu.peak_tflops.get(precision) is None:
        precision = (fallback or {})[precision]
    if work.matrix and precision == "fp32" and gpu.gemm_fp32_tflops is not None:
        return gpu.gemm_fp32_tflops * 1e12
    value = gpu.peak_flops_per_s(precision)
    if work.matrix and precision == "fp32" and value is not None:
        value *= gpu.fp32_gemm_share
    if value is None:
        said = f" (fallback {wanted}→{precision})" if precision != wanted else ""
        raise PrecisionError(
            f"{gpu.key} has no {precision} peak{said}: {gpu.why_missing(precision)}; "
            f"state a fallback (--fallback {wanted}=fp32 or {wanted}=fp16) to forecast "
            f"{wanted} work as another precision")
    return value


def model_time(gpu: Gpu, work: Work, fallback: dict[str, str] | None = None) -> float:
    """t_X of the module docstring (seconds for known flops/bytes; else per unit of work)."""
    count, _ = waves(work.blocks, gpu)
    util = max(utilization(work.curve, gpu, count) * shape_factor(work, gpu), MIN_UTIL)
    return roofline_seconds(gpu, work, fallback) / util


def roofline_seconds(gpu: Gpu, work: Work, fallback: dict[str, str] | None = None) -> float:
    """Q_X · max(flops / peak_X, traffic / bw_X): t_X before the utilization curve."""
    bw = gpu.bytes_per_s
    if bw is None:
        raise EtlError(f"{gpu.key}: memory bandwidth {gpu.why_missing('mem_bw_gbs')}; the "
                       "forecast needs it")
    _, quantization = waves(work.blocks, gpu)
    return quantization * _roofline(gpu, work, bw, fallback)


def _roofline(gpu: Gpu, work: Work, bw: float, fallback: dict[str, str] | None) -> float:
    flops, moved = work.flops, work.bytes
    if flops is None and moved is None:  # wave-scaled: one FLOP of matrix work, one byte else
        flops, moved = (1.0, 0.0) if work.matrix else (0.0, 1.0)
    flops, moved = flops or 0.0, moved or 0.0
    compute = flops / peak(gpu, work, fallback) if flops > 0 else 0.0
    return max(compute, moved / bw)


def ratio(source: Gpu, target: Gpu, work: Work, fallback: dict[str, str] | None = None
          ) -> float:
    """t_target / t_source: what a measured duration of this work is multiplied by."""
    before = model_time(source, work, fallback)
    return model_time(target, work, fallback) / before if before > 0 else 1.0
