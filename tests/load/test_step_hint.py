"""A run without step markers is one whole-trace window; it says so (anomaly
no_step_markers) and names, from its own host events, the step_pattern that would give
it steps: checked by ingesting the run again with that pattern in run.toml."""
from __future__ import annotations

import re
import sqlite3
from pathlib import Path

from etl.load.step_hint import pattern_for, toml_string
from tests.conftest import cli, event, kernel, launch, query_json, write_trace

KIND = "no_step_markers"
START = 1_745_524_738_000_000_000
STEP_NS = 1_000_000
SETUP_NS = 5_000_000


def export(path: Path, steps: int) -> Path:
    """An nsys export of a 'setup' NVTX range of SETUP_NS, then `steps` ranges 'train_batch
    N' of 1 ms that no default marker pattern reads, each around a 'forward' range and one
    kernel of 100 µs (busy 0.1 of each step)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(path)
    con.executescript("""
        CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INTEGER);
        CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT);
        INSERT INTO StringIds VALUES (1, 'cudaLaunchKernel'), (2, 'gemm');
        CREATE TABLE NVTX_EVENTS (start INT, end INT, eventType INT, text TEXT, textId INT,
                                  globalTid INT);
        CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INT, end INT, globalTid INT,
                                                  correlationId INT, nameId INT);
        CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INT, end INT, deviceId INT,
                                                 streamId INT, correlationId INT,
                                                 shortName INT);
    """)
    con.execute("INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (?)", (START,))
    con.execute("INSERT INTO NVTX_EVENTS VALUES (0, ?, 59, 'setup', NULL, 7)", (SETUP_NS,))
    for i in range(steps):
        at = SETUP_NS + i * STEP_NS
        con.execute("INSERT INTO NVTX_EVENTS VALUES (?, ?, 59, ?, NULL, 7)",
                    (at, at + STEP_NS, f"train_batch {i}"))
        con.execute("INSERT INTO NVTX_EVENTS VALUES (?, ?, 59, 'forward', NULL, 7)",
                    (at + 1_000, at + 500_000))
        con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?, 7, ?, 1)",
                    (at + 2_000, at + 3_000, i + 1))
        con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?, ?, 0, 7, ?, 2)",
                    (at + 400_000, at + 500_000, i + 1))
    con.commit()
    con.close()
    return path


def test_patterns_from_names() -> None:
    assert pattern_for([f"train_batch {i}" for i in range(10)]) == r"^train_batch (\d+)$"
    # the number that varies most is the step: epoch 1's steps 0-2, epoch 2's 0-2
    names = [f"epoch {e} step {s}" for e in (1, 2) for s in range(3)]
    assert pattern_for(names) == r"^epoch \d+ step (\d+)$"
    assert pattern_for(["it.[3]", "it.[4]"]) == r"^it\.\[(\d+)\]$"   # escaped
    assert pattern_for(["forward", "forward"]) is None                # no number
    assert toml_string(r"^a (\d+)$") == r"'^a (\d+)$'"
    assert toml_string(r"^it's (\d+)$") == '"^it\'s (\\\\d+)$"'  # a basic string


def test_an_export_without_steps_names_its_step_pattern(tmp_path: Path) -> None:
    export(tmp_path / "runs" / "nosteps" / "report.sqlite", 5)
    done = cli("ingest", str(tmp_path / "runs"), "--warehouse", str(tmp_path / "wh"))
    assert done.returncode == 0, done.stderr
    suggested = "step_pattern = '^train_batch (\\d+)$'"
    [line] = [x for x in done.stderr.splitlines() if f"anomaly {KIND}" in x]
    assert suggested in line
    [hint] = query_json(tmp_path / "wh", "SELECT source_id, event_id, detail FROM anomalies "
                        f"WHERE kind = '{KIND}'")
    assert (hint["source_id"], hint["event_id"]) == (0, None)
    assert hint["detail"].startswith("no step markers: one iteration window over the whole")
    assert f"'train_batch <n>' ×5 ('train_batch 0' … 'train_batch 4'): {suggested}" in (
        hint["detail"])
    assert "forward" not in hint["detail"]  # inside each step range: not outermost
    [window] = query_json(tmp_path / "wh", "SELECT iteration, gpu_util FROM gpu_utilization")
    assert window["iteration"] is None
    assert window["gpu_util"] == 5 * 100_000 / (SETUP_NS + 5 * STEP_NS)  # the whole session
    runs = cli("runs", "--warehouse", str(tmp_path / "wh"), env={"COLUMNS": "200"})
    assert runs.returncode == 0 and suggested in runs.stdout, runs.stdout

    # the suggestion works: with it in run.toml, five steps and no hint
    (tmp_path / "runs" / "nosteps" / "run.toml").write_text(suggested + "\n")
    done = cli("ingest", str(tmp_path / "runs"), "--warehouse", str(tmp_path / "wh"))
    assert done.returncode == 0, done.stderr
    steps = query_json(tmp_path / "wh", "SELECT iteration, gpu_util FROM gpu_utilization "
                       "ORDER BY iteration")
    assert [(s["iteration"], s["gpu_util"]) for s in steps] == [(i, 0.1) for i in range(5)]
    assert query_json(tmp_path / "wh", f"SELECT count(*) AS n FROM anomalies WHERE kind = "
                      f"'{KIND}'") == [{"n": 0}]


def test_a_kineto_trace_without_steps_names_its_annotations(tmp_path: Path) -> None:
    """Outermost user annotations only: 'inner N' inside each 'iter N' is not a candidate;
    'data N' events share their numbers (a loader's worker id): no pattern for them."""
    events = []
    for i in range(3):
        at = i * STEP_NS
        events += [event(cat="user_annotation", name=f"iter {i}", ts=at, dur=900_000),
                   event(cat="user_annotation", name=f"inner {i}", ts=at + 10, dur=1_000),
                   event(cat="user_annotation", name="data 0", ts=at + 950_000, dur=10),
                   launch(i + 1, at + 100), kernel(i + 1, at + 5_000, 50_000)]
    write_trace(tmp_path / "runs" / "k" / "trace.json", events)
    done = cli("ingest", str(tmp_path / "runs"), "--warehouse", str(tmp_path / "wh"))
    assert done.returncode == 0, done.stderr
    [hint] = query_json(tmp_path / "wh", f"SELECT detail FROM anomalies WHERE kind = '{KIND}'")
    shapes = re.findall(r"'([^']*)' ×(\d+)", hint["detail"])
    assert shapes == [("iter <n>", "3"), ("data 0", "3")]
    assert "step_pattern = '^iter (\\d+)$'" in hint["detail"]


def test_the_report_shows_the_hint(tmp_path: Path) -> None:
    export(tmp_path / "runs" / "nosteps" / "report.sqlite", 3)
    assert cli("ingest", str(tmp_path / "runs"), "--warehouse",
               str(tmp_path / "wh")).returncode == 0
    out = cli("report", "-o", str(tmp_path / "r.html"), "--warehouse", str(tmp_path / "wh"))
    assert out.returncode == 0, out.stderr
    html = (tmp_path / "r.html").read_text()
    assert "No step markers: one iteration window over the whole trace" in html
    assert "step_pattern = &#39;^train_batch (\\d+)$&#39;" in html  # escaped quotes
