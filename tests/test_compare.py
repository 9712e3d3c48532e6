"""`etl compare`: Welch's interval and test checked by hand, the CLI against SQL."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from etl.compare import difference
from tests.conftest import cli

T_975_DF4 = 2.776445  # Student's t, 97.5% quantile, 4 degrees of freedom (printed tables)


def test_welch_interval_by_hand() -> None:
    """Equal sizes and variances: Welch's df is exactly 2(n - 1) = 4, so the interval is
    the textbook one: 3 ± t(0.975, 4) × sqrt(1/3 + 1/3)."""
    d = difference([1.0, 2.0, 3.0], [4.0, 5.0, 6.0])
    half = T_975_DF4 * math.sqrt(2 / 3)
    assert (d.mean_a, d.mean_b, d.diff, d.ratio) == (2.0, 5.0, 3.0, 2.5)
    assert d.ci_low == pytest.approx(3 - half, abs=1e-5)
    assert d.ci_high == pytest.approx(3 + half, abs=1e-5)
    assert d.p_value == pytest.approx(0.02131, abs=1e-4) and d.verdict == "changed"


def test_unequal_variances_use_welch_df() -> None:
    from scipy.stats import t

    a, b = [1.0, 2.0, 3.0, 4.0], [2.0, 3.0, 5.0, 7.0, 8.0]
    va, vb = 5 / 3, 6.5  # sample variances, worked by hand
    se2 = va / 4 + vb / 5
    df = se2 ** 2 / ((va / 4) ** 2 / 3 + (vb / 5) ** 2 / 4)
    half = t.ppf(0.975, df) * math.sqrt(se2)
    d = difference(a, b)
    assert d.ci_low == pytest.approx(2.5 - half) and d.ci_high == pytest.approx(2.5 + half)
    assert d.verdict == "within noise" and 0.05 < d.p_value < 0.2


def test_too_few_samples_and_no_spread() -> None:
    one = difference([1.0], [2.0, 3.0])
    assert (one.verdict, one.ci_low, one.p_value, one.diff) == ("one sample", None, None, 1.5)
    same = difference([2.0, 2.0], [2.0, 2.0])
    assert same.verdict == "within noise" and same.ci_low == same.ci_high == 0
    assert difference([0.0, 0.0], [1.0, 1.0]).ratio is None  # B / 0: NULL, not infinity


@pytest.fixture(scope="module")
def demo_warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("compare")
    assert cli("demo", str(root / "runs")).returncode == 0
    assert cli("ingest", str(root / "runs"), "--warehouse", str(root / "wh")).returncode == 0
    return root / "wh"


def compare_json(warehouse: Path, *args: str) -> list[dict]:
    result = cli("compare", *args, "--warehouse", str(warehouse), "--format", "json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_compare_against_sql(demo_warehouse: Path) -> None:
    import etl

    rows = compare_json(demo_warehouse, "resnet_fp32_eager", "resnet_amp_eager")
    summary = {r["metric"]: r for r in rows if r["part"] == "summary"}
    con = etl.connect(demo_warehouse)
    windows = {run: [w for (w,) in con.execute(
        "SELECT window_ns FROM gpu_utilization WHERE run_name = ? AND iteration >= 2",
        [run]).fetchall()] for run in ("resnet_fp32_eager", "resnet_amp_eager")}
    (op_count,) = con.execute(
        "SELECT count(DISTINCT coalesce(op_name, '')) FROM kernels AS k JOIN runs AS r "
        "ON r.run_id = k.run_id WHERE r.run_name IN ('resnet_fp32_eager', 'resnet_amp_eager') "
        "AND k.kind = 'kernel' AND k.iteration >= 2").fetchone()
    con.close()
    window = summary["window_ns"]
    assert (window["n_a"], window["n_b"]) == (4, 4)  # steady steps 2..5; warm-up left out
    assert window["mean_a"] == pytest.approx(sum(windows["resnet_fp32_eager"]) / 4)
    assert window["mean_b"] == pytest.approx(sum(windows["resnet_amp_eager"]) / 4)
    assert window["verdict"] == "changed" and window["diff_ci_high"] < 0  # amp is faster
    assert summary["tc_issue_util"]["verdict"] == "one sample"
    ops = [r for r in rows if r["part"] == "op"]
    assert len(ops) == min(20, op_count)
    changes = [abs(r["diff"]) for r in ops]
    assert changes == sorted(changes, reverse=True)
    amp_only = [r for r in ops if r["metric"] == "aten::to"]
    assert amp_only and amp_only[0]["mean_a"] == 0 and amp_only[0]["ratio"] is None


def test_a_run_against_itself_is_noise(demo_warehouse: Path) -> None:
    rows = compare_json(demo_warehouse, "resnet_amp_ddp", "resnet_amp_ddp", "--by", "layer")
    tested = [r for r in rows if r["p_value"] is not None]
    assert len(tested) > 5 and all(r["verdict"] == "within noise" for r in tested)
    assert all(r["diff"] == 0 for r in rows if r["verdict"] != "no data")
    no_ncu = {r["metric"] for r in rows if r["verdict"] == "no data"}
    assert no_ncu == {"smsp_active_util", "issue_slot_util", "tc_active_util", "tc_issue_util"}


def test_compare_errors(demo_warehouse: Path) -> None:
    missing = cli("compare", "resnet_amp_ddp", "nope", "--warehouse", str(demo_warehouse))
    assert missing.returncode == 1 and missing.stderr.startswith("error: no run named nope")
    table = cli("compare", "resnet_fp32_eager", "resnet_amp_eager", "--by", "kernel",
                "--top", "3", "--warehouse", str(demo_warehouse))
    assert table.returncode == 0 and "top 3 kernels by change in GPU time:" in table.stdout
