"""`etl forecast` on a hand-made trace whose every prediction is worked out below, with the
model's coefficients and the backtest's errors fixed by the test (so that a refit does not
move the answers).

One step on one thread; everything is launched at the start, then a stream synchronize
that CUPTI's record names (µs):

    host   |step 0 ......................................................... 95|
           | mm 0.5-1.8 (launch1 @1)  launch2..5 @2..5   cudaStreamSynchronize 6 .. 84 |
    stream 7   K1 10-40  K2 40-50  M1 50-58  M2 58-62  N1 62-82

K1 gemm kernel of aten::mm [1024,1024]@[1024,1024] fp32 (shape); K2 an elementwise kernel
with 1000 blocks and no op (wave_scaled); M1 a host-to-device copy (transfer_kept); M2 a
device-to-device copy (bandwidth); N1 an NCCL kernel (communication_kept). Source Tesla
V100-PCIE-32GB (80 SMs, 14 TFLOP/s FP32, 900 GB/s), target H100-SXM5-80GB (132 SMs,
67 TFLOP/s, 3350 GB/s). Coefficients: gemm γ 0.8 on the V100, 0.5 elsewhere; elementwise
γ 0.8 everywhere; a = 0.

- K1: 2·1024³ FLOP and 3·1024²·4 bytes: compute-bound on both; 64 blocks of 128×128
  tiles: one wave, Q = 80/64 on the V100, 132/64 on the H100.
  f1 = (132/64 · 1/67 / 0.5) / (80/64 · 1/14 / 0.8).
- K2: bandwidth-bound by its name; 1000 blocks: ceil(1000/80) = 13 waves, Q = 1040/1000;
  ceil(1000/132) = 8 waves, Q = 1056/1000. f2 = (1.056/3350) / (1.04/900).
- M2: f4 = 900 / 3350 (no blocks: Q = 1).
- The iteration: K1 starts 9 µs after its launch, the rest run back to back, the sync
  returns 2 µs after N1 and the step ends 11 µs later:
  predicted = 10 + 30·f1 + 10·f2 + 8 + 4·f4 + 20 + 2 + 11 µs (measured: 95).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import etl
from etl.analysis.forecast import intervals, model
from etl.analysis.forecast.model import PrecisionError
from etl.analysis.forecast.run import ForecastError, memory_notes
from etl.core.gpus import GpuNameError, by_key
from tests.conftest import cli, event, kernel, launch, step, write_trace

US = 1000
F1 = (132 / 64 / 67 / 0.5) / (80 / 64 / 14 / 0.8)
F2 = (1.056 / 3350) / (1.04 / 900)
F4 = 900 / 3350
COEFFICIENTS = {"curve": {
    "gemm": {"a": 0.0, "gamma_default": 0.5, "gamma": {"V100-PCIE-32GB": 0.8}},
    "elementwise": {"a": 0.0, "gamma_default": 0.8, "gamma": {}},
    "norm": {"a": 0.0, "gamma_default": 0.8, "gamma": {}},
    "softmax": {"a": 0.0, "gamma_default": 0.8, "gamma": {}}}}
ERRORS = {"shape": (-0.2, 0.3), "wave_scaled": (-0.1, 0.1), "bandwidth": (0.0, 0.0),
          "communication_kept": (0.0, 0.0), "transfer_kept": (0.0, 0.0)}


def hand_trace(dtype: str = "float") -> list[dict[str, Any]]:
    def copy(corr: int, ts: int, dur: int, name: str) -> dict[str, Any]:
        return event(cat="gpu_memcpy", name=name, ts=ts, dur=dur, pid=0, tid=7,
                     correlation=corr, device=0, stream=7, bytes=1 << 20)

    elementwise = kernel(2, 40 * US, 10 * US, name="void at::native::vectorized_elementwise"
                         "_kernel<4, at::native::CUDAFunctor_add<float> >(int)")
    elementwise["args"].update(grid=[1000, 1, 1], block=[128, 1, 1])
    return [
        step(1, 0, 95 * US),
        event(name="aten::mm", ts=US // 2, dur=1300, **{
            "Input Dims": [[1024, 1024], [1024, 1024]], "Input type": [dtype, dtype]}),
        launch(1, US, US // 2), launch(2, 2 * US, US // 2),
        launch(3, 3 * US, US // 2, name="cudaMemcpyAsync"),
        launch(4, 4 * US, US // 2, name="cudaMemcpyAsync"), launch(5, 5 * US, US // 2),
        event(cat="cuda_runtime", name="cudaStreamSynchronize", ts=6 * US, dur=78 * US,
              correlation=6),
        event(cat="cuda_sync", name="Stream Sync", ts=7 * US, dur=76 * US, pid=0, tid=7,
              correlation=6, stream=7, device=0),
        kernel(1, 10 * US, 30 * US, name="volta_sgemm_128x128_nn"), elementwise,
        copy(3, 50 * US, 8 * US, "Memcpy HtoD (Pageable -> Device)"),
        copy(4, 58 * US, 4 * US, "Memcpy DtoD (Device -> Device)"),
        kernel(5, 62 * US, 20 * US, name="ncclKernel_AllReduce_RING_LL_Sum_float")]


def _run(root: Path, name: str, gpu: str, dtype: str = "float", toml: str = "") -> None:
    write_trace(root / name / "trace.json", hand_trace(dtype),
                deviceProperties=[{"id": 0, "name": gpu}])
    (root / name / "run.toml").write_text(toml)


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("forecast")
    _run(root / "runs", "hand", "Tesla V100-PCIE-32GB")
    _run(root / "runs", "bf16_on_a100", "NVIDIA A100-SXM4-80GB", "c10::BFloat16")
    _run(root / "runs", "generic_name", "AMD Radeon Graphics")
    results = etl.ingest(root / "runs", root / "wh", jobs=1)
    assert all(r.status == "ingested" for r in results), [r.error for r in results]
    return root / "wh"


@pytest.fixture(autouse=True)
def fixed(monkeypatch: pytest.MonkeyPatch) -> None:
    model.coefficients.cache_clear()
    intervals.method_errors.cache_clear()
    monkeypatch.setattr(model, "coefficients", lambda: COEFFICIENTS)
    monkeypatch.setattr(intervals, "method_errors", lambda: ERRORS)
    from etl.analysis.forecast import predict

    predict._cached_ratio.cache_clear()


def test_each_activity_gets_its_method_and_factor(warehouse: Path) -> None:
    result = etl.api.forecast("hand", "H100-SXM5-80GB", warehouse=warehouse)
    predicted = result.predicted
    assert predicted is not None
    assert list(predicted.method) == ["shape", "wave_scaled", "transfer_kept", "bandwidth",
                                      "communication_kept"]
    assert list(predicted.factor) == pytest.approx([F1, F2, 1.0, F4, 1.0], rel=1e-9)


def test_the_iteration_is_replayed_with_the_predicted_durations(warehouse: Path) -> None:
    [row] = etl.api.forecast("hand", "H100-SXM5-80GB", warehouse=warehouse).rows
    expected = (10 + 30 * F1 + 10 * F2 + 8 + 4 * F4 + 20 + 2 + 11) * US
    assert row["measured_ns"] == 95 * US
    assert row["predicted_ns"] == pytest.approx(expected, abs=3)  # each duration rounds
    assert (row["run_name"], row["iteration"], row["target_gpu"]) == ("hand", 1,
                                                                      "H100-SXM5-80GB")


def test_the_interval_weights_each_methods_errors_by_its_share(warehouse: Path) -> None:
    [row] = etl.api.forecast("hand", "H100-SXM5-80GB", warehouse=warehouse).rows
    times = {"shape": 30 * F1, "wave_scaled": 10 * F2, "transfer_kept": 8,
             "bandwidth": 4 * F4, "communication_kept": 20}
    total = sum(times.values())
    for method, value in times.items():
        assert row[f"{method}_share"] == pytest.approx(value / total, rel=1e-9)
    q90 = (times["shape"] * 0.3 + times["wave_scaled"] * 0.1) / total
    q10 = (times["shape"] * -0.2 + times["wave_scaled"] * -0.1) / total
    assert row["low_ns"] == round(row["predicted_ns"] / (1 + q90))
    assert row["high_ns"] == round(row["predicted_ns"] / (1 + q10))
    assert row["low_ns"] < row["predicted_ns"] < row["high_ns"]


def test_by_kernel_type_sums_the_activities(warehouse: Path) -> None:
    rows = etl.api.forecast("hand", "H100-SXM5-80GB", by="kernel_type",
                            warehouse=warehouse).rows
    found = {r["kernel_type"]: (r["activity_count"], r["measured_ns"], r["predicted_ns"])
             for r in rows}
    assert found["communication"] == (1, 20 * US, 20 * US)
    assert found["memory"] == (2, 12 * US, round(8 * US + 4 * US * F4))
    assert found["computation"][:2] == (2, 40 * US)
    assert found["computation"][2] == pytest.approx(30 * US * F1 + 10 * US * F2, abs=1)


def test_an_ambiguous_or_unknown_gpu_is_refused_in_one_line(warehouse: Path) -> None:
    done = cli("forecast", "hand", "--gpu", "H100", "--warehouse", warehouse)
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and "H100-PCIE, H100-SXM5-80GB" in done.stderr
    with pytest.raises(GpuNameError, match="not in the GPU catalog"):
        etl.api.forecast("hand", "GTX 1080", warehouse=warehouse)


def test_a_precision_the_target_lacks_is_refused_unless_a_fallback_is_stated(
        warehouse: Path) -> None:
    with pytest.raises(PrecisionError, match="V100-PCIE-32GB has no bf16 peak"):
        etl.api.forecast("bf16_on_a100", "V100-PCIE-32GB", warehouse=warehouse)
    done = cli("forecast", "bf16_on_a100", "--gpu", "V100-PCIE-32GB", "--warehouse",
               warehouse)
    assert done.returncode == 1 and "--fallback bf16=" in done.stderr
    rows = etl.api.forecast("bf16_on_a100", "V100-PCIE-32GB", warehouse=warehouse,
                            fallback={"bf16": "fp16"}).rows
    assert rows[0]["predicted_ns"] > 0


def test_a_source_gpu_the_trace_does_not_name_is_asked_for(warehouse: Path) -> None:
    with pytest.raises(ForecastError, match="give --source-gpu"):
        etl.api.forecast("generic_name", "L4", warehouse=warehouse)
    rows = etl.api.forecast("generic_name", "L4", warehouse=warehouse,
                            source_gpu="MI250").rows
    assert rows[0]["predicted_ns"] > 0


def test_a_peak_memory_the_target_cannot_hold_is_said() -> None:
    l4 = by_key("L4")  # 24 GB
    notes = memory_notes([(0, 0, 30e9, 28e9), (1, 0, 20e9, 10e9), (2, 0, None, None)], l4)
    assert notes == ["device 0 of rank 0: peak memory 30.0 GB does not fit L4's 24 GB",
                     "device 0 of rank 2: peak memory not measured (profile_memory=True): "
                     "whether it fits L4's 24 GB is not checked"]


def test_csv_is_the_rows_alone(warehouse: Path) -> None:
    done = cli("forecast", "hand", "--gpu", "H100-SXM5-80GB", "--format", "csv",
               "--warehouse", warehouse)
    assert done.returncode == 0, done.stderr
    header, row, *rest = done.stdout.splitlines()
    assert header.split(",")[:9] == ["run_name", "rank", "device_id", "iteration",
                                     "target_gpu", "measured_ns", "predicted_ns", "low_ns",
                                     "high_ns"]
    assert rest == [] and row.startswith("hand,,0,1,H100-SXM5-80GB,95000,")


def test_etl_gpus_lists_every_row_with_its_names() -> None:
    done = cli("gpus", "--format", "csv")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("key,model,names,arch,sm_count,boost_clock_mhz,memory_gb")
    assert len(lines) == 1 + 26
    assert any(line.startswith("H100-SXM5-80GB,H100 SXM5,NVIDIA H100 80GB HBM3,sm_90,132,")
               for line in lines)


def test_kernel_costs_are_computed_when_a_query_reads_them(warehouse: Path) -> None:
    done = cli("query", "SELECT r.kernel_name, r.cost_source, r.flops, r.bytes, "
               "c.op_kernel_count, r.bound FROM kernel_roofline AS r JOIN kernel_costs AS c "
               "USING (run_id, source_id, kernel_id) WHERE run_name = 'hand' "
               "ORDER BY kernel_id", "--format", "json",
               "--warehouse", warehouse)
    assert done.returncode == 0, done.stderr
    assert "computed the kernel costs of 3 runs" in done.stderr
    import json

    rows = json.loads(done.stdout)
    # the mm: 2·1024³ FLOP, 3·1024²·4 bytes, one kernel; nothing else has an op with shapes
    assert rows[0] == {"kernel_name": "volta_sgemm_128x128_nn", "cost_source": "shape",
                       "flops": 2.0 * 1024 ** 3, "bytes": 3 * 1024 ** 2 * 4.0,
                       "op_kernel_count": 1, "bound": "compute"}
    assert [r["cost_source"] for r in rows[1:]] == [None, None]  # the copies are not kernels
    assert etl.api.costs(["hand"], warehouse).kept == ["hand"]


def test_the_report_has_the_forecast_table_and_the_roofline(warehouse: Path,
                                                            tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    done = cli("report", "hand", "--forecast", "H100-SXM5-80GB,V100-PCIE-32GB",
               "--warehouse", warehouse, "-o", out)
    assert done.returncode == 0, done.stderr
    page = out.read_text()
    section = page[page.index('id="forecast"'):page.index('id="roofline"')]
    [row] = etl.api.forecast("hand", "H100-SXM5-80GB", warehouse=warehouse).rows
    assert f'data-value="{float(row["predicted_ns"])!r}"' in section  # the mean of 1 window
    assert section.count("<tr") == 1 + 2  # a header and a row per GPU
    roofline = page[page.index('id="roofline"'):]
    assert "hand: the 1 layers with the most costed kernel time" in roofline
    assert "<circle" in roofline.split("</svg>")[0]
    done = cli("report", "hand", "--forecast", "H100", "--warehouse", warehouse, "-o", out)
    assert done.returncode == 1 and "ambiguous" in done.stderr


def test_etl_costs_names_what_it_computed_and_refuses_unknown_runs(warehouse: Path) -> None:
    done = cli("costs", "hand", "--warehouse", warehouse)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("kernel costs computed for ")
    missing = cli("costs", "no_such_run", "--warehouse", warehouse)
    assert missing.returncode == 1 and "no run named no_such_run" in missing.stderr
