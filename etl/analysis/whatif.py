"""What a change would buy: the run's graph replayed with some durations scaled.

A scale is `SELECTOR:FACTOR` (the factor after the last colon: op names hold colons):
- `all`: every GPU activity (kernels, copies, sets);
- `kernel_type=computation|communication|memory|other`;
- `kernel=REGEX`, `op=REGEX`, `layer=REGEX`: activities whose kernel name, op (the op that
  launched it) or layer the regular expression finds (re.search);
- `rank=N`: everything of rank N, its GPU activities and its host time;
- `host`: the CPU time of every host thread (the gaps between calls, a call's own time;
  not the time a thread waits in a blocking call);
- several selectors joined by commas select what all of them select:
  `rank=3,kernel_type=computation:0.5` halves rank 3's computation kernels only ("if rank 3
  were not late"), `rank=3,host:0` removes rank 3's CPU time.
An activity a collective is paired for scales its transfer, not its wait for the other
ranks. Factors multiply where several scales match; 0 removes the time, 1 keeps it. A
scale that matches nothing, or a factor that is not a non-negative number, is refused.

Per iteration window: measured_ns (gpu_utilization's window_ns), replayed_ns (the graph
with the measured durations: equal to measured_ns where the model holds), whatif_ns, and
speedup_ratio = replayed_ns / whatif_ns. A run without steps has one window for the whole
trace (boundary whole_trace), replayed as such.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from etl.core.errors import EtlError
from etl.replay import critical_path, engine, graph, inputs, windows
from etl.replay.inputs import NONE

if TYPE_CHECKING:
    import duckdb

KERNEL_TYPES = ("computation", "communication", "memory", "other")
SELECTORS = ("all", "kernel_type=", "kernel=", "op=", "layer=", "rank=", "host")
USAGE = ("a scale is SELECTOR:FACTOR with SELECTOR all, host, kernel_type=TYPE, kernel=REGEX, "
         "op=REGEX, layer=REGEX or rank=N, or several joined by commas (all must match), "
         "e.g. --scale kernel_type=communication:0.5 or rank=3,kernel_type=computation:0.5")


class WhatIfError(EtlError):
    """A what-if that cannot be answered as asked (one line, with what to do)."""


# a comma joins selectors only where a selector's name follows (regexes hold commas: {1,3})
_JOIN = re.compile(r",(?=(?:all|host|kernel_type=|kernel=|op=|layer=|rank=))")


@dataclass(frozen=True)
class Scale:
    selector: str
    value: str | None   # the part after '=' (None for all, host)
    factor: float
    also: tuple[Scale, ...] = ()  # further selectors that must match too (factor unused)

    @property
    def text(self) -> str:
        parts = [f"{s.selector}{'' if s.value is None else '=' + s.value}"
                 for s in (self, *self.also)]
        return f"{','.join(parts)}:{self.factor:g}"


def parse_scale(text: str) -> Scale:
    """`SELECTOR[,SELECTOR...]:FACTOR`, refused in one line when a part is not understood."""
    selector, colon, factor_text = text.rpartition(":")
    if not colon or not selector:
        raise WhatIfError(f"--scale {text!r}: no factor; {USAGE}")
    try:
        factor = float(factor_text)
    except ValueError:
        factor = -1.0
    if not (factor >= 0 and np.isfinite(factor)):
        raise WhatIfError(f"--scale {text!r}: the factor {factor_text!r} is not a "
                          "non-negative number (0 removes the time, 0.5 halves it)")
    first, *rest = [_selector(text, part, factor) for part in _JOIN.split(selector)]
    return replace(first, also=tuple(rest))


def _selector(text: str, selector: str, factor: float) -> Scale:
    name, equals, value = selector.partition("=")
    if (name + ("=" if equals else "")) not in SELECTORS or (equals and not value):
        raise WhatIfError(f"--scale {text!r}: unknown selector {selector!r}; {USAGE}")
    if name == "kernel_type" and value not in KERNEL_TYPES:
        raise WhatIfError(f"--scale {text!r}: kernel_type is one of {', '.join(KERNEL_TYPES)}")
    if name == "rank" and not re.fullmatch(r"-?\d+", value):
        raise WhatIfError(f"--scale {text!r}: rank=N takes a rank number")
    if name in ("kernel", "op", "layer"):
        try:
            re.compile(value)
        except re.error as exc:
            raise WhatIfError(f"--scale {text!r}: {value!r} is not a regular expression "
                              f"({exc})") from None
    return Scale(name, value if equals else None, factor)


def factors(built: graph.Graph, scales: list[Scale]) -> np.ndarray:
    """The factor of every slot of the graph; a WhatIfError for a scale that matches
    nothing in the run."""
    out = built.unit_factors()
    first = built.first_activity_slot
    for scale in scales:
        hosts, acts = _matches(built, scale)
        if not len(hosts) and not len(acts):
            raise WhatIfError(f"--scale {scale.text}: matches nothing in this run (a what-if "
                              "that changes nothing is not answered with 1.0x)")
        out[hosts] *= scale.factor
        out[first + acts] *= scale.factor
    return out


def _matches(built: graph.Graph, scale: Scale) -> tuple[np.ndarray, np.ndarray]:
    """(host slots, activity indices) a scale selects: what each of its selectors does."""
    hosts, acts = _selected(built, scale)
    for other in scale.also:
        more_hosts, more_acts = _selected(built, other)
        hosts, acts = np.intersect1d(hosts, more_hosts), np.intersect1d(acts, more_acts)
    return hosts, acts


def _selected(built: graph.Graph, scale: Scale) -> tuple[np.ndarray, np.ndarray]:
    """(host slots, activity indices) one selector selects."""
    gpu = built.events.gpu
    none = np.array([], np.int64)
    if scale.selector == "host":
        return np.array(sorted(built.host_slot.values()), np.int64), none
    if scale.selector == "rank":
        rank = int(scale.value or 0)
        acts = np.flatnonzero(gpu["rank"] == rank) if len(gpu) else none
        sources = {int(s) for s, r in zip(built.events.threads["source_id"].tolist(),
                                          _thread_ranks(built)) if r == rank}
        sources |= set(gpu["source_id"][acts].tolist())
        return np.array(sorted(built.host_slot[s] for s in sources), np.int64), acts
    if scale.selector == "all":
        return none, np.arange(len(gpu))
    column = {"kernel_type": "kernel_type", "kernel": "name", "op": "op_name",
              "layer": "layer"}[scale.selector]
    values = gpu[column] if len(gpu) else np.array([], object)
    if scale.selector == "kernel_type":
        hit = values == scale.value
    else:
        pattern = re.compile(scale.value or "")
        hit = np.array([v is not None and pattern.search(str(v)) is not None for v in values],
                       bool)
    return none, np.flatnonzero(hit)


def _thread_ranks(built: graph.Graph) -> list[int | None]:
    """The rank of each thread's source (from its calls; None where unknown)."""
    calls = built.events.calls
    rank_of = {int(s): int(r) for s, r in zip(calls["source_id"].tolist(),
                                              calls["rank"].tolist()) if r != NONE}
    return [rank_of.get(int(s)) for s in built.events.threads["source_id"].tolist()]


@dataclass
class WhatIf:
    rows: list[dict[str, Any]]             # one per iteration window
    path: list[dict[str, Any]]             # the what-if's critical path, by kind and name
    whole_trace: bool                      # the run has no steps: one window per source
    unlinked: Counter[str] = field(default_factory=Counter)

    def notes(self) -> list[str]:
        """What the rows rest on, in words (the table's notes)."""
        from etl.analysis.critical_path import UNLINKED_REMEDY, UNLINKED_WHAT

        out = []
        if self.whole_trace:
            out.append("the run has no steps: each source is replayed over its whole window "
                       "(boundary whole_trace)")
        for what, count in sorted(self.unlinked.items()):
            out.append(f"{count} {UNLINKED_WHAT.get(what, what)}: {UNLINKED_REMEDY}")
        return out


def what_if(con: duckdb.DuckDBPyConnection, run_name: str, texts: list[str]) -> WhatIf:
    """The run's iterations replayed with the scales `texts` (see the module docstring)."""
    scales = [parse_scale(t) for t in texts]
    return answer(prepare(con, run_name), scales)


@dataclass
class Prepared:
    """A run's graph, its replay order and its windows with the measured durations: what
    every what-if of the run starts from (the report asks three of each run)."""

    run_name: str
    graph: graph.Graph
    ordered: Any
    before: list[windows.Window]
    recorded: dict[tuple[int, int, int | None], int]


def prepare(con: duckdb.DuckDBPyConnection, run_name: str,
            recorded: dict[tuple[int, int, int | None], int] | None = None) -> Prepared:
    """Read and replay the run once; `recorded` (gpu_utilization's window_ns by source,
    device and iteration) is read here unless the caller has it."""
    run_id = _run_id(con, run_name)
    built = graph.build(inputs.read_run(con, run_id))
    ordered = engine.order(built)
    measured = engine.replay(built, ordered, built.unit_factors())
    before = windows.windows(built, measured.time)
    if not before:
        raise WhatIfError(f"run {run_name!r} has no iteration window (no kernel on a device): "
                          "nothing to replay")
    if recorded is None:
        recorded = _measured_windows(con, run_id)
    return Prepared(run_name, built, ordered, before, recorded)


def answer(run: Prepared, scales: list[Scale]) -> WhatIf:
    """The prepared run's windows replayed with `scales`."""
    built = run.graph
    replayer = engine.Replayer(built, run.ordered, factors(built, scales))
    rows, path = [], Counter[tuple[str, str | None]]()
    for window in run.before:
        after, changed = replay_window(replayer, window)
        rows.append(_row(run.run_name, window, after, run.recorded))
        _add_path(path, built, changed, after)
    return WhatIf(rows, _path_rows(path), all(w.boundary == "whole_trace" for w in run.before),
                  built.unlinked)


def replay_window(replayer: engine.Replayer, window: windows.Window
                  ) -> tuple[windows.Window, engine.Replay]:
    """One iteration replayed from its measured start: what came before its window keeps
    its measured times and the window starts where it did, so that each iteration's answer
    is its own (an iteration does not inherit the savings of the ones before it, and no
    scale of at most 1 can lengthen it: every replayed instant is at most its measured one)."""
    built, ordered = replayer.graph, replayer.ordered
    first, last = _window_range(built, ordered, window)
    changed = replayer.run(first, last)
    key = (window.source_id, window.device_id)
    [after] = [w for w in windows.windows(built, changed.time, key, window.iteration, True)
               if w.iteration == window.iteration]
    # it starts where it did (the state it starts from is the measured one)
    return replace(after, start_ns=window.start_ns,
                   end_ns=max(after.end_ns, window.start_ns)), changed


def _window_range(built: graph.Graph, ordered: engine.Order, window: windows.Window
                  ) -> tuple[int, int]:
    """The places of the order a window's replay covers: every source's nodes from the
    window's start to its end, each source's times read on its own clock (ranks record on
    their own clocks, aligned by their collectives: the replay's clock shifts), so that
    another rank's work this window waits for is replayed with it."""
    shifts = _clock_shifts(built)
    own = shifts.get(window.source_id, 0)
    first, last = ordered.first_at_or_after(built, window.start_ns), -1
    for source, nodes in built.source_nodes.items():
        delta = own - shifts.get(source, 0)   # the window's times on this source's clock
        places, times = ordered.position[nodes], built.base[nodes]
        inside = places[(times >= window.start_ns + delta) & (times <= window.end_ns + delta)]
        if len(inside):
            first, last = min(first, int(inside.min())), max(last, int(inside.max()))
    measured_by_end = np.flatnonzero(built.base[ordered.nodes] <= window.end_ns)
    if len(measured_by_end):
        last = max(last, int(measured_by_end[-1]))
    return first, max(first, last)


def _clock_shifts(built: graph.Graph) -> dict[int, int]:
    """Per source, what puts its times on the run's common clock (collectives_v1's)."""
    gpu = built.events.gpu
    if not len(gpu):
        return {}
    return {int(s): int(c) for s, c in zip(gpu["source_id"].tolist(),
                                           gpu["clock_shift_ns"].tolist())}


def _run_id(con: duckdb.DuckDBPyConnection, run_name: str) -> str:
    found = con.execute("SELECT run_id FROM runs WHERE run_name = ?", [run_name]).fetchall()
    if not found:
        names = [r[0] for r in con.execute("SELECT run_name FROM runs ORDER BY run_name "
                                           "LIMIT 5").fetchall()]
        raise WhatIfError(f"no run named {run_name!r} in the warehouse (etl runs lists them; "
                          f"e.g. {', '.join(names) or 'none yet'})")
    return str(found[0][0])


def _measured_windows(con: duckdb.DuckDBPyConnection, run_id: str
                      ) -> dict[tuple[int, int, int | None], int]:
    rows = con.execute("SELECT source_id, device_id, iteration, window_ns FROM gpu_utilization "
                       "WHERE run_id = ?", [run_id]).fetchall()
    return {(int(s), int(d), i): int(w) for s, d, i, w in rows if w is not None}


def _row(run_name: str, before: windows.Window, after: windows.Window,
         recorded: dict[tuple[int, int, int | None], int]) -> dict[str, Any]:
    replayed, changed = before.length_ns, after.length_ns
    return {"run_name": run_name, "rank": before.rank, "device_id": before.device_id,
            "iteration": before.iteration,
            "measured_ns": recorded.get((before.source_id, before.device_id, before.iteration)),
            "replayed_ns": replayed, "whatif_ns": changed,
            "speedup_ratio": replayed / changed if changed > 0 else None}


def _add_path(total: Counter[tuple[str, str | None]], built: graph.Graph,
              result: engine.Replay, window: windows.Window) -> None:
    segments = critical_path.walk(built, result, window)
    for segment, name in zip(segments, critical_path.describe_all(built, segments)["name"]):
        total[(segment.kind, None if name is None else str(name))] += segment.dur_ns


def _path_rows(total: Counter[tuple[str, str | None]]) -> list[dict[str, Any]]:
    """The what-if's critical path over all windows: time by kind and name, largest first."""
    whole = sum(total.values()) or 1
    return [{"segment_kind": kind, "name": name, "dur_ns": ns, "path_share": ns / whole}
            for (kind, name), ns in total.most_common()]
