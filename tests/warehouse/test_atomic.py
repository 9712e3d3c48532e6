"""A run is visible whole or not at all, even when `etl ingest` is killed with SIGKILL."""
from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, corpus_path, query_json

KILLS = 24  # reported in tests/TRUST.md
TRACE_MB = 16
# `etl ingest` hands files of PARALLEL_BYTES and more to worker processes (64 MB). The
# killed ingests lower that bar, so that a 16 MB trace goes the same way as a big one
# (slices decoded by workers, which must die with their parent) at a third of the cost.
PARALLEL_BYTES = 8 << 20
_ETL_LOWER_BAR = f"""
import dataclasses
import etl.load.ingest as ingest

@dataclasses.dataclass(frozen=True)
class LowerBar(ingest.Options):
    parallel_bytes: int = {PARALLEL_BYTES}

ingest.Options = LowerBar
from etl.cli import main
main()
"""


def _start_ingest(runs: Path, wh: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    # two slice workers whatever the machine's cores (one core would give none)
    return subprocess.Popen([sys.executable, "-c", _ETL_LOWER_BAR, "ingest", str(runs),
                             "--warehouse", str(wh), "--jobs", "2"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _check_whole(wh: Path, expected: dict[str, int]) -> str | None:
    """The visible version of run `big` (if any) has all its rows in every table.

    One query, so one snapshot: a killed ingest may have published a version that becomes
    visible (its margin) between two queries, and a second query would count the newer one.
    """
    rows = query_json(wh, "SELECT r.run_id, r.anomaly_count, "
                      "(SELECT count(*) FROM kernels k WHERE k.run_id = r.run_id) AS kernels, "
                      "(SELECT count(*) FROM host_events h WHERE h.run_id = r.run_id) "
                      "AS host_events, "
                      "(SELECT count(*) FROM anomalies a WHERE a.run_id = r.run_id) "
                      "AS anomalies FROM runs r WHERE r.run_name = 'big'")
    if not rows:
        return None
    run = rows[0]
    counts = {k: run[k] for k in ("kernels", "host_events", "anomalies")}
    assert counts == {**expected, "anomalies": run["anomaly_count"]}
    return str(run["run_id"])


def _big_run(tmp_path: Path) -> Path:
    """A run holding one trace of TRACE_MB MB: a real trace repeated by bench/make_trace.py."""
    run = tmp_path / "runs" / "big"
    run.mkdir(parents=True)
    source = corpus_path("hta", "negative_queue_length_values_check", "rank0.json.gz")
    subprocess.run([sys.executable, str(ROOT / "bench" / "make_trace.py"), str(source),
                    str(run / "rank0.json"), "--mb", str(TRACE_MB)], check=True,
                   capture_output=True)
    assert (run / "rank0.json").stat().st_size > PARALLEL_BYTES
    return run


def _workers_of(pid: int) -> list[int]:
    """Live processes whose parent is `pid` (the ingest's slice workers)."""
    found = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            fields = dict(line.split(":\t", 1) for line in status.read_text().splitlines()
                          if ":\t" in line)
        except OSError:
            continue
        if fields.get("PPid", "").strip() == str(pid) and fields.get("State", "")[:1] != "Z":
            found.append(int(status.parent.name))
    return found


def _is_slice_worker(pid: int) -> bool:
    """A worker of the pool (spawned: multiprocessing's spawn_main), not its resource
    tracker, which lives on until the ingest ends."""
    try:
        return b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def _gone_soon(pids: list[int], seconds: float = 10) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not any(Path(f"/proc/{p}").exists() and not Path(f"/proc/{p}/status").read_text()
                   .count("State:\tZ") for p in pids):
            return True
        time.sleep(0.1)
    return False


@pytest.mark.slow  # a generated trace of TRACE_MB MB, ingested and killed KILLS times
def test_sigkill_at_random_points_never_leaves_half_a_run(tmp_path: Path) -> None:
    run = _big_run(tmp_path)
    wh = tmp_path / "wh"
    reference = tmp_path / "reference"
    started = time.perf_counter()
    assert _start_ingest(tmp_path / "runs", reference).wait(timeout=600) == 0
    took = time.perf_counter() - started  # kill points span the whole ingest, however slow
    expected = query_json(reference, "SELECT (SELECT count(*) FROM kernels) AS kernels, "
                          "(SELECT count(*) FROM host_events) AS host_events")[0]
    # every GPU activity of the generated trace, counted naively in its text
    activities = re.findall(rb'"cat": ?"(?:kernel|gpu_memcpy|gpu_memset)"',
                            (run / "rank0.json").read_bytes())
    assert expected["kernels"] == len(activities) > 0
    rng = random.Random(7)
    seen_versions: set[str | None] = set()
    killed_workers = 0
    for attempt in range(KILLS):
        # a new run.toml each time: new content, so every attempt really re-ingests
        (run / "run.toml").write_text(f'notes = "attempt {attempt}"\n')
        proc = _start_ingest(tmp_path / "runs", wh)
        time.sleep(rng.uniform(0.05, 1.3) * took)
        workers = _workers_of(proc.pid)
        killed_workers += any(_is_slice_worker(pid) for pid in workers)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert _gone_soon(workers), "slice workers outlived the killed ingest"
        if (wh / "data" / "_schema").exists():
            seen_versions.add(_check_whole(wh, expected))
    (run / "run.toml").write_text('notes = "final"\n')
    final = _start_ingest(tmp_path / "runs", wh)
    assert final.wait(timeout=600) == 0
    assert _check_whole(wh, expected) is not None
    assert len(seen_versions) >= 2  # kills landed both before and after a publish
    assert killed_workers > 0  # the lowered bar took effect: some kills met slice workers
