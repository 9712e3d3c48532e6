"""Four levels end to end: a real trace, an ncu export a run of the same program would give,
ingest, matching, and the roll-ups against the formula recomputed from the truth."""
from __future__ import annotations

import csv
import decimal
import gzip
import json
import random
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import cli, corpus_path, query_json
from tests.oracle.naive_kineto import gpu_utilization

TRACE = ("hta", "ns_resolution_trace", "rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz")
STEP = 103
SMS = 80
METRICS = ["smsp__cycles_elapsed.sum", "smsp__cycles_active.sum", "smsp__inst_issued.sum",
           "smsp__pipe_tensor_cycles_active.sum", "smsp__inst_executed_pipe_tensor.sum"]


def step_kernels(trace: dict[str, Any], step: int) -> list[dict[str, Any]]:
    """Kernels launched inside ProfilerStep#step, in launch order (stdlib reading)."""
    events = trace["traceEvents"]
    span = next(e for e in events if e.get("name") == f"ProfilerStep#{step}"
                and e.get("cat") in ("cpu_op", "user_annotation"))
    hs, he = span["ts"], span["ts"] + span["dur"]
    launches = {e["args"]["correlation"]: e["ts"] for e in events
                if e.get("cat") in ("cuda_runtime", "cuda_driver") and e.get("ph") == "X"
                and "correlation" in e.get("args", {}) and hs <= e["ts"] <= he}
    kernels = [e for e in events if e.get("cat") == "kernel"
               and e["args"].get("correlation") in launches]
    return sorted(kernels, key=lambda k: (launches[k["args"]["correlation"]], k["ts"]))


def ratios(n: int) -> list[dict[str, float]]:
    rng = random.Random(3)
    out = []
    for _ in range(n):
        active = rng.uniform(0.3, 1.0)
        issue = active * rng.uniform(0.1, 0.9)
        tensor = rng.choice([0.0, 0.0, rng.uniform(0.05, 0.6)]) * active
        elapsed = rng.randint(10_000, 2_000_000)
        # the export holds integer counters: the truth is the ratio of those integers
        counts = [round(r * elapsed) for r in (active, issue, tensor, tensor / 8)]
        out.append({"elapsed": elapsed, **{k: c / elapsed for k, c in zip(
            ("active", "issue", "tc_active", "tc_issue"), counts)}})
    return out


def write_raw_page(path: Path, kernels: list[dict[str, Any]], truth: list[dict[str, float]]
                   ) -> None:
    head = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream",
            "Block Size", "Grid Size", "Device", "CC", "device__attribute_multiprocessor_count",
            *METRICS]
    units = [""] * 12 + ["cycle", "cycle", "inst", "cycle", "inst"]
    with open(path, "w", newline="") as fh:
        fh.write("==PROF== Connected to process 1 (python)\n")
        writer = csv.writer(fh, quoting=csv.QUOTE_ALL, lineterminator="\n")
        writer.writerows([head, units])
        for i, (k, t) in enumerate(zip(kernels, truth)):
            e = t["elapsed"]
            a = k["args"]
            writer.writerow([i, 1, "python", "h", k["name"], 1, 7,
                             "({}, {}, {})".format(*a["block"]), "({}, {}, {})".format(*a["grid"]),
                             0, "7.0", SMS, e, round(t["active"] * e), round(t["issue"] * e),
                             round(t["tc_active"] * e), round(t["tc_issue"] * e)])


@pytest.fixture(scope="module")
def case(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("levels")
    run = root / "runs" / "v100_cnn"
    run.mkdir(parents=True)
    trace_path = corpus_path(*TRACE)
    (run / "trace.json.gz").symlink_to(trace_path)
    with gzip.open(trace_path, "rt") as fh:
        trace = json.load(fh, parse_float=decimal.Decimal)
    kernels = step_kernels(trace, STEP)
    truth = ratios(len(kernels))
    write_raw_page(run / "ncu_raw.csv", kernels, truth)
    (run / "run.toml").write_text("batch_size = 32\n")
    result = cli("ingest", str(root / "runs"), "--warehouse", str(root / "wh"))
    assert result.returncode == 0, result.stderr
    return {"wh": root / "wh", "trace": trace, "truth": truth, "path": trace_path}


def test_every_profiled_kernel_matches_its_position(case: dict[str, Any]) -> None:
    rows = query_json(case["wh"], "SELECT k.iteration, m.ncu_id, m.match_status FROM "
                      "kernel_match m JOIN kernels k USING (run_id, source_id, kernel_id) "
                      "ORDER BY k.iteration, m.ncu_id")
    matched = [r for r in rows if r["match_status"] == "matched"]
    assert len(matched) == len(case["truth"])
    assert len({r["iteration"] for r in matched}) == 1  # one whole identical iteration


def _expected(case: dict[str, Any], iteration: int) -> dict[str, float]:
    [row] = [r for r in gpu_utilization(case["path"]) if r["iteration"] == iteration]
    start, end = row["window_start_ns"], row["window_start_ns"] + row["window_ns"]
    kernels = step_kernels(case["trace"], iteration)
    d = [max(0, min(int(k["ts"] * 1000) + int(k["dur"] * 1000), end)
             - max(int(k["ts"] * 1000), start)) for k in kernels]
    total = sum(d)
    mean = {x: sum(t[x] * dk for t, dk in zip(case["truth"], d)) / total
            for x in ("active", "issue", "tc_active", "tc_issue")}
    util = row["busy_ns"] / row["window_ns"]
    return {"gpu_util": util, "smsp_active_util": util * mean["active"],
            "issue_slot_util": util * mean["issue"], "tc_active_util": util * mean["tc_active"],
            "tc_issue_util": util * mean["tc_issue"]}


def test_run_utilization_equals_the_formula(case: dict[str, Any]) -> None:
    [row] = query_json(case["wh"], "SELECT * FROM run_utilization")
    want = _expected(case, row["iteration"])
    for column, value in want.items():
        assert row[column] == pytest.approx(value, rel=1e-6), column
    assert row["matched_time_share"] == pytest.approx(1.0)
    assert row["gpu_util"] >= row["smsp_active_util"] >= row["issue_slot_util"]
    assert row["throughput_samples_per_s"] == pytest.approx(32e9 / row["window_ns"])


def test_figure_views_are_consistent(case: dict[str, Any]) -> None:
    cdf = query_json(case["wh"], "SELECT tc_issue_util, cumulative_time_share FROM "
                     "tc_time_cdf ORDER BY tc_issue_util")
    assert cdf[-1]["cumulative_time_share"] == pytest.approx(1.0)
    shares = [r["cumulative_time_share"] for r in cdf]
    assert shares == sorted(shares) and cdf[0]["tc_issue_util"] == 0
    [dist] = query_json(case["wh"], "SELECT kernel_count, min_util, max_util FROM "
                        "issue_slot_distribution")
    issue = [t["issue"] for t in case["truth"]]
    assert dist["kernel_count"] == len(issue)
    assert dist["min_util"] == pytest.approx(min(issue), rel=1e-5)
    assert dist["max_util"] == pytest.approx(max(issue), rel=1e-5)
    layers = query_json(case["wh"], "SELECT sum(kernel_count) AS n FROM layer_utilization")
    assert layers == [{"n": len(issue)}]
    [quality] = query_json(case["wh"], "SELECT matched, ncu_kernels, ncu_unmatched, "
                           "matched_count_share FROM match_quality")
    assert quality == {"matched": len(issue), "ncu_kernels": len(issue), "ncu_unmatched": 0,
                       "matched_count_share": 1.0}
    [comparison] = query_json(case["wh"], "SELECT devices, throughput_vs_best_ratio FROM "
                              "run_comparison")
    assert comparison == {"devices": 1, "throughput_vs_best_ratio": 1.0}
