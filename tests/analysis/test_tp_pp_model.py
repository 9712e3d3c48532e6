"""The tensor- and pipeline-parallel model of bench/tp_pp_backtest.py, by hand: which
nodes tensor parallelism splits, and the time it adds up to."""
from __future__ import annotations

import sys

import pytest

from etl.analysis.scale_out import CommModel, Topology
from etl.core.gpus import by_key
from etl.core.links import link
from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import neusight_trace  # noqa: E402
import tp_pp_backtest  # noqa: E402

NVLINK3 = link("nvlink3")   # 300 GB/s per GPU and direction, 3.4 us per step


def _node(name: str, target: str, out: str, latency: float, op: str = "call_function"
          ) -> dict[str, str]:
    return {"Name": name, "target": target, "op": op, "output_shape": out,
            "latency": str(latency), "fw_latency": str(latency)}


def test_the_split_nodes_are_the_gemms_and_the_wide_tensors() -> None:
    """Hidden states of 2 x 8 x 4 = 64 elements. The layer (from ln_1 to add_15, NeuSight's
    markers) is repeated twice: its GEMM (addmm, 5 ms) and wide MLP activation (output
    2 x 8 x 16, 3 ms) are split; its layer norm (2 ms) and residual add (1 ms) run whole,
    as does the embedding before it (1 ms): split 2 x 8 of 1 + 2 x 3 + 2 x 8 ms."""
    rows = [_node("transformer_wte", "transformer.wte", "(2, 8, 4)", 1, "call_module"),
            _node("transformer_h_0_ln_1", "transformer.h.0.ln_1", "(2, 8, 4)", 2,
                  "call_module"),
            _node("addmm", "<built-in method addmm of type object at 0x1>", "(16, 16)", 5),
            _node("mul", "<built-in function mul>", "(2, 8, 16)", 3),
            _node("add_15", "<built-in function add>", "(2, 8, 4)", 1)]
    label = neusight_trace.Label(by_key("V100-PCIE-32GB"), "V100", "gpt2_large-train-8-2",
                                 "gpt2_large", "train", 2, 2, 22.0, rows)
    assert tp_pp_backtest.split_share(label, 2 * 8 * 4) == pytest.approx(16 / 23)


def test_tensor_and_pipeline_parallel_times_by_hand() -> None:
    model, four = CommModel(0.5, ""), Topology(4, 8, NVLINK3)
    # an all-reduce of 3 MB on 4 ranks: 8.4 us + 6 steps x 3.4 us + 3e6 x 1.5 / 150 GB/s
    allreduce_ms = (8_400 + 6 * 3_400 + 3e6 * 1.5 / 150) / 1e6
    total, comm = tp_pp_backtest.tp_ms(100.0, 0.8, 2, 3e6, model, four)
    assert comm == pytest.approx(9 * allreduce_ms)
    assert total == pytest.approx(100 * (0.2 + 0.8 / 4) + 9 * allreduce_ms)
    # a send of 3 MB: 8.4 us + one step + 3e6 / 150 GB/s, six of them
    send_ms = (8_400 + 3_400 + 3e6 / 150) / 1e6
    total, comm = tp_pp_backtest.pp_ms(100.0, 3e6, model, four)
    assert comm == pytest.approx(6 * send_ms) and total == pytest.approx(100 + 6 * send_ms)
