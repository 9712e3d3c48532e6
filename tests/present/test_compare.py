"""`etl compare`: Welch's interval and test checked by hand, the CLI against SQL."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from etl.present.compare import difference
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


def test_the_same_samples_in_another_order_differ_by_exactly_zero() -> None:
    """A query returns rows in any order: 0.1 + 0.2 + 0.3 and 0.3 + 0.2 + 0.1 differ in
    their last bit as plain float sums, so a run against itself was a flaky non-zero."""
    d = difference([0.1, 0.2, 0.3], [0.3, 0.2, 0.1])
    assert d.diff == 0 and d.mean_a == d.mean_b and d.verdict == "within noise"


def test_too_few_samples_and_no_spread() -> None:
    one = difference([1.0], [2.0, 3.0])
    assert (one.verdict, one.ci_low, one.p_value, one.diff) == ("one sample", None, None, 1.5)
    same = difference([2.0, 2.0], [2.0, 2.0])
    assert same.verdict == "within noise" and same.ci_low == same.ci_high == 0
    assert difference([0.0, 0.0], [1.0, 1.0]).ratio is None  # B / 0: NULL, not infinity


# demo_warehouse: the demo's runs, ingested once per test session (tests/conftest.py)


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


# Repeated runs pooled: each run is one sample, the mean of its steady iterations.
# Step windows in us (all steady: each within 5% of its run's median); a kernel of half
# the window in each, so gpu_util is 0.5 everywhere.
REPEATS = {"a1": ("base", [98, 100, 102]), "a2": ("base", [110, 110, 110]),
           "b1": ("new", [80, 80, 80]), "b2": ("new", [84, 84, 84]), "b3": ("new", [88, 88, 88])}


@pytest.fixture(scope="module")
def repeats(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.conftest import kernel, launch, step, write_trace

    root = tmp_path_factory.mktemp("repeats")
    for run, (group, windows_us) in REPEATS.items():
        events = []
        for i, window in enumerate(windows_us, 1):
            start = (i - 1) * 1_000_000
            events += [step(i, start, window * 1000), launch(i, start + 1_000),
                       kernel(i, start + 2_000, window * 500)]
        write_trace(root / "runs" / run / "t.json", events)
        (root / "runs" / run / "run.toml").write_text(f'tags = ["repeat:{group}"]\n')
    result = cli("ingest", str(root / "runs"), "--warehouse", str(root / "wh"))
    assert result.returncode == 0, result.stderr
    return root / "wh"


def welch_by_hand(a: list[float], b: list[float]) -> tuple[float, float, float]:
    """(low, high, p) of B - A: Welch's standard error and Welch-Satterthwaite df; only
    Student's t distribution is taken from scipy."""
    from scipy.stats import t

    def var(x: list[float]) -> float:
        m = sum(x) / len(x)
        return sum((v - m) ** 2 for v in x) / (len(x) - 1)

    qa, qb = var(a) / len(a), var(b) / len(b)
    se = math.sqrt(qa + qb)
    df = (qa + qb) ** 2 / (qa ** 2 / (len(a) - 1) + qb ** 2 / (len(b) - 1))
    diff = sum(b) / len(b) - sum(a) / len(a)
    half = t.ppf(0.975, df) * se
    return diff - half, diff + half, 2 * t.sf(abs(diff / se), df)


def test_repeats_pool_one_value_per_run(repeats: Path) -> None:
    rows = compare_json(repeats, "repeat:base", "repeat:new")
    window = next(r for r in rows if r["metric"] == "window_ns")
    a, b = [100_000.0, 110_000.0], [80_000.0, 84_000.0, 88_000.0]  # per-run means, ns
    low, high, p = welch_by_hand(a, b)
    assert (window["n_a"], window["n_b"], window["samples"]) == (2, 3, "runs")
    assert (window["mean_a"], window["mean_b"]) == (105_000.0, 84_000.0)
    assert window["diff"] == -21_000.0
    assert window["diff_ci_low"] == pytest.approx(low, rel=1e-9)
    assert window["diff_ci_high"] == pytest.approx(high, rel=1e-9)
    assert window["p_value"] == pytest.approx(p, rel=1e-9)
    util = next(r for r in rows if r["metric"] == "gpu_util")
    assert (util["mean_a"], util["mean_b"], util["verdict"]) == (0.5, 0.5, "within noise")
    [op] = [r for r in rows if r["part"] == "op"]  # "(no op)": half of each window
    assert (op["n_a"], op["n_b"], op["mean_a"], op["mean_b"]) == (2, 3, 52_500.0, 42_000.0)


def test_run_lists_equal_tags_and_single_runs_use_iterations(repeats: Path) -> None:
    assert compare_json(repeats, "a1,a2", "b1, b2 ,b3") == compare_json(
        repeats, "repeat:base", "repeat:new")
    single = compare_json(repeats, "a1", "b1")
    window = next(r for r in single if r["metric"] == "window_ns")
    assert (window["n_a"], window["samples"], window["mean_a"]) == (3, "iterations", 100_000.0)
    mixed = next(r for r in compare_json(repeats, "a1", "repeat:new")
                 if r["metric"] == "window_ns")
    assert (mixed["n_a"], mixed["n_b"], mixed["verdict"]) == (1, 3, "one sample")


def test_unknown_repeat_group_names_the_fix(repeats: Path) -> None:
    result = cli("compare", "repeat:nope", "a1", "--warehouse", str(repeats))
    assert result.returncode == 1
    assert result.stderr.startswith("error: no run is tagged 'repeat:nope'; add tags = ")
    missing = cli("compare", "a1,zz", "a2", "--warehouse", str(repeats))
    assert missing.returncode == 1 and missing.stderr.startswith("error: no run named zz")


def test_fail_above_gates_on_the_whole_interval(demo_warehouse: Path) -> None:
    """fp32 against AMP (B slower): window_ns +43.7%, its 95% interval from +41.1%; the
    exit code is 3 only when even the interval's low end is above the threshold."""
    import math as m

    wh = ["--warehouse", str(demo_warehouse), "--format", "json"]
    runs = ["resnet_amp_eager", "resnet_fp32_eager"]
    [time] = [r for r in json.loads(cli("compare", *runs, *wh).stdout)
              if r["metric"] == "window_ns"]
    low = 100 * time["diff_ci_low"] / time["mean_a"]
    mean = 100 * time["diff"] / time["mean_a"]
    assert 5 < low < mean
    below, between = m.floor(low) - 1, (low + mean) / 2
    slower = cli("compare", *runs, *wh, "--fail-above", str(below))
    assert slower.returncode == 3 and slower.stderr.strip().endswith(
        f"slower by more than --fail-above {below:g}%")
    unsure = cli("compare", *runs, *wh, "--fail-above", f"{between:.3f}")
    assert unsure.returncode == 0 and "not slower by more than" in unsure.stderr
    faster = cli("compare", *reversed(runs), *wh, "--fail-above", "0")
    assert faster.returncode == 0


def test_fail_above_without_an_interval_says_so_and_passes(repeats: Path) -> None:
    out = cli("compare", "b1", "a1,a2", "--warehouse", str(repeats), "--fail-above", "1")
    assert out.returncode == 0, out.stderr
    assert out.stderr.strip() == ("--fail-above 1: no 95% interval of the iteration time's "
                                  "difference (one sample: 1 and 2 samples); not failing")
