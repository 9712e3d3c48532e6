"""The time model's GEMM terms (etl/analysis/forecast/model.py) on tiny inputs, worked out
by hand with coefficients fixed by the test (a refit does not move the answers):

    o   = clamp(log2(batch · M · N / 2^22), −6, 6)
    d   = clamp(log2(K / 4096), 0, 6)
    s_X = exp(θ_X · o + κ_X · d)
    u_X = γ_{c,X} · (1 − a_c / waves_X) · s_X, c = bmm for a GEMM of batch > 1

Coefficients: gemm γ 0.8 on the V100, 0.5 elsewhere; bmm γ 0.6 on the V100, 0.4
elsewhere; a = 0; θ 0.1 on the V100, 0 elsewhere; κ −0.2 on the V100, −0.3 elsewhere.
"""
from __future__ import annotations

import json
import math

import pytest

from etl.analysis.forecast import model, predict
from etl.core.gpus import by_key
from etl.core.op_cost import op_cost

F = "float"
V100, T4 = by_key("V100-PCIE-32GB"), by_key("T4")
COEFFICIENTS = {
    "curve": {
        "gemm": {"a": 0.0, "gamma_default": 0.5, "gamma": {"V100-PCIE-32GB": 0.8}},
        "bmm": {"a": 0.0, "gamma_default": 0.4, "gamma": {"V100-PCIE-32GB": 0.6}},
        "elementwise": {"a": 0.0, "gamma_default": 0.8, "gamma": {}}},
    "shape": {"theta_default": 0.0, "theta": {"V100-PCIE-32GB": 0.1},
              "kappa_default": -0.3, "kappa": {"V100-PCIE-32GB": -0.2}}}


@pytest.fixture(autouse=True)
def fixed(monkeypatch: pytest.MonkeyPatch) -> None:
    model.coefficients.cache_clear()
    monkeypatch.setattr(model, "coefficients", lambda: COEFFICIENTS)
    predict._cached_ratio.cache_clear()


def work(name: str, dims: list, types: list[str]) -> model.Work:
    cost = op_cost(name, json.dumps(dims), types)
    return predict.shape_work(cost, "", None, predict.Options())


# linear x[2,1024,8192] · W[4096,8192]ᵀ: one GEMM of M = 2·1024 = 2048, N = 4096, K = 8192
LINEAR = ("aten::linear", [[2, 1024, 8192], [4096, 8192]], [F, F])


def test_shape_terms_of_a_linear_a_bmm_and_a_clamped_gemm() -> None:
    w = work(*LINEAR)
    assert w.gemm == (1, 2048, 4096, 8192)
    # o = log2(2048·4096) − 22 = 11 + 12 − 22 = 1; d = log2(8192 / 4096) = 1
    assert model.shape_terms(w) == pytest.approx((1.0, 1.0))
    # bmm [4,256,1024] @ [4,1024,256]: o = log2(4·256·256) − 22 = 18 − 22 = −4; K = 1024
    # is below 4096: d = 0
    bmm = work("aten::bmm", [[4, 256, 1024], [4, 1024, 256]], [F, F])
    assert model.shape_terms(bmm) == pytest.approx((-4.0, 0.0))
    # mm [2^20, 2^20] @ [2^20, 2^20]: o = 40 − 22 = 18 → 6; d = log2(2^20 / 2^12) = 8 → 6
    huge = work("aten::mm", [[1 << 20, 1 << 20], [1 << 20, 1 << 20]], [F, F])
    assert model.shape_terms(huge) == (6.0, 6.0)
    # not a GEMM: no terms, s = 1
    add = work("aten::add", [[64, 64], [64, 64]], [F, F])
    assert model.shape_terms(add) is None and model.shape_factor(add, V100) == 1.0


def test_shape_factor_per_gpu_and_default() -> None:
    w = work(*LINEAR)
    # V100: exp(0.1·1 − 0.2·1) = exp(−0.1); T4 (not listed): exp(0·1 − 0.3·1) = exp(−0.3)
    assert model.shape_factor(w, V100) == pytest.approx(math.exp(-0.1))
    assert model.shape_factor(w, T4) == pytest.approx(math.exp(-0.3))


def test_a_batched_gemm_reads_the_bmm_curve_a_folded_linear_the_gemm_curve() -> None:
    assert work(*LINEAR).curve == "gemm"
    assert work("aten::mm", [[64, 32], [32, 16]], [F, F]).curve == "gemm"
    assert work("aten::bmm", [[4, 256, 1024], [4, 1024, 256]], [F, F]).curve == "bmm"
    # matmul [2,1,3,5] @ [4,5,6]: the right side is batched, batch 2·4 = 8
    assert work("aten::matmul", [[2, 1, 3, 5], [4, 5, 6]], [F, F]).curve == "bmm"
    assert model.gamma("bmm", V100) == (0.6, True) and model.gamma("bmm", T4) == (0.4, False)


def test_a_table_without_a_bmm_curve_or_shape_terms_reads_the_gemm_curve_alone(
        monkeypatch: pytest.MonkeyPatch) -> None:
    old = {"curve": {"gemm": COEFFICIENTS["curve"]["gemm"]}}
    monkeypatch.setattr(model, "coefficients", lambda: old)
    bmm = work("aten::bmm", [[4, 256, 1024], [4, 1024, 256]], [F, F])
    assert model.gamma("bmm", V100) == (0.8, True)
    assert model.shape_factor(bmm, V100) == 1.0


def test_ratio_of_a_linear_from_the_v100_to_the_t4() -> None:
    w = work(*LINEAR)
    # 2·2048·8192·4096 FLOP, compute-bound on both (bytes / bandwidth: 3-4% of FLOP / peak);
    # blocks of 128×128 output tiles: 16·32 = 512; V100 80 SMs: 7 waves, Q = 560/512;
    # T4 40 SMs: 13 waves, Q = 520/512.
    # t_V100 = (560/512)·F/14e12 / (0.8·e^−0.1); t_T4 = (520/512)·F/8.1e12 / (0.5·e^−0.3)
    expected = (520 / 560) * (14.0 / 8.1) * (0.8 * math.exp(-0.1)) / (0.5 * math.exp(-0.3))
    assert w.blocks == 512
    assert model.ratio(V100, T4, w) == pytest.approx(expected)
