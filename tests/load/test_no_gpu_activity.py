"""A trace source without one GPU activity says so whatever its format: one anomaly kind,
no_gpu_activity, of the source, and a line of the ingest's output (a profile taken without
CUDA activities, a CPU-only profile, an NVTX-only nsys export, an xplane without a GPU
plane)."""
from __future__ import annotations

import sqlite3
from pathlib import Path

from etl.extract.kineto.decode import read_trace
from etl.extract.kineto.rows import build
from tests.conftest import cli, corpus_path, event, kernel, launch, query_json, step, write_trace
from tests.extract.kineto.test_pipeline import run_pipeline

KIND = "no_gpu_activity"
# three kernel launches, a copy and a fill start GPU work; the sync call does not
CALLS = [launch(1, 10_000), launch(2, 20_000), launch(3, 30_000, name="cuLaunchKernel"),
         launch(4, 40_000, name="cudaMemcpyAsync"), launch(5, 50_000, name="cudaMemsetAsync"),
         launch(6, 60_000, name="cudaStreamSynchronize")]
EVENTS = [step(1, 0, 100_000), event(name="aten::mm", ts=5_000, dur=50_000), *CALLS]
PREFIX = "no GPU activity (kernel, copy or fill) in this source: "


def kinds(path: Path) -> list[str]:
    return build(read_trace(path), 0, None).anomalies["kind"].to_pylist()


def ingest(runs: Path, warehouse: Path) -> tuple[list[str], list[str]]:
    """(warning lines naming the kind, the summary table's rows) of `etl ingest`."""
    done = cli("ingest", str(runs), "--warehouse", str(warehouse))
    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.splitlines() if KIND in line
                and "recorded:" not in line]  # not the per-run anomaly count
    rows = [line for line in done.stdout.splitlines() if "│" in line]  # not the progress
    return warnings, rows


def test_launches_without_gpu_activity_are_flagged(tmp_path: Path) -> None:
    path = write_trace(tmp_path / "runs" / "nocuda" / "trace.json", EVENTS)
    in_memory = build(read_trace(path), 0, None).anomalies.to_pylist()
    assert [(a["kind"], a["event_id"]) for a in in_memory] == [(KIND, None)]
    assert in_memory[0]["detail"].startswith(PREFIX + "5 launch calls that start GPU work")
    _, streamed = run_pipeline(path, tmp_path / "spill")
    assert streamed["anomalies"] is not None
    assert streamed["anomalies"].to_pylist() == in_memory
    warnings, rows = ingest(tmp_path / "runs", tmp_path / "wh")
    assert warnings == ["warning: nocuda/trace.json: no GPU activity: 5 launch calls that "
                        "start GPU work: it was probably recorded without CUDA activities "
                        "(torch.profiler without ProfilerActivity.CUDA); no GPU utilization "
                        f"for this trace (anomaly {KIND})"]
    [summary_row] = [line for line in rows if "nocuda" in line]
    assert "no GPU activity" in summary_row  # the summary table's notes column
    rows_ = query_json(tmp_path / "wh", "SELECT source_id, kind, event_id FROM anomalies")
    assert rows_ == [{"source_id": 0, "kind": KIND, "event_id": None}]


def test_a_cpu_only_trace_is_flagged(tmp_path: Path) -> None:
    """No launch call and no GPU activity: torch.profiler with ProfilerActivity.CPU only."""
    events = [step(1, 0, 100_000), event(name="aten::mm", ts=5_000, dur=50_000),
              event(name="aten::add", ts=60_000, dur=10_000)]
    path = write_trace(tmp_path / "runs" / "cpuonly" / "trace.json", events)
    [anomaly] = build(read_trace(path), 0, None).anomalies.to_pylist()
    assert anomaly["kind"] == KIND and "a CPU-only profile" in anomaly["detail"]
    warnings, _ = ingest(tmp_path / "runs", tmp_path / "wh")
    assert len(warnings) == 1 and "no launch call either" in warnings[0]
    assert query_json(tmp_path / "wh", "SELECT kind FROM anomalies") == [{"kind": KIND}]


def nvtx_only_export(path: Path) -> Path:
    """An nsys export of `nsys profile -t nvtx`: NVTX push/pop ranges, no CUPTI table."""
    path.parent.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(path)
    con.executescript("""
        CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INTEGER);
        INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (1745524738000000000);
        CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT);
        CREATE TABLE NVTX_EVENTS (start INT, end INT, eventType INT, text TEXT, textId INT,
                                  globalTid INT);
        INSERT INTO NVTX_EVENTS VALUES (100, 2000, 59, 'forward', NULL, 7),
            (2100, 4000, 59, 'forward', NULL, 7), (500, 900, 59, 'loss', NULL, 7);
    """)
    con.commit()
    con.close()
    return path


def test_an_nvtx_only_nsys_export_is_flagged(tmp_path: Path) -> None:
    nvtx_only_export(tmp_path / "runs" / "nvtx" / "report.sqlite")
    warnings, _ = ingest(tmp_path / "runs", tmp_path / "wh")
    assert len(warnings) == 1 and "3 NVTX ranges and 0 CUDA runtime/driver calls" in warnings[0]
    [row] = query_json(tmp_path / "wh", "SELECT source_id, event_id, detail FROM anomalies "
                       f"WHERE kind = '{KIND}'")
    assert (row["source_id"], row["event_id"]) == (0, None)
    assert row["detail"].startswith(PREFIX + "3 NVTX ranges") and "-t cuda,nvtx" in row["detail"]


def test_an_xplane_without_a_gpu_plane_is_flagged(tmp_path: Path) -> None:
    from tests.extract.xplane.xspace_writer import Event, Line, Plane, xspace

    host = Plane(1, "/host:CPU", [Line(1, "python3", 5, [Event("a:MatMul", 1000, 2000)])])
    folder = tmp_path / "runs" / "tfcpu" / "plugins" / "profile" / "s"
    folder.mkdir(parents=True)
    (folder / "h.xplane.pb").write_bytes(xspace([host]))
    warnings, _ = ingest(tmp_path / "runs", tmp_path / "wh")
    assert len(warnings) == 1 and "no /device:GPU:N plane" in warnings[0]
    assert query_json(tmp_path / "wh", "SELECT kind FROM anomalies WHERE kind LIKE "
                      "'%gpu%'") == [{"kind": KIND}]


def test_one_gpu_activity_is_not_flagged(tmp_path: Path) -> None:
    with_kernel = write_trace(tmp_path / "a.json", [*EVENTS, kernel(1, 12_000, 1_000)])
    only_copy = write_trace(tmp_path / "b.json", [step(1, 0, 100_000), CALLS[3], kernel(
        4, 45_000, 1_000, cat="gpu_memcpy")])
    assert KIND not in kinds(with_kernel)
    assert KIND not in kinds(only_copy)


def test_the_corpus_profile_without_gpu_activity() -> None:
    """HTA's cupti_profiler sample: 77 kernel launches, 17 copies, 10 fills; its only GPU
    rows are CUPTI profiler ranges (kind other), no kernel, copy or fill."""
    path = corpus_path("hta/cupti_profiler/benchmark_result_924719_1679055439_trace.json.gz")
    anomalies = build(read_trace(path), 0, None).anomalies.to_pylist()
    found = [a["detail"] for a in anomalies if a["kind"] == KIND]
    assert len(found) == 1 and found[0].startswith(PREFIX + "104 launch calls")
