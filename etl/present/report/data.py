"""What the report reads: one query per table of the report, on one snapshot.

Every function takes a connection of `etl.connect()` and the selected run names, and
returns rows as dicts in a fixed order, so that the same warehouse gives the same report.
A table that each run's section has is read for all the runs at once (a query's fixed
cost, binding a view over its views, is most of its time on a small warehouse) and
handed out by run: `{run_name: rows}`, each run's rows in the order its own query gave.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from etl.core.errors import EtlError

if TYPE_CHECKING:
    import duckdb

Row = dict[str, Any]


def rows(con: duckdb.DuckDBPyConnection, sql: str, params: Sequence[Any] = ()) -> list[Row]:
    cursor = con.execute(sql, list(params))
    names = [d[0] for d in cursor.description or []]
    return [dict(zip(names, r)) for r in cursor.fetchall()]


def select_runs(con: duckdb.DuckDBPyConnection, names: Sequence[str], where: str | None
                ) -> list[str]:
    """Run names chosen by name or by a SQL predicate over `runs` (all runs by default)."""
    import duckdb

    if names and where:
        raise EtlError("give run names or --where, not both")
    try:
        if where:
            found = rows(con, f"SELECT run_name FROM runs WHERE {where} ORDER BY run_name")
        else:
            found = rows(con, "SELECT run_name FROM runs ORDER BY run_name")
    except duckdb.Error as exc:
        raise EtlError(f"--where {where!r}: {str(exc).splitlines()[0]}") from None
    chosen = [r["run_name"] for r in found]
    missing = sorted(set(names) - set(chosen))
    if missing:
        raise EtlError(f"no run named {', '.join(missing)} in the warehouse; `etl runs` "
                       "lists them")
    return sorted(names) if names else chosen


# The views under most of the report's tables (tc_amdahl, batch_scaling, the utilization
# and instrument tables read them through run_utilization_v2), each one row per iteration
# window or per run, in creation order. Binding a table binds its whole tree of views
# again, and most of a query's time on a small warehouse is that: computed once each
# (demo report 4.5 -> 2.1 s), the tables above bind and run over their rows.
SHARED_VIEWS = ("_iteration_windows_v1", "_iteration_windows_v3", "_window_coverage_v1",
                "_iteration_memory_v2", "_iteration_memory_v3", "gpu_utilization_v1",
                "gpu_utilization_v4", "gpu_utilization_v5", "run_summary_v4", "run_summary_v5",
                "run_utilization_v2")


def share_views(con: duckdb.DuckDBPyConnection, chosen: Sequence[str]) -> bool:
    """Keep each of SHARED_VIEWS in a TEMP table of its name when `chosen` is every run;
    whether it did. DuckDB resolves a name in the temp schema first, so the stored views
    that read one read its rows, which are the view's own on this snapshot, sorted so that
    sums above them add in one order. For some of the runs the views are left alone: kept
    whole they would be computed for every run, and cut to the chosen runs they would
    change the tables that compare a run with others (batch_scaling, instrument_overhead)."""
    if sorted(chosen) != select_runs(con, [], None):
        return False
    [(database,)] = con.execute("SELECT current_database()").fetchall()
    for view in SHARED_VIEWS:
        con.execute(f'CREATE TEMP TABLE "{view}" AS FROM "{database}".main."{view}" '
                    "ORDER BY ALL")
    return True


def has_relation(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    found = rows(con, "SELECT 1 FROM duckdb_views() WHERE view_name = ? UNION ALL "
                 "SELECT 1 FROM duckdb_tables() WHERE table_name = ?", [name, name])
    return bool(found)


def _in(runs: Sequence[str]) -> str:
    return "(" + ", ".join("?" for _ in runs) + ")" if runs else "(NULL)"


RUN = "_run"  # the run name column of a query over several runs, taken out of its rows
PerRun = dict[str, list[Row]]


def by_run(con: duckdb.DuckDBPyConnection, sql: str, runs: Sequence[str],
           params: Sequence[Any] = ()) -> PerRun:
    """Rows of `sql` (which selects the run name AS _run, has `{runs}` where the run names
    go, and is ordered by _run first) split by run, without the _run column."""
    out: PerRun = {run: [] for run in runs}
    for row in rows(con, sql.format(runs=_in(runs)), [*runs, *params]):
        out[row.pop(RUN)].append(row)
    return out


def top_per_run(order: str) -> str:
    """A QUALIFY clause keeping each run's first `?` rows in `order`."""
    return f"QUALIFY row_number() OVER (PARTITION BY {RUN} ORDER BY {order}) <= ?"


def runs_table(con: duckdb.DuckDBPyConnection, runs: Sequence[str]) -> list[Row]:
    return rows(con, "SELECT run_name, model, framework, exec_mode, precision, batch_size, gpu, "
                "len(sources) AS sources, kernel_count, anomaly_count, "
                "regexp_matches(coalesce(run_toml, ''), '(?m)^synthetic\\s*=\\s*true') "
                f"AS synthetic FROM runs WHERE run_name IN {_in(runs)} ORDER BY run_name", runs)


def run_levels(con: duckdb.DuckDBPyConnection, runs: Sequence[str]) -> list[Row]:
    return rows(con, "SELECT run_name, source_id, rank, device_id, iteration, gpu_util, "
                "smsp_active_util, "
                "issue_slot_util, tc_active_util, tc_issue_util, matched_time_share FROM "
                f"run_utilization WHERE run_name IN {_in(runs)} AND ncu_reason IS NULL "
                "ORDER BY run_name, rank, device_id", runs)


def issue_slot_values(con: duckdb.DuckDBPyConnection, runs: Sequence[str]) -> list[Row]:
    return rows(con, "SELECT run_name, issue_slot_util FROM kernel_utilization WHERE "
                f"issue_slot_util IS NOT NULL AND run_name IN {_in(runs)} "
                "ORDER BY run_name, issue_slot_util", runs)


def issue_slot_summary(con: duckdb.DuckDBPyConnection, runs: Sequence[str]) -> list[Row]:
    return rows(con, "SELECT run_name, kernel_count, mean_util, p50_util, p90_util, max_util, "
                f"above_60pct_share FROM issue_slot_distribution WHERE run_name IN {_in(runs)}"
                " ORDER BY run_name", runs)


LAYER_LEVELS = ("smsp_active_util", "issue_slot_util", "tc_active_util", "tc_issue_util")


def layer_levels(con: duckdb.DuckDBPyConnection, runs: Sequence[str], limit: int) -> PerRun:
    # pinned to v2: Fig. 7's columns are v2's; a newer version is taken up on purpose
    means = ", ".join(f"time_weighted_mean_{x}" for x in LAYER_LEVELS)
    return by_run(con, f"SELECT run_name AS {RUN}, coalesce(layer, '(no layer)') || ' / ' || "
                  "coalesce(op_name, '(no op)') AS layer_op, kernel_count, gpu_time_ns, "
                  f"{means} FROM layer_utilization_v2 WHERE run_name IN {{runs}} "
                  f"{top_per_run('gpu_time_ns DESC, layer_op')} "
                  f"ORDER BY {RUN}, gpu_time_ns DESC, layer_op", runs, [limit])


def tc_cdf(con: duckdb.DuckDBPyConnection, runs: Sequence[str]) -> list[Row]:
    return rows(con, "SELECT run_name, tc_issue_util, kernel_count, gpu_time_ns, "
                f"cumulative_time_share FROM tc_time_cdf WHERE run_name IN {_in(runs)} "
                "ORDER BY run_name, tc_issue_util", runs)


def iterations(con: duckdb.DuckDBPyConnection, runs: Sequence[str]) -> PerRun:
    return by_run(con, f"SELECT run_name AS {RUN}, source_id, rank, device_id, iteration, "
                  "window_ns, busy_ns, window_ns - busy_ns AS idle_ns, gpu_util FROM "
                  "gpu_utilization WHERE run_name IN {runs} "
                  f"ORDER BY {RUN}, source_id, device_id, iteration", runs)


def critical_path_kinds(con: duckdb.DuckDBPyConnection, runs: Sequence[str]) -> PerRun:
    """Per window, its critical path's time by kind (critical_path_summary_v1)."""
    kinds = ", ".join(f"sum(dur_ns) FILTER (WHERE segment_kind = '{k}') AS {k}_ns"
                      for k in PATH_KINDS)
    return by_run(con, f"SELECT run_name AS {RUN}, source_id, rank, device_id, iteration, "
                  f"{kinds}, max(path_ns) AS path_ns FROM critical_path_summary WHERE "
                  "run_name IN {runs} GROUP BY run_name, source_id, rank, device_id, "
                  f"iteration ORDER BY {RUN}, source_id, device_id, iteration", runs)


PATH_KINDS = ("host", "launch", "queue", "gpu", "sync_wait", "comm_wait")


def kinds(con: duckdb.DuckDBPyConnection, runs: Sequence[str]) -> PerRun:
    return by_run(con, f"SELECT r.run_name AS {RUN}, k.kind, count(*) AS activity_count, "
                  "sum(k.dur_ns) AS total_ns FROM kernels AS k JOIN runs AS r ON r.run_id = "
                  "k.run_id WHERE r.run_name IN {runs} AND k.dur_ns >= 0 GROUP BY r.run_name, "
                  f"k.kind ORDER BY {RUN}, total_ns DESC, k.kind", runs)


def top_kernels(con: duckdb.DuckDBPyConnection, runs: Sequence[str], limit: int) -> PerRun:
    return by_run(con, f"SELECT run_name AS {RUN}, kernel_name, kernel_count, total_ns, "
                  "mean_ns, busy_share FROM kernel_summary WHERE run_name IN {runs} "
                  f"{top_per_run('total_ns DESC, kernel_name')} "
                  f"ORDER BY {RUN}, total_ns DESC, kernel_name", runs, [limit])


def top_ops(con: duckdb.DuckDBPyConnection, runs: Sequence[str], limit: int) -> PerRun:
    return by_run(con, f"SELECT run_name AS {RUN}, coalesce(op_name, '(no op)') AS op_name, "
                  "coalesce(layer, '(no layer)') AS layer, kernel_count, gpu_time_ns, "
                  "gpu_time_share FROM op_time WHERE run_name IN {runs} "
                  f"{top_per_run('gpu_time_ns DESC, op_name, layer')} "
                  f"ORDER BY {RUN}, gpu_time_ns DESC, op_name, layer", runs, [limit])


def ncu_kernel_counts(con: duckdb.DuckDBPyConnection, runs: Sequence[str]) -> dict[str, int]:
    """Kernels of each run's Nsight Compute exports, for the runs that have one."""
    found = rows(con, "SELECT r.run_name, count(*) AS n FROM ncu_kernels AS k JOIN runs AS r "
                 f"ON r.run_id = k.run_id WHERE r.run_name IN {_in(runs)} GROUP BY ALL", runs)
    return {r["run_name"]: r["n"] for r in found}


def ncu_kernel_levels(con: duckdb.DuckDBPyConnection, runs: Sequence[str], limit: int
                      ) -> PerRun:
    """The levels of each run's ncu kernels by themselves (ncu_kernel_utilization), longest
    first: for a run whose export has no trace kernel to be matched to."""
    order = "u.duration_ns DESC NULLS LAST, u.ncu_source_id, u.ncu_id"
    return by_run(con, f"SELECT r.run_name AS {RUN}, u.ncu_source_id, u.ncu_id, u.kernel_name, "
                  "u.duration_ns, u.smsp_active_util, u.issue_slot_util, u.tc_active_util, "
                  "u.tc_issue_util FROM ncu_kernel_utilization AS u JOIN runs AS r ON "
                  "r.run_id = u.run_id WHERE r.run_name IN {runs} "
                  f"{top_per_run(order)} ORDER BY {RUN}, {order}", runs, [limit])


def match_coverage(con: duckdb.DuckDBPyConnection, runs: Sequence[str]) -> PerRun:
    return by_run(con, f"SELECT r.run_name AS {RUN}, q.source_id, q.device_id, "
                  "q.ncu_source_id, q.ncu_kernels, q.matched, q.ambiguous, "
                  "q.trace_unmatched_in_range, q.ncu_unmatched, q.matched_count_share, "
                  "q.matched_time_share FROM match_quality AS q JOIN runs AS r ON r.run_id = "
                  "q.run_id WHERE r.run_name IN {runs} "
                  f"ORDER BY {RUN}, q.source_id, q.device_id, q.ncu_source_id", runs)


def step_hints(con: duckdb.DuckDBPyConnection, runs: Sequence[str]) -> PerRun:
    """Each run's no_step_markers anomalies (etl/load/step_hint.py): a source without step
    markers, and the step_pattern candidates among its own names."""
    return by_run(con, f"SELECT r.run_name AS {RUN}, a.source_id, a.detail FROM anomalies AS "
                  "a JOIN runs AS r ON r.run_id = a.run_id WHERE r.run_name IN {runs} AND "
                  f"a.kind = 'no_step_markers' ORDER BY {RUN}, a.source_id", runs)


def anomalies(con: duckdb.DuckDBPyConnection, runs: Sequence[str]) -> PerRun:
    return by_run(con, f"SELECT r.run_name AS {RUN}, a.kind, count(*) AS anomaly_count, "
                  "min(a.detail) AS example FROM anomalies AS a JOIN runs AS r ON r.run_id = "
                  "a.run_id WHERE r.run_name IN {runs} GROUP BY r.run_name, a.kind "
                  f"ORDER BY {RUN}, anomaly_count DESC, a.kind", runs)


AMDAHL = "tc_amdahl_v2"  # pinned: v2 falls back on the name-based estimate without ncu


def amdahl(con: duckdb.DuckDBPyConnection, runs: Sequence[str]) -> list[Row]:
    return rows(con, "SELECT run_name, source_id, rank, device_id, iteration, basis, "
                "non_tc_time_share, "
                "speedup_bound_k2_ratio, speedup_bound_k10_ratio, speedup_bound_inf_ratio, "
                f"basis_note FROM {AMDAHL} WHERE run_name IN {_in(runs)} ORDER BY run_name, "
                "rank, device_id", runs)


def batch_scaling(con: duckdb.DuckDBPyConnection, runs: Sequence[str]) -> list[Row]:
    """batch_scaling rows of the configurations that these runs belong to."""
    return rows(con, "SELECT b.model, b.framework, b.exec_mode, b.precision, b.gpu, "
                "b.batch_size, b.throughput_samples_per_s, b.gpu_util, b.peak_memory_share, "
                "b.throughput_gain_ratio FROM batch_scaling AS b WHERE EXISTS (SELECT 1 FROM "
                f"runs AS r WHERE r.run_name IN {_in(runs)} AND r.model = b.model AND "
                "r.framework = b.framework AND r.exec_mode = b.exec_mode AND "
                "r.precision = b.precision AND r.batch_size = b.batch_size) "
                "ORDER BY b.model, b.framework, b.exec_mode, b.precision, b.batch_size",
                list(runs))


OVERHEAD = "instrument_overhead_v1"  # pinned: the columns the report knows


def instrument_overhead(con: duckdb.DuckDBPyConnection, runs: Sequence[str]) -> list[Row]:
    """instrument_overhead's rows of the experiments that hold one of these runs (all the
    experiment's runs: the baseline may not be among them)."""
    return rows(con, "SELECT experiment, run_name, instrument, files, bytes, bytes_per_s, "
                "bytes_per_iteration, bytes_reason, iteration_ns, iteration_source, "
                "baseline_run, iteration_overhead_ns, iteration_overhead_ratio, "
                f"overhead_reason FROM {OVERHEAD} WHERE experiment IN (SELECT experiment "
                f"FROM {OVERHEAD} WHERE run_name IN {_in(runs)}) "
                "ORDER BY experiment, iteration_ns NULLS LAST, run_name, instrument", runs)


# pinned, as INSTRUMENT_COMPARISON (v5: the allocator's order at an instant, memory of other
# devices said as such)
MEMORY = "gpu_utilization_v5"


def memory(con: duckdb.DuckDBPyConnection, runs: Sequence[str]) -> PerRun:
    return by_run(con, f"SELECT run_name AS {RUN}, source_id, rank, device_id, iteration, "
                  "peak_allocated_bytes, peak_reserved_bytes, peak_memory_share, memory_status "
                  f"FROM {MEMORY} WHERE run_name IN {{runs}} "
                  f"ORDER BY {RUN}, source_id, device_id, window_start_ns", runs)


# pinned: the report reads the version whose columns it knows; a newer one is taken up on
# purpose (v3: covered_share NULL with a reason where v1 and v2 read 1.0)
INSTRUMENT_COMPARISON = "instrument_comparison_v3"

# instrument_comparison's value columns in the order of the paper's levels, with labels
INSTRUMENTS = {
    "trace_gpu_util": "trace busy", "smi_gpu_util": "nvidia-smi util",
    "dcgm_gr_engine_active_util": "DCGM GRACT", "dcgm_sm_active_util": "DCGM SMACT",
    "dcgm_sm_occupancy_util": "DCGM SMOCC", "nsys_sm_active_util": "nsys SM active",
    "ncu_smsp_active_util": "ncu SMSP active", "nsys_sm_issue_util": "nsys SM issue",
    "ncu_issue_slot_util": "ncu issue slot", "dcgm_tensor_active_util": "DCGM TENSO",
    "nsys_tensor_active_util": "nsys tensor active", "ncu_tc_active_util": "ncu tensor active"}


def _reason_column(column: str) -> str:
    if column.startswith("ncu_"):
        return "ncu_reason"
    if column == "trace_gpu_util":
        return "CAST(NULL AS VARCHAR)"
    return column.removesuffix("_util") + "_reason"


def instruments(con: duckdb.DuckDBPyConnection, runs: Sequence[str]) -> PerRun:
    """instrument_comparison's windows of each run: each value and, as `<column>_why`,
    the view's reason when it is NULL."""
    values = ", ".join(f"{c}, {_reason_column(c)} AS {c}_why" for c in INSTRUMENTS)
    return by_run(con, f"SELECT run_name AS {RUN}, source_id, device_id, iteration, window_ns, "
                  f"{values} FROM {INSTRUMENT_COMPARISON} WHERE run_name IN {{runs}} "
                  f"ORDER BY {RUN}, source_id NULLS FIRST, device_id, window_start_ns", runs)
