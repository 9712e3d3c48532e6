"""NCCL's NVTX ranges in an nsys export become collective_ops rows, and the view collectives
pairs two ranks' exports by them: made by hand after NCCL's src/include/nvtx.h (a range
named after the API call, around the launch of its kernel)."""
from __future__ import annotations

import sqlite3
from pathlib import Path

from tests.conftest import cli, query_json

KERNEL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"


def nccl_export(path: Path, late_ns: int) -> Path:
    """A step [0, 2 ms): an ncclAllReduce range [late, late + 30 us) around the launch of
    the all-reduce kernel, which runs from late + 20 us to 1.5 ms on stream 20; and a
    range named otherwise (ncclAllReduceX) that is not NCCL's."""
    con = sqlite3.connect(path)
    con.executescript(f"""
        CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INTEGER);
        INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (1000000000000);
        CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT);
        INSERT INTO StringIds VALUES (1, 'cudaLaunchKernel'), (2, '{KERNEL}');
        CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INT, end INT, globalTid INT,
            correlationId INT, nameId INT);
        INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES ({late_ns + 10000}, {late_ns + 15000},
            5, 1, 1);
        CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INT, end INT, deviceId INT,
            streamId INT, correlationId INT, demangledName INT);
        INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES ({late_ns + 20000}, 1500000, 0, 20, 1, 2);
        CREATE TABLE NVTX_EVENTS (start INT, end INT, eventType INT, text TEXT,
            globalTid INT);
        INSERT INTO NVTX_EVENTS VALUES (0, 2000000, 59, 'ProfilerStep#1', 5),
            ({late_ns}, {late_ns + 30000}, 59, 'ncclAllReduce', 5),
            ({late_ns + 1000}, {late_ns + 2000}, 59, 'ncclAllReduceX', 5);
    """)
    con.commit()
    con.close()
    return path


def test_nccl_ranges_name_the_collectives_of_an_nsys_run(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "two_ranks"
    run.mkdir(parents=True)
    nccl_export(run / "rank0.sqlite", 100_000)
    nccl_export(run / "rank1.sqlite", 700_000)   # 600 us late
    result = cli("ingest", str(tmp_path / "runs"), "--warehouse", str(tmp_path / "wh"))
    assert result.returncode == 0, result.stderr
    ops = query_json(tmp_path / "wh", "SELECT source_id, collective_name, ts_ns, dur_ns, "
                     "group_size FROM collective_ops ORDER BY source_id")
    start = 1000000000000
    assert ops == [{"source_id": 0, "collective_name": "allreduce", "ts_ns": start + 100_000,
                    "dur_ns": 30_000, "group_size": None},
                   {"source_id": 1, "collective_name": "allreduce", "ts_ns": start + 700_000,
                    "dur_ns": 30_000, "group_size": None}]
    rows = query_json(tmp_path / "wh", "SELECT source_id, collective, collective_name, "
                      "rank_count, wait_ns, transfer_ns FROM collectives ORDER BY source_id")
    # the kernels end together (1.5 ms): rank 0 waited from its start (120 us) to rank 1's
    # (720 us); both then moved data for 780 us
    assert rows == [
        {"source_id": 0, "collective": "allreduce", "collective_name": "allreduce",
         "rank_count": 2, "wait_ns": 600_000, "transfer_ns": 780_000},
        {"source_id": 1, "collective": "allreduce", "collective_name": "allreduce",
         "rank_count": 2, "wait_ns": 0, "transfer_ns": 780_000}]
