"""The report's forecast and roofline sections (issue #31).

- Forecast (`etl report --forecast H100-SXM5-80GB,L4`): per run and catalog GPU, the mean
  over its iteration windows of measured_ns, predicted_ns and the interval's bounds (etl
  forecast's rows), and each method's share; a forecast refused (a precision the GPU
  lacks, a source GPU the trace does not name) is a row with the refusal.
- Roofline per layer: per run, the layers' kernels added up from kernel_roofline (FLOPs,
  bytes and time of the costed kernels), drawn on the device's roofline (log-log: FLOP per
  byte, FLOP/s; the roof at the run's most-FLOP precision).
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape
from typing import TYPE_CHECKING, Any

from etl.present.report import svg
from etl.present.report.sections import Figure, Section, Table

if TYPE_CHECKING:
    import duckdb

LAYERS = 12  # layers drawn per run, by kernel time
LAYER_ROOFLINE = """
SELECT coalesce(layer, '(no layer)') AS layer, count(*) AS kernels,
       sum(dur_ns) AS costed_ns, sum(flops) AS flops, sum(bytes) AS bytes,
       sum(flops) / nullif(sum(bytes), 0) AS arithmetic_intensity,
       sum(flops) / nullif(sum(dur_ns), 0) * 1e9 AS achieved_flops_per_s,
       arg_max(peak_flops_per_s, flops) AS peak_flops_per_s,
       any_value(peak_bytes_per_s) AS peak_bytes_per_s, arg_max(peak_precision, flops) AS precision
FROM kernel_roofline
WHERE run_name = ? AND roofline_reason IS NULL AND flops > 0
GROUP BY ALL
ORDER BY costed_ns DESC
LIMIT ?
"""


def forecast_section(con: duckdb.DuckDBPyConnection, runs: list[str], gpus: Sequence[str]
                     ) -> Section:
    """The runs' forecasts on the GPUs named (see the module docstring)."""
    from etl.analysis.forecast.predict import METHODS
    from etl.core.gpus import resolve

    title = "What these runs would take on other GPUs (etl forecast)"
    targets = [resolve(g.strip(), "--forecast") for g in gpus]
    rows = [row for run in runs for row in _run_forecasts(con, run, targets)]
    columns = ["run_name", "target_gpu", "windows", "mean_measured_ns", "mean_predicted_ns",
               "mean_low_ns", "mean_high_ns", "speedup_ratio",
               *(f"{m}_share" for m in METHODS), "note"]
    note = ("Means over each run's iteration windows; low and high bound a central 80% "
            "interval from the backtest's errors of the methods used (docs/forecast.md).")
    return Section("forecast", title, [Figure(title, Table.of("etl forecast", rows, columns),
                                              note=note)])


def _run_forecasts(con: duckdb.DuckDBPyConnection, run: str, targets: Sequence[Any]
                   ) -> list[dict[str, Any]]:
    from etl.analysis.forecast import run as forecasting
    from etl.core.errors import EtlError

    try:
        prepared = forecasting.prepare(con, run)
    except EtlError as exc:
        return [_refused(run, t.key, str(exc)) for t in targets]
    out = []
    for target in targets:
        try:
            result = forecasting.forecast_on(prepared, target)
        except EtlError as exc:
            out.append(_refused(run, target.key, str(exc)))
            continue
        out.append(_mean_row(run, target.key, result.rows, result.notes))
    return out


def _mean_row(run: str, target: str, rows: list[dict[str, Any]], notes: list[str]
              ) -> dict[str, Any]:
    def mean(column: str) -> float | None:
        values = [r[column] for r in rows if r[column] is not None]
        return sum(values) / len(values) if values else None

    measured, predicted = mean("measured_ns"), mean("predicted_ns")
    shares = {c: mean(c) for c in rows[0] if c.endswith("_share")} if rows else {}
    memory = [n for n in notes if "does not fit" in n]
    return {"run_name": run, "target_gpu": target, "windows": len(rows),
            "mean_measured_ns": measured, "mean_predicted_ns": predicted,
            "mean_low_ns": mean("low_ns"), "mean_high_ns": mean("high_ns"),
            "speedup_ratio": measured / predicted if measured and predicted else None,
            **shares, "note": "; ".join(memory)}


def _refused(run: str, target: str, reason: str) -> dict[str, Any]:
    return {"run_name": run, "target_gpu": target, "windows": 0, "note": reason}


def roofline_section(con: duckdb.DuckDBPyConnection, runs: list[str]) -> Section:
    """Per run, its layers on the device's roofline (see the module docstring)."""
    title = "Layers on the roofline"
    figures = []
    for run in runs:
        rows = [dict(zip(("layer", "kernels", "costed_ns", "flops", "bytes",
                          "arithmetic_intensity", "achieved_flops_per_s", "peak_flops_per_s",
                          "peak_bytes_per_s", "precision"), r))
                for r in con.execute(LAYER_ROOFLINE, [run, LAYERS]).fetchall()]
        if rows:
            figures.append(_roofline_figure(run, rows))
    empty = ("no kernel of these runs has a cost and a catalog GPU (kernel_roofline: input "
             "shapes with record_shapes=True, or ncu counters)") if not figures else ""
    return Section("roofline", title, figures, empty=empty)


def _roofline_figure(run: str, rows: list[dict[str, Any]]) -> Figure:
    title = f"{run}: the {len(rows)} layers with the most costed kernel time, on the roofline"
    peak = max(r["peak_flops_per_s"] for r in rows)
    bandwidth = rows[0]["peak_bytes_per_s"]
    points = [(str(r["layer"]), r["arithmetic_intensity"], r["achieved_flops_per_s"])
              for r in rows if r["arithmetic_intensity"] and r["achieved_flops_per_s"]]
    chart = roofline_chart(title, points, peak, bandwidth)
    note = (f"The roof: {peak / 1e12:g} TFLOP/s ({rows[0]['precision']}) and "
            f"{bandwidth / 1e9:g} GB/s; each point is a layer's costed kernels.")
    return Figure(title, Table.of("kernel_roofline", rows), chart, note)


def roofline_chart(title: str, points: Sequence[tuple[str, float, float]], peak: float,
                   bandwidth: float) -> str:
    """A log-log roofline: FLOP/s against FLOP per byte, the roof min(peak, AI × bw), a
    dot per point (label, arithmetic intensity, achieved FLOP/s)."""
    ridge = peak / bandwidth
    xs = [x for _, x, _ in points] + [ridge]
    x_lo, x_hi = _decades(min(xs) / 2, max(xs) * 2)
    y_lo, y_hi = _decades(min([y for _, _, y in points] + [peak]) / 2, peak * 2)
    plot_w, plot_h = svg.WIDTH - svg.LEFT - svg.RIGHT, svg.PLOT_H
    height = int(plot_h) + svg.TOP + svg.BOTTOM + 30

    def at(x: float, y: float) -> tuple[float, float]:
        fx = (math.log10(x) - x_lo) / (x_hi - x_lo)
        fy = (math.log10(y) - y_lo) / (y_hi - y_lo)
        return svg.LEFT + plot_w * fx, svg.TOP + plot_h * (1 - fy)

    roof = [at(10 ** x_lo, min(peak, 10 ** x_lo * bandwidth)), at(ridge, peak),
            at(10 ** x_hi, peak)]
    body = _log_axes(x_lo, x_hi, y_lo, y_hi, at)
    body.append(f'<polyline points="{" ".join(f"{x:.1f},{y:.1f}" for x, y in roof)}" '
                'fill="none" stroke="black" stroke-width="2"/>')
    for i, (label, x, y) in enumerate(points):
        cx, cy = at(x, y)
        body.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="4" '
                    f'fill="{svg.PALETTE[i % len(svg.PALETTE)]}"><title>{escape(label)}'
                    '</title></circle>')
    return svg.frame(title, height, body, [label for label, _, _ in points])


def _decades(lo: float, hi: float) -> tuple[int, int]:
    low = math.floor(math.log10(max(lo, 1e-30)))
    return low, max(math.ceil(math.log10(max(hi, 1e-30))), low + 1)


def _log_axes(x_lo: int, x_hi: int, y_lo: int, y_hi: int, at: Any) -> list[str]:
    base_y = svg.TOP + svg.PLOT_H
    out = [f'<line x1="{svg.LEFT}" y1="{base_y}" x2="{svg.WIDTH - svg.RIGHT}" y2="{base_y}" '
           'stroke="black"/>', f'<line x1="{svg.LEFT}" y1="{svg.TOP}" x2="{svg.LEFT}" '
           f'y2="{base_y}" stroke="black"/>']
    for e in range(x_lo, x_hi + 1):
        x, _ = at(10.0 ** e, 10.0 ** y_lo)
        out.append(svg.text(x, base_y + 14, f"1e{e}"))
    for e in range(y_lo, y_hi + 1):
        _, y = at(10.0 ** x_lo, 10.0 ** e)
        out.append(svg.text(svg.LEFT - 6, y + 4, f"1e{e}", anchor="end"))
    out.append(svg.text(svg.LEFT + (svg.WIDTH - svg.LEFT - svg.RIGHT) / 2, base_y + 32,
                         "arithmetic intensity (FLOP per byte)"))
    out.append(svg.text(16, svg.TOP + svg.PLOT_H / 2, "FLOP/s", extra='transform="rotate(-90 '
                         f'16 {svg.TOP + svg.PLOT_H / 2:.1f})"'))
    return out
