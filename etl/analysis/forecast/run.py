"""A measured run forecast on another GPU: each activity's predicted duration (predict.py),
the iterations replayed with them (etl/replay/, as the what-if replays its scales), and an
interval from the backtest's errors.

Per iteration window: measured_ns (gpu_utilization's window), predicted_ns (the window
replayed from its measured start with every GPU activity at its predicted duration and
the host at its measured time × host_factor), and the central 80% interval [low_ns,
high_ns]: with e = predicted / actual − 1 the relative error of a method in the backtest
(intervals.py) and w_m each method's share of the window's predicted GPU time,
low = predicted / (1 + Σ w_m·q90_m), high = predicted / (1 + Σ w_m·q10_m).
`by` op, layer, kernel or kernel_type: the same per group of activities (sums of
durations, not replays: the groups overlap in time).
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from etl.analysis.forecast import inputs as activity_inputs
from etl.analysis.forecast import intervals, ncu
from etl.analysis.forecast.predict import METHODS, Options, Predicted, predict
from etl.analysis.whatif import WhatIfError, _run_id, replay_window
from etl.core.errors import EtlError
from etl.core.gpus import AMBIGUOUS_NAMES, Gpu, GpuNameError, resolve, trace_name_row
from etl.replay import engine, graph, inputs, windows

if TYPE_CHECKING:
    import duckdb

BY = ("iteration", "op", "layer", "kernel", "kernel_type")
GROUP_COLUMN = {"op": "op_name", "layer": "layer", "kernel": "name",
                "kernel_type": "kernel_type"}
PRECISIONS = ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8")


class ForecastError(EtlError):
    """A forecast that cannot be made as asked (one line, with what to do)."""


@dataclass
class Forecast:
    target: Gpu
    rows: list[dict[str, Any]]
    notes: list[str] = field(default_factory=list)
    predicted: Predicted | None = None

    @property
    def columns(self) -> list[str]:
        return list(self.rows[0]) if self.rows else []


@dataclass
class Prepared:
    """What a forecast reads of a run, whatever the target: its graph, windows, activities
    and their GPUs (prepare once, forecast on several GPUs)."""

    run_name: str
    run_id: str
    built: graph.Graph
    ordered: engine.Order
    iteration_windows: list[windows.Window]
    recorded: dict[tuple[int, int, int | None], int]
    acts: activity_inputs.ActivityInputs
    sources: list[Gpu]
    options: Options
    memory: list[tuple[Any, ...]]
    ncu: ncu.Counters


def prepare(con: duckdb.DuckDBPyConnection, run_name: str, source_gpu: str | None = None,
            fallback: dict[str, str] | None = None) -> Prepared:
    options = Options(_run_precision(con, run_name), tuple(sorted(_fallback(fallback).items())))
    run_id = _run_id(con, run_name)
    built = graph.build(inputs.read_run(con, run_id))
    ordered = engine.order(built)
    gpu = built.events.gpu
    recorded, memory = _utilization(con, run_id)
    return Prepared(run_name, run_id, built, ordered,
                    windows.windows(built, engine.measured(built, ordered).time), recorded,
                    activity_inputs.read(con, run_id, gpu),
                    source_gpus(con, run_id, gpu, source_gpu), options, memory,
                    ncu.read(con, run_id, gpu))


def forecast(con: duckdb.DuckDBPyConnection, run_name: str, target_name: str,
             by: str = "iteration", source_gpu: str | None = None, host_factor: float = 1.0,
             fallback: dict[str, str] | None = None) -> Forecast:
    """The run forecast on the target GPU (see the module docstring)."""
    if by not in BY:
        raise ForecastError(f"--by {by!r}: one of {', '.join(BY)}")
    target = resolve(target_name, "--gpu")
    return forecast_on(prepare(con, run_name, source_gpu, fallback), target, by, host_factor)


def forecast_on(run: Prepared, target: Gpu, by: str = "iteration", host_factor: float = 1.0,
                comm: np.ndarray | None = None) -> Forecast:
    """A prepared run forecast on one target GPU; `comm`, per GPU activity, a factor on
    its predicted time (the collectives' on more GPUs: etl/analysis/scale_out.py)."""
    if not (host_factor >= 0 and np.isfinite(host_factor)):
        raise ForecastError(f"--host-factor {host_factor!r}: a non-negative number")
    gpu = run.built.events.gpu
    predicted = predict(gpu, run.acts, run.sources, target, run.options,
                        ncu.factors(run.ncu, run.acts, run.sources, target,
                                    dict(run.options.fallback)))
    notes = predicted.notes + memory_notes(run.memory, target)
    if by == "iteration":
        rows = _iteration_rows(run, predicted, target, host_factor, comm)
        if all(w.boundary == "whole_trace" for w in run.iteration_windows):
            notes.insert(0, "the run has no steps: each source is replayed over its whole "
                            "window (boundary whole_trace)")
    else:
        rows = _group_rows(run.run_name, gpu, predicted, target, GROUP_COLUMN[by])
    return Forecast(target, rows, notes, predicted)


def _fallback(given: dict[str, str] | None) -> dict[str, str]:
    for lacking, stand_in in (given or {}).items():
        if lacking not in PRECISIONS or stand_in not in PRECISIONS:
            raise ForecastError(f"--fallback {lacking}={stand_in}: both sides are one of "
                                f"{', '.join(PRECISIONS)}")
    return dict(given or {})


def _run_precision(con: duckdb.DuckDBPyConnection, run_name: str) -> str | None:
    found = con.execute("SELECT p.peak_precision FROM runs AS r JOIN peak_precisions AS p "
                        "ON p.run_precision = lower(trim(r.precision)) WHERE r.run_name = ?",
                        [run_name]).fetchall()
    return str(found[0][0]) if found else None


def source_gpus(con: duckdb.DuckDBPyConnection, run_id: str, gpu: inputs.Columns,
                override: str | None) -> list[Gpu]:
    """The catalog row of each activity's device: --source-gpu, else the device's name as
    the trace writes it, else run.toml's gpu; refused when none names one row."""
    if override is not None:
        row = resolve(override, "--source-gpu")
        return [row] * len(gpu)
    names = {(int(s), int(d)): n for s, d, n in con.execute(
        "SELECT source_id, device_id, name FROM devices WHERE run_id = ?", [run_id]).fetchall()}
    found = con.execute("SELECT gpu FROM runs WHERE run_id = ?", [run_id]).fetchall()
    run_gpu = found[0][0] if found else None
    rows: dict[tuple[int, int], Gpu] = {}
    for key in set(zip(gpu["source_id"].tolist(), gpu["device_id"].tolist())):
        rows[key] = _device_row(names.get(key), run_gpu, key)
    return [rows[k] for k in zip(gpu["source_id"].tolist(), gpu["device_id"].tolist())]


def _device_row(name: str | None, run_gpu: str | None, key: tuple[int, int]) -> Gpu:
    row = trace_name_row(name)
    if row is not None:
        return row
    if name is not None and name.strip().lower() in AMBIGUOUS_NAMES:
        resolve(name, f"the GPU of source {key[0]} device {key[1]}")  # raises, candidates
    if run_gpu:
        try:
            return resolve(run_gpu, "run.toml gpu")
        except GpuNameError as exc:
            raise ForecastError(f"{exc}; or give --source-gpu NAME") from None
    raise ForecastError(f"the GPU of source {key[0]} device {key[1]} is unknown (the trace "
                        f"writes {name!r}, run.toml gives no gpu): give --source-gpu NAME "
                        "(etl gpus lists the catalog)")


def _utilization(con: duckdb.DuckDBPyConnection, run_id: str
                 ) -> tuple[dict[tuple[int, int, int | None], int], list[tuple[Any, ...]]]:
    """gpu_utilization's windows (source, device, iteration → window_ns) and per device
    its peak memory (rank, device, reserved, allocated bytes), in one read of the view."""
    rows = con.execute("SELECT source_id, device_id, iteration, window_ns, rank, "
                       "peak_reserved_bytes, peak_allocated_bytes FROM gpu_utilization "
                       "WHERE run_id = ?", [run_id]).fetchall()
    recorded = {(int(s), int(d), i): int(w) for s, d, i, w, *_ in rows if w is not None}
    peaks: dict[tuple[Any, int], list[Any]] = {}
    for _, device, _, _, rank, reserved, allocated in rows:
        peak = peaks.setdefault((rank, device), [None, None])
        for at, value in ((0, reserved), (1, allocated)):
            if value is not None:
                peak[at] = value if peak[at] is None else max(peak[at], value)
    memory = [(r, d, *peaks[(r, d)]) for r, d in sorted(peaks, key=lambda k: (
        k[0] is None, k[0] or 0, k[1]))]
    return recorded, memory


def memory_notes(rows: list[tuple[Any, ...]], target: Gpu) -> list[str]:
    """Whether the run's peak memory (per device: rank, device, reserved, allocated bytes)
    fits the target's."""
    capacity = target.memory_bytes
    if capacity is None:
        return [f"{target.key}: memory size {target.why_missing('memory_gb')}: not checked"]
    out = []
    for rank, device, reserved, allocated in rows:
        peak = reserved if reserved is not None else allocated
        where = f"device {device}" + ("" if rank is None else f" of rank {rank}")
        if peak is None:
            out.append(f"{where}: peak memory not measured (profile_memory=True): whether it "
                       f"fits {target.key}'s {capacity / 1e9:g} GB is not checked")
        elif peak > capacity:
            out.append(f"{where}: peak memory {peak / 1e9:.1f} GB does not fit "
                       f"{target.key}'s {capacity / 1e9:g} GB")
    return out


def _iteration_rows(run: Prepared, predicted: Predicted, target: Gpu, host_factor: float,
                    comm: np.ndarray | None = None) -> list[dict[str, Any]]:
    built = run.built
    if not run.iteration_windows:
        raise WhatIfError(f"run {run.run_name!r} has no iteration window (no kernel on a "
                          "device): nothing to forecast")
    factors = built.unit_factors()
    factors[1:built.first_activity_slot] = host_factor
    factors[built.first_activity_slot:] = (predicted.factor if comm is None
                                           else predicted.factor * comm)
    replayer = engine.Replayer(built, run.ordered, factors)
    errors = intervals.method_errors()
    rows = []
    for window in run.iteration_windows:
        after, _ = replay_window(replayer, window)
        mine = _window_activities(built, window)
        rows.append(_iteration_row(run.run_name, window, after.length_ns, run.recorded,
                                   target, predicted, mine, errors))
    return rows


def _window_activities(built: graph.Graph, window: windows.Window) -> np.ndarray:
    gpu = built.events.gpu
    mine = (gpu["source_id"] == window.source_id) & (gpu["device_id"] == window.device_id)
    if window.iteration is not None:
        mine &= gpu["iteration"] == window.iteration
    return np.flatnonzero(mine)


def _iteration_row(run_name: str, window: windows.Window, predicted_ns: int,
                   recorded: dict[tuple[int, int, int | None], int], target: Gpu,
                   predicted: Predicted, mine: np.ndarray,
                   errors: dict[str, tuple[float, float]]) -> dict[str, Any]:
    shares = _shares(predicted, mine)
    low, high = intervals.bounds(predicted_ns, shares, errors)
    return {"run_name": run_name, "rank": window.rank, "device_id": window.device_id,
            "iteration": window.iteration, "target_gpu": target.key,
            "measured_ns": recorded.get((window.source_id, window.device_id,
                                         window.iteration)),
            "predicted_ns": predicted_ns, "low_ns": low, "high_ns": high,
            **{f"{m}_share": shares.get(m) for m in METHODS}}


def _shares(predicted: Predicted, mine: np.ndarray) -> dict[str, float]:
    total = float(predicted.predicted_ns[mine].sum())
    if total <= 0:
        return {}
    methods = predicted.method[mine]
    return {m: float(predicted.predicted_ns[mine][methods == m].sum()) / total
            for m in METHODS}


def _group_rows(run_name: str, gpu: inputs.Columns, predicted: Predicted, target: Gpu,
                column: str) -> list[dict[str, Any]]:
    groups: dict[tuple[Any, ...], list[int]] = defaultdict(list)
    for k, key in enumerate(zip(gpu["rank"].tolist(), gpu["device_id"].tolist(),
                                gpu[column].tolist())):
        groups[key].append(k)
    errors = intervals.method_errors()
    rows = []
    for (rank, device, value), members in groups.items():
        mine = np.array(members, np.int64)
        shares = _shares(predicted, mine)
        total = int(round(float(predicted.predicted_ns[mine].sum())))
        low, high = intervals.bounds(total, shares, errors)
        rows.append({"run_name": run_name, "rank": None if rank == inputs.NONE else rank,
                     "device_id": device, column: value, "target_gpu": target.key,
                     "activity_count": len(members),
                     "measured_ns": int(predicted.measured_ns[mine].sum()),
                     "predicted_ns": total, "low_ns": low, "high_ns": high,
                     **{f"{m}_share": shares.get(m) for m in METHODS}})
    rows.sort(key=lambda r: -r["predicted_ns"])
    return rows
