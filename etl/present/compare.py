"""`etl compare RUN_A RUN_B`: two runs side by side, with the noise told apart from change.

Samples are iterations: every iteration of every rank and device from the one run_summary
selects (the first stable one) on, so the warm-up steps do not count. For each quantity the
mean of each run, their difference B - A and ratio B / A, a 95% confidence interval of the
difference and Welch's t-test (scipy.stats.ttest_ind, unequal variances) are given; the
verdict is `changed` when p < 0.05, `within noise` otherwise, and `one sample` when a run
has fewer than two iterations (no test is possible), `no data` when one has none (no
ncu export for the levels). The four levels come from
run_utilization (one value per device). Each table is read once for the runs of both
sides (a query's fixed cost, binding views over views, is most of its time).

A side may name several runs: repeats of one configuration. `A` and `B` are each a run
name, run names joined by commas (`r1,r2,r3`), or `repeat:<group>`, every run whose
run.toml `tags` holds that exact tag. When a side has more than one run, the samples are
runs on both sides: each run's value is the mean of its steady iterations (of its devices
for the levels), and the mean, interval and Welch test are over those per-run values, since
iterations of one run are not independent repeats of the experiment. The `samples` column
says which (`iterations` or `runs`).

    pooling (A = repeat:base: runs a1, a2; metric window_ns):
      a1 steady iterations: 100, 102, 98 us  -> a1: 100 us
      a2 steady iterations: 110, 110 us      -> a2: 110 us
      → A: samples [100, 110] us, n_a = 2, mean_a = 105 us

    before/after of the grouping (--by op):
      kernels of run A, iteration 2: aten::conv2d 3 ms, aten::relu 1 ms
      kernels of run A, iteration 3: aten::conv2d 3.2 ms          (relu absent: 0 ms)
      → aten::conv2d: samples [3, 3.2] ms; aten::relu: samples [1, 0] ms
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from etl.core.errors import EtlError

if TYPE_CHECKING:
    import duckdb

ALPHA = 0.05
GROUPINGS = {"op": "coalesce(k.op_name, '(no op)')", "layer": "coalesce(k.layer, '(no layer)')",
             "kernel": "k.name", "kernel_type": "k.kernel_type"}
COLUMNS = ["part", "metric", "unit", "n_a", "n_b", "mean_a", "mean_b", "diff", "ratio",
           "diff_ci_low", "diff_ci_high", "p_value", "verdict", "samples"]
REPEAT_PREFIX = "repeat:"
SUMMARY_METRICS = (("window_ns", "ns"), ("busy_ns", "ns"), ("gpu_util", "0..1"),
                   ("throughput_samples_per_s", "samples/s"))
LEVELS = ("gpu_util", "smsp_active_util", "issue_slot_util", "tc_active_util", "tc_issue_util")
# the steady iterations of each rank and device: run_summary's selected one and those after
STEADY = """
    SELECT g.run_name, g.source_id, g.device_id, g.iteration, g.window_ns, g.busy_ns,
           g.gpu_util, CASE WHEN g.window_ns > 0 THEN r.batch_size * 1e9 / g.window_ns END
    FROM gpu_utilization AS g
    JOIN run_summary AS s
      ON s.run_id = g.run_id AND s.source_id = g.source_id AND s.device_id = g.device_id
    JOIN runs AS r ON r.run_id = g.run_id
    WHERE g.run_name IN {runs}
      AND (s.selected_iteration IS NULL OR g.iteration >= s.selected_iteration)
"""


@dataclass(frozen=True)
class Difference:
    mean_a: float | None
    mean_b: float | None
    diff: float | None
    ratio: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    verdict: str


def difference(a: Sequence[float], b: Sequence[float]) -> Difference:
    """Means, B - A, B / A, Welch's 95% interval of B - A and its p-value."""
    mean_a, mean_b = _mean(a), _mean(b)
    diff = mean_b - mean_a if mean_a is not None and mean_b is not None else None
    ratio = mean_b / mean_a if mean_a and mean_b is not None else None
    if not a or not b:
        return Difference(mean_a, mean_b, diff, ratio, None, None, None, "no data")
    if len(a) < 2 or len(b) < 2:
        return Difference(mean_a, mean_b, diff, ratio, None, None, None, "one sample")
    if _constant(a) and _constant(b):  # no spread at all: the difference is exact
        verdict = "within noise" if diff == 0 else "changed"
        return Difference(mean_a, mean_b, diff, ratio, diff, diff, None, verdict)
    assert mean_a is not None and mean_b is not None and diff is not None
    low, high, p = welch(a, b, mean_a, mean_b)
    return Difference(mean_a, mean_b, diff, ratio, low, high, p,
                      "changed" if p < ALPHA else "within noise")


def welch(a: Sequence[float], b: Sequence[float], mean_a: float, mean_b: float
          ) -> tuple[float, float, float]:
    """Welch's (1 - ALPHA) interval of B - A and its two-sided p-value: what
    scipy.stats.ttest_ind(b, a, equal_var=False) gives, from Student's t in scipy.special
    (scipy.stats alone took 0.8 s to import, half of a compare)."""
    from scipy.special import stdtr, stdtrit

    qa, qb = _variance(a, mean_a) / len(a), _variance(b, mean_b) / len(b)
    se = math.sqrt(qa + qb)
    df = (qa + qb) ** 2 / (qa ** 2 / (len(a) - 1) + qb ** 2 / (len(b) - 1))
    diff = mean_b - mean_a
    half = float(stdtrit(df, 1 - ALPHA / 2)) * se
    return diff - half, diff + half, float(2 * stdtr(df, -abs(diff) / se))


def _variance(values: Sequence[float], mean: float) -> float:
    return math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1)


def _mean(values: Sequence[float]) -> float | None:
    """The mean, the same whatever the order of the values (a query returns rows in any
    order; a plain sum differs in its last bits, and a run against itself would differ)."""
    return math.fsum(values) / len(values) if values else None


def _constant(values: Sequence[float]) -> bool:
    return all(math.isclose(v, values[0], rel_tol=0, abs_tol=0) for v in values)


def _row(part: str, metric: str, unit: str, a: Sequence[float], b: Sequence[float],
         samples: str) -> dict[str, Any]:
    d = difference(a, b)
    return dict(zip(COLUMNS, [part, metric, unit, len(a), len(b), d.mean_a, d.mean_b, d.diff,
                              d.ratio, d.ci_low, d.ci_high, d.p_value, d.verdict, samples]))


Samples = dict[str, list[float]]  # metric or group -> the samples of one run


def _pooled(per_run: Sequence[Samples], by_run: bool) -> Samples:
    """One side's samples: a run's own, or with `by_run` one value per run (the mean of
    that run's samples; a run without any gives none)."""
    out: Samples = {}
    for run in per_run:
        for key, values in run.items():
            pooled = [math.fsum(values) / len(values)] if by_run and values else values
            out.setdefault(key, []).extend(pooled)
    return out


def _in(runs: Sequence[str]) -> str:
    return "(" + ", ".join("?" for _ in runs) + ")"


def _run_summaries(con: duckdb.DuckDBPyConnection, runs: Sequence[str]) -> dict[str, Samples]:
    """Per run: window, busy, gpu_util and throughput per steady iteration; levels per
    device (one query each for all the runs)."""
    metrics = [m for m, _ in SUMMARY_METRICS] + list(LEVELS[1:])
    out: dict[str, Samples] = {r: {m: [] for m in metrics} for r in runs}
    for row in con.execute(STEADY.format(runs=_in(runs)), list(runs)).fetchall():
        for column, (metric, _) in enumerate(SUMMARY_METRICS, 4):
            if row[column] is not None:
                out[row[0]][metric].append(float(row[column]))
    levels = ", ".join(LEVELS[1:])
    for run, *values in con.execute(f"SELECT run_name, {levels} FROM run_utilization WHERE "
                                    f"run_name IN {_in(runs)}", list(runs)).fetchall():
        for level, value in zip(LEVELS[1:], values):
            if value is not None:
                out[run][level].append(value)
    return out


def summary(con: duckdb.DuckDBPyConnection, runs_a: Sequence[str], runs_b: Sequence[str]
            ) -> list[dict[str, Any]]:
    """Window, busy, gpu_util and throughput per iteration; the levels of run_utilization."""
    by_run = len(runs_a) > 1 or len(runs_b) > 1
    per_run = _run_summaries(con, sorted({*runs_a, *runs_b}))
    a, b = (_pooled([per_run[r] for r in runs], by_run) for runs in (runs_a, runs_b))
    units = dict(SUMMARY_METRICS) | {level: "0..1" for level in LEVELS[1:]}
    return [_row("summary", metric, unit, a[metric], b[metric], _unit(by_run))
            for metric, unit in units.items()]


def _unit(by_run: bool) -> str:
    return "runs" if by_run else "iterations"


def changes(con: duckdb.DuckDBPyConnection, runs_a: Sequence[str], runs_b: Sequence[str],
            by: str, top: int) -> list[dict[str, Any]]:
    """The `top` groups by |change| of mean GPU time per steady iteration (absent = 0 ns)."""
    if by == "kernel_type" and not _has_column(con, "kernels", "kernel_type"):
        raise EtlError("--by kernel_type: this warehouse's kernels have no kernel_type column "
                       "yet; use --by op, layer or kernel")
    by_run = len(runs_a) > 1 or len(runs_b) > 1
    per_run = _group_samples(con, sorted({*runs_a, *runs_b}), GROUPINGS[by])
    groups = sorted({g for _, found in per_run.values() for g in found})
    a, b = (_pooled([{g: _padded(per_run[r], g) for g in groups} for r in runs], by_run)
            for runs in (runs_a, runs_b))
    rows = [_row(by, g, "ns per iteration", a.get(g, []), b.get(g, []), _unit(by_run))
            for g in groups]
    rows.sort(key=lambda r: (-abs(r["diff"] or 0), r["metric"]))
    return rows[:top]


RunGroups = tuple[list[tuple[int, Any]], dict[str, dict[tuple[int, Any], float]]]


def _group_samples(con: duckdb.DuckDBPyConnection, runs: Sequence[str], key: str
                   ) -> dict[str, RunGroups]:
    """Per run: its steady (source, iteration) samples and each group's ns in each."""
    found = con.execute(
        "WITH steady AS (SELECT DISTINCT run_name, source_id, iteration FROM "
        f"({STEADY.format(runs=_in(runs))})) "
        f"SELECT r.run_name, {key} AS grp, k.source_id, k.iteration, sum(k.dur_ns) AS ns "
        "FROM kernels AS k JOIN runs AS r ON r.run_id = k.run_id "
        "JOIN steady AS s ON s.run_name = r.run_name AND s.source_id = k.source_id "
        "AND s.iteration IS NOT DISTINCT FROM k.iteration "
        "WHERE k.kind = 'kernel' AND k.dur_ns >= 0 GROUP BY ALL", list(runs)).fetchall()
    out: dict[str, RunGroups] = {}
    for run in runs:
        mine = [row[1:] for row in found if row[0] == run]
        keys = sorted({(s, i) for _, s, i, _ in mine}, key=lambda k: (k[0], k[1] is None, k[1]))
        groups: dict[str, dict[tuple[int, Any], float]] = {}
        for grp, source, iteration, ns in mine:
            groups.setdefault(str(grp), {})[(source, iteration)] = float(ns)
        out[run] = (keys, groups)
    return out


def _padded(run: RunGroups, group: str) -> list[float]:
    keys, groups = run
    times = groups.get(group, {})
    return [times.get(k, 0.0) for k in keys]


def resolve_side(con: duckdb.DuckDBPyConnection, side: str) -> list[str]:
    """The runs a side names: `run`, `r1,r2,...` or `repeat:<group>` (a run.toml tag)."""
    if side.startswith(REPEAT_PREFIX):
        runs = [n for (n,) in con.execute("SELECT run_name FROM runs WHERE list_contains("
                                          "tags, ?) ORDER BY run_name", [side]).fetchall()]
        if not runs:
            raise EtlError(f"no run is tagged {side!r}; add tags = [\"{side}\"] to the "
                           "run.toml of each repeat and ingest again, or name the runs "
                           "joined by commas")
        return runs
    names = [n.strip() for n in side.split(",") if n.strip()]
    known = {n for (n,) in con.execute("SELECT run_name FROM runs").fetchall()}
    missing = [n for n in names if n not in known]
    if missing or not names:
        raise EtlError(f"no run named {', '.join(missing) or repr(side)} in the warehouse; "
                       "`etl runs` lists them")
    return names


def _has_column(con: duckdb.DuckDBPyConnection, table: str, column: str) -> bool:
    return column in [d[0] for d in con.execute(f"SELECT * FROM {table} LIMIT 0").description]


@dataclass(frozen=True)
class Gate:
    """`--fail-above PCT` judged on window_ns (the mean iteration time): `slower` only when
    B's mean exceeds A's by more than PCT percent with the whole 95% interval of B - A
    above that threshold; `undecided` when there is no interval (too few samples)."""

    slower: bool
    undecided: bool
    line: str


def gate(rows: Sequence[dict[str, Any]], percent: float) -> Gate:
    """The gate over compare()'s rows (see Gate)."""
    [time] = [r for r in rows if r["part"] == "summary" and r["metric"] == "window_ns"]
    if time["diff_ci_low"] is None or not time["mean_a"]:
        return Gate(False, True, f"--fail-above {percent:g}: no 95% interval of the "
                    f"iteration time's difference ({time['verdict']}: {time['n_a']} and "
                    f"{time['n_b']} samples); not failing")
    low, high = (100 * time[k] / time["mean_a"] for k in ("diff_ci_low", "diff_ci_high"))
    change = 100 * time["diff"] / time["mean_a"]
    said = (f"B's mean iteration time is {change:+.1f}% of A's (95% interval {low:+.1f}% to "
            f"{high:+.1f}%)")
    if low > percent:
        return Gate(True, False, f"{said}: slower by more than --fail-above {percent:g}%")
    return Gate(False, False, f"{said}: not slower by more than {percent:g}% throughout")


def compare(warehouse: Any, side_a: str, side_b: str, by: str = "op", top: int = 20
            ) -> list[dict[str, Any]]:
    """Summary rows then the top changed groups, every row with the columns COLUMNS.
    Each side is a run, runs joined by commas, or `repeat:<group>` (resolve_side)."""
    from etl.api import connect

    con = connect(warehouse)
    try:
        runs_a, runs_b = resolve_side(con, side_a), resolve_side(con, side_b)
        return summary(con, runs_a, runs_b) + changes(con, runs_a, runs_b, by, top)
    finally:
        con.close()
