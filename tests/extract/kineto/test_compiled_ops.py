"""torch.compile's wrapper ops yield a kernel's op to the op that launched it.

A hand-made trace: a compiled region (Torch-Compiled Region > CompiledFunction) launching
a Triton kernel through its own op, an aten::mm, and a CUDA graph straight from
CompiledFunction; an eager aten::linear > aten::addmm; and the compiled backward
(evaluate_function: CompiledFunctionBackward > CompiledFunctionBackward > Triton op). The
real traces with such wrappers are read against a naive walk of each launch's enclosing ops.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import corpus_path, event, kernel, launch, write_trace
from tests.extract.kineto.test_pipeline import assert_same_as_in_memory, run_pipeline

REGION, BACKWARD = "Torch-Compiled Region: 0/0", "CompiledFunctionBackward"
EVALUATE = "autograd::engine::evaluate_function: CompiledFunctionBackward"


def compiled_events() -> list[dict[str, Any]]:
    return [event(name=REGION, ts=0, dur=100_000),
            event(name="CompiledFunction", ts=1_000, dur=90_000),
            event(name="triton_poi_fused_add_0", ts=2_000, dur=10_000),
            launch(1, 3_000, name="cuLaunchKernel") | {"cat": "cuda_driver"},
            event(name="aten::mm", ts=20_000, dur=10_000),
            launch(2, 21_000),
            launch(3, 40_000, name="cudaGraphLaunch"),
            event(name="aten::linear", ts=200_000, dur=10_000),
            event(name="aten::addmm", ts=201_000, dur=8_000),
            launch(4, 202_000),
            event(name=EVALUATE, ts=300_000, dur=50_000),
            event(name=BACKWARD, ts=301_000, dur=40_000),
            event(name="triton_poi_fused_mul_1", ts=302_000, dur=10_000),
            launch(5, 303_000, name="cuLaunchKernel") | {"cat": "cuda_driver"},
            kernel(1, 500_000, 1_000, name="triton_poi_fused_add_0"),
            kernel(2, 502_000, 1_000, name="gemm"),
            kernel(3, 504_000, 1_000, name="graph_node_a"),
            kernel(3, 506_000, 1_000, name="graph_node_b"),
            kernel(4, 508_000, 1_000, name="addmm_kernel"),
            kernel(5, 510_000, 1_000, name="triton_poi_fused_mul_1")]


EXPECTED = {"triton_poi_fused_add_0": "triton_poi_fused_add_0", "gemm": "aten::mm",
            "graph_node_a": REGION, "graph_node_b": REGION,
            "addmm_kernel": "aten::linear", "triton_poi_fused_mul_1": "triton_poi_fused_mul_1"}


@pytest.mark.parametrize("chunk_rows", [1, 3, 1000])
def test_a_compiled_kernel_takes_the_op_that_launched_it(tmp_path: Path, chunk_rows: int
                                                         ) -> None:
    path = write_trace(tmp_path / "t.json", compiled_events())
    _, got = run_pipeline(path, tmp_path / "spill", slice_bytes=256, chunk_rows=chunk_rows)
    ops = {k["name"]: k["op_name"] for k in got["kernels"].to_pylist()}
    assert ops == EXPECTED
    assert_same_as_in_memory(path, tmp_path / "again", slice_bytes=256, chunk_rows=chunk_rows)


@pytest.mark.parametrize("parts", [("hta", "negative_queue_length_values_check", "rank0.json.gz"),
                                   ("hta", "df_index_resolver", "df_index_resolver.json.gz"),
                                   ("hta", "trace_diff", "test", "test.json.gz"),
                                   ("hta", "triton_example", "triton_example.json.gz")])
def test_real_compiled_traces_agree_with_a_naive_walk(tmp_path: Path, parts: tuple[str, ...]
                                                      ) -> None:
    """Real traces with CompiledFunction / Torch-Compiled Region wrappers: every launched
    activity's op as the naive walk finds it (tests/oracle/naive_ops.py)."""
    from tests.oracle.naive_ops import kernel_ops

    path = corpus_path(*parts)
    _, got = run_pipeline(path, tmp_path / "spill")
    ours = {k["kernel_id"]: k["op_name"] for k in got["kernels"].to_pylist()
            if k["launch_event_id"] is not None}
    naive = kernel_ops(path)
    assert ours == {i: op for i, (op, _) in naive.items()}
    # the rule is at work here: some activities take an op inside a wrapper
    assert any(op != outermost for op, outermost in naive.values())
