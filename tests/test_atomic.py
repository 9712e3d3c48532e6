"""A run is visible whole or not at all, even when `etl ingest` is killed with SIGKILL."""
from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from pathlib import Path

from tests.conftest import ETL, ROOT, copy_corpus_run, corpus_path, query_json


def _start_ingest(runs: Path, wh: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([*ETL, "ingest", str(runs), "--warehouse", str(wh)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _check_whole(wh: Path, expected: dict[str, int]) -> str | None:
    """The visible version of run `big` (if any) has all its rows in every table."""
    runs = query_json(wh, "SELECT run_id, anomaly_count FROM runs WHERE run_name = 'big'")
    if not runs:
        return None
    run_id = runs[0]["run_id"]
    counts = query_json(wh, f"SELECT (SELECT count(*) FROM kernels WHERE run_id = '{run_id}') "
                        f"AS kernels, (SELECT count(*) FROM host_events WHERE run_id = "
                        f"'{run_id}') AS host_events, (SELECT count(*) FROM anomalies WHERE "
                        f"run_id = '{run_id}') AS anomalies")[0]
    assert counts == {**expected, "anomalies": runs[0]["anomaly_count"]}
    return run_id


def test_sigkill_at_random_points_never_leaves_half_a_run(tmp_path: Path) -> None:
    run = copy_corpus_run(corpus_path("hta", "negative_queue_length_values_check"),
                          tmp_path / "runs", "big")
    wh = tmp_path / "wh"
    reference = tmp_path / "reference"
    started = time.perf_counter()
    assert _start_ingest(tmp_path / "runs", reference).wait(timeout=300) == 0
    took = time.perf_counter() - started  # kill points span the whole ingest, however slow
    expected = query_json(reference, "SELECT (SELECT count(*) FROM kernels) AS kernels, "
                          "(SELECT count(*) FROM host_events) AS host_events")[0]
    assert expected["kernels"] == 7_747  # 6,080 kernels + memcpy/memset (SOURCES.md)
    rng = random.Random(7)
    seen_versions: set[str | None] = set()
    for attempt in range(8):
        # a new run.toml each time: new content, so every attempt really re-ingests
        (run / "run.toml").write_text(f'notes = "attempt {attempt}"\n')
        proc = _start_ingest(tmp_path / "runs", wh)
        time.sleep(rng.uniform(0.05, 1.3) * took)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        if (wh / "data" / "_schema").exists():
            seen_versions.add(_check_whole(wh, expected))
    (run / "run.toml").write_text('notes = "final"\n')
    final = _start_ingest(tmp_path / "runs", wh)
    assert final.wait(timeout=300) == 0
    assert _check_whole(wh, expected) is not None
    assert len(seen_versions) >= 2  # kills landed both before and after a publish
