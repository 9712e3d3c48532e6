"""Backtest of `etl forecast` on NeuSight's end-to-end labels: the paper's table, ours beside
NeuSight's own.

    .venv/bin/python bench/forecast_backtest.py [--out /tmp/neusight-backtest] [--write]

Every single-GPU label of ../shared/corpus/neusight/scripts/asplos/label (BERT-Large,
GPT-2 Large, GPT-3 XL / 2.7B, OPT-1.3B; training and inference at several batch sizes) is
converted to a Kineto trace of one iteration (bench/neusight_trace.py) and ingested; each
is then forecast, with `etl forecast`'s code, on every other GPU that has a label of the
same configuration, and the predicted iteration compared with that GPU's measured
end-to-end time (the label's JSON). The time model was fitted only on per-op
measurements of the paper's training GPUs (bench/forecast_fit.py); no end-to-end label is
read but as a forecast's input (the source) or its truth (the target).

A pair is in distribution when both GPUs are in the fitting data (A100-PCIE-40GB, P100,
P4, T4, V100), out of it otherwise. NeuSight's errors are its published ones
(scripts/asplos/summary/summary.csv, option ''): one per target GPU and configuration
(NeuSight predicts from the model graph, not from a source GPU); ours for a target and
configuration is the median over its sources.

It also measures, on NeuSight's per-op data (pairs of GPUs that ran the same op shape,
both ≥ 0.1 ms), the per-op error of the methods the labels cannot exercise (wave_scaled:
kernel name and grid alone; bandwidth: a copy's bandwidth ratio, on the elementwise ops),
and, with --write, writes every method's error quantiles to
etl/analysis/forecast/backtest_errors.toml (the forecast's intervals) and the tables to
docs/forecast_backtest.md.
"""
from __future__ import annotations

import argparse
import csv
import datetime
import statistics
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import neusight_ops  # noqa: E402
import neusight_trace  # noqa: E402
from etl.analysis.forecast import model  # noqa: E402
from etl.analysis.forecast.intervals import ERRORS  # noqa: E402
from etl.analysis.forecast.predict import Options, name_work, shape_work  # noqa: E402
from etl.core.gpus import Gpu, by_key  # noqa: E402
from etl.core.op_cost import op_cost  # noqa: E402

ROOT = neusight_trace.ROOT
SUMMARY = neusight_trace.LABELS.parent / "summary" / "summary.csv"
DOC = ROOT / "docs" / "forecast_backtest.md"
TRAINING = {"A100-PCIE-40GB", "P100-PCIE-16GB", "P4", "T4", "V100-PCIE-32GB"}
MODELS = {"bert_large": "BERT-Large", "gpt2_large": "GPT2-Large", "gpt3_xl": "GPT3-XL",
          "gpt3_27": "GPT3-2.7B", "opt_13": "OPT-1.3B"}


@dataclass(frozen=True)
class Case:
    source: str          # catalog keys
    target: str
    config: str          # <model>-<mode>-<seq>-<batch>
    source_ms: float     # the source's measured end-to-end time
    actual_ms: float     # the target's
    predicted_ms: float
    replayed_ms: float   # the source trace's iteration as converted
    peak_ratio_ms: float  # baseline: source time × FP32 peak ratio

    @property
    def error(self) -> float:
        return self.predicted_ms / self.actual_ms - 1.0

    @property
    def in_distribution(self) -> bool:
        return self.source in TRAINING and self.target in TRAINING

    @property
    def baseline_error(self) -> float:
        return self.peak_ratio_ms / self.actual_ms - 1.0


def convert_and_ingest(out: Path) -> tuple[dict[tuple[str, str], neusight_trace.Label], Path]:
    """Every label as a run folder under OUT/runs, ingested into OUT/warehouse."""
    import etl

    runs, warehouse = out / "runs", out / "warehouse"
    found = {}
    for path in neusight_trace.labels():
        label = neusight_trace.read_label(path)
        found[(label.gpu.key, label.config)] = label
        if not (runs / label.folder / label.config / "trace.json").exists():
            neusight_trace.write_run(label, runs)
    results = etl.ingest([runs], warehouse, prefix=True)
    refused = [r for r in results if r.status == "refused"]
    if refused:
        raise SystemExit(f"refused: {refused[0].run_name}: {refused[0].error}")
    return found, warehouse


def run_cases(found: dict[tuple[str, str], neusight_trace.Label], warehouse: Path
              ) -> list[Case]:
    import etl
    from etl.analysis.forecast import run as forecast_run

    con = etl.connect(warehouse)
    cases = []
    by_config: dict[str, list[str]] = defaultdict(list)
    for gpu, config in found:
        by_config[config].append(gpu)
    for (gpu, config), label in sorted(found.items()):
        targets = [t for t in by_config[config] if t != gpu]
        if not targets:
            continue
        prepared = forecast_run.prepare(con, f"runs/{label.folder}/{config}")
        replayed = prepared.recorded and next(iter(prepared.recorded.values())) / 1e6
        for target in targets:
            result = forecast_run.forecast_on(prepared, by_key(target))
            predicted = result.rows[0]["predicted_ns"] / 1e6
            cases.append(Case(gpu, target, config, label.e2e_ms,
                              found[(target, config)].e2e_ms, predicted, float(replayed or 0),
                              label.e2e_ms * _fp32(label.gpu) / _fp32(by_key(target))))
    con.close()
    return cases


def _fp32(gpu: Gpu) -> float:
    return gpu.peak_tflops["fp32"]


def neusight_errors() -> dict[tuple[str, str], tuple[float, float | None]]:
    """(NeuSight's % error, roofline's % error) per (GPU key, config), published."""
    out = {}
    with open(SUMMARY, newline="") as fh:
        for row in csv.DictReader(fh):
            if row["option"] or row["model_name"] not in MODELS:
                continue
            gpu = neusight_trace.trace_name_row(row["device"].replace("_", " "))
            if gpu is None:
                continue
            config = f"{row['model_name']}-{row['mode']}-{row['seqlen']}-{row['batch']}"
            roof = float(row["roofline_all_e2e_err"]) if row["roofline_all_e2e_err"] else None
            out[(gpu.key, config)] = (float(row["neusight_all_e2e_err"]), roof)
    return out


# ---- per-op errors of the methods ---------------------------------------------------------

def op_pairs(min_s: float = 1e-4) -> dict[str, list[tuple[float, bool]]]:
    """Signed relative errors per method on NeuSight's per-op data: every pair of GPUs that
    ran the same op shape, both at least `min_s`; (error, in distribution)."""
    rows = [r for r in neusight_ops.read(devices=None) if r.latency_s >= min_s]
    same: dict[tuple[str, str, tuple[int, ...]], list[neusight_ops.OpRow]] = defaultdict(list)
    for r in rows:
        same[(r.file, r.op, r.shape)].append(r)
    out: dict[str, list[tuple[float, bool]]] = defaultdict(list)
    for group in same.values():
        for s in group:
            for t in group:
                if s.gpu.key == t.gpu.key:
                    continue
                inside = s.gpu.key in TRAINING and t.gpu.key in TRAINING
                for method, work in _method_works(s).items():
                    try:
                        predicted = s.latency_s * model.ratio(s.gpu, t.gpu, work)
                    except model.PrecisionError:
                        continue
                    out[method].append((predicted / t.latency_s - 1.0, inside))
    return out


def _method_works(row: neusight_ops.OpRow) -> dict[str, model.Work]:
    name, dims, types = neusight_ops.op_signature(row.file, row.op, dict(zip(
        ("B", "M", "N", "K") if row.file in ("bmm", "linear") else ("B", "H"), row.shape)))
    import json

    cost = op_cost(name, json.dumps(dims), types)
    works = {"shape": shape_work(cost, row.kernel, row.work.blocks, Options()),
             "wave_scaled": name_work(row.kernel, row.work.blocks, Options())}
    if row.file == "elem":
        works["bandwidth"] = model.Work("copy", False, "fp32", None, None, row.work.blocks)
    return works


# ---- tables ------------------------------------------------------------------------------

def med(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def pct(x: float | None) -> str:
    return "" if x is None or x != x else f"{100 * x:.1f}"


def quantiles(errors: list[float]) -> tuple[float, float]:
    ordered = sorted(errors)
    cut = statistics.quantiles(ordered, n=10, method="inclusive")
    return cut[0], cut[-1]


def summary_lines(cases: list[Case], published: dict[tuple[str, str], tuple[float, float | None]]
                  ) -> list[str]:
    errors = [abs(c.error) for c in cases]
    inside = [abs(c.error) for c in cases if c.in_distribution]
    outside = [abs(c.error) for c in cases if not c.in_distribution]
    per_target: dict[str, list[float]] = defaultdict(list)
    for c in cases:
        per_target[c.target].append(abs(c.error))
    worst = max(per_target, key=lambda t: med(per_target[t]))
    wins, compared = _versus_neusight(cases, published)
    v100 = [abs(c.error) for c in cases if c.source == "V100-PCIE-32GB" and c.target in
            ("H100-SXM5-80GB", "A100-PCIE-40GB", "A100-PCIE-80GB", "L4", "T4", "MI210")]
    v100_base = [abs(c.baseline_error) for c in cases if c.source == "V100-PCIE-32GB" and
                 c.target in ("H100-SXM5-80GB", "A100-PCIE-40GB", "A100-PCIE-80GB", "L4",
                              "T4", "MI210")]
    return [
        "| figure | value | target |",
        "|---|---|---|",
        f"| (source, target, configuration) pairs | {len(cases)} | |",
        f"| median abs. error, all pairs | {pct(med(errors))}% | ≤ 10% |",
        f"| in distribution (both GPUs fitted) / out | {pct(med(inside))}% ({len(inside)}) / "
        f"{pct(med(outside))}% ({len(outside)}) | |",
        f"| worst target GPU's median | {pct(med(per_target[worst]))}% ({worst}) | ≤ 20% |",
        f"| below NeuSight's published error | {wins} of {compared} (target, configuration) "
        "| at least half |",
        f"| V100 → H100, A100, L4, T4, MI210: ours / V100 time × FP32 peak ratio | "
        f"{pct(med(v100))}% / {pct(med(v100_base))}% | NeuSight 7.9%, roofline ~37% |",
        f"| baseline: source time × FP32 peak ratio, all pairs | "
        f"{pct(med([abs(c.baseline_error) for c in cases]))}% | |"]


def _versus_neusight(cases: list[Case], published: dict[tuple[str, str], tuple[float, float | None]]
                     ) -> tuple[int, int]:
    ours: dict[tuple[str, str], list[float]] = defaultdict(list)
    for c in cases:
        ours[(c.target, c.config)].append(abs(c.error))
    keys = [k for k in ours if k in published]
    return sum(1 for k in keys if 100 * med(ours[k]) < published[k][0]), len(keys)


def target_lines(cases: list[Case], published: dict[tuple[str, str], tuple[float, float | None]]
                 ) -> list[str]:
    lines = ["| target GPU | model | mode | batch | sources | ours: median (min–max) % | "
             "NeuSight % | roofline % (NeuSight's) | FP32 peak ratio % |",
             "|---|---|---|---|---|---|---|---|---|"]
    group: dict[tuple[str, str], list[Case]] = defaultdict(list)
    for c in cases:
        group[(c.target, c.config)].append(c)
    for (target, config), members in sorted(group.items()):
        model_name, mode, _, batch = config.split("-")
        errs = [abs(c.error) for c in members]
        ns = published.get((target, config))
        lines.append(f"| {target} | {MODELS.get(model_name, model_name)} | {mode} | {batch} | "
                     f"{len(members)} | {pct(med(errs))} ({pct(min(errs))}–{pct(max(errs))}) | "
                     f"{'' if ns is None else f'{ns[0]:.1f}'} | "
                     f"{'' if ns is None or ns[1] is None else f'{ns[1]:.1f}'} | "
                     f"{pct(med([abs(c.baseline_error) for c in members]))} |")
    return lines


def per_target_lines(cases: list[Case]) -> list[str]:
    lines = ["| target GPU | pairs | median abs. error % | in distribution | FP32 peak ratio % |",
             "|---|---|---|---|---|"]
    group: dict[str, list[Case]] = defaultdict(list)
    for c in cases:
        group[c.target].append(c)
    for target, members in sorted(group.items()):
        lines.append(f"| {target} | {len(members)} | {pct(med([abs(c.error) for c in members]))} "
                     f"| {'yes' if target in TRAINING else 'no'} | "
                     f"{pct(med([abs(c.baseline_error) for c in members]))} |")
    return lines


def worst_lines(cases: list[Case], count: int = 12) -> list[str]:
    lines = ["| source → target | configuration | predicted ms | measured ms | error % |",
             "|---|---|---|---|---|"]
    for c in sorted(cases, key=lambda c: -abs(c.error))[:count]:
        lines.append(f"| {c.source} → {c.target} | {c.config} | {c.predicted_ms:.1f} | "
                     f"{c.actual_ms:.1f} | {100 * c.error:+.1f} |")
    return lines


def reconcile_lines(found: dict[tuple[str, str], neusight_trace.Label], cases: list[Case]
                    ) -> list[str]:
    ratios: dict[str, list[float]] = defaultdict(list)
    calibrated: dict[str, list[float]] = defaultdict(list)
    replayed = {(c.source, c.config): c.replayed_ms for c in cases}
    for (gpu, config), label in found.items():
        ratios[gpu].append(neusight_trace.span(neusight_trace.convert(label)) / 1e6
                           / label.e2e_ms)
        if (gpu, config) in replayed:
            calibrated[gpu].append(replayed[(gpu, config)] / label.e2e_ms)
    lines = ["| GPU | labels | before calibration: converted iteration / measured end-to-end, "
             "median (min–max) | after: the trace's measured window / end-to-end |",
             "|---|---|---|---|"]
    for gpu, values in sorted(ratios.items()):
        after = calibrated.get(gpu, [])
        lines.append(f"| {gpu} | {len(values)} | {med(values):.3f} ({min(values):.3f}–"
                     f"{max(values):.3f}) | {med(after):.4f} |")
    return lines


def method_lines(ops: dict[str, list[tuple[float, bool]]], cases: list[Case]) -> list[str]:
    lines = ["| method | level | cases | median abs. error % (in / out of distribution) | "
             "q10 % | q90 % |", "|---|---|---|---|---|---|"]
    e2e = [c.error for c in cases]
    q10, q90 = quantiles(e2e)
    lines.append(f"| shape | end to end (labels) | {len(e2e)} | {pct(med([abs(e) for e in e2e]))} "
                 f"({pct(med([abs(c.error) for c in cases if c.in_distribution]))} / "
                 f"{pct(med([abs(c.error) for c in cases if not c.in_distribution]))}) | "
                 f"{pct(q10)} | {pct(q90)} |")
    for method, values in sorted(ops.items()):
        errs = [e for e, _ in values]
        q10, q90 = quantiles(errs)
        lines.append(f"| {method} | per op (NeuSight's op data) | {len(errs)} | "
                     f"{pct(med([abs(e) for e in errs]))} "
                     f"({pct(med([abs(e) for e, i in values if i]))} / "
                     f"{pct(med([abs(e) for e, i in values if not i]))}) | {pct(q10)} | "
                     f"{pct(q90)} |")
    return lines


def errors_toml(ops: dict[str, list[tuple[float, bool]]], cases: list[Case]) -> str:
    lines = ["# The forecast's method errors: q10 and q90 of predicted / measured - 1. Written",
             "# by bench/forecast_backtest.py --write: do not edit by hand, rerun.",
             f'# {datetime.date.today().isoformat()}; shape from {len(cases)} end-to-end pairs '
             "of NeuSight's labels, the others from its per-op data", ""]
    q10, q90 = quantiles([c.error for c in cases])
    lines += ["[method.shape]", 'level = "end to end"', f"cases = {len(cases)}",
              f"q10 = {q10:.4f}", f"q90 = {q90:.4f}", ""]
    for method in ("wave_scaled", "bandwidth"):
        errs = [e for e, _ in ops.get(method, [])]
        q10, q90 = quantiles(errs)
        lines += [f"[method.{method}]", 'level = "per op"', f"cases = {len(errs)}",
                  f"q10 = {q10:.4f}", f"q90 = {q90:.4f}", ""]
    # no public cross-GPU data has ncu counters: the shape method's per-op errors (the
    # same roofline fraction, from shapes instead of counters) stand in for ncu's
    errs = [e for e, _ in ops.get("shape", [])]
    q10, q90 = quantiles(errs)
    lines += ["[method.ncu]", 'level = "per op, the shape method\'s (no cross-GPU ncu data)"',
              f"cases = {len(errs)}", f"q10 = {q10:.4f}", f"q90 = {q90:.4f}", ""]
    return "\n".join(lines)


def _write_cases(path: Path, cases: list[Case]) -> None:
    """Every pair as a CSV row (signed errors), for looking further."""
    with open(path, "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["source", "target", "config", "source_ms", "actual_ms",
                         "predicted_ms", "error", "peak_ratio_error", "in_distribution"])
        writer.writerows([c.source, c.target, c.config, c.source_ms, c.actual_ms,
                          c.predicted_ms, c.error, c.baseline_error, c.in_distribution]
                         for c in cases)


def document(sections: dict[str, list[str]]) -> str:
    head = ["# Forecast backtest: NeuSight's labels",
            "",
            "Written by `bench/forecast_backtest.py --write` (do not edit by hand). How it is",
            "made and what the numbers mean: docs/forecast.md. Errors are |predicted /",
            "measured − 1| of the iteration time, in %.", ""]
    body = []
    for title, lines in sections.items():
        body += [f"## {title}", ""] + lines + [""]
    return "\n".join(head + body)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path("/tmp/neusight-backtest"))
    parser.add_argument("--write", action="store_true",
                        help="write backtest_errors.toml and docs/forecast_backtest.md")
    args = parser.parse_args()
    started = time.process_time()
    found, warehouse = convert_and_ingest(args.out)
    cases = run_cases(found, warehouse)
    published = neusight_errors()
    ops = op_pairs()
    sections = {
        "Summary": summary_lines(cases, published),
        "Per target GPU": per_target_lines(cases),
        "Per target GPU, model and batch (ours beside NeuSight's published errors)":
            target_lines(cases, published),
        "Worst cases": worst_lines(cases),
        "Methods (the forecast's intervals)": method_lines(ops, cases),
        "Converter: the converted trace's iteration against the label's end-to-end time":
            reconcile_lines(found, cases)}
    text = document(sections)
    print(text)
    _write_cases(args.out / "cases.csv", cases)
    print(f"\n{time.process_time() - started:.1f} CPU s in this process")
    if args.write:
        DOC.write_text(text)
        ERRORS.write_text(errors_toml(ops, cases))
        print(f"wrote {DOC} and {ERRORS}")


if __name__ == "__main__":
    main()
