"""Charts as inline SVG, drawn directly: bars, horizontal bars, violins and step lines.

Every chart has a title, axes with their units and a legend, and a fixed size (width and
height attributes as well as a viewBox), so that it never renders at zero size. Text is
escaped here; the result is trusted markup for the template. No scripts, no fonts, no
external references: the file opens offline.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1",
           "#9c755f", "#bab0ac", "#ff9da7", "#86bcb6", "#d37295")
WIDTH = 760
LEFT, RIGHT, TOP, BOTTOM = 70, 20, 40, 60
LEGEND_ROW = 18
PLOT_H = 260.0  # plot height of the charts with a numeric x axis


@dataclass(frozen=True)
class Series:
    name: str
    values: Sequence[float | None]


def _text(x: float, y: float, s: str, anchor: str = "middle", size: int = 11,
          extra: str = "") -> str:
    return (f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" '
            f'{extra}>{escape(s)}</text>')


def nice_max(value: float) -> float:
    """The smallest 1, 2, 2.5 or 5 × 10^k at or above `value` (1 for nothing to show)."""
    if value <= 0 or not math.isfinite(value):
        return 1.0
    exponent = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 2.5, 5, 10):
        if step * exponent >= value * (1 - 1e-12):
            return step * exponent
    return 10 * exponent


def _ticks(top: float, count: int = 5) -> list[float]:
    return [top * i / count for i in range(count + 1)]


def _fmt_tick(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.3g}"


def _frame(title: str, height: int, body: list[str], legend: Sequence[str]) -> str:
    places = _legend_places(legend)
    wrapped = LEGEND_ROW * max((row for _, row in places), default=0)
    height += wrapped  # the legend's extra rows go under the plot
    rows = [f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" '
            f'height="{height}" viewBox="0 0 {WIDTH} {height}" role="img" '
            f'aria-label="{escape(title)}" font-family="sans-serif">',
            f'<rect width="{WIDTH}" height="{height}" fill="white"/>',
            _text(WIDTH / 2, 20, title, size=14, extra='font-weight="bold"')]
    rows += body
    rows += _legend(legend, places, height - 14 - wrapped)
    rows.append("</svg>")
    return "\n".join(rows)


def _legend_places(names: Sequence[str]) -> list[tuple[float, int]]:
    """(x, row) of each legend entry: entries wrap to a new row at the right edge."""
    places, x, row = [], float(LEFT), 0
    for name in names:
        width = 24 + 7 * len(name)
        if x + width > WIDTH - RIGHT and x > LEFT:
            x, row = float(LEFT), row + 1
        places.append((x, row))
        x += width
    return places


def _legend(names: Sequence[str], places: Sequence[tuple[float, int]], top: float
            ) -> list[str]:
    out = ['<g class="legend">']
    for i, (name, (x, row)) in enumerate(zip(names, places)):
        y = top + row * LEGEND_ROW
        out.append(f'<rect x="{x:.1f}" y="{y - 9:.1f}" width="10" height="10" '
                   f'fill="{PALETTE[i % len(PALETTE)]}"/>')
        out.append(_text(x + 14, y, name, anchor="start"))
    out.append("</g>")
    return out


def _y_axis(top: float, plot_h: float, label: str) -> list[str]:
    out = [f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{TOP + plot_h}" stroke="black"/>']
    for t in _ticks(top):
        y = TOP + plot_h - plot_h * t / top
        out.append(f'<line x1="{LEFT - 4}" y1="{y:.1f}" x2="{WIDTH - RIGHT}" y2="{y:.1f}" '
                   'stroke="#ddd"/>')
        out.append(_text(LEFT - 6, y + 4, _fmt_tick(t), anchor="end"))
    out.append(_text(16, TOP + plot_h / 2, label, extra=f'transform="rotate(-90 16 '
                     f'{TOP + plot_h / 2:.1f})"'))
    return out


def bar_chart(title: str, categories: Sequence[str], series: Sequence[Series], y_label: str,
              x_label: str, stacked: bool = False, y_max: float | None = None) -> str:
    """Vertical bars: one group per category, one bar per series (or one stack)."""
    plot_h, height = 240.0, 240 + TOP + BOTTOM + 30
    sums = [sum(v or 0 for v in vals) for vals in zip(*(s.values for s in series))]
    peak = max(sums) if stacked and sums else max(
        (v or 0 for s in series for v in s.values), default=0)
    top = y_max if y_max is not None else nice_max(peak)
    body = _y_axis(top, plot_h, y_label)
    slot = (WIDTH - LEFT - RIGHT) / max(1, len(categories))
    bar_w = slot * 0.8 / (1 if stacked else max(1, len(series)))
    base_y = TOP + plot_h
    for c, category in enumerate(categories):
        x0, stack = LEFT + c * slot + slot * 0.1, 0.0
        for i, s in enumerate(series):
            value = s.values[c] or 0.0
            h = plot_h * value / top
            x = x0 if stacked else x0 + i * bar_w
            y = base_y - h - (plot_h * stack / top if stacked else 0)
            body.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{bar_w:.1f}" height="{h:.1f}" '
                        f'fill="{PALETTE[i % len(PALETTE)]}"><title>{escape(s.name)} '
                        f'{escape(category)}: {value:.4g}</title></rect>')
            stack += value if stacked else 0
        body.append(_text(LEFT + c * slot + slot / 2, base_y + 14, _short(category, slot)))
    body.append(f'<line x1="{LEFT}" y1="{base_y}" x2="{WIDTH - RIGHT}" y2="{base_y}" '
                'stroke="black"/>')
    body.append(_text(LEFT + (WIDTH - LEFT - RIGHT) / 2, base_y + 32, x_label))
    return _frame(title, height, body, [s.name for s in series])


def _short(label: str, room: float) -> str:
    chars = max(4, int(room / 6.5))
    return label if len(label) <= chars else label[: chars - 1] + "…"


def hbar_chart(title: str, categories: Sequence[str], series: Sequence[Series],
               x_label: str, x_max: float | None = None) -> str:
    """Horizontal grouped bars: one row per category (long names such as layers)."""
    left = 230
    row_h = 6 + 9 * len(series)
    plot_h = row_h * max(1, len(categories))
    height = int(plot_h) + TOP + BOTTOM + 10
    peak = max((v or 0 for s in series for v in s.values), default=0)
    top = x_max if x_max is not None else nice_max(peak)
    plot_w = WIDTH - left - RIGHT
    body = []
    for t in _ticks(top):
        x = left + plot_w * t / top
        body.append(f'<line x1="{x:.1f}" y1="{TOP}" x2="{x:.1f}" y2="{TOP + plot_h}" '
                    'stroke="#ddd"/>')
        body.append(_text(x, TOP + plot_h + 14, _fmt_tick(t)))
    for c, category in enumerate(categories):
        y0 = TOP + c * row_h + 3
        body.append(_text(left - 6, y0 + row_h / 2 + 1, _short(category, left - 10),
                          anchor="end", size=10))
        for i, s in enumerate(series):
            value = s.values[c] or 0.0
            body.append(f'<rect x="{left}" y="{y0 + i * 9:.1f}" width="{plot_w * value / top:.1f}"'
                        f' height="8" fill="{PALETTE[i % len(PALETTE)]}"><title>'
                        f'{escape(s.name)} {escape(category)}: {value:.4g}</title></rect>')
    body.append(f'<line x1="{left}" y1="{TOP}" x2="{left}" y2="{TOP + plot_h}" stroke="black"/>')
    body.append(_text(left + plot_w / 2, TOP + plot_h + 32, x_label))
    return _frame(title, height, body, [s.name for s in series])


@dataclass(frozen=True)
class Violin:
    name: str
    grid: Sequence[float]       # values at which the density was evaluated
    density: Sequence[float]    # empty: too few distinct values for a density
    points: Sequence[float]
    mean: float
    maximum: float


def violin_chart(title: str, violins: Sequence[Violin], y_label: str, y_max: float = 1.0
                 ) -> str:
    """One violin per group (density mirrored), with its mean (line) and max (diamond)."""
    plot_h, height = 260.0, 260 + TOP + BOTTOM + 30
    body = _y_axis(y_max, plot_h, y_label)
    slot = (WIDTH - LEFT - RIGHT) / max(1, len(violins))
    base_y = TOP + plot_h

    def y_of(v: float) -> float:
        return base_y - plot_h * v / y_max

    for c, v in enumerate(violins):
        cx, half = LEFT + slot * (c + 0.5), slot * 0.4
        peak = max(v.density, default=0) or 1.0
        if v.density:
            right = [(cx + half * d / peak, y_of(g)) for g, d in zip(v.grid, v.density)]
            left = [(2 * cx - x, y) for x, y in reversed(right)]
            path = " ".join(f"{x:.1f},{y:.1f}" for x, y in right + left)
            body.append(f'<polygon points="{path}" fill="{PALETTE[0]}" fill-opacity="0.6" '
                        f'stroke="{PALETTE[0]}"/>')
        for p in v.points:
            body.append(f'<circle cx="{cx:.1f}" cy="{y_of(p):.1f}" r="1.5" '
                        f'fill="{PALETTE[2]}"/>')
        body.append(f'<line x1="{cx - half:.1f}" y1="{y_of(v.mean):.1f}" x2="{cx + half:.1f}" '
                    f'y2="{y_of(v.mean):.1f}" stroke="{PALETTE[1]}" stroke-width="2"/>')
        my = y_of(v.maximum)
        body.append(f'<polygon points="{cx:.1f},{my - 5:.1f} {cx + 5:.1f},{my:.1f} '
                    f'{cx:.1f},{my + 5:.1f} {cx - 5:.1f},{my:.1f}" fill="{PALETTE[3]}"/>')
        body.append(_text(cx, base_y + 14, _short(v.name, slot)))
    body.append(f'<line x1="{LEFT}" y1="{base_y}" x2="{WIDTH - RIGHT}" y2="{base_y}" '
                'stroke="black"/>')
    body.append(_text(LEFT + (WIDTH - LEFT - RIGHT) / 2, base_y + 32, "run"))
    return _frame(title, height, body, ["density over kernels", "mean", "kernels",
                                        "max"])


def step_chart(title: str, lines: Sequence[tuple[str, Sequence[float], Sequence[float]]],
               x_label: str, y_label: str, y_max: float = 1.0) -> str:
    """Right-continuous step lines (a cumulative distribution), one per series."""
    plot_h, height = PLOT_H, int(PLOT_H) + TOP + BOTTOM + 30
    x_top = nice_max(max((x for _, xs, _ in lines for x in xs), default=0))
    plot_w, base_y = WIDTH - LEFT - RIGHT, TOP + PLOT_H
    body = _y_axis(y_max, plot_h, y_label) + _x_ticks(x_top)
    for i, (_, xs, ys) in enumerate(lines):
        pts, prev_y = [f"{LEFT:.1f},{base_y:.1f}"], 0.0
        for x, y in zip(xs, ys):
            px = LEFT + plot_w * x / x_top
            pts.append(f"{px:.1f},{base_y - plot_h * prev_y / y_max:.1f}")
            pts.append(f"{px:.1f},{base_y - plot_h * y / y_max:.1f}")
            prev_y = y
        pts.append(f"{LEFT + plot_w:.1f},{base_y - plot_h * prev_y / y_max:.1f}")
        body.append(f'<polyline points="{" ".join(pts)}" fill="none" stroke-width="2" '
                    f'stroke="{PALETTE[i % len(PALETTE)]}"/>')
    body += _x_axis(x_label)
    return _frame(title, height, body, [name for name, _, _ in lines])


def line_chart(title: str, lines: Sequence[tuple[str, Sequence[float], Sequence[float]]],
               x_label: str, y_label: str, y_max: float | None = None) -> str:
    """Lines through (x, y) points with a dot at each, one per series (x ascending)."""
    height = int(PLOT_H) + TOP + BOTTOM + 30
    x_top = nice_max(max((x for _, xs, _ in lines for x in xs), default=0))
    y_top = y_max or nice_max(max((y for _, _, ys in lines for y in ys), default=0))
    plot_w, base_y = WIDTH - LEFT - RIGHT, TOP + PLOT_H
    body = _y_axis(y_top, PLOT_H, y_label) + _x_ticks(x_top)
    for i, (_, xs, ys) in enumerate(lines):
        colour = PALETTE[i % len(PALETTE)]
        pts = [(LEFT + plot_w * x / x_top, base_y - PLOT_H * y / y_top) for x, y in zip(xs, ys)]
        body.append(f'<polyline points="{" ".join(f"{x:.1f},{y:.1f}" for x, y in pts)}" '
                    f'fill="none" stroke-width="2" stroke="{colour}"/>')
        body += [f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{colour}"/>' for x, y in pts]
    body += _x_axis(x_label)
    return _frame(title, height, body, [name for name, _, _ in lines])


def _x_ticks(x_top: float) -> list[str]:
    """Tick labels of a numeric x axis from 0 to x_top, under a plot of height PLOT_H."""
    plot_w = WIDTH - LEFT - RIGHT
    return [_text(LEFT + plot_w * t / x_top, TOP + PLOT_H + 14, _fmt_tick(t))
            for t in _ticks(x_top)]


def _x_axis(label: str) -> list[str]:
    base_y, plot_w = TOP + PLOT_H, WIDTH - LEFT - RIGHT
    return [f'<line x1="{LEFT}" y1="{base_y}" x2="{WIDTH - RIGHT}" y2="{base_y}" '
            'stroke="black"/>', _text(LEFT + plot_w / 2, base_y + 32, label)]


# for charts drawn elsewhere (etl/present/report/forecast.py: the roofline)
frame, text = _frame, _text
