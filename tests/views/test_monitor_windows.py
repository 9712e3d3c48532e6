"""nvidia-smi samples in Kineto iteration windows (instrument_comparison_v2), worked by hand.

Two ProfilerSteps of 1 s each, 10 s and 11 s after the trace's base time
2026-11-24T10:00:00Z; nvidia-smi logs Paris local time (UTC+1 in November), every 250 ms
with one gap:

    local time    util  in window        step 1 [10:00:10, 10:00:11) UTC
    11:00:09.750   99   before step 1      = 11:00:10.000 .. 11:00:10.750 local
    11:00:10.000   10   step 1             4 samples, mean (10+20+30+40)/4 % = 0.25
    11:00:10.250   20   step 1           step 2 [10:00:11, 10:00:12) UTC
    11:00:10.500   30   step 1             3 samples, mean (50+60+70)/3 % = 0.60
    11:00:10.750   40   step 1           median interval 250 ms (7 x 250, 1 x 500):
    11:00:11.000   50   step 2             covered: 4 x 0.25 / 1 = 1.0, 3 x 0.25 / 1 = 0.75
    11:00:11.250   60   step 2
    11:00:11.500   70   step 2
    11:00:12.000   99   after step 2 (windows end before it)
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import etl
from tests.conftest import kernel, launch, step, write_trace

BASE_NS = 1_795_514_400_000_000_000  # 2026-11-24T10:00:00Z
S = 1_000_000_000
SMI_LOG = """timestamp, index, utilization.gpu [%]
2026/11/24 11:00:09.750, 0, 99 %
2026/11/24 11:00:10.000, 0, 10 %
2026/11/24 11:00:10.250, 0, 20 %
2026/11/24 11:00:10.500, 0, 30 %
2026/11/24 11:00:10.750, 0, 40 %
2026/11/24 11:00:11.000, 0, 50 %
2026/11/24 11:00:11.250, 0, 60 %
2026/11/24 11:00:11.500, 0, 70 %
2026/11/24 11:00:12.000, 0, 99 %
"""


def _events(origin: int) -> list[dict[str, Any]]:
    """Two steps at origin + 10 s and + 11 s, a kernel inside each (windows = the steps)."""
    t = origin + 10 * S
    return [step(1, t, S), launch(1, t + 1000), kernel(1, t + S // 5, S // 2),
            step(2, t + S, S), launch(2, t + S + 1000), kernel(2, t + S + S // 2, S // 4)]


RUNS = {  # run name: (events' origin in the trace, header keys)
    "base_time": (0, {"baseTimeNanoseconds": BASE_NS}),
    "epoch": (BASE_NS, {}),           # 2021-23 Kineto: ts are µs since 1970
    "unmapped": (0, {}),              # neither: no clock to place the windows with
}


@pytest.fixture(scope="module")
def comparison(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[tuple]]:
    root = tmp_path_factory.mktemp("kineto_windows")
    for name, (origin, header) in RUNS.items():
        folder = root / "runs" / name
        write_trace(folder / "trace.json", _events(origin), **header)
        (folder / "nvidia-smi.csv").write_text(SMI_LOG)
        (folder / "run.toml").write_text('timezone = "Europe/Paris"\n')
    results = etl.ingest([root / "runs"], root / "wh")
    assert [r.status for r in results] == ["ingested"] * 3, [r.error for r in results]
    con = etl.connect(root / "wh")
    rows = con.execute("""
        SELECT run_name, iteration, smi_gpu_util, smi_gpu_samples, smi_gpu_covered_share,
               smi_gpu_reason, window_start_utc_ns, trace_clock, trace_gpu_util
        FROM instrument_comparison_v2 ORDER BY run_name, iteration""").fetchall()
    return {name: [r[1:] for r in rows if r[0] == name] for name in RUNS}


@pytest.mark.parametrize("run", ["base_time", "epoch"])
def test_samples_fall_in_kineto_windows(comparison: dict[str, list[tuple]], run: str) -> None:
    (it1, util1, n1, cov1, why1, start1, clock, busy1), (it2, util2, n2, cov2, _, start2, _,
                                                         busy2) = comparison[run]
    assert (it1, it2) == (1, 2) and clock == run
    assert start1 == BASE_NS + 10 * S and start2 == BASE_NS + 11 * S
    assert (n1, n2) == (4, 3)
    assert util1 == pytest.approx(0.25, abs=1e-12) and util2 == pytest.approx(0.60, abs=1e-12)
    assert (cov1, cov2) == (1.0, 0.75) and why1 is None
    assert busy1 == 0.5 and busy2 == 0.25  # the trace's own busy share, beside the monitor's


def test_unmapped_trace_says_why(comparison: dict[str, list[tuple]]) -> None:
    for _, util, n, _, why, start, clock, busy in comparison["unmapped"]:
        assert util is None and n == 0 and start is None and clock == "unmapped"
        assert "not on the wall clock" in why and "baseTimeNanoseconds" in why
        assert busy is not None


def test_v1_keeps_kineto_windows_off_the_wall_clock(tmp_path: Path) -> None:
    folder = tmp_path / "runs" / "r"
    write_trace(folder / "trace.json", _events(0), baseTimeNanoseconds=BASE_NS)
    (folder / "nvidia-smi.csv").write_text(SMI_LOG)
    (folder / "run.toml").write_text('timezone = "Europe/Paris"\n')
    [result] = etl.ingest([folder], tmp_path / "wh")
    assert result.status == "ingested", result.error
    rows = etl.connect(tmp_path / "wh").execute(
        "SELECT smi_gpu_util, smi_gpu_reason FROM instrument_comparison_v1").fetchall()
    assert rows and all(u is None and "kineto_json" in r for u, r in rows)
