"""Every real trace of the corpus ingests, conforms to schemas/, and agrees with the oracle."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from etl.core.schema import TABLES, table_schema
from tests.conftest import corpus_param, corpus_path, grouped_rows, query_json, snapshot
from tests.oracle.naive_kineto import gpu_utilization, selected_iterations

RUNS = {
    "amd_trace": ("hta", "amd_trace"),
    "alexnet": ("hta", "critical_path", "alexnet"),
    "event_sync": ("hta", "critical_path", "cuda_event_sync_multi_stream"),
    "cupti_profiler": ("hta", "cupti_profiler"),
    "df_index_resolver": ("hta", "df_index_resolver"),
    "nccl_parser_config": ("hta", "nccl_parser_config"),
    "negative_queue": ("hta", "negative_queue_length_values_check"),
    "ns_resolution_trace": ("hta", "ns_resolution_trace"),
    "control": ("hta", "trace_diff", "control"),
    "test": ("hta", "trace_diff", "test"),
    "trace_file_list": ("hta", "trace_file_list"),
    "trace_filter": ("hta", "trace_filter"),
    "triton_example": ("hta", "triton_example"),
    "with_gpu_user_annotation": ("hta", "with_gpu_user_annotation"),
    "h100_bert": ("other", "tracelens", "h100"),
    "b200_eager": ("other", "tracelens", "b200"),
}


# corpus_wh (tests/conftest.py): RUNS under their names, beside the ncu exports and the
# levels case of the view tests, ingested once per session


def test_every_corpus_trace_ingests(corpus_wh: Path) -> None:
    rows = query_json(corpus_wh, "SELECT run_name, len(sources) AS n, event_count FROM runs")
    named = {r["run_name"]: r for r in rows if r["run_name"] in RUNS}
    assert set(named) == set(RUNS)
    assert named["trace_filter"]["n"] == 2
    assert all(r["event_count"] > 0 for r in named.values())


@pytest.mark.parametrize("table", [t for t in TABLES if t != "runs"])
def test_parquet_matches_schema_and_keys_are_unique(corpus_wh: Path, table: str) -> None:
    expected = table_schema(table).arrow()
    files = [p for p in (corpus_wh / "data").glob(f"*/{table}.parquet")]
    runs = query_json(corpus_wh, "SELECT count(*) AS n FROM runs")[0]["n"]
    assert runs >= len(RUNS) and len(files) == runs + 1  # + the zero-row schema file
    for path in files:
        assert pq.read_schema(path).remove_metadata() == expected
    key = {"host_events": "event_id", "kernels": "kernel_id"}.get(table)
    if key:
        dup = query_json(corpus_wh, f"SELECT run_id, source_id, {key}, count(*) AS n FROM "
                         f"{table} GROUP BY ALL HAVING n > 1 OR {key} IS NULL")
        assert dup == []


def test_worked_values_from_the_issue(corpus_wh: Path) -> None:
    ns = query_json(corpus_wh, "SELECT window_ns, busy_ns, round(gpu_util, 6) AS u FROM "
                    "gpu_utilization WHERE run_name = 'ns_resolution_trace' AND iteration = 103")
    assert ns == [{"window_ns": 95_570_619, "busy_ns": 93_601_607, "u": 0.979397}]
    ctl = query_json(corpus_wh, "SELECT window_ns, round(gpu_util, 6) AS u FROM "
                     "gpu_utilization WHERE run_name = 'control' AND iteration = 1011")
    assert ctl == [{"window_ns": 76_234_000, "u": 0.821012}]


def _oracle_cases() -> list[Any]:
    return [corpus_param(name, str(Path(*parts)), trace=Path(*parts))
            for name, parts in RUNS.items()]


@pytest.fixture(scope="module")
def answers(corpus_wh: Path) -> Callable[..., list[tuple[Any, ...]]]:
    """grouped_rows of one snapshot of the corpus warehouse: each view queried once for
    every trace of the oracle tests below."""
    return grouped_rows(snapshot(corpus_wh))


@pytest.mark.parametrize("run_name,folder", _oracle_cases())
def test_gpu_utilization_agrees_with_naive_oracle(answers: Callable[..., list[tuple[Any, ...]]],
                                                   run_name: str, folder: str) -> None:
    for trace in sorted(corpus_path(folder).glob("*.json.gz")):
        got = {(r[0], r[1], r[2]): r[3:] for r in answers(
            "SELECT r.run_name, src.path, g.rank, g.device_id, g.iteration, g.window_ns, "
            "g.busy_ns, g.activity_busy_ns, g.kernel_count, g.kernel_time_ns, "
            "g.window_start_ns FROM gpu_utilization g JOIN runs r USING (run_id), "
            "unnest(r.sources) AS s(src) WHERE src.source_id = g.source_id",
            run_name, trace.name)}
        rows = gpu_utilization(trace)
        want = {(r["rank"], r["device_id"], r["iteration"]): (
            r["window_ns"], r["busy_ns"], r["activity_busy_ns"], r["kernel_count"],
            r["kernel_time_ns"], r["window_start_ns"]) for r in rows}
        assert got == want, trace.name
        _check_selection(answers, run_name, rows)


def _check_selection(answers: Callable[..., list[tuple[Any, ...]]], run_name: str,
                     rows: list) -> None:
    chosen = selected_iterations(rows)
    got = {(r[0], r[1]): (r[2], r[3]) for r in answers(
        "SELECT run_name, rank, device_id, selected_iteration, selection FROM run_summary",
        run_name)}
    for key, iteration in chosen.items():
        assert got[key][0] == iteration, (run_name, key)
        assert got[key][1] in ("first_within_5pct_of_median", "whole_trace")
