"""tc_amdahl against an independent reading of kernel_utilization and Amdahl's formula."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import cli, kernel, launch, step, write_trace


@pytest.fixture(scope="module")
def demo_con(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    import etl

    root = tmp_path_factory.mktemp("amdahl")
    assert cli("demo", str(root / "runs")).returncode == 0
    assert cli("ingest", str(root / "runs"), "--warehouse", str(root / "wh")).returncode == 0
    con = etl.connect(root / "wh")
    yield con
    con.close()


def amdahl(p: float, k: float) -> float:
    """Hand-written Amdahl: a fraction p of the time sped up k times."""
    return 1 / ((1 - p) + p / k)


def test_amdahl_by_hand() -> None:
    assert amdahl(0.5, 2) == pytest.approx(4 / 3)
    assert amdahl(0.75, 10) == pytest.approx(1 / 0.325)


def test_tc_amdahl_matches_kernels(demo_con) -> None:  # type: ignore[no-untyped-def]
    rows = demo_con.execute(
        "SELECT run_name, iteration, window_ns, non_tc_time_share, tc_window_share, "
        "speedup_bound_k2_ratio, speedup_bound_k10_ratio, speedup_bound_inf_ratio, basis "
        "FROM tc_amdahl ORDER BY run_name").fetchall()
    assert [r[0] for r in rows] == ["resnet_amp_eager", "resnet_fp32_eager"]  # ddp: no ncu
    for run, iteration, window, non_tc_share, p, k2, k10, kinf, basis in rows:
        kernels = demo_con.execute(
            "SELECT dur_ns, tc_issue_util FROM kernel_utilization WHERE run_name = ? AND "
            "iteration = ? AND tc_issue_util IS NOT NULL", [run, iteration]).fetchall()
        tc = sum(d for d, t in kernels if t > 0)
        non_tc = sum(d for d, t in kernels if t == 0)
        assert 0 < tc and 0 < non_tc
        assert non_tc_share == pytest.approx(non_tc / (tc + non_tc), rel=1e-12)
        assert p == pytest.approx(min(1.0, tc / window), rel=1e-12)
        assert k2 == pytest.approx(amdahl(p, 2), rel=1e-12)
        assert k10 == pytest.approx(amdahl(p, 10), rel=1e-12)
        assert kinf == pytest.approx(1 / (1 - p), rel=1e-12)
        assert 1 < k2 < k10 < kinf and basis == "ncu"


def test_tc_amdahl_agrees_with_fig8_at_zero(demo_con) -> None:  # type: ignore[no-untyped-def]
    """The demo's ncu export covers one iteration, so Fig. 8's share of GPU time at
    tc_issue_util = 0 is tc_amdahl's share of time without tensor-core instructions."""
    pairs = demo_con.execute(
        "SELECT a.non_tc_time_share, c.cumulative_time_share FROM tc_amdahl AS a JOIN "
        "tc_time_cdf AS c ON c.run_name = a.run_name AND c.tc_issue_util = 0").fetchall()
    assert len(pairs) == 2
    for ours, fig8 in pairs:
        assert ours == pytest.approx(fig8, rel=1e-12)


def test_no_ncu_no_row(tmp_path: Path) -> None:
    import etl

    write_trace(tmp_path / "runs" / "plain" / "t.json", [step(1, 0, 100_000), launch(1, 1_000),
                                                        kernel(1, 10_000, 40_000)])
    assert cli("ingest", str(tmp_path / "runs"), "--warehouse", str(tmp_path / "wh")
               ).returncode == 0
    con = etl.connect(tmp_path / "wh")
    assert con.execute("SELECT count(*) FROM tc_amdahl").fetchall() == [(0,)]
    con.close()
