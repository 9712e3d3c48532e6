"""Op and kernel args kept (flops, input shapes, occupancy), FLOP/s per op and MFU, each
number worked out by hand on a tiny trace; and the peak catalog's entries."""
from __future__ import annotations

import copy
import gzip
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from etl.core.gpu_peaks import catalog, peak_rows, problems
from tests.conftest import (cli, corpus_path, event, grouped_rows, kernel, launch, query_json,
                            snapshot, step, write_trace)

A100 = "NVIDIA A100-SXM4-80GB"
A100_FP16 = 312e12   # dense FP16 tensor peak, A100 datasheet
B200_BF16 = 2250e12  # dense BF16 tensor peak, HGX B200 datasheet (4.5 PFLOPS sparse / 2)
OCCUPANCY = {"est. achieved occupancy %": 50, "blocks per SM": 2.5, "warps per SM": 20}

#  thread 1:  ProfilerStep#1 [0, 100 µs)                       ProfilerStep#2 [100, 200 µs)
#    aten::linear [1, 51) > aten::addmm [2, 42) flops 4e9 > launches c1 @3, c2 @20
#    aten::mul [60, 70) flops 1e6 > launch c3 @61;  aten::add [80, 85) flops 5e5, no kernel
#    aten::mm [110, 150) flops 2e9 > launch c4 @111
#  device 0:  k1 [10, 40)  k2 [40, 50)  k3 [70, 75)  k4 [120, 180)
EVENTS = [
    step(1, 0, 100_000),
    event(name="aten::linear", ts=1_000, dur=50_000),
    event(name="aten::addmm", ts=2_000, dur=40_000, flops=4_000_000_000,
          **{"Input Dims": [[64, 1024], [1024, 2048], []], "Input type": ["float", "float",
                                                                          "Scalar"]}),
    launch(1, 3_000), launch(2, 20_000),
    kernel(1, 10_000, 30_000, name="gemm"), kernel(2, 40_000, 10_000, name="bias"),
    event(name="aten::mul", ts=60_000, dur=10_000, flops=1_000_000),
    launch(3, 61_000), kernel(3, 70_000, 5_000, name="mul"),
    event(name="aten::add", ts=80_000, dur=5_000, flops=500_000),
    step(2, 100_000, 100_000),
    event(name="aten::mm", ts=110_000, dur=40_000, flops=2_000_000_000),
    launch(4, 111_000), kernel(4, 120_000, 60_000, name="gemm"),
]


def _with_occupancy(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = copy.deepcopy(events)
    first_kernel = next(e for e in out if e["cat"] == "kernel")
    first_kernel["args"].update(OCCUPANCY)
    return out


def _run(runs: Path, name: str, events: list[dict[str, Any]], gpu: str | None,
         precision: str | None) -> None:
    header = {"deviceProperties": [{"id": 0, "name": gpu}]} if gpu else {}
    write_trace(runs / name / "trace.json", events, **header)
    toml = f'precision = "{precision}"\n' if precision else ""
    (runs / name / "run.toml").write_text(toml + "batch_size = 8\n")


def _without_flops(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = copy.deepcopy(events)
    for e in out:
        e.get("args", {}).pop("flops", None)
    return out


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("flops")
    runs = root / "runs"
    _run(runs, "amp_a100", _with_occupancy(EVENTS), A100, "amp")
    _run(runs, "unknown_gpu", EVENTS, "AMD Radeon Graphics", "amp")
    _run(runs, "no_tf32_on_t4", EVENTS, "Tesla T4", "tf32")
    _run(runs, "no_precision", EVENTS, A100, None)
    _run(runs, "no_flops", _without_flops(EVENTS), A100, "fp32")
    _run(runs, "bf16_b200", EVENTS, "NVIDIA B200", "bf16")
    _run(runs, "mi250_by_run_toml", EVENTS, "AMD Radeon Graphics", "bf16")
    with open(runs / "mi250_by_run_toml" / "run.toml", "a") as toml:
        toml.write('gpu = "AMD Instinct MI250"\n')
    result = cli("ingest", str(runs), "--warehouse", str(root / "wh"))
    assert result.returncode == 0, result.stderr
    return root / "wh"


def test_op_and_kernel_args_are_kept(warehouse: Path) -> None:
    [addmm] = query_json(warehouse, "SELECT flops, input_dims, input_types, call_stack "
                         "FROM host_events JOIN runs USING (run_id) "
                         "WHERE run_name = 'amp_a100' AND name = 'aten::addmm'")
    assert addmm == {"flops": 4_000_000_000, "input_dims": "[[64,1024],[1024,2048],[]]",
                     "input_types": ["float", "float", "Scalar"], "call_stack": None}
    rows = query_json(warehouse, "SELECT name, est_achieved_occupancy_share, blocks_per_sm, "
                      "warps_per_sm FROM kernels JOIN runs USING (run_id) "
                      "WHERE run_name = 'amp_a100' ORDER BY ts_ns LIMIT 2")
    assert rows == [  # 50 % is stored as the share 0.5
        {"name": "gemm", "est_achieved_occupancy_share": 0.5, "blocks_per_sm": 2.5,
         "warps_per_sm": 20.0},
        {"name": "bias", "est_achieved_occupancy_share": None, "blocks_per_sm": None,
         "warps_per_sm": None}]


def test_op_flops_by_hand(warehouse: Path) -> None:
    rows = query_json(warehouse, "SELECT op_name, iteration, kernel_count, gpu_time_ns, "
                      "host_dur_ns, flops, flops_event_count, gpu_flops_per_s, "
                      "host_flops_per_s, flops_reason FROM op_flops "
                      "WHERE run_name = 'amp_a100' ORDER BY op_event_id")
    by_op = {r.pop("op_name"): r for r in rows}
    assert set(by_op) == {"aten::linear", "aten::mul", "aten::mm"}  # aten::add: no kernel
    # aten::linear: addmm's 4 GFLOP over k1 + k2 = 40 µs of GPU time, over its 50 µs span
    assert by_op["aten::linear"] == {
        "iteration": 1, "kernel_count": 2, "gpu_time_ns": 40_000, "host_dur_ns": 50_000,
        "flops": 4_000_000_000, "flops_event_count": 1,
        "gpu_flops_per_s": pytest.approx(4e9 / 40e-6, rel=1e-12),
        "host_flops_per_s": pytest.approx(4e9 / 50e-6, rel=1e-12), "flops_reason": None}
    assert by_op["aten::mul"]["gpu_flops_per_s"] == pytest.approx(1e6 / 5e-6, rel=1e-12)
    assert by_op["aten::mm"]["host_flops_per_s"] == pytest.approx(2e9 / 40e-6, rel=1e-12)
    none = query_json(warehouse, "SELECT DISTINCT flops, gpu_flops_per_s, flops_reason "
                      "FROM op_flops_v1 WHERE run_name = 'no_flops'")
    assert none == [{"flops": None, "gpu_flops_per_s": None,
                     "flops_reason": "no flops in the trace (profile with with_flops=True)"}]
    # v2 also looks for input shapes: this trace's addmm lists two tensors for three
    none = query_json(warehouse, "SELECT DISTINCT flops, flops_source, flops_reason "
                      "FROM op_flops WHERE run_name = 'no_flops'")
    assert none == [{"flops": None, "flops_source": None, "flops_reason":
                     "no flops recorded (with_flops=True), and no op with input shapes has a "
                     "FLOP formula (record_shapes=True)"}]


def test_mfu_by_hand(warehouse: Path) -> None:
    rows = query_json(warehouse, "SELECT iteration, window_start_ns, window_end_ns, flops, "
                      "achieved_flops_per_s, peak_precision, peak_flops_per_s, mfu_util, "
                      "mfu_reason FROM mfu "
                      "WHERE run_name = 'amp_a100' ORDER BY iteration")
    # step 1: window [0, 100 µs) (its kernels end at 75 µs); aten::add ran no kernel
    flops_1 = 4e9 + 1e6
    assert rows[0] == {
        "iteration": 1, "window_start_ns": 0, "window_end_ns": 100_000,
        "flops": 4_001_000_000, "achieved_flops_per_s": pytest.approx(flops_1 / 100e-6),
        "peak_precision": "fp16", "peak_flops_per_s": A100_FP16,
        "mfu_util": pytest.approx(flops_1 / 100e-6 / A100_FP16, rel=1e-12),
        "mfu_reason": None}
    # step 2: window [100, 200 µs), 2 GFLOP: 20 TFLOP/s of 312
    assert rows[1]["mfu_util"] == pytest.approx(2e9 / 100e-6 / A100_FP16, rel=1e-12)


def test_mfu_by_hand_on_a_b200(warehouse: Path) -> None:
    rows = query_json(warehouse, "SELECT iteration, peak_precision, peak_flops_per_s, mfu_util "
                      "FROM mfu WHERE run_name = 'bf16_b200' ORDER BY iteration")
    # step 1: 4.001 GFLOP over its 100 µs window, of 2250 TFLOP/s: 1.778e-5
    assert rows == [
        {"iteration": 1, "peak_precision": "bf16", "peak_flops_per_s": B200_BF16,
         "mfu_util": pytest.approx(4.001e9 / 100e-6 / 2250e12, rel=1e-12)},
        {"iteration": 2, "peak_precision": "bf16", "peak_flops_per_s": B200_BF16,
         "mfu_util": pytest.approx(2e9 / 100e-6 / 2250e12, rel=1e-12)}]


def test_run_toml_gpu_names_a_generic_device(warehouse: Path) -> None:
    """ROCm writes "AMD Radeon Graphics" without the marketing name: run.toml gpu says the
    model, and MFU takes its peak (181.05 TFLOP/s BF16 per MI250 GCD)."""
    rows = query_json(warehouse, "SELECT iteration, gpu_name, peak_flops_per_s, mfu_util "
                      "FROM mfu WHERE run_name = 'mi250_by_run_toml' ORDER BY iteration")
    assert rows == [
        {"iteration": 1, "gpu_name": "AMD Instinct MI250", "peak_flops_per_s": 181.05e12,
         "mfu_util": pytest.approx(4.001e9 / 100e-6 / 181.05e12, rel=1e-12)},
        {"iteration": 2, "gpu_name": "AMD Instinct MI250", "peak_flops_per_s": 181.05e12,
         "mfu_util": pytest.approx(2e9 / 100e-6 / 181.05e12, rel=1e-12)}]


@pytest.fixture(scope="module")
def answers(warehouse: Path) -> Callable[..., list[tuple[Any, ...]]]:
    """grouped_rows of one snapshot of `warehouse`: each mfu version queried once for
    every run below (planning one costs ~0.3 CPU s, whatever rows it gives)."""
    return grouped_rows(snapshot(warehouse))


@pytest.mark.parametrize(("view", "run", "reason"), [
    ("mfu_v2", "unknown_gpu", "GPU AMD Radeon Graphics not in etl/gpu_peaks.toml"),
    ("mfu_v2", "no_tf32_on_t4", "no tf32 peak for Tesla T4 in etl/gpu_peaks.toml"),
    ("mfu_v2", "no_precision", "runs.precision not given (run.toml precision)"),
    ("mfu_v2", "no_flops", "no flops in the trace (profile with with_flops=True)"),
    ("mfu_v3", "unknown_gpu", "GPU AMD Radeon Graphics not in etl/core/gpu_peaks.toml"),
    ("mfu_v3", "no_flops", "no flops in the trace (profile with with_flops=True)"),
    ("mfu", "unknown_gpu", "GPU AMD Radeon Graphics not in etl/core/gpus.toml"),
    ("mfu", "no_tf32_on_t4", "no tf32 peak for Tesla T4 in etl/core/gpus.toml"),
    ("mfu", "no_precision", "runs.precision not given (run.toml precision)"),
    ("mfu", "no_flops", "no flops in the trace (with_flops=True) and none from input "
                        "shapes (record_shapes=True)"),
])
def test_mfu_is_null_with_a_reason(answers: Callable[..., list[tuple[Any, ...]]], view: str,
                                   run: str, reason: str) -> None:
    rows = answers(f"SELECT DISTINCT run_name, mfu_util, mfu_reason FROM {view}", run)
    assert rows == [(None, reason)]


def test_every_catalog_entry_has_a_source_and_known_precisions() -> None:
    doc = catalog()
    assert problems(doc) == []
    assert all(entry["source"].strip() and entry["peak_tflops"] for entry in doc["gpu"])
    peaks = {(key, precision): flops for key, _, _, precision, flops, _ in peak_rows(doc)}
    assert peaks[(A100.lower(), "fp16")] == A100_FP16
    assert peaks[("nvidia h100 80gb hbm3", "bf16")] == 989.5e12  # 1979 with sparsity / 2


@pytest.mark.parametrize(("edit", "problem"), [
    (lambda d: d["gpu"][0].update(source=" "), "needs names and a source"),
    (lambda d: d["gpu"][0]["peak_tflops"].update(fp4=1.0), "must name precisions"),
    (lambda d: d["gpu"][0]["peak_tflops"].update(fp32=-1), "is not a positive number"),
    (lambda d: d["gpu"][1].update(names=d["gpu"][0]["names"]), "is listed twice"),
    (lambda d: d["precisions"].update(amp="fp4"), "[precisions] amp"),
])
def test_a_broken_catalog_entry_is_named(edit: Any, problem: str) -> None:
    doc = copy.deepcopy(catalog())
    edit(doc)
    assert any(problem in p for p in problems(doc))


# corpus traces whose GPU has a datasheet entry: the device names they write resolve
NAMED_CORPUS_GPUS = {"other/tracelens/b200/eager_trace.json.gz": "B200 (HGX)",
                     "other/tracelens/h100/gaunernst_bert-small-uncased__1016001.json.gz":
                         "H100 SXM5"}


@pytest.mark.parametrize("relative", sorted(NAMED_CORPUS_GPUS))
def test_corpus_device_names_resolve_to_a_catalog_entry(relative: str) -> None:
    with gzip.open(corpus_path(relative), "rt", encoding="utf-8") as fh:
        names = {d["name"] for d in json.load(fh)["deviceProperties"]}
    models = {key: model for key, _, model, _, _, _ in peak_rows(catalog())}
    assert {models.get(name.strip().lower()) for name in names} == {NAMED_CORPUS_GPUS[relative]}


def test_the_mi250_trace_writes_a_generic_name() -> None:
    """ROCm 6.2 wrote "AMD Radeon Graphics" for the MI250's GCDs: a name every AMD GPU may
    write, so it resolves to no entry (MFU NULL with a reason, never a guess); the MI250
    entry holds the per-GCD peaks for traces that write the marketing name."""
    with gzip.open(corpus_path("hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz"),
                   "rt", encoding="utf-8") as fh:
        props = json.load(fh)["deviceProperties"]
    assert {(d["name"], d["numSms"]) for d in props} == {("AMD Radeon Graphics", 104)}
    peaks = {(key, precision): flops for key, _, _, precision, flops, _ in peak_rows(catalog())}
    assert ("amd radeon graphics", "fp16") not in peaks
    assert peaks[("amd instinct mi250", "fp16")] == 181.05e12  # 362.1 per package / 2 GCDs
