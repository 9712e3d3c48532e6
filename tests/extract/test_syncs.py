"""The syncs table against naive readings of the raw files: Kineto's cuda_sync events (stdlib
json) and nsys's CUPTI_ACTIVITY_KIND_SYNCHRONIZATION rows (sqlite3), kind by kind."""
from __future__ import annotations

import decimal
import gzip
import json
import re
import sqlite3
from collections import Counter
from pathlib import Path

import pytest

import etl
from tests.conftest import KINETO, NSYS, corpus_path

# what each call or event name means, as CUDA documents the calls
CALL_KINDS = {"cudaStreamSynchronize": "stream_sync", "cudaEventSynchronize": "event_sync",
              "cudaEventQuery": "event_sync", "cudaStreamWaitEvent": "stream_wait_event",
              "cudaDeviceSynchronize": "context_sync", "cuCtxSynchronize": "context_sync"}
EVENT_KINDS = {"Stream Sync": "stream_sync", "Event Sync": "event_sync",
               "Stream Wait Event": "stream_wait_event", "Context Sync": "context_sync"}


def syncs_of(warehouse: Path, run: str) -> Counter[tuple[str, int]]:
    con = etl.connect(warehouse)
    return Counter(con.execute(
        "SELECT s.kind, s.dur_ns FROM syncs AS s JOIN runs USING (run_id) WHERE run_name = ?",
        [run]).fetchall())


@pytest.mark.parametrize("run", ["alexnet", "event_sync"])
def test_kineto_syncs_are_the_cuda_sync_events(timeline_warehouse: Path, run: str) -> None:
    expected: Counter[tuple[str, int]] = Counter()
    for path in corpus_path(*KINETO[run]).rglob("*.json*"):
        opener = gzip.open if path.read_bytes()[:2] == b"\x1f\x8b" else open
        with opener(path, "rt", encoding="utf-8") as fh:
            doc = json.load(fh, parse_float=decimal.Decimal)
        for ev in doc["traceEvents"]:
            if ev.get("cat") == "cuda_sync":
                expected[(EVENT_KINDS[ev["name"]],
                          int(decimal.Decimal(ev["dur"]) * 1000))] += 1
    assert expected and syncs_of(timeline_warehouse, run) == expected


def test_kineto_stream_waits_name_the_stream_and_the_record(timeline_warehouse: Path) -> None:
    path = next(corpus_path(*KINETO["event_sync"]).rglob("*.json*"))
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        events = json.load(fh)["traceEvents"]
    expected = sorted((ev["args"]["wait_on_stream"],
                       ev["args"]["wait_on_cuda_event_record_corr_id"])
                      for ev in events if ev.get("name") == "Stream Wait Event")
    con = etl.connect(timeline_warehouse)
    got = sorted(con.execute(
        "SELECT wait_stream_id, wait_record_correlation_id FROM syncs JOIN runs USING (run_id) "
        "WHERE run_name = 'event_sync' AND kind = 'stream_wait_event'").fetchall())
    assert expected and got == [tuple(e) for e in expected]


@pytest.mark.parametrize("file", NSYS)
def test_nsys_syncs_are_the_synchronization_rows(timeline_warehouse: Path, file: str) -> None:
    with sqlite3.connect(corpus_path("nsys", file)) as db:
        rows = db.execute(
            "SELECT s.value, y.end - y.start FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION AS y "
            "LEFT JOIN CUPTI_ACTIVITY_KIND_RUNTIME AS r ON r.correlationId = y.correlationId "
            "LEFT JOIN StringIds AS s ON s.id = r.nameId").fetchall()
    expected = Counter((CALL_KINDS[re.sub(r"_v\d+$", "", name)], dur) for name, dur in rows)
    assert expected and syncs_of(timeline_warehouse, "nsys_" + file.split("_")[0]) == expected
