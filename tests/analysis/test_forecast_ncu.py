"""The forecast's ncu method and the ncu rows of kernel_costs, on a tiny run with an ncu
export worked by hand.

One step; one kernel `ampere_sgemm_128x64_nn` of 500 blocks of 256 threads, 64 registers,
no shared memory, 100 µs on an NVIDIA A100-SXM4-80GB, matched to an ncu result that
counted 1e9 FFMA thread instructions (2e9 FP32 FLOP) and 1e8 + 1e8 DRAM bytes; a second
kernel whose result counted nothing of the roofline.

Occupancy (CUDA's rule, sm_80 and sm_90 alike here): 8 warps a block; 64 registers ×
32 = 2048 a warp, 16384 / 2048 = 8 warps per sub-partition, 32 an SM: 4 blocks; shared
memory 1 KiB reserved a block: 164; warps 64 / 8 = 8: 4 blocks an SM.
A100: 108 × 4 = 432 slots, 2 waves, Q = 864 / 500; H100: 132 × 4 = 528 slots, 1 wave,
Q = 528 / 500 (one block an SM would give 540 / 500 and 528 / 500).
t_roof A100 = max(2e9 / 19.5e12, 2e8 / 2039e9) (compute); H100 = max(2e9 / 67e12,
2e8 / 3350e9) (memory). factor = t_roof,H · Q_H / (t_roof,A · Q_A).
"""
from __future__ import annotations

import csv
from pathlib import Path

import pytest

import etl
from tests.conftest import event, launch, step, write_trace

US = 1000
ROOF_A = max(2e9 / 19.5e12, 2e8 / 2039e9)
ROOF_H = max(2e9 / 67e12, 2e8 / 3350e9)
FACTOR = ROOF_H * (528 / 500) / (ROOF_A * (864 / 500))
METRICS = ["device__attribute_multiprocessor_count", "gpu__time_duration.sum",
           "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum", "dram__bytes_read.sum",
           "dram__bytes_write.sum"]


def _trace(path: Path) -> None:
    events = [step(1, 0, 300 * US), launch(1, US), launch(2, 2 * US)]
    for corr, (name, ts) in enumerate((("ampere_sgemm_128x64_nn", 10 * US),
                                        ("vectorized_elementwise_kernel", 120 * US)), 1):
        events.append(event(cat="kernel", name=name, ts=ts, dur=100 * US, pid=0, tid=7,
                            correlation=corr, device=0, stream=7, grid=[500, 1, 1],
                            block=[256, 1, 1], **{"registers per thread": 64,
                                                  "shared memory": 0}))
    write_trace(path, events, deviceProperties=[{"id": 0, "name": "NVIDIA A100-SXM4-80GB"}])


def _ncu(path: Path) -> None:
    head = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context",
            "Stream", "Block Size", "Grid Size", "Device", "CC", *METRICS]
    units = [""] * 11 + ["", "nsecond", "inst", "byte", "byte"]
    with open(path, "w", newline="") as fh:
        writer = csv.writer(fh, quoting=csv.QUOTE_ALL, lineterminator="\n")
        writer.writerows([head, units])
        writer.writerow([0, 1, "python", "h", "ampere_sgemm_128x64_nn", 1, 7, "(256, 1, 1)",
                         "(500, 1, 1)", 0, "8.0", 108, 100000, 1e9, 1e8, 1e8])
        writer.writerow([1, 1, "python", "h", "vectorized_elementwise_kernel", 1, 7,
                         "(256, 1, 1)", "(500, 1, 1)", 0, "8.0", 108, 100000, "", "", ""])


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("forecast_ncu")
    _trace(root / "runs" / "counted" / "trace.json")
    _ncu(root / "runs" / "counted" / "ncu.csv")
    [result] = etl.ingest(root / "runs", root / "wh", jobs=1)
    assert result.status == "ingested", result.error
    return root / "wh"


def test_the_counted_kernel_keeps_its_fraction_of_the_roofline(warehouse: Path) -> None:
    result = etl.api.forecast("counted", "H100-SXM5-80GB", warehouse=warehouse)
    predicted = result.predicted
    assert predicted is not None
    assert list(predicted.method) == ["ncu", "wave_scaled"]
    assert predicted.factor[0] == pytest.approx(FACTOR, rel=1e-9)


def test_kernel_costs_take_the_counters(warehouse: Path) -> None:
    assert etl.api.costs(None, warehouse).runs == ["counted"]
    con = etl.connect(warehouse)
    rows = con.execute("SELECT kernel_id, cost_source, precision, matrix, flops, bytes, "
                       "cost_reason FROM kernel_costs ORDER BY kernel_id").fetchall()
    assert rows[0][1:6] == ("ncu", "fp32", False, 2e9, 2e8)
    assert rows[1][1] is None and "no input shapes" in rows[1][6]
    [(bound, util)] = con.execute("SELECT bound, roofline_util FROM kernel_roofline "
                                  "WHERE cost_source = 'ncu'").fetchall()
    # 2e9 FLOP in 100 µs = 2e13 FLOP/s; AI 10 > ridge 19.5e12 / 2039e9 = 9.56: compute
    assert bound == "compute" and util == pytest.approx(2e13 / 19.5e12, rel=1e-12)
