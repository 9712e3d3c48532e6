"""The forecast's interval: the backtest's relative errors per method, weighted by each
method's share of the predicted time.

backtest_errors.toml (written by bench/forecast_backtest.py) holds, per method, q10 and q90
of the signed relative error e = predicted / measured − 1 over the backtest's cases:
end-to-end configurations for `shape` (every configuration of NeuSight's labels forecast
from each GPU to every other that has it), per-op cross-GPU pairs for the methods the
labels cannot exercise (wave_scaled, bandwidth: NeuSight's per-op data with its launch
geometry). A kept method (communication_kept, transfer_kept) has e = 0: its time is the
measured one (its own run-to-run variation is not in the interval). An interval whose
methods lack errors is NULL.

    low  = predicted / (1 + Σ_m w_m · q90_m)      (the predicted time was that much high)
    high = predicted / (1 + Σ_m w_m · q10_m)
"""
from __future__ import annotations

import tomllib
from functools import cache
from pathlib import Path

ERRORS = Path(__file__).with_name("backtest_errors.toml")
KEPT = ("communication_kept", "transfer_kept")


@cache
def method_errors() -> dict[str, tuple[float, float]]:
    """(q10, q90) of each method's relative error; kept methods (0, 0)."""
    out = {m: (0.0, 0.0) for m in KEPT}
    if ERRORS.exists():
        with open(ERRORS, "rb") as fh:
            doc = tomllib.load(fh)
        for method, entry in doc.get("method", {}).items():
            out[method] = (float(entry["q10"]), float(entry["q90"]))
    return out


def bounds(predicted_ns: int | float, shares: dict[str, float],
           errors: dict[str, tuple[float, float]]) -> tuple[int | None, int | None]:
    """(low_ns, high_ns) of the module docstring; NULLs when a method with a share has no
    backtest error or nothing was predicted."""
    used = {m: w for m, w in shares.items() if w and w > 0}
    if not used or any(m not in errors for m in used):
        return None, None
    q10 = sum(w * errors[m][0] for m, w in used.items())
    q90 = sum(w * errors[m][1] for m, w in used.items())
    return int(round(predicted_ns / (1.0 + q90))), int(round(predicted_ns / (1.0 + q10)))
