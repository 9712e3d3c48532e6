"""A trace with launch calls and no GPU activity at all (a profile taken without CUDA
activities) says so: an anomaly of its source, and a line of the ingest's output."""
from __future__ import annotations

from pathlib import Path

from etl.extract.kineto.decode import read_trace
from etl.extract.kineto.rows import build
from tests.conftest import cli, corpus_path, event, kernel, launch, query_json, step, write_trace
from tests.extract.kineto.test_pipeline import run_pipeline

KIND = "launches_without_gpu_activity"
# three kernel launches, a copy and a fill start GPU work; the sync call does not
CALLS = [launch(1, 10_000), launch(2, 20_000), launch(3, 30_000, name="cuLaunchKernel"),
         launch(4, 40_000, name="cudaMemcpyAsync"), launch(5, 50_000, name="cudaMemsetAsync"),
         launch(6, 60_000, name="cudaStreamSynchronize")]
EVENTS = [step(1, 0, 100_000), event(name="aten::mm", ts=5_000, dur=50_000), *CALLS]


def kinds(path: Path) -> list[str]:
    return build(read_trace(path), 0, None).anomalies["kind"].to_pylist()


def test_launches_without_gpu_activity_are_flagged(tmp_path: Path) -> None:
    path = write_trace(tmp_path / "runs" / "nocuda" / "trace.json", EVENTS)
    in_memory = build(read_trace(path), 0, None).anomalies.to_pylist()
    assert [(a["kind"], a["event_id"]) for a in in_memory] == [(KIND, None)]
    assert in_memory[0]["detail"].startswith("5 launch calls that start GPU work")
    _, streamed = run_pipeline(path, tmp_path / "spill")
    assert streamed["anomalies"] is not None
    assert streamed["anomalies"].to_pylist() == in_memory
    done = cli("ingest", str(tmp_path / "runs"), "--warehouse", str(tmp_path / "wh"))
    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.splitlines() if KIND in line]
    assert warnings == ["warning: nocuda/trace.json: 5 launch calls that start GPU work and "
                        "no GPU activity: recorded without CUDA activities? No GPU utilization "
                        f"for this trace (anomaly {KIND})"]
    [summary_row] = [line for line in done.stdout.splitlines()
                     if "nocuda" in line and "│" in line]  # the summary table, not progress
    assert "no GPU activity" in summary_row  # the summary table's notes column
    rows = query_json(tmp_path / "wh", "SELECT source_id, kind, event_id FROM anomalies")
    assert rows == [{"source_id": 0, "kind": KIND, "event_id": None}]


def test_one_gpu_activity_or_no_work_is_not_flagged(tmp_path: Path) -> None:
    with_kernel = write_trace(tmp_path / "a.json", [*EVENTS, kernel(1, 12_000, 1_000)])
    only_sync = write_trace(tmp_path / "b.json", [step(1, 0, 100_000), CALLS[-1]])
    assert KIND not in kinds(with_kernel)
    assert KIND not in kinds(only_sync)


def test_the_corpus_profile_without_gpu_activity() -> None:
    """HTA's cupti_profiler sample: 77 kernel launches, 17 copies, 10 fills; its only GPU
    rows are CUPTI profiler ranges (kind other), no kernel, copy or fill."""
    path = corpus_path("hta/cupti_profiler/benchmark_result_924719_1679055439_trace.json.gz")
    anomalies = build(read_trace(path), 0, None).anomalies.to_pylist()
    found = [a["detail"] for a in anomalies if a["kind"] == KIND]
    assert len(found) == 1 and found[0].startswith("104 launch calls")
