"""Every table and view, over the corpus and over edge-case warehouses, returns NULL where a
value cannot be computed, never NaN or ±infinity (DuckDB's 0.0/0.0 is NaN, x/0.0 is inf).

The list of views comes from discovery (sql/views/), so a new view is checked the day it
is added. The edge cases are tiny inline runs, one folder each, each named for the case.
"""
from __future__ import annotations

import csv
import decimal
import gzip
import json
import math
from pathlib import Path
from typing import Any

import pytest

from etl.views.query import run_query
from etl.core.schema import TABLES
from etl.core.sql_files import discover
from tests.conftest import (
    cli,
    copy_corpus_run,
    corpus_path,
    event,
    kernel,
    launch,
    step,
    write_trace,
)

SM_COUNT = 108
NCU_HEAD = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream",
            "Block Size", "Grid Size", "Device", "CC", "device__attribute_multiprocessor_count",
            "gpu__time_duration.sum"]
# per kernel: elapsed, active, issued, tensor-pipe active, tensor instructions (of elapsed)
COUNTERS = {"smsp__cycles_elapsed.sum": 1.0, "smsp__cycles_active.sum": 0.8,
            "smsp__inst_issued.sum": 0.7, "smsp__pipe_tensor_cycles_active.sum": 0.3,
            "smsp__inst_executed_pipe_tensor.sum": 0.05}
NO_ISSUE_SLOTS = [c for c in COUNTERS if c != "smsp__inst_issued.sum"]
NAMES = ("volta_gemm_128x64", "vectorized_elementwise_kernel", "reduce_kernel")


def view_names() -> list[str]:
    """Every relation a user can query: tables, versioned views and their stable names."""
    views = discover()
    return [*TABLES, *sorted({v.name for v in views} | {v.stable for v in views})]


def nonfinite(value: Any) -> bool:
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, dict):
        return any(nonfinite(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(nonfinite(v) for v in value)
    return False


def nonfinite_columns(warehouse: Path) -> dict[str, list[str]]:
    """relation → its columns holding NaN or ±inf in some row."""
    found = {}
    for name in view_names():
        columns, rows = run_query(warehouse, f'SELECT * FROM "{name}"')
        bad = sorted({c for row in rows for c, v in zip(columns, row) if nonfinite(v)})
        if bad:
            found[name] = bad
    return found


# ---- the edge cases ------------------------------------------------------------------------

def steps_with_kernels(dur_ns: int, steps: int = 2, device: int = 0) -> list[dict[str, Any]]:
    """`steps` ProfilerSteps of 100 µs, each launching NAMES once on `device`."""
    events: list[dict[str, Any]] = []
    for n in range(steps):
        start = n * 100_000
        events.append(step(n + 1, start, 100_000))
        for i, name in enumerate(NAMES):
            corr = n * 10 + i + 1
            events.append(launch(corr, start + 1_000 + i * 2_000))
            k = kernel(corr, start + 10_000 + i * 20_000, dur_ns, device=device, name=name)
            k["args"].update(grid=[64 * (i + 1), 1, 1], block=[128, 1, 1])
            events.append(k)
    return events


def write_ncu(path: Path, counters: list[str], dur_ns: int) -> None:
    """A raw-page export of the first step's kernels (NAMES in launch order)."""
    with open(path, "w", newline="") as fh:
        writer = csv.writer(fh, quoting=csv.QUOTE_ALL, lineterminator="\n")
        writer.writerow(NCU_HEAD + counters)
        writer.writerow([""] * 12 + ["nsecond"] + ["cycle"] * len(counters))
        for i, name in enumerate(NAMES):
            elapsed = 1_000_000
            writer.writerow([i, 1, "python", "h", name, 1, 7, "(128, 1, 1)",
                             f"({64 * (i + 1)}, 1, 1)", 0, "8.0", SM_COUNT, dur_ns,
                             *[round(COUNTERS[c] * elapsed) for c in counters]])


def write_run(runs: Path, name: str, events: list[dict[str, Any]], **header: Any) -> Path:
    folder = runs / name
    write_trace(folder / "trace.json", events, **header)
    # a model of its own: run_comparison compares runs of one model only
    (folder / "run.toml").write_text(f'model = "{name}"\nbatch_size = 8\n')
    return folder


def write_edge_runs(runs: Path) -> None:
    write_run(runs, "no_kernels", [step(1, 0, 100_000), event(name="aten::add", ts=1_000,
                                                                dur=5_000)])
    write_run(runs, "zero_gpu_time", steps_with_kernels(dur_ns=0))
    # no issue-slot counter; step 2 has no matched kernel (ncu profiled step 1 only)
    subset = write_run(runs, "ncu_counter_subset", steps_with_kernels(dur_ns=5_000))
    write_ncu(subset / "ncu.csv", NO_ISSUE_SLOTS, dur_ns=5_000)
    zero = write_run(runs, "ncu_zero_gpu_time", steps_with_kernels(dur_ns=0))
    write_ncu(zero / "ncu.csv", list(COUNTERS), dur_ns=0)
    devices = [{"id": i, "name": "A100", "numSms": SM_COUNT, "computeMajor": 8,
                "computeMinor": 0} for i in range(3)]
    idle = [*steps_with_kernels(dur_ns=5_000),
            kernel(90, 50_000, 0, device=1, cat="gpu_memcpy", name="Memcpy HtoD")]
    write_run(runs, "idle_devices", idle, deviceProperties=devices)  # 1: a 0 ns copy, 2: nothing


@pytest.fixture(scope="module")
def edge_wh(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("edges")
    write_edge_runs(root / "runs")
    result = cli("ingest", str(root / "runs"), "--warehouse", str(root / "wh"))
    assert result.returncode == 0, result.stderr
    return root / "wh"


# ---- the corpus ----------------------------------------------------------------------------

def write_corpus_runs(runs: Path) -> None:
    """Every corpus trace of test_corpus, the ncu exports (alone and beside a trace), and the
    levels case of test_levels_rollup (a real trace with a matched raw page)."""
    from tests.load.test_corpus import RUNS
    from tests.views.test_levels_rollup import STEP, TRACE, ratios, step_kernels, write_raw_page

    for name, parts in RUNS.items():
        copy_corpus_run(corpus_path(*parts), runs, name)
    for export in sorted(corpus_path("ncu").iterdir()):
        if export.suffix in (".csv", ".ncu-rep"):
            copy_corpus_run(export, runs, "ncu_" + export.stem.replace(".", "_"))
    both = copy_corpus_run(corpus_path("ncu", "a100_mistic_ilpProf.ncu-rep"), runs, "with_trace")
    (both / "trace.json.gz").symlink_to(corpus_path("hta", "nccl_parser_config",
                                                     "nccl_data.json.gz"))
    levels = runs / "levels"
    levels.mkdir()
    (levels / "trace.json.gz").symlink_to(corpus_path(*TRACE))
    with gzip.open(corpus_path(*TRACE), "rt") as fh:
        kernels = step_kernels(json.load(fh, parse_float=decimal.Decimal), STEP)
    write_raw_page(levels / "ncu_raw.csv", kernels, ratios(len(kernels)))
    (levels / "run.toml").write_text("batch_size = 32\n")


@pytest.fixture(scope="module")
def corpus_wh(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("corpus_views")
    write_corpus_runs(root / "runs")
    result = cli("ingest", str(root / "runs"), "--warehouse", str(root / "wh"))
    assert result.returncode == 0, result.stderr
    return root / "wh"


# ---- the tests -----------------------------------------------------------------------------

def test_edge_cases_reach_the_views(edge_wh: Path) -> None:
    """The edge cases are what they claim to be, so the NaN test below sees them."""
    _, rows = run_query(edge_wh, "SELECT run_name, count(*) FILTER (WHERE kind = 'kernel'), "
                        "sum(dur_ns) FROM runs LEFT JOIN kernels USING (run_id) GROUP BY ALL "
                        "ORDER BY 1")
    assert rows == [("idle_devices", 6, 30_000), ("ncu_counter_subset", 6, 30_000),
                    ("ncu_zero_gpu_time", 6, 0), ("no_kernels", 0, None),
                    ("zero_gpu_time", 6, 0)]
    _, matched = run_query(edge_wh, "SELECT run_name, iteration, count(*) FROM "
                           "kernel_utilization GROUP BY ALL ORDER BY 1")
    assert matched == [("ncu_counter_subset", 1, 3), ("ncu_zero_gpu_time", 1, 3)]
    _, levels = run_query(edge_wh, "SELECT run_name, count(issue_slot_util), "
                          "count(smsp_active_util) FROM kernel_utilization GROUP BY ALL ORDER BY 1")
    assert levels == [("ncu_counter_subset", 0, 3), ("ncu_zero_gpu_time", 3, 3)]


def test_no_relation_returns_nan_or_infinity_on_edge_cases(edge_wh: Path) -> None:
    assert nonfinite_columns(edge_wh) == {}


@pytest.mark.slow  # every relation over the whole corpus (the edge cases run in make check)
def test_no_relation_returns_nan_or_infinity_on_the_corpus(corpus_wh: Path) -> None:
    assert nonfinite_columns(corpus_wh) == {}


# v2 renamed these columns (sql/CHANGELOG.md, 2026-11-25) and changed nothing else
RENAMED = {
    "kernel_summary": {"busy_share_ratio": "busy_share"},
    "op_time": {"gpu_time_share_ratio": "gpu_time_share"},
    "issue_slot_distribution": {"above_60pct_ratio": "above_60pct_share"},
    "match_quality": {"count_coverage_ratio": "matched_count_share",
                      "time_coverage_ratio": "matched_time_share"},
    "tc_time_cdf": {"time_share_at_most_ratio": "cumulative_time_share"},
    "layer_utilization": {
        f"{x}_{stat}": f"{'time_weighted_mean' if stat == 'mean' else stat}_{x}"
        for x in ("smsp_active_util", "issue_slot_util", "tc_active_util", "tc_issue_util")
        for stat in ("mean", "p10", "p50", "p90")},
}


@pytest.mark.parametrize("stable", sorted(RENAMED))
@pytest.mark.parametrize("where", ["edge", "corpus"])
def test_v2_is_v1_with_renamed_columns(stable: str, where: str, request: Any) -> None:
    warehouse = request.getfixturevalue(f"{where}_wh")
    old_columns, old_rows = run_query(warehouse, f"SELECT * FROM {stable}_v1")
    new_columns, new_rows = run_query(warehouse, f"SELECT * FROM {stable}_v2")
    assert new_columns == [RENAMED[stable].get(c, c) for c in old_columns]
    assert sorted(new_rows, key=repr) == sorted(old_rows, key=repr)
    # the stable name follows the newest version, which keeps v2's columns (op_time and
    # layer_utilization v3 add layer_kind and pass)
    assert set(new_columns) <= set(run_query(warehouse, f"SELECT * FROM {stable} LIMIT 0")[0])
    if where == "corpus":
        assert old_rows, f"{stable}: the corpus gives no rows to compare"


@pytest.mark.parametrize("stable", ["op_time", "layer_utilization"])
@pytest.mark.parametrize("where", ["edge", "corpus"])
def test_v3_splits_v2_by_layer_kind_and_pass(stable: str, where: str, request: Any) -> None:
    warehouse = request.getfixturevalue(f"{where}_wh")
    totals = ("SELECT run_id, op_name, layer, sum(kernel_count), sum(gpu_time_ns) "
              "FROM {} GROUP BY ALL")
    _, v2 = run_query(warehouse, totals.format(f"{stable}_v2"))
    _, v3 = run_query(warehouse, totals.format(f"{stable}_v3"))
    assert sorted(v3, key=repr) == sorted(v2, key=repr)
    _, kinds = run_query(warehouse, f"SELECT count(*) FROM {stable}_v3 WHERE "
                         "(layer IS NULL) <> (layer_kind IS NULL)")
    assert kinds == [(0,)]
