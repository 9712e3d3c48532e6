"""kernels.layer, layer_kind, pass and layer_status (issue #18): backward kernels take the
layer of their forward op by the autograd sequence number.

Checked against a tiny trace worked by hand, against the fwd-bwd flows of the corpus traces
that have them (tests/oracle/fwdbwd_layers.py, which never reads sequence numbers), and on
a corpus trace without sequence numbers (the link is absent: layer NULL, and why).
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from etl.extract.layer_columns import with_layer_columns
from tests.conftest import (corpus_path, event, kernel, launch, query_json, step,
                            write_trace)
from tests.oracle.fwdbwd_layers import backward_kernel_layers
from tests.extract.kineto.test_pipeline import assert_same_as_in_memory, run_pipeline

SEQ, FWD = "Sequence number", "Fwd thread id"


def _op(name: str, ts: int, dur: int, tid: int = 1, seq: int | None = None,
        fwd: int | None = None) -> dict[str, Any]:
    args = {k: v for k, v in ((SEQ, seq), (FWD, fwd)) if v is not None}
    return event(cat="cpu_op", name=name, ts=ts, dur=dur, tid=tid, **args)


def _scope(name: str, ts: int, dur: int, tid: int = 1) -> dict[str, Any]:
    cat = "python_function" if name.startswith("nn.Module: ") else "user_annotation"
    return event(cat=cat, name=name, ts=ts, dur=dur, tid=tid)


def _engine(node: str, ts: int, dur: int, seq: int | None, fwd: int | None = 1
            ) -> dict[str, Any]:
    return _op(f"autograd::engine::evaluate_function: {node}", ts, dur, 2, seq, fwd)


def _forward() -> list[dict[str, Any]]:
    """Thread 1: the forward pass (sequence numbers 10-14, Fwd thread id 0)."""
    return [
        step(1, 0, 100_000),
        _scope("nn.Module: Net", 1_000, 39_000),
        # takes number 10 too but creates no node (as BatchNorm's num_batches_tracked += 1):
        # the latest-starting op with the number is the forward op
        _op("aten::add_", 1_500, 300, seq=10, fwd=0),
        _scope("nn.Module: Linear", 2_000, 18_000),
        _op("aten::linear", 3_000, 15_000, seq=10, fwd=0),
        _op("aten::addmm", 4_000, 13_000, seq=10, fwd=0), launch(1, 5_000),
        _scope("my_label", 21_000, 9_000),
        _op("aten::relu", 22_000, 7_000, seq=11, fwd=0), launch(2, 23_000),
        _op("aten::mul", 31_000, 4_000, seq=12, fwd=0), launch(3, 32_000),
        _op("aten::exp", 36_000, 2_000, seq=14, fwd=0),
        _op("aten::sum", 41_000, 4_000, seq=13, fwd=0), launch(4, 42_000),  # no scope
        _scope("Optimizer.step#SGD.step", 80_000, 15_000),
        _op("aten::add_", 81_000, 4_000), launch(20, 82_000),
        launch(30, 96_000),  # no op, no scope
        _op("aten::exp", 36_000, 2_000, tid=3, seq=14, fwd=0),  # thread 3 uses 14 too
    ]


def _backward() -> list[dict[str, Any]]:
    """Thread 2: the autograd engine (Fwd thread id 1)."""
    return [
        _engine("SumBackward0", 50_000, 3_000, 13),
        _op("SumBackward0", 50_500, 2_000, 2, 13, 1), launch(10, 51_000, tid=2),
        _engine("MulBackward0", 54_000, 3_000, 12),
        _op("MulBackward0", 54_500, 2_000, 2, 12, 1),
        _op("aten::mul", 55_000, 1_000, 2), launch(11, 55_200, 100, tid=2),
        _engine("ReluBackward0", 58_000, 2_000, 11), launch(12, 58_500, tid=2),
        _engine("AddmmBackward0", 61_000, 5_000, 10),
        _op("AddmmBackward0", 61_500, 3_500, 2, 10, 1), launch(13, 62_000, tid=2),
        _engine("torch::autograd::AccumulateGrad", 67_000, 3_000, None, None),
        _scope("nccl:all_reduce", 67_500, 2_000, tid=2), launch(14, 68_000, tid=2),
        launch(15, 69_600, 100, tid=2),
        _engine("DivBackward0", 71_000, 2_000, 99), launch(16, 71_500, tid=2),
        _engine("ExpBackward0", 74_000, 2_000, 14), launch(17, 74_500, tid=2),
    ]


# kernel name (= its correlation id) -> (layer, layer_kind, pass, layer_status), by hand
EXPECTED = {
    1: ("nn.Module: Linear", "module", "forward", "enclosing_scope"),
    2: ("my_label", "user_annotation", "forward", "enclosing_scope"),
    3: ("nn.Module: Net", "module", "forward", "enclosing_scope"),
    4: (None, None, "forward", "no_scope"),
    20: ("Optimizer.step#SGD.step", "optimizer", "optimizer", "enclosing_scope"),
    30: (None, None, None, "no_scope"),
    10: (None, None, "backward", "forward_op_without_scope"),   # aten::sum has no scope
    11: ("nn.Module: Net", "module", "backward", "forward_op"),  # aten::mul's layer
    12: ("my_label", "user_annotation", "backward", "forward_op"),
    13: ("nn.Module: Linear", "module", "backward", "forward_op"),
    14: ("nccl:all_reduce", "communication", "backward", "enclosing_scope"),
    15: (None, None, "backward", "no_sequence_number"),          # AccumulateGrad
    16: (None, None, "backward", "forward_op_not_in_trace"),
    17: (None, None, "backward", "ambiguous_forward_thread"),    # 14 on threads 1 and 3
    99: (None, None, None, "no_launch"),
}


def _hand_trace(path: Path) -> Path:
    kernels = [kernel(corr, 200_000 + 1_000 * n, 500, name=str(corr))
               for n, corr in enumerate(EXPECTED)]
    return write_trace(path, _forward() + _backward() + kernels)


def test_layers_of_a_hand_made_trace(tmp_path: Path) -> None:
    path = _hand_trace(tmp_path / "t.json")
    _, got = run_pipeline(path, tmp_path / "spill", slice_bytes=512, chunk_rows=3)
    rows = got["kernels"].to_pylist()  # type: ignore[union-attr]
    found = {int(k["name"]): (k["layer"], k["layer_kind"], k["pass"], k["layer_status"])
             for k in rows}
    assert found == EXPECTED


def test_hand_made_trace_equals_in_memory_reading(tmp_path: Path) -> None:
    path = _hand_trace(tmp_path / "t.json")
    for chunk_rows in (1, 4, 1000):
        assert_same_as_in_memory(path, tmp_path / f"spill{chunk_rows}", slice_bytes=512,
                                 chunk_rows=chunk_rows)


def test_host_events_of_a_hand_made_trace(tmp_path: Path) -> None:
    _, got = run_pipeline(_hand_trace(tmp_path / "t.json"), tmp_path / "spill")
    host = got["host_events"].to_pylist()  # type: ignore[union-attr]
    by_name = {row["name"]: row for row in host if row["name"] != "aten::add_"}
    by_name["aten::add_"] = next(r for r in host if r["name"] == "aten::add_"
                                 and r["sequence_number"] is None)
    assert (by_name["aten::addmm"]["sequence_number"], by_name["aten::addmm"]["fwd_thread_id"],
            by_name["aten::addmm"]["pass"]) == (10, 0, "forward")
    assert (by_name["SumBackward0"]["sequence_number"], by_name["SumBackward0"]["fwd_thread_id"],
            by_name["SumBackward0"]["pass"]) == (13, 1, "backward")
    assert by_name["aten::add_"]["pass"] == "optimizer"
    assert by_name["nccl:all_reduce"]["pass"] == "backward"  # inside AccumulateGrad's engine op
    assert by_name["ProfilerStep#1"]["pass"] is None  # a step marker is no scope
    calls = {r["correlation_id"]: r["pass"] for r in host if r["correlation_id"] is not None}
    assert (calls[30], calls[15], calls[4]) == (None, "backward", "forward")


FLOW_TRACES = ["hta/nccl_parser_config/nccl_data.json.gz",
               "hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
               "hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz"]


@pytest.mark.parametrize("relative", FLOW_TRACES)
def test_backward_layers_equal_the_fwdbwd_flows(relative: str, tmp_path: Path) -> None:
    path = corpus_path(relative)
    _, got = run_pipeline(path, tmp_path / "spill")
    linked = {k["kernel_id"]: k["layer"] for k in got["kernels"].to_pylist()  # type: ignore
              if k["layer_status"] in ("forward_op", "forward_op_without_scope")}
    assert linked and linked == backward_kernel_layers(path)


def test_a_trace_without_sequence_numbers_keeps_backward_layers_null(tmp_path: Path) -> None:
    path = corpus_path("hta/with_gpu_user_annotation/step_based_trace_2543932.json.gz")
    _, got = run_pipeline(path, tmp_path / "spill")
    kernels = got["kernels"].to_pylist()  # type: ignore[union-attr]
    backward = [k for k in kernels if k["pass"] == "backward"]
    assert len(backward) == 50  # launched inside autograd::engine::evaluate_function ops
    assert {(k["layer"], k["layer_kind"], k["layer_status"]) for k in backward} == {
        (None, None, "no_sequence_number")}
    passes = Counter(k["pass"] for k in kernels)
    assert passes == {"forward": 54, "backward": 50, "optimizer": 36, None: 10}


def test_scope_formats_by_hand() -> None:
    kernels = pa.table({
        "layer": ["model/dense", "gradient_tape/model/dense", "gradients_1/x", "SGD/update",
                  "my_gradients/x", None, None],
        "launch_event_id": pa.array([1, 2, 3, 4, 5, 6, None], pa.int64())})
    patterns = {"backward": "^(gradients|gradient_tape)(_\\d+)?$", "optimizer": "^(SGD)$"}
    got = with_layer_columns(kernels, "name_scope", patterns)
    assert got["pass"].to_pylist() == ["forward", "backward", "backward", "optimizer",
                                       "forward", None, None]
    assert got["layer_kind"].to_pylist() == ["name_scope"] * 5 + [None, None]
    assert got["layer_status"].to_pylist() == ["enclosing_scope"] * 5 + ["no_scope",
                                                                         "no_launch"]
    assert with_layer_columns(kernels, "nvtx", None)["pass"].null_count == 7


def test_op_time_groups_by_layer_and_pass(tmp_path: Path) -> None:
    from tests.views.test_tiny_trace import ingest_tiny

    events = _forward() + _backward() + [
        kernel(corr, 200_000 + 1_000 * n, 100 * (n + 1), name=str(corr))
        for n, corr in enumerate(EXPECTED)]
    warehouse = ingest_tiny(tmp_path, events)
    got = {(r["layer"], r["layer_kind"], r["pass"]): (r["kernel_count"], r["gpu_time_ns"])
           for r in query_json(warehouse, "SELECT layer, layer_kind, pass, "
                               "sum(kernel_count) AS kernel_count, sum(gpu_time_ns) AS "
                               "gpu_time_ns FROM op_time_v3 GROUP BY ALL")}
    want: dict[tuple[Any, ...], tuple[int, int]] = {}
    for n, (layer, kind, pass_, _) in enumerate(EXPECTED.values()):
        count, time = want.get((layer, kind, pass_), (0, 0))
        want[(layer, kind, pass_)] = (count + 1, time + 100 * (n + 1))
    assert got == want
    assert got[("nn.Module: Linear", "module", "backward")] == (1, 1_000)  # kernel 13
