"""nsys SQLite export and cuda_gpu_trace CSV → trace tables; GPU_METRICS → gpu_samples."""
from __future__ import annotations

import csv
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import pytest

from etl.core.errors import InputError
from etl.extract.nsys.stats_csv import read as ingest_gpu_trace
from etl.extract.nsys.read import read as ingest_sqlite, refuse_rep
from etl.extract.trace_role import PipelineOptions, Sinks, TraceClock
from tests.conftest import corpus_path

RESNET = "rtxa4500_flame_resnet18-fwd_nsys2024.6.sqlite"


def _ingest(path: Path, reader: Any = ingest_sqlite, workers: int = 2
            ) -> tuple[Any, dict[str, list[dict]]]:
    got: dict[str, list[dict]] = {}

    def sink(name: str) -> Any:
        return lambda table: got.setdefault(name, []).extend(table.to_pylist())

    sinks = Sinks(sink("host_events"), sink("kernels"), sink("anomalies"), lambda: None,
                  lambda name, table: got.setdefault(name, []).extend(table.to_pylist()))
    spill = Path(tempfile.mkdtemp()) / "spill"
    return reader(path, workers, None, spill, sinks, PipelineOptions()), got


def test_resnet_export_kernels_match_the_stats_csv_oracle() -> None:
    """Every SQLite activity equals a row of nsys's own cuda_gpu_trace report of the run
    (start - session start, duration, correlation id), 2482 kernels + 122 copies + 81 sets."""
    result, got = _ingest(corpus_path("nsys", RESNET))
    con = sqlite3.connect(f"file:{corpus_path('nsys', RESNET)}?mode=ro", uri=True)
    [(session,)] = con.execute("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME")
    ours = sorted((k["ts_ns"] - session, k["dur_ns"], k["correlation_id"], k["kind"])
                  for k in got["kernels"])
    with open(corpus_path("nsys", "rtxa4500_flame_resnet18-fwd_cuda_gpu_trace_base.csv"),
              newline="") as fh:
        rows = list(csv.DictReader(fh))
    kind = {"[CUDA memcpy": "memcpy", "[CUDA memset": "memset"}
    theirs = sorted((int(r["Start (ns)"]), int(r["Duration (ns)"]), int(r["CorrId"]),
                     kind.get(r["Name"][:12], "kernel")) for r in rows)
    assert ours == theirs and len(ours) == 2685
    assert sum(k["kind"] == "kernel" for k in got["kernels"]) == 2482


def test_resnet_export_links_launches_layers_and_never_popped_steps() -> None:
    result, got = _ingest(corpus_path("nsys", RESNET))
    host = {h["event_id"]: h for h in got["host_events"]}
    kernels = [k for k in got["kernels"] if k["kind"] == "kernel"]
    assert all(k["launch_event_id"] is not None for k in kernels)
    for k in kernels[:50]:
        launch = host[k["launch_event_id"]]
        assert launch["correlation_id"] == k["correlation_id"]
        assert launch["category"] == "cuda_runtime" and launch["ts_ns"] <= k["ts_ns"]
    its = result.iterations.to_pylist()
    assert [i["iteration"] for i in its] == list(range(10, 20))
    # the iterationN ranges are never popped: each ends where the next starts
    assert all(a["end_ns"] == b["start_ns"] for a, b in zip(its, its[1:]))
    # the last one ends with the last GPU activity launched from it (the run's last
    # kernel), not at the capture's end 0.48 s later, and says it was inferred
    last_kernel_end = max(k["ts_ns"] + k["dur_ns"] for k in got["kernels"])
    assert its[-1]["end_ns"] == last_kernel_end
    assert [a["kind"] for a in got["anomalies"]] == ["step_end_inferred"]
    per_iteration = {}
    for k in kernels:
        if k["iteration"] is not None:
            per_iteration[k["iteration"]] = per_iteration.get(k["iteration"], 0) + 1
    assert per_iteration == {i: 124 for i in range(10, 20)}  # SOURCES.md: 124 per iteration
    assert {k["layer"] for k in kernels if k["iteration"] is not None} == {"forward"}
    [device] = result.devices.to_pylist()
    assert (device["name"], device["compute_capability"], device["sm_count"]) == (
        "NVIDIA RTX A4500", "8.6", 56)
    # wall clock: the session started 2025-04-24T19:58:58Z
    assert 1745524738 * 10**9 < its[0]["start_ns"] < 1745524800 * 10**9


@pytest.mark.parametrize("name,kernels", [
    ("rtx2070s_dlprof_pytorch-dummy_nsys2022.1.sqlite", 46),
    ("rtx3060_p4arth_vecadd_nsys2025.5.sqlite", 1),
    ("rtx4090_lashi_memTransfer_NO-KERNELS_nsys2023.2.sqlite", 0)])
def test_every_schema_version_reads_by_column_name(name: str, kernels: int) -> None:
    result, got = _ingest(corpus_path("nsys", name))
    assert sum(k["kind"] == "kernel" for k in got.get("kernels", [])) == kernels
    assert len(got["host_events"]) > 0
    [it] = result.iterations.to_pylist()
    assert it["boundary"] == "whole_trace" and it["end_ns"] >= it["start_ns"]


def test_gpu_metrics_become_samples(tmp_path: Path) -> None:
    path = tmp_path / "m.sqlite"
    con = sqlite3.connect(path)
    con.executescript("""
        CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INTEGER);
        INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (1000000000000);
        CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INT, end INT, globalTid INT,
            correlationId INT, nameId INT);
        CREATE TABLE TARGET_INFO_GPU_METRICS (typeId INT, metricId INT, metricName TEXT);
        INSERT INTO TARGET_INFO_GPU_METRICS VALUES (65537, 1, 'SM Active [Throughput %]'),
            (65537, 2, 'Tensor Active [Throughput %]');
        CREATE TABLE GPU_METRICS (timestamp INT, typeId INT, metricId INT, value INT);
        INSERT INTO GPU_METRICS VALUES (500, 65537, 1, 90), (500, 65537, 2, 4);
    """)
    con.commit()
    con.close()
    _, got = _ingest(path)
    samples = {s["metric"]: s for s in got["gpu_samples"]}
    assert samples["sm_active"]["value"] == 0.9 and samples["tensor_active"]["value"] == 0.04
    assert samples["sm_active"]["ts_ns"] == 1000000000500
    assert samples["sm_active"]["clock"] == "session_start"
    assert samples["sm_active"]["device_index"] == 1


def test_truncated_export_is_one_line(tmp_path: Path) -> None:
    data = corpus_path("nsys", "rtx2070s_dlprof_pytorch-dummy_nsys2022.1.sqlite").read_bytes()
    path = tmp_path / "cut.sqlite"
    path.write_bytes(data[:len(data) // 3])
    with pytest.raises(InputError) as info:
        _ingest(path)
    assert "cut.sqlite" in info.value.line() and "\n" not in info.value.line()


def test_nsys_rep_is_refused_with_the_export_command(tmp_path: Path) -> None:
    with pytest.raises(InputError) as info:
        refuse_rep(tmp_path / "report1.nsys-rep")
    assert ("nsys export --type sqlite --output report1.sqlite report1.nsys-rep"
            in info.value.line())


def test_stats_csv_reads_kernels_without_launches() -> None:
    result, got = _ingest(corpus_path(
        "nsys", "rtxa4500_flame_resnet18-fwd_cuda_gpu_trace_base.csv"), ingest_gpu_trace)
    kinds = [k["kind"] for k in got["kernels"]]
    assert (kinds.count("kernel"), kinds.count("memcpy"), kinds.count("memset")) == (
        2482, 122, 81)
    assert {a["kind"] for a in got["anomalies"]} == {"kernel_without_launch", "clock_unaligned"}
    assert result.devices.to_pylist()[0]["name"] == "NVIDIA RTX A4500"


def tiny_export(path: Path, session_start: object) -> Path:
    """One runtime call and its kernel, 1 µs apart; a session start row unless None."""
    con = sqlite3.connect(path)
    con.executescript("""
        CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INTEGER);
        CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT);
        INSERT INTO StringIds VALUES (1, 'cudaLaunchKernel'), (2, 'k');
        CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INT, end INT, globalTid INT,
            correlationId INT, nameId INT);
        INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (100, 200, 7, 5, 1);
        CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INT, end INT, deviceId INT,
            streamId INT, correlationId INT, shortName INT);
        INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (1100, 1600, 0, 7, 5, 2);
    """)
    if session_start is not None:
        con.execute("INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (?)", (session_start,))
    con.commit()
    con.close()
    return path


def test_the_reader_states_its_clock_from_the_session_start(tmp_path: Path) -> None:
    start = 1_745_524_738_000_000_000
    result, got = _ingest(tiny_export(tmp_path / "t.sqlite", start))
    assert result.clock == TraceClock("session_start", 0, None)
    [kernel] = got["kernels"]
    assert kernel["ts_ns"] == start + 1100   # UTC = source time + utc_offset_ns (0)
    assert "anomalies" not in got or not any(a["kind"] == "clock_unaligned"
                                              for a in got["anomalies"])


@pytest.mark.parametrize("session_start,reason", [
    (None, "no TARGET_INFO_SESSION_START_TIME"),
    ("yesterday", "is not an integer number of ns"),
    (1.5, "is not an integer number of ns")])
def test_without_a_session_start_the_clock_is_unmapped(
        tmp_path: Path, session_start: object, reason: str) -> None:
    """Not guessed from the size of the times: unmapped, with the reason."""
    result, got = _ingest(tiny_export(tmp_path / "t.sqlite", session_start))
    assert result.clock.kind == "unmapped" and result.clock.utc_offset_ns is None
    assert reason in result.clock.reason
    [kernel] = got["kernels"]
    assert kernel["ts_ns"] == 1100           # the session clock, nothing added
    [anomaly] = [a for a in got["anomalies"] if a["kind"] == "clock_unaligned"]
    assert reason in anomaly["detail"]


def _metrics_export(path: Path, session_start: int | None, rows: int) -> Path:
    """`rows` GPU_METRICS samples over 3 GPUs and 4 metrics (one unnamed, one not in %),
    with NULL values, device and metric ids among them."""
    tiny_export(path, session_start)
    con = sqlite3.connect(path)
    con.executescript("""
        CREATE TABLE TARGET_INFO_GPU_METRICS (typeId INT, metricId INT, metricName TEXT);
        CREATE TABLE GPU_METRICS (timestamp INT, typeId INT, metricId INT, value INT);
    """)
    gpus = (0x10000, 0x10001, 0x10203)    # the low byte is the GPU: 0, 1, 3
    con.executemany("INSERT INTO TARGET_INFO_GPU_METRICS VALUES (?, ?, ?)", [
        (t, m, name) for t in gpus for m, name in (
            (1, "SM Active [Throughput %]"), (2, "Tensor Active [Throughput %]"),
            (3, "PCIe RX Bandwidth [Throughput MB/s]"))])
    con.executemany("INSERT INTO GPU_METRICS VALUES (?, ?, ?, ?)", [
        (1000 * i, None if i % 97 == 5 else gpus[i % 3], None if i % 89 == 7 else i % 5,
         None if i % 13 == 0 else (i * 7) % 101) for i in range(rows)])
    con.commit()
    con.close()
    return path


@pytest.mark.parametrize("session_start,workers", [(1_745_524_738_000_000_000, 1),
                                                  (None, 1), (1_745_524_738_000_000_000, 2)])
def test_gpu_metrics_stream_equal_a_naive_reading(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, session_start: int | None,
        workers: int) -> None:
    """Batches of 3 pages (many batches): each row as a per-row Python reading gives it.
    workers=2: read by the worker process (its batches: the patch does not reach it)."""
    from etl.extract.nsys import pages
    from etl.extract.fields import field_map
    from tests.oracle import naive_nsys

    monkeypatch.setattr(pages, "BATCH_PAGES", 3)
    path = _metrics_export(tmp_path / "m.sqlite", session_start, 5000)
    parts: list[Any] = []
    sinks = Sinks(lambda t: None, lambda t: None, lambda t: None, lambda: None,
                  lambda name, table: parts.append(table))
    ingest_sqlite(path, 2, None, tmp_path / "spill", sinks, PipelineOptions(workers=workers))
    assert len(parts) > 3 or workers > 1  # handed on batch by batch, never the whole table
    samples = [s for part in parts for s in part.to_pylist()]
    assert [(s["sample_index"], s["device_index"], s["clock_ts_ns"], s["metric"],
             s["value"], s["unit"], s["reported_unit"]) for s in samples] == (
        naive_nsys.gpu_samples(path, field_map("nsys")["gpu_metric_map"]))
    if session_start is None:   # no session start: not placed on the wall clock
        assert {(s["ts_ns"], s["clock"]) for s in samples} == {(None, "unaligned")}
    else:
        assert all(s["ts_ns"] == s["clock_ts_ns"] + session_start for s in samples)
        assert {s["clock"] for s in samples} == {"session_start"}
    by_metric = {s["metric"] for s in samples}
    assert {"sm_active", "tensor_active", "PCIe RX Bandwidth", "metric 4"} <= by_metric


def test_an_export_whose_schema_lies_past_the_first_64_kib_is_recognised(
        tmp_path: Path) -> None:
    """Tables created after 200 KiB of data, with a schema too large for page 1, put the
    table names beyond what the head sniff reads; the file is still an nsys export and
    ingests through the CLI."""
    from tests.conftest import cli

    path = tmp_path / "runs" / "late_schema" / "report.sqlite"
    path.parent.mkdir(parents=True)
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE filler (blob BLOB)")
    con.executemany("INSERT INTO filler VALUES (?)", [(b"x" * 4000,)] * 50)
    for n in range(40):  # page 1 overflows: the schema moves to leaf pages after the data
        columns = ", ".join(f"column_with_a_long_name_{c} INTEGER" for c in range(8))
        con.execute(f"CREATE TABLE ANOTHER_TABLE_OF_THE_EXPORT_{n} ({columns})")
    con.commit()
    con.close()
    tiny_export(path, 1_700_000_000_000_000_000)
    assert b"CUPTI_ACTIVITY_KIND_" not in path.read_bytes()[:1 << 16]
    result = cli("ingest", str(tmp_path / "runs"), "--warehouse", str(tmp_path / "wh"))
    assert result.returncode == 0, result.stderr
    import duckdb
    con2 = duckdb.connect(str(tmp_path / "wh" / "warehouse.duckdb"), read_only=True)
    assert con2.execute("SELECT count(*), min(dur_ns) FROM kernels").fetchone() == (1, 500)


def test_current_exports_sms_active_is_sm_active(tmp_path: Path) -> None:
    """Current nsys names the metric "SMs Active [Throughput %]" (older: "SM Active"):
    both are sm_active, a ratio, whatever the spelling."""
    path = tiny_export(tmp_path / "m.sqlite", 1_745_524_738_000_000_000)
    con = sqlite3.connect(path)
    con.executescript("""
        CREATE TABLE TARGET_INFO_GPU_METRICS (typeId INT, metricId INT, metricName TEXT);
        CREATE TABLE GPU_METRICS (timestamp INT, typeId INT, metricId INT, value INT);
        INSERT INTO TARGET_INFO_GPU_METRICS VALUES (65536, 1, 'SMs Active [Throughput %]'),
                                                   (65537, 1, 'SM Active [Throughput %]');
        INSERT INTO GPU_METRICS VALUES (1000, 65536, 1, 40), (1000, 65537, 1, 75);
    """)
    con.commit()
    con.close()
    parts: list[Any] = []
    sinks = Sinks(lambda t: None, lambda t: None, lambda t: None, lambda: None,
                  lambda name, table: parts.append(table))
    ingest_sqlite(path, 2, None, tmp_path / "spill", sinks, PipelineOptions(workers=1))
    samples = sorted((s["device_index"], s["metric"], s["value"], s["unit"])
                     for part in parts for s in part.to_pylist())
    assert samples == [(0, "sm_active", 0.4, "ratio"), (1, "sm_active", 0.75, "ratio")]


@pytest.mark.parametrize("workers", [1, 2])
def test_cuda_graphs_traced_whole_are_busy_and_flagged(tmp_path: Path, workers: int) -> None:
    """nsys --cuda-graph-trace=graph (its default) writes one GRAPH_TRACE row per graph
    execution and no kernel rows for its nodes (nsys SQLite schema reference). By hand:
    the 500 ns kernel and the 6 000 ns graph launched by cudaGraphLaunch (correlation 6)
    are 6 500 ns busy in the export's one window, 100-8 000 ns (no NVTX steps)."""
    path = tiny_export(tmp_path / "g.sqlite", 1_745_524_738_000_000_000)
    con = sqlite3.connect(path)
    con.executescript("""
        INSERT INTO StringIds VALUES (3, 'cudaGraphLaunch');
        INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (1700, 1800, 7, 6, 3);
        CREATE TABLE CUPTI_ACTIVITY_KIND_GRAPH_TRACE (start INTEGER NOT NULL,
            end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL,
            greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER,
            globalPid INTEGER, graphId INTEGER NOT NULL, graphExecId INTEGER NOT NULL);
        INSERT INTO CUPTI_ACTIVITY_KIND_GRAPH_TRACE VALUES (2000, 8000, 0, 1, NULL, 7, 6,
            NULL, 12, 34);
    """)
    con.commit()
    con.close()
    got: dict[str, list[dict]] = {}
    sinks = Sinks(lambda t: got.setdefault("host", []).extend(t.to_pylist()),
                  lambda t: got.setdefault("kernels", []).extend(t.to_pylist()),
                  lambda t: got.setdefault("anomalies", []).extend(t.to_pylist()),
                  lambda: None, lambda name, table: None)
    ingest_sqlite(path, 2, None, tmp_path / "spill", sinks, PipelineOptions(workers=workers))
    kernels = sorted((k["name"], k["kind"], k["dur_ns"], k["correlation_id"],
                      k["launch_event_id"] is not None) for k in got["kernels"])
    assert kernels == [("[CUDA graph]", "kernel", 6000, 6, True), ("k", "kernel", 500, 5, True)]
    [flag] = [a for a in got["anomalies"] if a["kind"] == "cuda_graph_traced_whole"]
    assert flag["detail"].startswith("1 CUDA graph execution(s)")
    assert "--cuda-graph-trace=node" in flag["detail"]
    if workers == 1:
        import etl

        (tmp_path / "run").mkdir()
        path.rename(tmp_path / "run" / "report.sqlite")
        etl.ingest(tmp_path / "run", tmp_path / "wh", jobs=1)
        assert etl.connect(tmp_path / "wh").execute(
            "SELECT busy_ns, window_ns FROM gpu_utilization").fetchall() == [(6500, 7900)]


def test_an_export_of_several_processes_says_so(tmp_path: Path) -> None:
    """nsys profile torchrun ...: two processes (pids 4000 and 4001 in globalPid's bits
    24-47) whose correlation ids overlap; the steps cannot tell them apart, and the anomaly
    says so (one process: no anomaly)."""
    path = tiny_export(tmp_path / "p.sqlite", 1_745_524_738_000_000_000)
    con = sqlite3.connect(path)
    con.executescript("""
        ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL ADD COLUMN globalPid INT;
        UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET globalPid = (1 << 56) + (4000 << 24);
    """)
    con.commit()
    one = _ingest(path)[1]
    assert not [a for a in one["anomalies"] if a["kind"] == "several_processes"]
    con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (1700, 1900, 1, 7, 5, 2, "
                "(1 << 56) + (4001 << 24))")
    con.commit()
    con.close()
    [flag] = [a for a in _ingest(path)[1]["anomalies"] if a["kind"] == "several_processes"]
    assert flag["detail"].startswith("GPU activities of 2 processes (pid 4000, 4001)")


@pytest.mark.parametrize("workers", [1, 2])
def test_each_process_links_its_own_launches(tmp_path: Path, workers: int) -> None:
    """Two processes (pids 4000 and 4001) each number their calls from 5: a kernel's
    launch is the call of its correlation id in its own process (globalTid and globalPid
    hold the pid in bits 24-47), not the first call of that id in the export."""
    path = tiny_export(tmp_path / "p.sqlite", 1_745_524_738_000_000_000)
    a, b = (1 << 56) + (4000 << 24), (1 << 56) + (4001 << 24)
    con = sqlite3.connect(path)
    con.executescript(f"""
        UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET globalTid = {a} + 11;
        INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (300, 400, {b} + 12, 5, 1);
        ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL ADD COLUMN globalPid INT;
        UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET globalPid = {a};
        INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (1700, 1900, 1, 7, 5, 2, {b});
    """)
    con.commit()
    con.close()
    got = _ingest(path, workers=workers)[1]
    host = {h["event_id"]: h for h in got["host_events"]}
    launched = sorted((k["ts_ns"] % 10_000, k["correlation_id"],
                       host[k["launch_event_id"]]["ts_ns"] % 10_000) for k in got["kernels"])
    assert launched == [(1100, 5, 100), (1700, 5, 300)]


MS = 1_000_000


def _process_tables(path: Path) -> sqlite3.Connection:
    """A new export at `path` with the tables of calls, kernels and NVTX ranges that name
    their process (globalTid, globalPid), open for rows."""
    con = sqlite3.connect(path)
    con.executescript("""
        CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT);
        INSERT INTO StringIds VALUES (1, 'cudaLaunchKernel'), (2, 'k');
        CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INT, end INT, globalTid INT,
            correlationId INT, nameId INT);
        CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INT, end INT, deviceId INT,
            streamId INT, correlationId INT, shortName INT, globalPid INT);
        CREATE TABLE NVTX_EVENTS (start INT, end INT, eventType INT, text TEXT,
            globalTid INT);
    """)
    return con


def _two_process_export(path: Path, skew_ns: int, again_ns: int | None = None) -> Path:
    """torchrun under one nsys: pids 4000 and 4001 on GPUs 0 and 1, each pushing
    ProfilerStep#1 and #2 (10 ms each, from 10 ms; pid 4001 `skew_ns` later) and launching
    one kernel per step (2 ms on GPU 0, 5 ms on GPU 1) with correlation ids 10 and 11 in both.
    `again_ns`: pid 4000 runs ProfilerStep#1 once more there (a second loop, apart)."""
    con = _process_tables(path)
    for rank, kernel_ms in ((0, 2), (1, 5)):
        pid = (1 << 56) + ((4000 + rank) << 24)
        for step in (0, 1):
            s = 10 * MS + step * 10 * MS + rank * skew_ns
            con.execute("INSERT INTO NVTX_EVENTS VALUES (?, ?, 59, ?, ?)",
                        (s, s + 10 * MS, f"ProfilerStep#{step + 1}", pid + 1))
            con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?, ?, ?, 1)",
                        (s + 100_000, s + 110_000, pid + 1, 10 + step))
            con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?, ?, ?, 7, ?, 2, ?)",
                        (s + 300_000, s + 300_000 + kernel_ms * MS, rank, 10 + step, pid))
    if again_ns is not None:
        con.execute("INSERT INTO NVTX_EVENTS VALUES (?, ?, 59, 'ProfilerStep#1', ?)",
                    (again_ns, again_ns + 10 * MS, (1 << 56) + (4000 << 24) + 1))
    con.commit()
    con.close()
    return path


@pytest.mark.parametrize("skew_ms,windows", [
    (0, [(1, 10, 20), (2, 20, 30)]),
    # pid 4001 3 ms behind: step 1 of both runs 10-23 ms, cut where step 2 starts (20 ms)
    (3, [(1, 10, 20), (2, 20, 33)])])
def test_the_steps_of_several_processes_make_one_window_each(
        tmp_path: Path, skew_ms: int, windows: list[tuple[int, int, int]]) -> None:
    """Each process pushes its own ProfilerStep#N: the ranges of one number that overlap are
    one iteration, from the first start to the last end, never two rows of a number (one of
    them 0 ns long) nor steps taken for never popped."""
    result, got = _ingest(_two_process_export(tmp_path / "p.sqlite", skew_ms * MS))
    its = [(i["iteration"], i["start_ns"] // MS, i["end_ns"] // MS)
           for i in result.iterations.to_pylist()]
    assert its == windows
    assert sorted((k["device_id"], k["iteration"]) for k in got["kernels"]) == [
        (0, 1), (0, 2), (1, 1), (1, 2)]
    # every process's step ranges are markers, none a layer (the NVTX layer of a kernel)
    assert {k["layer"] for k in got["kernels"]} == {None}
    kinds = {a["kind"] for a in got["anomalies"]}
    assert "several_processes" in kinds and "step_end_inferred" not in kinds


def test_a_step_number_run_twice_apart_stays_two_iterations(tmp_path: Path) -> None:
    """A second ProfilerStep#1 long after the first (a second loop) does not overlap it:
    it stays an iteration of its own."""
    result, _ = _ingest(_two_process_export(tmp_path / "p.sqlite", 0, again_ns=50 * MS))
    its = [(i["iteration"], i["start_ns"] // MS, i["end_ns"] // MS)
           for i in result.iterations.to_pylist()]
    assert its == [(1, 10, 20), (2, 20, 30), (1, 50, 60)]


def _one_process_loops(path: Path, end_of: Any) -> Path:
    """One thread running ProfilerStep#1, #2 twice (from 10, 20, 50, 60 ms), each range
    ending at end_of(start ms) ns, one 1.7 ms kernel launched 0.1 ms into each."""
    con = _process_tables(path)
    pid = (1 << 56) + (4000 << 24)
    for corr, (number, start_ms) in enumerate([(1, 10), (2, 20), (1, 50), (2, 60)]):
        s = start_ms * MS
        con.execute("INSERT INTO NVTX_EVENTS VALUES (?, ?, 59, ?, ?)",
                    (s, end_of(start_ms), f"ProfilerStep#{number}", pid + 1))
        con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?, ?, ?, 1)",
                    (s + 100_000, s + 110_000, pid + 1, corr))
        con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?, ?, 0, 7, ?, 2, ?)",
                    (s + 300_000, s + 2 * MS, corr, pid))
    con.commit()
    con.close()
    return path


@pytest.mark.parametrize("end_of,windows", [
    (lambda start_ms: (start_ms + 10) * MS, [(1, 10, 20), (2, 20, 30), (1, 50, 60), (2, 60, 70)]),
    # never popped: every range ends at the capture's end (100 ms), each is cut where the
    # next starts and the last ends with its kernel (62 ms)
    (lambda start_ms: 100 * MS, [(1, 10, 20), (2, 20, 50), (1, 50, 60), (2, 60, 62)])])
def test_one_thread_running_a_loop_twice_keeps_four_iterations(
        tmp_path: Path, end_of: Any, windows: list[tuple[int, int, int]]) -> None:
    """Ranges of one number from one thread are never merged, even when they overlap
    because they were never popped."""
    result, got = _ingest(_one_process_loops(tmp_path / "p.sqlite", end_of))
    its = [(i["iteration"], i["start_ns"] // MS, i["end_ns"] // MS)
           for i in result.iterations.to_pylist()]
    assert its == windows
    assert [k["iteration"] for k in sorted(got["kernels"], key=lambda k: k["ts_ns"])] == [
        1, 2, 1, 2]


def test_cupti_tables_no_reader_takes_are_named(tmp_path: Path) -> None:
    """A CUPTI activity table with rows that nothing reads (Blackwell's MEM_DECOMPRESS) is
    named with its row count; the profiler's OVERHEAD table and empty tables are not."""
    path = tiny_export(tmp_path / "t.sqlite", 1_745_524_738_000_000_000)
    con = sqlite3.connect(path)
    con.executescript("""
        CREATE TABLE CUPTI_ACTIVITY_KIND_MEM_DECOMPRESS (start INT, end INT, deviceId INT);
        INSERT INTO CUPTI_ACTIVITY_KIND_MEM_DECOMPRESS VALUES (1, 2, 0), (3, 4, 0);
        CREATE TABLE CUPTI_ACTIVITY_KIND_OVERHEAD (start INT, end INT);
        INSERT INTO CUPTI_ACTIVITY_KIND_OVERHEAD VALUES (1, 2);
        CREATE TABLE CUPTI_ACTIVITY_KIND_NVLINK (start INT);
    """)
    con.commit()
    con.close()
    [flag] = [a for a in _ingest(path)[1]["anomalies"] if a["kind"] == "nsys_tables_not_read"]
    assert "CUPTI_ACTIVITY_KIND_MEM_DECOMPRESS (2 rows)" in flag["detail"]
    assert "OVERHEAD" not in flag["detail"] and "NVLINK" not in flag["detail"]
    assert not [a for a in _ingest(tiny_export(tmp_path / "plain.sqlite", 0))[1]["anomalies"]
                if a["kind"] == "nsys_tables_not_read"]
