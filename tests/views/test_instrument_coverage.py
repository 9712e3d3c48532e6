"""instrument_comparison's covered_share, worked by hand on one 4 s window: samples x the
median interval / the window when it can be computed, else NULL with the reason (v2 read
1.0 where the run had no sample or one: least(1.0, NULL) is 1.0 in DuckDB)."""
from __future__ import annotations

from pathlib import Path

import etl
from tests.conftest import kernel, launch, step, write_trace

BASE_NS = 1_795_514_400_000_000_000   # 2026-11-24 10:00:00 UTC
WINDOW_NS = 4_000_000_000
HEADER = "timestamp, index, utilization.gpu [%]\n"


def run(root: Path, name: str, smi_seconds: list[int]) -> None:
    """A Kineto trace of one 4 s step on the wall clock (baseTimeNanoseconds), and an
    nvidia-smi log with a sample of device 0 at each of `smi_seconds` after the step's
    start (UTC, run.toml timezone)."""
    folder = root / name
    write_trace(folder / "trace.json", [step(1, 0, WINDOW_NS), launch(1, 1_000),
                                        kernel(1, 10_000, 1_000_000_000)],
                baseTimeNanoseconds=BASE_NS)
    (folder / "run.toml").write_text('timezone = "UTC"\n')
    if smi_seconds:
        lines = [f"2026/11/24 10:00:{s:02d}.000, 0, {10 * (k + 1)} %"
                 for k, s in enumerate(smi_seconds)]
        (folder / "smi.csv").write_text(HEADER + "\n".join(lines) + "\n")


def test_coverage_by_hand_and_null_with_reason(tmp_path: Path) -> None:
    run(tmp_path / "runs", "none", [])
    run(tmp_path / "runs", "one", [1])
    run(tmp_path / "runs", "two", [1, 2])
    results = etl.ingest([tmp_path / "runs"], tmp_path / "wh")
    assert {r.status for r in results} == {"ingested"}, [r.error for r in results]
    con = etl.connect(tmp_path / "wh")
    try:
        rows = {r[0]: r[1:] for r in con.execute(
            "SELECT run_name, window_ns, smi_gpu_util, smi_gpu_samples, smi_gpu_covered_share, "
            "smi_gpu_covered_reason FROM instrument_comparison_v3").fetchall()}
        v2 = dict(con.execute("SELECT run_name, smi_gpu_covered_share FROM "
                              "instrument_comparison_v2").fetchall())
    finally:
        con.close()
    assert {r[0] for r in rows.values()} == {WINDOW_NS}
    assert rows["none"][1:] == (None, 0, None, "no nvidia-smi gpu_util samples in the run")
    assert rows["one"][1:] == (0.1, 1, None, "fewer than two timed samples of one device in "
                               "the run: no sampling interval")
    # two samples 1 s apart: 2 x 1 s of a 4 s window
    util, n, covered, reason = rows["two"][1:]
    assert abs(util - 0.15) < 1e-12 and (n, covered, reason) == (2, 0.5, None)
    assert v2 == {"none": 1.0, "one": 1.0, "two": 0.5}  # what v3 corrects, and keeps
