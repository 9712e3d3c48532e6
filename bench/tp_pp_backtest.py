"""Tensor- and pipeline-parallel labels of NeuSight against a plain model of each (the
stretch of issue #32): what the one-GPU measurement says a 4-GPU Megatron-LM run takes.

    .venv/bin/python bench/tp_pp_backtest.py [--corpus ../shared/corpus]

NeuSight (github.com/sitar-lab/NeuSight, commit 6945927, MIT) measured GPT-2 Large training
(fp32, sequence 1024) with 4-way tensor parallelism (label/<GPU>/...-<batch>-tp4.json) and a
4-stage pipeline of one micro-batch (-pp4_1.json), on one machine. Each is forecast from the
one-GPU label at the same batch (the same GPU's measurement, else the median of `etl
forecast --gpu` from the NVIDIA GPUs that measured it, as bench/dp_backtest.py does):

- tensor parallel (Megatron-LM's layer split): the work of each node of the one-GPU label
  whose tensor is split four ways — the GEMMs (addmm, matmul, bmm, softmax over heads) and
  every node whose output is larger than the hidden states (the attention scores, the MLP's
  4h activations, the vocabulary's logits) — takes a quarter of its share of the measured
  time; the rest (layer norms, residual adds, dropout on the hidden states, embeddings)
  runs whole on every GPU. Each layer adds four all-reduces of the hidden states
  (batch x sequence x hidden x 4 bytes; two in the forward pass, two in the backward), one
  more for the embedding, none of them hidden, at NCCL's ring time over the GPU's usual
  link at NeuSight's 72% of its bandwidth (etl/analysis/scale_out.py);
- pipeline parallel with one micro-batch: the stages run one after the other, so the
  iteration is the one-GPU time plus the activations (forward) and their gradients
  (backward) sent between the 3 pairs of stages.
Nothing is fitted to these labels. GPT-3 XL's labels have no one-GPU measurement at their
batch (4) on any GPU: not forecast.
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import dp_backtest  # noqa: E402
import neusight_trace  # noqa: E402
from etl.analysis.scale_out import DEFAULT_EFFICIENCY, CommModel, Topology  # noqa: E402
from etl.core.links import typical_link  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
WAYS = 4
SPLIT_METHODS = {"addmm", "matmul", "bmm", "baddbmm", "softmax"}
# (GPU folder, label, one-GPU label at the same batch, the GPU's device name)
CASES = [("NVIDIA_H100_80GB_HBM3", "gpt2_large-train-1024-4", "NVIDIA H100 80GB HBM3"),
         ("NVIDIA_A100-SXM4-40GB", "gpt2_large-train-1024-4", "NVIDIA A100-SXM4-40GB")]


def split_share(label: neusight_trace.Label, hidden_elements: int) -> float:
    """The share of the label's per-node time (its layer repeated num_layer times) in
    nodes whose tensors tensor parallelism splits (module docstring)."""
    split = whole = 0.0
    for row in neusight_trace.expanded(label):
        latency = float(row["latency"] or 0)
        out = neusight_trace._out(row)
        larger = bool(out) and math.prod(out) > hidden_elements
        if neusight_trace._method(row) in SPLIT_METHODS or larger:
            split += latency
        else:
            whole += latency
    return split / (split + whole)


def tp_ms(one_gpu_ms: float, share: float, layers: int, hidden_bytes: float,
          model: CommModel, topology: Topology) -> tuple[float, float]:
    """(iteration, its all-reduces) in ms, by the module docstring's model."""
    allreduce = model.time_ns("allreduce", hidden_bytes, topology) / 1e6
    comm = (4 * layers + 1) * allreduce
    return one_gpu_ms * ((1 - share) + share / WAYS) + comm, comm


def pp_ms(one_gpu_ms: float, hidden_bytes: float, model: CommModel, topology: Topology
          ) -> tuple[float, float]:
    """(iteration, its sends) in ms: one micro-batch through 4 stages in turn."""
    send = model.time_ns("send", hidden_bytes, topology.with_ranks(2)) / 1e6
    comm = 2 * (WAYS - 1) * send
    return one_gpu_ms + comm, comm


def neusight_errors(summary: Path) -> dict[tuple[str, int, str], float]:
    with open(summary, newline="") as fh:
        return {(r["device"], int(r["batch"]), r["option"]): float(r["neusight_all_e2e_err"])
                for r in csv.DictReader(fh) if r["option"] in ("tp4", "pp4_1")
                and r["model_name"] == "gpt2_large"}


def one_gpu(folder: str, label: str, device: str, asplos: Path
            ) -> tuple[float, neusight_trace.Label, str] | None:
    """The one-GPU time at the label's batch (measured, else forecast) and the per-node
    label whose shares the split is read from."""
    own = asplos / "label" / folder / f"{label}.csv"
    if own.exists():
        read = neusight_trace.read_label(own)
        return read.e2e_ms, read, "measured"
    forecast, source = dp_backtest._forecast_single(folder, label, device)
    others = [p for p in neusight_trace.labels() if p.stem == label and "NVIDIA" in str(p)]
    if forecast is None or not others:
        return None
    return forecast["e2e_latency"], neusight_trace.read_label(others[0]), source


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", type=Path, default=ROOT.parent / "shared" / "corpus")
    args = parser.parse_args()
    asplos = args.corpus / "neusight" / "scripts" / "asplos"
    config = json.loads((asplos / "data" / "DLmodel_configs" / "gpt2_large.json").read_text())
    published = neusight_errors(asplos / "summary" / "summary.csv")
    model = CommModel(DEFAULT_EFFICIENCY, "")
    print("| GPU (link) | plan | batch | one GPU (ms) | split share | communication (ms) | "
          "forecast (ms) | measured (ms) | error | NeuSight's error |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    errors = []
    for folder, label, device in CASES:
        batch = int(label.split("-")[3])
        found = one_gpu(folder, label, device, asplos)
        if found is None:
            continue
        single_ms, shares_from, source = found
        node = typical_link(device)
        assert node is not None, device
        topology = Topology(WAYS, 8, node)
        hidden_bytes = 4.0 * batch * config["n_positions"] * config["n_embd"]
        share = split_share(shares_from, batch * config["n_positions"] * config["n_embd"])
        for plan, (forecast, comm) in (
                ("tp4", tp_ms(single_ms, share, config["n_layer"], hidden_bytes, model,
                              topology)),
                ("pp4_1", pp_ms(single_ms, hidden_bytes, model, topology))):
            measured = json.loads((asplos / "label" / folder /
                                   f"{label}-{plan}.json").read_text())["e2e_latency"]
            error = forecast / measured - 1
            errors.append(abs(error))
            print(f"| {device} ({node.key}) | {plan} | {batch} | {single_ms:.1f} ({source}) | "
                  f"{share:.3f} | {comm:.1f} | {forecast:.1f} | {measured:.1f} | "
                  f"{error:+.1%} | {published.get((folder, batch, plan), float('nan')):.1f}% |")
    if errors:
        print(f"\nmedian |error| {statistics.median(errors):.1%} over {len(errors)} labels")


if __name__ == "__main__":
    main()
