"""tc_amdahl against an independent reading of kernel_utilization and Amdahl's formula."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import cli, launch, step, write_trace


@pytest.fixture(scope="module")
def demo_con(demo_warehouse: Path):  # type: ignore[no-untyped-def]
    import etl

    con = etl.connect(demo_warehouse)
    yield con
    con.close()


def amdahl(p: float, k: float) -> float:
    """Hand-written Amdahl: a fraction p of the time sped up k times."""
    return 1 / ((1 - p) + p / k)


def test_amdahl_by_hand() -> None:
    assert amdahl(0.5, 2) == pytest.approx(4 / 3)
    assert amdahl(0.75, 10) == pytest.approx(1 / 0.325)


@pytest.mark.parametrize("view", ["tc_amdahl_v1", "tc_amdahl_v2", "tc_amdahl_v3"])
def test_tc_amdahl_matches_kernels(demo_con, view: str) -> None:  # type: ignore[no-untyped-def]
    rows = demo_con.execute(
        "SELECT run_name, iteration, window_ns, non_tc_time_share, tc_window_share, "
        "speedup_bound_k2_ratio, speedup_bound_k10_ratio, speedup_bound_inf_ratio, basis "
        f"FROM {view} WHERE basis = 'ncu' ORDER BY run_name").fetchall()
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


# tc_amdahl_v2 on a tiny run worked by hand: one step [0, 100 us] (the window), a cuBLAS
# tensor-core GEMM (name estimate: true), an elementwise kernel (false), a triton kernel
# whose name says nothing (false) and an NCCL all-reduce (tc_estimate NULL, non-tensor).
TINY = [("ampere_h16816gemm_128x128_ldg8_nn", 10_000, 30_000),
        ("vectorized_elementwise_kernel", 42_000, 10_000),
        ("triton_poi_fused_mm_0", 55_000, 20_000),
        ("ncclKernel_AllReduce_RING_LL_Sum_float", 80_000, 10_000)]
# ncu's tensor-core issue ratio per kernel: the triton kernel does issue tensor instructions
NCU_TC_ISSUE = [0.25, 0.0, 0.125, 0.0]
NCU_METRICS = ["smsp__cycles_elapsed.sum", "smsp__cycles_active.sum", "smsp__inst_issued.sum",
               "smsp__pipe_tensor_cycles_active.sum", "smsp__inst_executed_pipe_tensor.sum"]


def tiny_trace(path: Path) -> None:
    from tests.conftest import event

    events = [step(1, 0, 100_000)]
    for corr, (name, ts, dur) in enumerate(TINY, 1):
        events.append(launch(corr, 1_000 * corr))
        events.append(event(cat="kernel", name=name, ts=ts, dur=dur, pid=0, tid=7,
                            correlation=corr, device=0, stream=7, grid=[8, 1, 1],
                            block=[128, 1, 1]))
    write_trace(path, events)


def tiny_ncu(path: Path) -> None:
    """A raw-page ncu CSV of the four kernels in launch order, elapsed 1000 cycles each."""
    import csv

    head = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context",
            "Stream", "Block Size", "Grid Size", "Device", "CC",
            "device__attribute_multiprocessor_count", *NCU_METRICS]
    units = [""] * 12 + ["cycle", "cycle", "inst", "cycle", "inst"]
    with open(path, "w", newline="") as fh:
        fh.write("==PROF== Connected to process 1 (python)\n")
        writer = csv.writer(fh, quoting=csv.QUOTE_ALL, lineterminator="\n")
        writer.writerows([head, units])
        for i, ((name, _, _), tc) in enumerate(zip(TINY, NCU_TC_ISSUE)):
            writer.writerow([i, 1, "python", "h", name, 1, 7, "(128, 1, 1)", "(8, 1, 1)", 0,
                             "8.0", 108, 1000, 800, 400, 2000 * tc, 1000 * tc])


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    import etl

    root = tmp_path_factory.mktemp("tiny_amdahl")
    tiny_trace(root / "runs" / "names" / "t.json")
    tiny_trace(root / "runs" / "measured" / "t.json")
    tiny_ncu(root / "runs" / "measured" / "ncu.csv")
    result = cli("ingest", str(root / "runs"), "--warehouse", str(root / "wh"))
    assert result.returncode == 0, result.stderr
    con = etl.connect(root / "wh")
    yield {(view, run): dict(zip([d[0] for d in cursor.description], row))
           for view in ("tc_amdahl_v2", "tc_amdahl_v3")
           for cursor in [con.execute(f"SELECT * FROM {view}")]
           for row in cursor.fetchall() for run in [row[1]]}
    con.close()


@pytest.mark.parametrize("view", ["tc_amdahl_v2", "tc_amdahl_v3"])
@pytest.mark.parametrize("run, basis, tc_ns, non_tc_ns", [
    # names: only the GEMM is a tensor-core kernel; 10 + 20 + 10 us are not
    ("names", "name_estimate", 30_000, 40_000),
    # ncu: the GEMM and the triton kernel issue tensor instructions (0.25, 0.125 > 0)
    ("measured", "ncu", 50_000, 20_000),
])
def test_tc_amdahl_by_hand(tiny, view: str, run: str, basis: str,  # type: ignore[no-untyped-def]
                           tc_ns: int, non_tc_ns: int) -> None:
    row = tiny[view, run]
    p = tc_ns / 100_000  # the window is the step's 100 us
    assert (row["basis"], row["window_ns"], row["tc_ns"], row["non_tc_ns"]) == (
        basis, 100_000, tc_ns, non_tc_ns)
    assert row["non_tc_time_share"] == pytest.approx(non_tc_ns / 70_000, rel=1e-12)
    assert row["tc_window_share"] == pytest.approx(p, rel=1e-12)
    assert row["speedup_bound_k2_ratio"] == pytest.approx(1 / ((1 - p) + p / 2), rel=1e-12)
    assert row["speedup_bound_k10_ratio"] == pytest.approx(1 / ((1 - p) + p / 10), rel=1e-12)
    assert row["speedup_bound_inf_ratio"] == pytest.approx(1 / (1 - p), rel=1e-12)


@pytest.mark.parametrize("view", ["tc_amdahl_v2", "tc_amdahl_v3"])
def test_tc_amdahl_says_why_it_estimates(tiny, view: str) -> None:  # type: ignore[no-untyped-def]
    names, measured = tiny[view, "names"], tiny[view, "measured"]
    assert names["basis_note"] == "no ncu export in the run"
    assert names["matched_time_share"] is None
    assert (names["tc_kernels"], names["non_tc_kernels"]) == (1, 3)
    assert measured["basis_note"] is None
    assert measured["matched_time_share"] == pytest.approx(1.0)
    assert (measured["tc_kernels"], measured["non_tc_kernels"]) == (2, 2)
