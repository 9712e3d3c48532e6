"""Backtest of the data-parallel forecast (etl/analysis/scale_out.py) on NeuSight's measured
4-GPU runs: the paper's labels, ours beside NeuSight's own error.

    .venv/bin/python bench/dp_backtest.py [--corpus ../shared/corpus]

NeuSight (github.com/sitar-lab/NeuSight, commit 6945927, MIT) measured GPT-2 Large training
(fp32, sequence 1024) on 4 GPUs of one machine data parallel (Megatron-LM's DDP, the
gradients all-reduced in buckets while the backward pass runs): label/<GPU>/gpt2_large-
train-1024-<global batch>-dp4.json, the forward and backward time of rank 0. Each label is
forecast from the same model's one-GPU measurement at the per-GPU batch (global / 4):
label/<GPU>/gpt2_large-train-1024-<batch>.json (e2e and backward time), and where that GPU
has none, from the other NVIDIA GPUs' measurements, each forecast onto it as `etl forecast
--gpu` does (the converted NeuSight trace of bench/neusight_trace.py), their median. The
forecast adds what DDP's all-reduce of the gradients (4 bytes x the parameters counted from
the model's config) leaves exposed after the backward pass, over the GPU's usual link
(etl/core/links.toml) at NeuSight's 72% of its bandwidth: nothing here is fitted to the
labels.
"""
from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
import tempfile
from pathlib import Path

from etl.analysis.scale_out import DEFAULT_EFFICIENCY, CommModel, Topology, exposed_allreduce_ns
from etl.core.links import typical_link

ROOT = Path(__file__).resolve().parents[1]
# (GPU folder, DP label, one-GPU label at the per-GPU batch, the GPU's device name)
CASES = [("NVIDIA_H100_80GB_HBM3", "gpt2_large-train-1024-4-dp4", "gpt2_large-train-1024-1",
          "NVIDIA H100 80GB HBM3"),
         ("NVIDIA_H100_80GB_HBM3", "gpt2_large-train-1024-16-dp4", "gpt2_large-train-1024-4",
          "NVIDIA H100 80GB HBM3"),
         ("NVIDIA_A100-SXM4-40GB", "gpt2_large-train-1024-4-dp4", "gpt2_large-train-1024-1",
          "NVIDIA A100-SXM4-40GB")]


def gpt2_parameters(config: dict[str, int]) -> int:
    """GPT-2's parameters from its config (the LM head shares the token embedding)."""
    d, vocab, positions = config["n_embd"], config["vocab_size"], config["n_positions"]
    per_layer = (2 * d                    # ln_1
                 + d * 3 * d + 3 * d      # attention c_attn
                 + d * d + d              # attention c_proj
                 + 2 * d                  # ln_2
                 + d * 4 * d + 4 * d      # mlp c_fc
                 + 4 * d * d + d)         # mlp c_proj
    return vocab * d + positions * d + config["n_layer"] * per_layer + 2 * d


def neusight_errors(summary: Path) -> dict[tuple[str, int], float]:
    """NeuSight's published e2e error (%) per GPU and global batch of the dp4 rows."""
    with open(summary, newline="") as fh:
        return {(r["device"], int(r["batch"])): float(r["neusight_all_e2e_err"])
                for r in csv.DictReader(fh) if r["option"] == "dp4"
                and r["model_name"] == "gpt2_large"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", type=Path, default=ROOT.parent / "shared" / "corpus")
    args = parser.parse_args()
    asplos = args.corpus / "neusight" / "scripts" / "asplos"
    config = json.loads((asplos / "data" / "DLmodel_configs" / "gpt2_large.json").read_text())
    grad_bytes = 4 * gpt2_parameters(config)
    published = neusight_errors(asplos / "summary" / "summary.csv")
    print(f"GPT-2 Large: {gpt2_parameters(config):,} parameters, {grad_bytes / 1e9:.3f} GB of "
          f"fp32 gradients; {DEFAULT_EFFICIENCY:.0%} of each link")
    print("| GPU | global batch | one-GPU source | one GPU (ms) | backward (ms) | exposed "
          "all-reduce (ms) | forecast (ms) | measured (ms) | error | NeuSight's error |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    errors = []
    for folder, dp_label, single_label, device in CASES:
        measured = json.loads((asplos / "label" / folder / f"{dp_label}.json").read_text())
        batch = int(dp_label.split("-")[3])
        single, source = _single_gpu(asplos, folder, single_label)
        if single is None:
            single, source = _forecast_single(folder, single_label, device)
        if single is None:
            print(f"| {device} | {batch} | none on this GPU | | | | | "
                  f"{measured['e2e_latency']:.1f} | | {published.get((folder, batch), 0):.1f}% |")
            continue
        node = typical_link(device)
        assert node is not None, device
        topology = Topology(4, 8, node)
        exposed = exposed_allreduce_ns(grad_bytes, single["bwall_latency"] * 1e6,
                                       CommModel(DEFAULT_EFFICIENCY, ""), topology) / 1e6
        forecast = single["e2e_latency"] + exposed
        error = (forecast - measured["e2e_latency"]) / measured["e2e_latency"]
        errors.append(abs(error))
        print(f"| {device} ({node.key}) | {batch} | {source} | {single['e2e_latency']:.1f} | "
              f"{single['bwall_latency']:.1f} | {exposed:.2f} | {forecast:.1f} | "
              f"{measured['e2e_latency']:.1f} | {error:+.1%} | "
              f"{published.get((folder, batch), float('nan')):.1f}% |")
    if errors:
        print(f"\nmean |error| {sum(errors) / len(errors):.1%} over {len(errors)} labels; "
              f"largest {max(errors):.1%}")


def _single_gpu(asplos: Path, folder: str, label: str) -> tuple[dict[str, float] | None, str]:
    path = asplos / "label" / folder / f"{label}.json"
    if path.exists():
        return json.loads(path.read_text()), f"{label} measured"
    return None, ""


def _forecast_single(folder: str, label: str, device: str
                     ) -> tuple[dict[str, float] | None, str]:
    """The one-GPU label on this GPU forecast (`etl forecast --gpu`) from every NVIDIA GPU
    that measured it: the median of the forecasts, and the backward pass scaled by each
    source's forecast over its measured time (the converted trace keeps no backward apart)."""
    import etl
    from etl.analysis.forecast import run as forecast_run
    from etl.core.gpus import resolve

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import neusight_trace

    target = resolve(device)
    sources = [neusight_trace.read_label(p) for p in neusight_trace.labels()
               if p.stem == label and p.parent.name != folder and "NVIDIA" in p.parent.name]
    with tempfile.TemporaryDirectory() as tmp:
        for source in sources:
            neusight_trace.write_run(source, Path(tmp) / "runs")
        etl.ingest([Path(tmp) / "runs"], Path(tmp) / "wh", prefix=True)
        con = etl.connect(Path(tmp) / "wh")
        totals, backwards = [], []
        for source in sources:
            prepared = forecast_run.prepare(con, f"runs/{source.folder}/{label}")
            predicted = forecast_run.forecast_on(prepared, target).rows[0]["predicted_ns"] / 1e6
            measured = json.loads((neusight_trace.LABELS / source.folder /
                                   f"{label}.json").read_text())
            totals.append(predicted)
            backwards.append(measured["bwall_latency"] * predicted / measured["e2e_latency"])
        con.close()
    if not totals:
        return None, ""
    names = ", ".join(s.gpu.key for s in sources)
    return ({"e2e_latency": statistics.median(totals),
             "bwall_latency": statistics.median(backwards)},
            f"{label} forecast from {names} (median; {min(totals):.1f}-{max(totals):.1f} ms)")


if __name__ == "__main__":
    main()
