"""The report's sections: each is charts with the numbers under them, or a reason why not.

A `Section` holds `Figure`s; a figure is an SVG chart (or none) and the `Table` it was
drawn from. Tables keep each cell's exact value (`data-value` in the HTML) beside the
shown text, so a test can check the page against SQL.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from etl.present.report import data, svg

if TYPE_CHECKING:
    import duckdb

TOP_N = 10
LAYERS_SHOWN = 12
LEVELS = ("gpu_util", "smsp_active_util", "issue_slot_util", "tc_active_util", "tc_issue_util")
LEVEL_LABELS = {"gpu_util": "GPU", "smsp_active_util": "SMSP active",
                "issue_slot_util": "issue slot", "tc_active_util": "tensor core active",
                "tc_issue_util": "tensor core issue"}


@dataclass
class Table:
    source: str                       # the view or table the rows come from
    columns: list[str]
    rows: list[list[Any]]

    @classmethod
    def of(cls, source: str, rows: Sequence[data.Row], columns: Sequence[str] | None = None
           ) -> Table:
        names = list(columns or (rows[0].keys() if rows else []))
        return cls(source, names, [[r[c] for c in names] for r in rows])


@dataclass
class Figure:
    title: str
    table: Table
    chart: str = ""                   # inline SVG; empty for a table alone
    note: str = ""
    id: str = ""                      # an anchor for the figures linked to (and screenshot)


@dataclass
class Section:
    id: str
    title: str
    figures: list[Figure] = field(default_factory=list)
    empty: str = ""                   # why there is nothing to show
    intro: str = ""


def fmt(value: Any) -> str:
    """A cell's text: ratios to 4 decimals, integers with separators, NULL as an em dash."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:.4f}" if abs(value) < 10 else f"{value:,.1f}"
    return str(value)


def overview(con: duckdb.DuckDBPyConnection, runs: list[str]) -> Section:
    table = Table.of("runs", data.runs_table(con, runs))
    synthetic = [r[0] for r in table.rows if r[-1]]
    intro = (f"Synthetic runs (generated, not measured): {', '.join(synthetic)}."
             if synthetic else "")
    return Section("overview", "Runs", [Figure("Runs in this report", table)], intro=intro)


def batch_scaling(con: duckdb.DuckDBPyConnection, runs: list[str]) -> Section:
    title = "Fig. 1, 3, 4: throughput, memory and levels against batch size"
    rows = data.batch_scaling(con, runs) if data.has_relation(con, "batch_scaling") else []
    if not rows:
        return Section("batch-scaling", title, empty="no configuration of these runs has a "
                       "batch size (run.toml batch_size) and a representative iteration")
    groups: dict[str, list[data.Row]] = {}
    for r in rows:
        key = " ".join(str(r[c]) for c in ("model", "framework", "exec_mode", "precision"))
        groups.setdefault(key, []).append(r)
    table = Table.of("batch_scaling", rows)
    return Section("batch-scaling", title, [
        _scaling_figure("Fig. 1: throughput against batch size", groups, "batch_size",
                        "throughput_samples_per_s", "batch size (samples per GPU)",
                        "throughput (samples/s)", None, table),
        _scaling_figure("Fig. 3: peak GPU memory against batch size", groups, "batch_size",
                        "peak_memory_share", "batch size (samples per GPU)",
                        "peak memory / device memory (0..1)", 1.0, table),
        _scaling_figure("Fig. 4: GPU utilization against peak GPU memory", groups,
                        "peak_memory_share", "gpu_util", "peak memory / device memory (0..1)",
                        "GPU utilization (0..1)", 1.0, table)])


def _scaling_figure(title: str, groups: dict[str, list[data.Row]], x: str, y: str,
                    x_label: str, y_label: str, y_max: float | None, table: Table) -> Figure:
    """One line per configuration over the points where both values are known."""
    lines = []
    for name, rows in groups.items():
        points = sorted((r[x], r[y]) for r in rows if r[x] is not None and r[y] is not None)
        if points:
            lines.append((name, [p[0] for p in points], [p[1] for p in points]))
    if not lines:
        return Figure(title, table, note=f"no configuration has both {x} and {y}")
    return Figure(title, table, svg.line_chart(title, lines, x_label, y_label, y_max))


def fig5(con: duckdb.DuckDBPyConnection, runs: list[str]) -> Section:
    title = "Fig. 5: utilization at four levels per run"
    levels = data.run_levels(con, runs)
    if not levels:
        return Section("fig5", title, empty=_no_levels(con, runs, "run_utilization has no "
                       "ncu levels"))
    labels = [_device_label(r, levels) for r in levels]
    series = [svg.Series(LEVEL_LABELS[x], [r[x] for r in levels]) for x in LEVELS]
    chart = svg.bar_chart(title, labels, series, "utilization (0..1)", "run", y_max=1.0)
    without = sorted(set(runs) - {r["run_name"] for r in levels})
    exported = data.ncu_kernel_counts(con, without)
    unmatched = [r for r in without if r in exported]
    none = [r for r in without if r not in exported]
    note = " ".join(filter(None, [
        f"No ncu export in: {', '.join(none)}." if none else "",
        f"An ncu export without a matched trace kernel in: {', '.join(unmatched)} (its "
        "kernels' levels are in the run's section)." if unmatched else ""]))
    return Section("fig5", title, [Figure(title, Table.of("run_utilization", levels), chart,
                                          note)])


def _device_label(row: data.Row, all_rows: Sequence[data.Row]) -> str:
    mine = [r for r in all_rows if r["run_name"] == row["run_name"]]
    return f"{row['run_name']} {_place(row, mine)}" if len(mine) > 1 else row["run_name"]


def _place(row: data.Row, rows: Sequence[data.Row]) -> str:
    """`r1/d0`: rank 1's device 0; a source without a rank (xplane, nsys) is named by its
    source_id (`s2/d0`) when the rows hold several sources, else by its device alone."""
    if row.get("rank") is not None:
        return f"r{row['rank']}/d{row['device_id']}"
    if len({r.get("source_id") for r in rows}) > 1:
        return f"s{row['source_id']}/d{row['device_id']}"
    return f"d{row['device_id']}"


def _no_levels(con: duckdb.DuckDBPyConnection, runs: list[str], what: str) -> str:
    """Why a figure of ncu levels over trace kernels is empty: no export, or exports
    whose kernels matched no trace kernel (their levels are in each run's section)."""
    exported = data.ncu_kernel_counts(con, runs)
    if not exported:
        return f"no ncu export in these runs ({what})"
    return (f"no trace kernel of these runs was matched to Nsight Compute counters ({what}); "
            f"ncu exports in: {', '.join(sorted(exported))} (their kernels' levels are in "
            "each run's section)")


def fig6(con: duckdb.DuckDBPyConnection, runs: list[str]) -> Section:
    title = "Fig. 6: issue-slot utilization over kernels"
    values = data.issue_slot_values(con, runs)
    if not values:
        return Section("fig6", title, empty=_no_levels(con, runs, "no matched kernel has "
                       "an issue-slot ratio"))
    by_run: dict[str, list[float]] = {}
    for r in values:
        by_run.setdefault(r["run_name"], []).append(r["issue_slot_util"])
    chart = svg.violin_chart(title, [_violin(n, v) for n, v in by_run.items()],
                             "issue-slot utilization per kernel (0..1)")
    table = Table.of("issue_slot_distribution", data.issue_slot_summary(con, runs))
    return Section("fig6", title, [Figure(title, table, chart, "Density: Gaussian kernel "
                                          "density estimate (scipy.stats.gaussian_kde, "
                                          "Scott's bandwidth), each kernel counted once.")])


def _violin(name: str, values: list[float]) -> svg.Violin:
    import numpy as np

    grid: list[float] = []
    density: list[float] = []
    if len(set(values)) > 1:  # a KDE of one distinct value is singular
        lo, hi = min(values), max(values)
        pad = (hi - lo) * 0.1
        points = np.linspace(max(0.0, lo - pad), min(1.0, hi + pad), 80)
        grid, density = points.tolist(), gaussian_kde(values, points).tolist()
    return svg.Violin(name, grid, density, values, sum(values) / len(values), max(values))


def gaussian_kde(values: Sequence[float], points: Any) -> Any:
    """scipy.stats.gaussian_kde(values)(points) in one dimension, with Scott's bandwidth
    (variance × n^(-2/5)), in numpy: importing scipy.stats took a fifth of the report."""
    import numpy as np

    data = np.asarray(values, dtype=float)
    variance = np.var(data, ddof=1) * len(data) ** (-2 / 5)
    offsets = (np.asarray(points, dtype=float)[:, None] - data[None, :]) ** 2
    return np.exp(-0.5 * offsets / variance).sum(axis=1) / (
        len(data) * np.sqrt(2 * np.pi * variance))


def fig7(con: duckdb.DuckDBPyConnection, runs: list[str]) -> Section:
    title = "Fig. 7: utilization per layer"
    figures = []
    layers = data.layer_levels(con, runs, LAYERS_SHOWN)
    for run in runs:
        rows = layers[run]
        if not rows:
            continue
        label = f"{title} — {run} (top {LAYERS_SHOWN} by GPU time)"
        series = [svg.Series(LEVEL_LABELS[x], [r[f"time_weighted_mean_{x}"] for r in rows])
                  for x in data.LAYER_LEVELS]
        chart = svg.hbar_chart(label, [r["layer_op"] for r in rows], series,
                               "time-weighted mean utilization over kernels (0..1)", x_max=1.0)
        figures.append(Figure(label, Table.of("layer_utilization", rows), chart))
    empty = "" if figures else _no_levels(con, runs, "layer_utilization is empty")
    return Section("fig7", title, figures, empty=empty)


def fig8(con: duckdb.DuckDBPyConnection, runs: list[str]) -> Section:
    title = "Fig. 8: cumulative GPU time against tensor-core issue utilization"
    cdf = data.tc_cdf(con, runs)
    if not cdf:
        return Section("fig8", title, empty=_no_levels(con, runs, "no matched kernel has a "
                       "tensor-core issue ratio"))
    lines: dict[str, tuple[list[float], list[float]]] = {}
    for r in cdf:
        xs, ys = lines.setdefault(r["run_name"], ([], []))
        xs.append(r["tc_issue_util"])
        ys.append(r["cumulative_time_share"] or 0.0)
    chart = svg.step_chart(title, [(n, xs, ys) for n, (xs, ys) in lines.items()],
                           "tensor-core issue utilization of a kernel (0..1)",
                           "share of GPU time at or below (0..1)")
    return Section("fig8", title, [Figure(title, Table.of("tc_time_cdf", cdf), chart)])


def _without_view(con: duckdb.DuckDBPyConnection, view: str, section: str, title: str
                  ) -> Section | None:
    """The empty section of a pinned view this warehouse's database lacks (views not
    refreshed: warehouse.duckdb was open elsewhere), else None."""
    if data.has_relation(con, view):
        return None
    return Section(section, title, empty=f"no {view} view in this warehouse")


def amdahl(con: duckdb.DuckDBPyConnection, runs: list[str]) -> Section:
    title = "Amdahl's law: speed-up bound if only tensor-core kernels got faster"
    if (missing := _without_view(con, data.AMDAHL, "amdahl", title)) is not None:
        return missing
    rows = data.amdahl(con, runs)
    if not rows:
        return Section("amdahl", title, empty="no kernel of these runs is typed (runs "
                       "ingested before kernel types: ingest them again) or matched to ncu")
    labels = [_device_label(r, rows) + ("" if r["basis"] == "ncu" else " (names)")
              for r in rows]
    series = [svg.Series(f"k = {k}", [r[f"speedup_bound_{k}_ratio"] for r in rows])
              for k in ("k2", "k10", "inf")]
    chart = svg.bar_chart(title, labels, series, "iteration speed-up bound (×)", "run")
    estimated = sorted({r["run_name"] for r in rows if r["basis"] != "ncu"})
    note = ("Basis 'ncu': tensor-core kernels are the matched kernels with tc_issue_util > 0."
            + (f" Estimated from kernel names (basis 'name_estimate', marked '(names)'; "
               "names hide some tensor-core kernels, so the bound may be too low): "
               f"{', '.join(estimated)}."
               if estimated else ""))
    return Section("amdahl", title, [Figure(title, Table.of(data.AMDAHL, rows), chart,
                                            note)])


@dataclass
class RunTables:
    """The tables of every run's section, each read once for all the runs (data.by_run)."""

    iterations: data.PerRun
    step_hints: data.PerRun
    path: data.PerRun
    kinds: data.PerRun
    kernels: data.PerRun
    ops: data.PerRun
    coverage: data.PerRun
    ncu_counts: dict[str, int]
    ncu_levels: data.PerRun
    anomalies: data.PerRun
    memory: data.PerRun
    instruments: data.PerRun

    @classmethod
    def read(cls, con: duckdb.DuckDBPyConnection, runs: list[str]) -> RunTables:
        return cls(data.iterations(con, runs), data.step_hints(con, runs),
                   data.critical_path_kinds(con, runs), data.kinds(con, runs),
                   data.top_kernels(con, runs, TOP_N), data.top_ops(con, runs, TOP_N),
                   data.match_coverage(con, runs), data.ncu_kernel_counts(con, runs),
                   data.ncu_kernel_levels(con, runs, TOP_N), data.anomalies(con, runs),
                   data.memory(con, runs), data.instruments(con, runs))


def overhead(con: duckdb.DuckDBPyConnection, runs: list[str]) -> Section:
    """Per experiment: each run's time per iteration against the least instrumented run,
    and what its instruments write (the talk's experiment 2, on the user's runs)."""
    title = "What the instruments cost: time per iteration and bytes written"
    if (missing := _without_view(con, data.OVERHEAD, "overhead", title)) is not None:
        return missing
    found = data.instrument_overhead(con, runs)
    if not found:
        return Section("overhead", title, empty="no experiment of these runs has runs that "
                       "differ in their instruments (same repeat: tag, or same model, "
                       "framework, precision, batch size and GPU in run.toml)")
    by_experiment: dict[str, list[data.Row]] = {}
    for r in found:
        by_experiment.setdefault(r.pop("experiment"), []).append(r)
    return Section("overhead", title, [_overhead_figure(name, rows)
                                       for name, rows in by_experiment.items()])


def _overhead_figure(experiment: str, rows: list[data.Row]) -> Figure:
    title = f"Instruments of {experiment}"
    times = {r["run_name"]: r["iteration_ns"] for r in rows}
    chart = svg.bar_chart(title, list(times), [svg.Series("time per iteration (ms)", [
        None if t is None else t / 1e6 for t in times.values()])], "ms per iteration", "run")
    baseline = rows[0]["baseline_run"]
    note = (f"Against {baseline}, the least instrumented run. Time per iteration from the "
            "trace, else from run.toml seconds_per_iteration (iteration_source); bytes per "
            "iteration = the instrument's bytes per second of the job x the run's time per "
            "iteration.")
    return Figure(title, Table.of(data.OVERHEAD, rows), chart, note)


def per_run(con: duckdb.DuckDBPyConnection, tables: RunTables, run: str, index: int
            ) -> Section:
    figures = [_busy_idle(tables, run), _critical_path(tables, run),
               _what_ifs(con, tables, run), _kind_breakdown(tables, run)]
    figures += [_top_kernels(tables, run), _top_ops(tables, run), _coverage(tables, run),
                _anomalies(tables, run)]
    figures += [_memory(tables, run, f"run-{index}-memory"),
                _instruments(tables, run, f"run-{index}-instruments")]
    for figure in figures:  # never a blank chart: a figure without rows says why
        if not figure.table.rows:
            figure.chart = ""
            figure.note = figure.note or "no rows: this run has no GPU activity of this kind"
    return Section(f"run-{index}", f"Run {run}", figures)


def _iteration_labels(rows: Sequence[data.Row]) -> list[str]:
    """`it 3`, or `r1/d0 it 3` when the rows hold several ranks or devices."""
    several = len({(r["source_id"], r["device_id"]) for r in rows}) > 1
    return [(f"{_place(r, rows)} " if several else "")
            + ("whole trace" if r["iteration"] is None else f"it {r['iteration']}")
            for r in rows]


def _busy_idle(tables: RunTables, run: str) -> Figure:
    rows = tables.iterations[run]
    title = f"{run}: busy and idle time per iteration"
    labels = _iteration_labels(rows)
    series = [svg.Series("busy (a kernel running)", [r["busy_ns"] / 1e6 for r in rows]),
              svg.Series("idle", [r["idle_ns"] / 1e6 for r in rows])]
    chart = svg.bar_chart(title, labels, series, "time (ms)", "iteration", stacked=True)
    hints = tables.step_hints[run]
    several = len(hints) > 1
    note = " ".join((f"Source {h['source_id']}: " if several else "") + h["detail"][0].upper()
                    + h["detail"][1:] for h in hints)
    return Figure(title, Table.of("gpu_utilization", rows), chart, note)


def _critical_path(tables: RunTables, run: str) -> Figure:
    rows = tables.path[run]
    title = f"{run}: critical path per iteration, by kind"
    labels = _iteration_labels(rows)
    series = [svg.Series(kind, [(r[f"{kind}_ns"] or 0) / 1e6 for r in rows])
              for kind in data.PATH_KINDS]
    chart = svg.bar_chart(title, labels, series, "time on the critical path (ms)", "iteration",
                          stacked=True)
    return Figure(title, Table.of("critical_path_summary", rows), chart,
                  note="what each iteration's end waited on, back to its start (etl whatif "
                       "replays it with other durations)")


STANDARD_WHAT_IFS = (("GPU work 2x faster", "all:0.5"), ("no host overhead", "host:0"),
                     ("communication free", "kernel_type=communication:0"))


def _what_ifs(con: duckdb.DuckDBPyConnection, tables: RunTables, run: str) -> Figure:
    """Three what-ifs every run can be asked: the mean speedup over its windows. The run is
    read and replayed once for the three."""
    from etl.analysis.whatif import WhatIfError, answer, parse_scale, prepare

    rows: list[data.Row] = []
    notes: set[str] = set()
    recorded = {(r["source_id"], r["device_id"], r["iteration"]): r["window_ns"]
                for r in tables.iterations[run] if r["window_ns"] is not None}
    try:
        prepared: Any = prepare(con, run, recorded)
    except WhatIfError as exc:
        prepared = exc
    for question, scale in STANDARD_WHAT_IFS:
        try:
            if isinstance(prepared, WhatIfError):
                raise prepared
            result = answer(prepared, [parse_scale(scale)])
        except WhatIfError as exc:
            rows.append({"what_if": question, "scale": scale, "windows": 0,
                         "mean_replayed_ns": None, "mean_whatif_ns": None,
                         "speedup_ratio": None, "note": str(exc).split(": ", 1)[-1]})
            continue
        notes.update(result.notes())
        replayed = sum(r["replayed_ns"] for r in result.rows) / len(result.rows)
        changed = sum(r["whatif_ns"] for r in result.rows) / len(result.rows)
        rows.append({"what_if": question, "scale": scale, "windows": len(result.rows),
                     "mean_replayed_ns": replayed, "mean_whatif_ns": changed,
                     "speedup_ratio": replayed / changed if changed > 0 else None, "note": ""})
    title = f"{run}: what three changes would buy"
    return Figure(title, Table.of("etl whatif", rows), note="; ".join(sorted(notes)))


def _kind_breakdown(tables: RunTables, run: str) -> Figure:
    rows = tables.kinds[run]
    title = f"{run}: GPU time by activity kind"
    chart = svg.bar_chart(title, [r["kind"] for r in rows],
                          [svg.Series("GPU time (ms)", [r["total_ns"] / 1e6 for r in rows])],
                          "summed duration (ms)", "activity kind")
    return Figure(title, Table.of("kernels", rows), chart)


def _top_kernels(tables: RunTables, run: str) -> Figure:
    rows = tables.kernels[run]
    title = f"{run}: top {TOP_N} kernels by GPU time"
    chart = svg.hbar_chart(title, [r["kernel_name"] for r in rows],
                           [svg.Series("share of busy time", [r["busy_share"] for r in rows])],
                           "kernel time / busy time (0..1)")
    return Figure(title, Table.of("kernel_summary", rows), chart)


def _top_ops(tables: RunTables, run: str) -> Figure:
    rows = tables.ops[run]
    title = f"{run}: top {TOP_N} operators by GPU time"
    chart = svg.hbar_chart(title, [f"{r['op_name']} / {r['layer']}" for r in rows],
                           [svg.Series("share of kernel time",
                                       [r["gpu_time_share"] for r in rows])],
                           "op's kernel time / all kernel time (0..1)")
    return Figure(title, Table.of("op_time", rows), chart)


def _coverage(tables: RunTables, run: str) -> Figure:
    rows = tables.coverage[run]
    title = f"{run}: match coverage of the ncu export"
    if rows:
        return Figure(title, Table.of("match_quality", rows))
    exported = tables.ncu_counts.get(run)
    if not exported:
        return Figure(title, Table.of("match_quality", rows), note="no ncu export in this run")
    levels = tables.ncu_levels[run]
    return Figure(f"{run}: the ncu export's kernels, by themselves",
                  Table.of("ncu_kernel_utilization", levels), note=(
                      f"The run's ncu export has {exported} kernel(s) and no trace kernel to "
                      "match them to (no trace in the run, or none matched): their levels "
                      f"are shown by themselves (the {min(TOP_N, len(levels))} longest), "
                      "without GPU time, iterations or a GPU level."))


def _anomalies(tables: RunTables, run: str) -> Figure:
    rows = tables.anomalies[run]
    title = f"{run}: anomalies"
    return Figure(title, Table.of("anomalies", rows),
                  note="" if rows else "no anomalies recorded for this run")


MEMORY_STATUS = {
    "no_memory_events": "no memory events in this run (PyTorch: profile with "
                        "profile_memory=True; TensorFlow/JAX: the xplane's allocator events)",
    "no_allocated_bytes": "the memory events carry no allocated bytes",
    "memory_events_of_other_devices": "the trace's GPU memory events are of other devices "
                                      "than those its kernels ran on (anomaly "
                                      "memory_device_unmatched)",
}


def _memory(tables: RunTables, run: str, anchor: str) -> Figure:
    rows = tables.memory[run]
    title = f"{run}: peak GPU memory per iteration"
    measured = [r for r in rows if r["peak_allocated_bytes"] is not None]
    if not measured:
        statuses = sorted({r["memory_status"] for r in rows})
        why = "; ".join(MEMORY_STATUS.get(s, s) for s in statuses) or "no iteration windows"
        return Figure(title, Table.of(data.MEMORY, []), note=why, id=anchor)
    series = [svg.Series(f"peak {kind} (MiB)", [(r[f"peak_{kind}_bytes"] or 0) / 2**20
                                                for r in measured])
              for kind in ("allocated", "reserved")]
    chart = svg.bar_chart(title, _iteration_labels(measured), series, "MiB", "iteration")
    unknown = len(rows) - len(measured)
    note = (f"peak_memory_share = peak allocated / the device's memory. {unknown} iteration(s)"
            " without memory events are not drawn." if unknown else
            "peak_memory_share = peak allocated / the device's memory.")
    return Figure(title, Table.of(data.MEMORY, rows), chart, note, anchor)


TENSOR_INSTRUMENTS = ("dcgm_tensor_active_util", "nsys_tensor_active_util",
                      "ncu_tc_active_util")
BUSY_INSTRUMENTS = ("smi_gpu_util", "dcgm_gr_engine_active_util", "trace_gpu_util")


def _instruments(tables: RunTables, run: str, anchor: str) -> Figure:
    rows = tables.instruments[run]
    title = f"{run}: instruments side by side (same windows)"
    shown = [c for c in data.INSTRUMENTS if any(r[c] is not None for r in rows)]
    hidden = _why_hidden(rows, [c for c in data.INSTRUMENTS if c not in shown])
    table = Table.of(data.INSTRUMENT_COMPARISON, rows,
                     ["source_id", "device_id", "iteration", "window_ns", *shown])
    monitors = [c for c in shown if c != "trace_gpu_util"]
    if not rows or not monitors:
        why = "no instrument but the trace has a value for this run's windows"
        return Figure(title, table, note=f"{why}. {hidden}" if rows else
                      "no iteration windows or monitor samples in this run", id=anchor)
    series = [svg.Series(data.INSTRUMENTS[c], [r[c] for r in rows]) for c in shown]
    labels = ["whole run" if r["source_id"] is None else
              ("whole trace" if r["iteration"] is None else f"it {r['iteration']}")
              for r in rows]
    chart = svg.bar_chart(title, labels, series, "utilization (0..1)", "window", y_max=1.0)
    return Figure(title, table, chart, " ".join(filter(None, [_gap(rows), hidden])), anchor)


def _why_hidden(rows: Sequence[data.Row], columns: Sequence[str]) -> str:
    """`Not shown: <instruments>: <reason>; ...`, grouped by the view's reason, a family
    named once when none of its columns is shown for that reason."""
    by_reason: dict[str, list[str]] = {}
    for c in columns:
        for reason in sorted({_general(r[f"{c}_why"]) for r in rows if r[f"{c}_why"]}):
            by_reason.setdefault(reason, []).append(c)
    return ("Not shown: " + "; ".join(f"{', '.join(_families(names))}: {reason}"
                                      for reason, names in by_reason.items()) + "."
            if by_reason else "")


def _general(reason: str) -> str:
    """`no dcgm sm_active samples in the run` → `no samples in the run` (the family is
    named beside it)."""
    import re

    return re.sub(r"^no \S+ \S+ samples in the run$", "no samples in the run", reason)


def _families(columns: Sequence[str]) -> list[str]:
    names: list[str] = []
    for c in columns:
        family = data.INSTRUMENTS[c].split()[0]
        whole = all(x in columns for x in data.INSTRUMENTS
                    if data.INSTRUMENTS[x].split()[0] == family)
        name = family if whole else data.INSTRUMENTS[c]
        if name not in names:
            names.append(name)
    return names


def _gap(rows: Sequence[data.Row]) -> str:
    """The paper's gap: the busiest-looking instrument against the tensor pipes."""
    busy = _first_mean(rows, BUSY_INSTRUMENTS)
    tensor = _first_mean(rows, TENSOR_INSTRUMENTS)
    if busy is None or tensor is None:
        return ""
    return (f"The gap the paper points at: {data.INSTRUMENTS[busy[0]]} reads {busy[1]:.1%} "
            f"busy while {data.INSTRUMENTS[tensor[0]]} has the tensor pipes active "
            f"{tensor[1]:.1%} of the time (means over the windows shown).")


def _first_mean(rows: Sequence[data.Row], columns: Sequence[str]
                ) -> tuple[str, float] | None:
    for c in columns:
        values = [r[c] for r in rows if r[c] is not None]
        if values:
            return c, sum(values) / len(values)
    return None
