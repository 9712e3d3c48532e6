"""The views of what traces alone tell (kernel_breakdown, temporal_breakdown, comm_overlap,
stragglers, idle_breakdown, launch_stats, queue_length): a tiny trace worked by hand, and
every corpus trace against the naive oracle (tests/oracle/naive_breakdown.py)."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pytest

from tests.conftest import (corpus_param, corpus_path, event, grouped_rows, ingested, kernel,
                            launch, snapshot, step)
from tests.conftest import write_trace
from tests.oracle import naive_breakdown as naive
from tests.load.test_corpus import RUNS

# One step [0, 200 µs] on device 0. Stream 7: a tensor-core GEMM [10, 60) µs, a copy
# [110, 120) µs, a kernel [160, 161) µs launched at 150 µs (after the copy ended: host
# wait) and one [161.010, 162) µs launched early (a 10 ns gap: kernel wait). Stream 8: an
# all-reduce [40, 100) µs, overlapping the GEMM during [40, 60) µs.
TINY = [
    step(1, 0, 200_000),
    launch(1, 1_000, 2_000),
    kernel(1, 10_000, 50_000, stream=7, name="ampere_h16816gemm_128x128"),
    launch(2, 4_000, 1_000),
    kernel(2, 40_000, 60_000, stream=8, name="ncclKernel_AllReduce_RING_LL_Sum_float"),
    launch(3, 5_000, 1_000, name="cudaMemcpyAsync"),
    kernel(3, 110_000, 10_000, stream=7, name="Memcpy HtoD (Pinned -> Device)",
           cat="gpu_memcpy"),
    launch(5, 6_000, 1_000),
    launch(4, 150_000, 5_000),
    kernel(4, 160_000, 1_000, stream=7, name="elementwise"),
    kernel(5, 161_010, 990, stream=7, name="elementwise"),
    event(cat="gpu_user_annotation", name="ProfilerStep#1", ts=0, dur=200_000, pid=0, tid=7,
          device=0, stream=7),
]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> duckdb.DuckDBPyConnection:
    root = tmp_path_factory.mktemp("tiny_breakdown")
    write_trace(root / "runs" / "tiny" / "trace.json", TINY)
    return snapshot(ingested(root))


def rows(con: duckdb.DuckDBPyConnection, sql: str) -> list[tuple[Any, ...]]:
    return con.execute(sql).fetchall()


def test_tiny_kernel_types(tiny: duckdb.DuckDBPyConnection) -> None:
    assert rows(tiny, "SELECT name, kernel_type, memory_kind, tc_estimate FROM kernels "
                "ORDER BY kernel_id") == [
        ("ampere_h16816gemm_128x128", "computation", None, True),
        ("ncclKernel_AllReduce_RING_LL_Sum_float", "communication", None, None),
        ("Memcpy HtoD (Pinned -> Device)", "memory", "HtoD", None),
        ("elementwise", "computation", None, False),
        ("elementwise", "computation", None, False),
        ("ProfilerStep#1", "other", None, None)]


def test_tiny_temporal_breakdown(tiny: duckdb.DuckDBPyConnection) -> None:
    # computation [10,60) ∪ [160,161) ∪ [161.01,162) = 51.99 µs; communication alone
    # [60,100) = 40 µs; memory alone [110,120) = 10 µs; idle the rest of 200 µs
    assert rows(tiny, "SELECT iteration, window_ns, computation_ns, communication_ns, "
                "memory_ns, idle_ns, computation_share FROM temporal_breakdown") == [
        (1, 200_000, 51_990, 40_000, 10_000, 98_010, 51_990 / 200_000)]
    assert rows(tiny, "SELECT t.computation_ns + t.communication_ns + t.memory_ns "
                "- g.activity_busy_ns FROM temporal_breakdown t JOIN gpu_utilization g "
                "USING (run_id, source_id, device_id, iteration)") == [(0,)]


def test_tiny_comm_overlap(tiny: duckdb.DuckDBPyConnection) -> None:
    assert rows(tiny, "SELECT communication_ns, computation_ns, overlapped_ns, "
                "exposed_communication_ns, comm_overlap_share FROM comm_overlap") == [
        (60_000, 51_990, 20_000, 40_000, 1 / 3)]


def test_tiny_kernel_breakdown(tiny: duckdb.DuckDBPyConnection) -> None:
    got = rows(tiny, "SELECT kernel_type, kernel_count, time_ns, kernel_time_share, busy_share, "
               "tc_estimate_time_share, top_kernels[1].name FROM kernel_breakdown ORDER BY 1")
    total, busy = 121_990, 101_990
    assert got == [
        ("communication", 1, 60_000, 60_000 / total, 60_000 / busy, None,
         "ncclKernel_AllReduce_RING_LL_Sum_float"),
        ("computation", 3, 51_990, 51_990 / total, 51_990 / busy, 50_000 / 51_990,
         "ampere_h16816gemm_128x128"),
        ("memory", 1, 10_000, 10_000 / total, 10_000 / busy, None,
         "Memcpy HtoD (Pinned -> Device)")]


def test_tiny_idle_breakdown(tiny: duckdb.DuckDBPyConnection) -> None:
    # stream 7: [60,110) the copy was launched at 5 µs: other; [120,160) launched at 150 µs:
    # host wait; [161,161.01) launched at 6 µs and under 30 µs: kernel wait
    got = rows(tiny, "SELECT stream_id, idle_category, interval_count, idle_ns, idle_share "
               "FROM idle_breakdown ORDER BY 1, 2")
    assert got == [(7, "host_wait", 1, 40_000, 40_000 / 90_010),
                   (7, "kernel_wait", 1, 10, 10 / 90_010),
                   (7, "other", 1, 50_000, 50_000 / 90_010)]


def test_tiny_launch_stats(tiny: duckdb.DuckDBPyConnection) -> None:
    got = rows(tiny, "SELECT kernel_name, launch_count, mean_launch_ns, mean_launch_delay_ns, "
               "mean_queue_delay_ns, short_kernel_count, short_kernel_share FROM launch_stats "
               "ORDER BY 1")
    assert got == [
        # launched at 150 µs for 5 µs, ran 1 µs: short; launched at 6 µs for 1 µs, ran 0.99
        ("Memcpy HtoD (Pinned -> Device)", 1, 1_000.0, 104_000.0, 105_000.0, 0, 0.0),
        ("ampere_h16816gemm_128x128", 1, 2_000.0, 7_000.0, 9_000.0, 0, 0.0),
        ("elementwise", 2, 3_000.0, (5_000 + 154_010) / 2, (10_000 + 155_010) / 2, 2, 1.0),
        ("ncclKernel_AllReduce_RING_LL_Sum_float", 1, 1_000.0, 35_000.0, 36_000.0, 0, 0.0)]


def test_tiny_queue_length(tiny: duckdb.DuckDBPyConnection) -> None:
    got = rows(tiny, "SELECT ts_ns, change, queue_length FROM queue_length WHERE stream_id = 7 "
               "ORDER BY ts_ns, change")
    assert got == [(1_000, "launch", 1), (5_000, "launch", 2), (6_000, "launch", 3),
                   (10_000, "start", 2), (110_000, "start", 1), (150_000, "launch", 2),
                   (160_000, "start", 1), (161_010, "start", 0)]


# ---- the corpus against the naive oracle ---------------------------------------------------

@pytest.fixture(scope="module")
def corpus(corpus_wh: Path) -> duckdb.DuckDBPyConnection:
    """The session's corpus warehouse (tests/conftest.py): RUNS under their names, beside
    runs of ncu exports the queries below filter out by name or leave in (the faster
    versions' rows). Read only; the temporary tables are this connection's."""
    return snapshot(corpus_wh)


Answers = Callable[..., list[tuple[Any, ...]]]


@pytest.fixture(scope="module")
def answers(corpus: duckdb.DuckDBPyConnection) -> Answers:
    """grouped_rows of `corpus`: each view below queried once for every trace, by run name
    and source id (its first two columns)."""
    return grouped_rows(corpus)


def traces() -> list[Any]:
    return [corpus_param(name, Path(*parts), trace=Path(*parts))
            for name, parts in RUNS.items()]


def _source(con: duckdb.DuckDBPyConnection, run_name: str, trace: Path) -> int:
    [(source_id,)] = con.execute(
        "SELECT src.source_id FROM runs r, unnest(r.sources) AS s(src) "
        "WHERE r.run_name = ? AND src.path = ?", [run_name, trace.name]).fetchall()
    return int(source_id)


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in corpus_path(*folder.parts).iterdir() if ".json" in p.name)


@pytest.mark.parametrize("run_name,folder", traces())
def test_temporal_and_overlap_agree_with_oracle(corpus: duckdb.DuckDBPyConnection,
                                                answers: Answers, run_name: str,
                                                folder: Path) -> None:
    for trace in _files(folder):
        source = _source(corpus, run_name, trace)
        got = {(r[0], r[1], r[2]): r[3:] for r in answers(
            "SELECT t.run_name, t.source_id, t.rank, t.device_id, t.iteration, t.window_ns, "
            "t.computation_ns, t.communication_ns, t.memory_ns, t.idle_ns, c.communication_ns, "
            "c.overlapped_ns FROM temporal_breakdown t JOIN comm_overlap c ON c.run_id = "
            "t.run_id AND c.source_id = t.source_id AND c.device_id = t.device_id AND "
            "c.iteration IS NOT DISTINCT FROM t.iteration", run_name, source)}
        want = {k: (v["window_ns"], v["computation_ns"], v["communication_ns"], v["memory_ns"],
                    v["idle_ns"], v["comm_union_ns"], v["overlapped_ns"])
                for k, v in naive.temporal(trace).items()}
        assert got == want, trace.name


@pytest.mark.parametrize("run_name,folder", traces())
def test_kernel_breakdown_agrees_with_oracle(corpus: duckdb.DuckDBPyConnection,
                                             answers: Answers, run_name: str,
                                             folder: Path) -> None:
    for trace in _files(folder):
        got = {(r[0], r[1], r[2], r[3]): (r[4], r[5]) for r in answers(
            "SELECT run_name, source_id, rank, device_id, iteration, kernel_type, "
            "kernel_count, time_ns FROM kernel_breakdown WHERE device_id IS NOT NULL",
            run_name, _source(corpus, run_name, trace))}
        assert got == naive.kernel_types(trace), trace.name


@pytest.mark.parametrize("run_name,folder", traces())
def test_idle_breakdown_agrees_with_oracle(corpus: duckdb.DuckDBPyConnection,
                                           answers: Answers, run_name: str,
                                           folder: Path) -> None:
    for trace in _files(folder):
        got = {tuple(r[:5]): (r[5], r[6]) for r in answers(
            "SELECT run_name, source_id, rank, device_id, stream_id, iteration, "
            "idle_category, interval_count, idle_ns FROM idle_breakdown",
            run_name, _source(corpus, run_name, trace))}
        assert got == naive.idle(trace), trace.name


@pytest.mark.parametrize("run_name,folder", traces())
def test_launch_stats_agree_with_oracle(corpus: duckdb.DuckDBPyConnection,
                                        answers: Answers, run_name: str,
                                        folder: Path) -> None:
    """The oracle credits each activity with its launch call, as launch_stats_v1 does;
    v2 keeps graph kernels apart (tests/views/test_launch_stats_graphs.py), and its rows of
    a name, graph and not, add up to the oracle's counts; v3 counts a graph's delays at its
    first activity, as the oracle's graph_launch_delays does."""
    for trace in _files(folder):
        source = _source(corpus, run_name, trace)
        got = {r[0]: {"launch_count": r[1], "short_kernel_count": r[2],
                      "launch_outlier_count": r[3], "delay_outlier_count": r[4],
                      "sum_launch_delay_ns": r[5]} for r in answers(
            "SELECT run_name, source_id, kernel_name, launch_count, short_kernel_count, "
            "launch_outlier_count, delay_outlier_count, "
            "round(mean_launch_delay_ns * launch_count)::BIGINT FROM launch_stats_v1",
            run_name, source)}
        want = naive.launch_stats(trace)
        assert got == want, trace.name
        v2 = {r[0]: {"launch_count": r[1], "delay_outlier_count": r[2]} for r in answers(
            "SELECT run_name, source_id, kernel_name, sum(launch_count), "
            "sum(delay_outlier_count) FROM launch_stats_v2 GROUP BY ALL", run_name, source)}
        assert v2 == {name: {k: w[k] for k in ("launch_count", "delay_outlier_count")}
                      for name, w in want.items()}, trace.name
        v3 = {(r[0], r[1]): (r[2], r[3]) for r in answers(
            "SELECT run_name, source_id, kernel_name, graph_launch, delay_count, "
            "coalesce(delay_outlier_count, 0) FROM launch_stats_v3", run_name, source)}
        assert v3 == naive.graph_launch_delays(trace), trace.name


def test_stragglers_on_two_ranks(corpus: duckdb.DuckDBPyConnection) -> None:
    """trace_filter: ranks 0 and 1 of one job; rank 1 computes 12-14% more than the median
    in both steps, so it is the straggler, and the medians are the oracle's."""
    oracle: dict[tuple[Any, Any, Any], dict[str, int]] = {}
    for trace in _files(Path("hta", "trace_filter")):
        oracle.update(naive.temporal(trace))
    comp = naive.median_by_iteration(oracle, "computation_ns")
    window = naive.median_by_iteration(oracle, "window_ns")
    got = corpus.execute(
        "SELECT iteration, rank, device_id, rank_count, median_computation_ns, "
        "median_window_ns, computation_ns, straggler FROM stragglers "
        "WHERE run_name = 'trace_filter' ORDER BY iteration, rank").fetchall()
    assert [(r[0], r[1]) for r in got] == [(551, 0), (551, 1), (552, 0), (552, 1)]
    for iteration, rank, device, count, med_comp, med_window, computation, straggler in got:
        assert count == 2
        assert med_comp == comp[iteration] and med_window == window[iteration]
        assert computation == oracle[(rank, device, iteration)]["computation_ns"]
        assert straggler == (rank == 1)
        assert computation > 1.05 * med_comp if rank == 1 else computation < med_comp


@pytest.mark.parametrize("run_name,folder", [t for t in traces() if t.values[0] in (
    "trace_filter", "nccl_parser_config", "h100_bert", "b200_eager", "amd_trace")])
def test_memcpy_bandwidth_agrees_with_oracle(corpus: duckdb.DuckDBPyConnection,
                                             answers: Answers, run_name: str,
                                             folder: Path) -> None:
    for trace in _files(folder):
        got = {tuple(r[:4]): (r[4], r[5], r[6]) for r in answers(
            "SELECT run_name, source_id, rank, device_id, iteration, memory_kind, "
            "activity_count, total_bytes, round(total_bytes / bandwidth_gb_per_s)::BIGINT "
            "FROM memcpy_bandwidth WHERE device_id IS NOT NULL",
            run_name, _source(corpus, run_name, trace))}
        want = naive.copies(trace)
        assert got.keys() == want.keys(), trace.name
        for key, (count, total, dur) in want.items():
            assert got[key][:2] == (count, total), (trace.name, key)
            if total and dur:
                assert got[key][2] == dur, (trace.name, key)


# Versions made only to answer faster must keep their predecessor's rows (sql/CHANGELOG.md).
FASTER = [("temporal_breakdown_v2", "temporal_breakdown_v3"),
          ("comm_overlap_v2", "comm_overlap_v3"),
          ("stragglers_v2", "stragglers_v3"),
          ("mfu_v1", "mfu_v2"),
          ("gpu_utilization_v3", "gpu_utilization_v4"),
          ("run_summary_v3", "run_summary_v4"),
          ("_iteration_memory_v1", "_iteration_memory_v2")]


@pytest.mark.parametrize("before,after", FASTER)
def test_faster_version_keeps_the_rows(corpus: duckdb.DuckDBPyConnection, tiny:
                                       duckdb.DuckDBPyConnection, before: str,
                                       after: str) -> None:
    for con in (corpus, tiny):
        # each version evaluated once, into a temporary table the counts read (a view over
        # views costs its whole tree at every read)
        con.execute(f"CREATE OR REPLACE TEMP TABLE _before AS FROM {before}")
        con.execute(f"CREATE OR REPLACE TEMP TABLE _after AS FROM {after}")
        try:
            [(count,)] = rows(con, "SELECT count(*) FROM _before")
            assert count > 0, before
            for a, b in (("_before", "_after"), ("_after", "_before")):
                assert rows(con, f"SELECT count(*) FROM (FROM {a} EXCEPT ALL FROM {b})") == [
                    (0,)], (a, before, after)
        finally:
            con.execute("DROP TABLE IF EXISTS _before")
            con.execute("DROP TABLE IF EXISTS _after")
