"""bench/neusight_trace.py: NeuSight's labels as Kineto traces of one iteration, held to
the labels' own end-to-end times (the backtest's inputs)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

import etl
from tests.conftest import ROOT, corpus_path

sys.path.insert(0, str(ROOT / "bench"))
import neusight_trace  # noqa: E402

V100 = "Tesla_V100-PCIE-32GB"


def _label(config: str, gpu: str = V100) -> neusight_trace.Label:
    path = corpus_path("neusight", "scripts", "asplos", "label", gpu, f"{config}.csv")
    return neusight_trace.read_label(path)


def test_the_layer_is_repeated_as_neusight_does() -> None:
    label = _label("gpt2_large-train-1024-1")
    rows = neusight_trace.expanded(label)
    names = [r["Name"] for r in label.rows]
    start, end = names.index("transformer_h_0_ln_1"), names.index("add_15") + 1
    assert len(rows) == len(names) + (label.num_layer - 1) * (end - start)
    ops = neusight_trace.convert(label)
    forward = [o for o in ops if not o.name.startswith("autograd")]
    # c_attn, c_proj, c_fc, mlp c_proj: four addmm a layer, 36 layers
    assert sum(o.name == "aten::addmm" for o in forward) == 4 * 36
    assert sum(o.name == "aten::linear" for o in forward) == 1  # lm_head, in the epilogue


def test_the_floor_is_the_median_of_the_kernel_less_nodes() -> None:
    # research notes: view/size fw times on V100 10.0 / 11.3 / 15.4 µs (min/median/p90)
    assert 10_000 <= neusight_trace.floor_ns(_label("gpt2_large-train-1024-1")) <= 13_000


@pytest.mark.parametrize("config", ["bert_large-inf-512-8", "bert_large-train-512-2",
                                    "gpt2_large-train-1024-1", "opt_13-inf-2048-8"])
def test_converted_iterations_are_near_the_measured_end_to_end(config: str) -> None:
    label = _label(config)
    ratio = neusight_trace.span(neusight_trace.convert(label)) / (label.e2e_ms * 1e6)
    assert 0.95 <= ratio <= 1.15, ratio  # V100: 0.97-1.13 before calibration


def test_calibration_makes_the_iteration_the_measured_time(tmp_path: Path) -> None:
    label = _label("bert_large-train-512-2")
    folder = neusight_trace.write_run(label, tmp_path / "runs")
    [result] = etl.ingest(folder, tmp_path / "wh", jobs=1)
    assert result.status == "ingested", result.error
    con = etl.connect(tmp_path / "wh")
    [(window,)] = con.execute("SELECT window_ns FROM gpu_utilization").fetchall()
    assert window / 1e6 == pytest.approx(label.e2e_ms, rel=1e-3)
    [(kernels, with_shapes)] = con.execute(
        "SELECT count(*), count(*) FILTER (WHERE h.input_dims IS NOT NULL) FROM kernels AS k "
        "JOIN host_events AS h ON h.run_id = k.run_id AND h.event_id = k.op_event_id "
        "WHERE k.kind = 'kernel'").fetchall()
    assert kernels > 1000 and with_shapes > 0


def test_label_nodes_are_read_as_gemms_by_hand() -> None:
    import label_vs_rows

    def node(op: str, target: str, shapes: str, out: str) -> dict[str, str]:
        return {"op": op, "target": target, "input_shapes": shapes, "output_shape": out,
                "dtype": "torch.float32"}

    dense = node("call_module", "bert.encoder.layer.0.intermediate.dense",
                 "[[16, 512, 1024]]", "(16, 512, 4096)")
    assert label_vs_rows.node_shape(dense) == (1, 16 * 512, 1024, 4096)
    scores = node("call_function", "<built-in method matmul of type object at 0x1>",
                  "[[16, 16, 512, 64], [16, 16, 64, 512]]", "(16, 16, 512, 512)")
    assert label_vs_rows.node_shape(scores) == (256, 512, 64, 512)
    norm = node("call_module", "bert.embeddings.LayerNorm", "[[16, 512, 1024]]",
                "(16, 512, 1024)")
    assert label_vs_rows.node_shape(norm) is None


def test_the_p4_labels_run_its_rows_gemm_slower() -> None:
    # one node read by hand: BERT-Large b16's intermediate dense, (8192 x 1024) @ (1024 x
    # 4096), 27.94 ms in the P4's label; linear.csv's P4 row B=1 M=8192 N=1024 K=4096
    import csv

    import label_vs_rows

    label = _label("bert_large-inf-512-16", "Tesla_P4")
    [dense] = [r for r in label.rows if r["Name"] == "bert_encoder_layer_0_intermediate_dense"]
    with open(label_vs_rows.TEST / "linear.csv", newline="") as fh:
        [row] = [r for r in csv.DictReader(fh) if r["Device"] == "Tesla P4"
                 and (r["B"], r["M"], r["N"], r["K"]) == ("1", "8192", "1024", "4096")]
    by_hand = float(dense["fw_latency"]) / float(row["Latency"])
    assert 1.8 < by_hand < 2.1
    ratios = label_vs_rows.ratios()
    assert any(r == pytest.approx(by_hand) for r, _, _ in ratios["Tesla_P4"])
    p4 = sorted(r for r, _, _ in ratios["Tesla_P4"])
    v100 = sorted(r for r, _, _ in ratios[V100])
    assert p4[len(p4) // 2] > 1.5 and 0.9 < v100[len(v100) // 2] < 1.1
