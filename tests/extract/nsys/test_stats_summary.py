"""An `nsys stats` summary CSV (kernel totals, no timeline) is said to be what it is, with
the export that holds the timeline, instead of "no profiler output"."""
from __future__ import annotations

import shutil
from pathlib import Path

from etl.extract.nsys.stats_summary import describe
from tests.conftest import INPUTS, cli, corpus_path, query_json

SUMMARY = INPUTS / "nsys" / "report1_cuda_gpu_kern_sum.csv"


def ingest(runs: Path, warehouse: Path) -> tuple[int, str]:
    done = cli("ingest", str(runs), "--warehouse", str(warehouse))
    return done.returncode, done.stderr


def test_a_summary_alone_is_refused_as_a_summary(tmp_path: Path) -> None:
    folder = tmp_path / "runs" / "summary"
    folder.mkdir(parents=True)
    shutil.copy(SUMMARY, folder)
    code, err = ingest(tmp_path / "runs", tmp_path / "wh")
    [line] = [x for x in err.splitlines() if x.startswith("error:")]
    assert code == 1 and "no profiler output" not in line
    assert line == (
        "error: summary: nothing the tool can ingest in the run folder (1 file(s) skipped: "
        "report1_cuda_gpu_kern_sum.csv: an nsys stats summary (cuda_gpu_kern_sum: total GPU "
        "time per kernel name), not a timeline: it has no kernel start, so no GPU "
        "utilization can be computed from it; ingest the timeline instead: nsys export "
        "--type sqlite report1.nsys-rep (or nsys stats --report cuda_gpu_trace --format csv "
        "report1.nsys-rep)); nothing ingested (etl formats lists what is read)")


def test_a_summary_beside_its_export_is_skipped_naming_it(tmp_path: Path) -> None:
    folder = tmp_path / "runs" / "both"
    folder.mkdir(parents=True)
    shutil.copy(SUMMARY, folder)
    (folder / "report1.sqlite").symlink_to(
        corpus_path("nsys", "rtx3060_p4arth_vecadd_nsys2025.5.sqlite"))
    code, err = ingest(tmp_path / "runs", tmp_path / "wh")
    assert code == 0, err
    assert ("both/report1_cuda_gpu_kern_sum.csv: skipped (an nsys stats summary "
            "(cuda_gpu_kern_sum: total GPU time per kernel name), not a timeline") in err
    assert "its timeline is report1.sqlite beside it, which is ingested" in err
    [run] = query_json(tmp_path / "wh", "SELECT len(sources) AS n, skipped[1].path AS path "
                       "FROM runs")
    assert run == {"n": 1, "path": "report1_cuda_gpu_kern_sum.csv"}


def test_the_reports_are_told_apart() -> None:
    assert describe("Time (%),Total Time (ns),Num Calls,Avg (ns),Med (ns),Min (ns),Max (ns),"
                    "StdDev (ns),Name").startswith("cuda_api_sum")
    assert describe("Time (%),Total Time (ns),Count,Avg (ns),Med (ns),Min (ns),Max (ns),"
                    "StdDev (ns),Operation").startswith("cuda_gpu_mem_time_sum")
    assert describe("Time (%),Total Time (ns),Instances,Avg (ns),Med (ns),Min (ns),Max (ns),"
                    "StdDev (ns),Style,Range").startswith("nvtx_sum")
