"""instrument_comparison against an independent reading of the same synthetic run: the
monitor samples whose time falls in each NVTX step range, averaged by hand."""
from __future__ import annotations

import sqlite3
from pathlib import Path

import etl
from etl.demo.nsys import SAMPLE_NS, write_monitor_logs, write_nsys_export

START = 1_712_192_400_000_000_000


def _run(tmp_path: Path, timezone: str | None) -> Path:
    folder = tmp_path / "runs" / "r"
    folder.mkdir(parents=True)
    windows = write_nsys_export(folder / "profile.sqlite", START, steps=3, kernels_per_step=8,
                                step_ns=50_000_000, seed="t")
    write_monitor_logs(folder, START, (windows[0][0], windows[-1][1]), "Asia/Tokyo", "t")
    (folder / "run.toml").write_text(f'timezone = "{timezone}"\n' if timezone else "")
    return folder


def _by_hand(folder: Path) -> dict[int, tuple[float, float, int]]:
    """Per step: mean nvidia-smi utilization, mean DCGM TENSO, smi samples, read naively."""
    con = sqlite3.connect(folder / "profile.sqlite")
    steps = {int(t.split("#")[1]): (START + s, START + e) for s, e, t in con.execute(
        "SELECT start, end, text FROM NVTX_EVENTS")}
    from datetime import datetime
    from zoneinfo import ZoneInfo

    smi = []
    for line in (folder / "nvidia-smi.csv").read_text().splitlines()[1:]:
        ts, _, util, _ = (p.strip() for p in line.split(","))
        local = datetime.strptime(ts, "%Y/%m/%d %H:%M:%S.%f").replace(tzinfo=ZoneInfo("Asia/Tokyo"))
        smi.append((round(local.timestamp() * 1e6) * 1000, int(util.split()[0]) / 100))
    tenso, when = [], 0
    for line in (folder / "dcgm-exporter.prom").read_text().splitlines()[1:]:
        if not line.startswith("DCGM"):
            when = round(datetime.fromisoformat(line).timestamp() * 1e6) * 1000
        elif line.startswith("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"):
            tenso.append((when, float(line.rsplit(" ", 1)[1])))
    out = {}
    for n, (s, e) in steps.items():
        u = [v for t, v in smi if s <= t < e]
        x = [v for t, v in tenso if s <= t < e]
        out[n] = (sum(u) / len(u), sum(x) / len(x), len(u))
    return out


def test_monitor_means_per_step_match_a_naive_reading(tmp_path: Path) -> None:
    folder = _run(tmp_path, "Asia/Tokyo")
    [result] = etl.ingest([folder], tmp_path / "wh")
    assert result.status == "ingested", result.error
    con = etl.connect(tmp_path / "wh")
    rows = con.execute("""
        SELECT iteration, smi_gpu_util, dcgm_tensor_active_util, smi_gpu_samples,
               smi_gpu_covered_share, trace_gpu_util, nsys_tensor_active_util,
               nsys_sm_active_samples, ncu_reason
        FROM instrument_comparison ORDER BY iteration""").fetchall()
    expected = _by_hand(folder)
    assert [r[0] for r in rows] == sorted(expected)
    for it, smi, tenso, n, covered, busy, nsys_tc, nsys_n, ncu_reason in rows:
        want = expected[it]
        assert abs(smi - want[0]) < 1e-9 and abs(tenso - want[1]) < 1e-9 and n == want[2]
        assert covered == min(1.0, n * SAMPLE_NS / 50_000_000)
        assert busy > 0.9 and tenso < 0.05 and nsys_tc < 0.05 and nsys_n == 5
        assert ncu_reason == "no ncu export in the run"  # run_utilization_v2.ncu_reason
    # the paper's gap in one query
    [(gap,)] = con.execute("""SELECT count(*) FROM instrument_comparison
        WHERE trace_gpu_util > 0.9 AND dcgm_tensor_active_util < 0.05""").fetchall()
    assert gap == 3


def test_without_timezone_the_smi_column_says_why(tmp_path: Path) -> None:
    folder = _run(tmp_path, None)
    [result] = etl.ingest([folder], tmp_path / "wh")
    assert result.status == "ingested", result.error
    con = etl.connect(tmp_path / "wh")
    rows = con.execute("SELECT smi_gpu_util, smi_gpu_reason, dcgm_sm_active_util "
                       "FROM instrument_comparison").fetchall()
    assert all(r[0] is None and "wall-clock" in r[1] and r[2] is not None for r in rows)
    [(kind,)] = con.execute("SELECT DISTINCT kind FROM anomalies WHERE kind = 'clock_unaligned'"
                            ).fetchall()
    assert kind == "clock_unaligned"
