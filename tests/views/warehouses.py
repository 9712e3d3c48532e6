"""The test warehouses every view is run over: tiny edge-case runs, each named for its case,
and the corpus (every corpus trace, the ncu exports alone and beside a trace, and a real
trace with a matched raw page). tests/views/conftest.py ingests each once per session.
"""
from __future__ import annotations

import csv
import decimal
import gzip
import json
from collections.abc import Collection
from pathlib import Path
from typing import Any

from tests.conftest import copy_corpus_run, corpus_path, event, kernel, launch, step, write_trace

SM_COUNT = 108
NCU_HEAD = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream",
            "Block Size", "Grid Size", "Device", "CC", "device__attribute_multiprocessor_count",
            "gpu__time_duration.sum"]
# per kernel: elapsed, active, issued, tensor-pipe active, tensor instructions (of elapsed)
COUNTERS = {"smsp__cycles_elapsed.sum": 1.0, "smsp__cycles_active.sum": 0.8,
            "smsp__inst_issued.sum": 0.7, "smsp__pipe_tensor_cycles_active.sum": 0.3,
            "smsp__inst_executed_pipe_tensor.sum": 0.05}
NO_ISSUE_SLOTS = [c for c in COUNTERS if c != "smsp__inst_issued.sum"]
NAMES = ("volta_gemm_128x64", "vectorized_elementwise_kernel", "reduce_kernel")


# ---- the edge cases ------------------------------------------------------------------------

def steps_with_kernels(dur_ns: int, steps: int = 2, device: int = 0) -> list[dict[str, Any]]:
    """`steps` ProfilerSteps of 100 µs, each launching NAMES once on `device`."""
    events: list[dict[str, Any]] = []
    for n in range(steps):
        start = n * 100_000
        events.append(step(n + 1, start, 100_000))
        for i, name in enumerate(NAMES):
            corr = n * 10 + i + 1
            events.append(launch(corr, start + 1_000 + i * 2_000))
            k = kernel(corr, start + 10_000 + i * 20_000, dur_ns, device=device, name=name)
            k["args"].update(grid=[64 * (i + 1), 1, 1], block=[128, 1, 1])
            events.append(k)
    return events


def write_ncu(path: Path, counters: list[str], dur_ns: int) -> None:
    """A raw-page export of the first step's kernels (NAMES in launch order)."""
    with open(path, "w", newline="") as fh:
        writer = csv.writer(fh, quoting=csv.QUOTE_ALL, lineterminator="\n")
        writer.writerow(NCU_HEAD + counters)
        writer.writerow([""] * 12 + ["nsecond"] + ["cycle"] * len(counters))
        for i, name in enumerate(NAMES):
            elapsed = 1_000_000
            writer.writerow([i, 1, "python", "h", name, 1, 7, "(128, 1, 1)",
                             f"({64 * (i + 1)}, 1, 1)", 0, "8.0", SM_COUNT, dur_ns,
                             *[round(COUNTERS[c] * elapsed) for c in counters]])


def write_run(runs: Path, name: str, events: list[dict[str, Any]], **header: Any) -> Path:
    folder = runs / name
    write_trace(folder / "trace.json", events, **header)
    # a model of its own: run_comparison compares runs of one model only
    (folder / "run.toml").write_text(f'model = "{name}"\nbatch_size = 8\n')
    return folder


def write_edge_runs(runs: Path) -> None:
    write_run(runs, "no_kernels", [step(1, 0, 100_000), event(name="aten::add", ts=1_000,
                                                                dur=5_000)])
    write_run(runs, "zero_gpu_time", steps_with_kernels(dur_ns=0))
    # no issue-slot counter; step 2 has no matched kernel (ncu profiled step 1 only)
    subset = write_run(runs, "ncu_counter_subset", steps_with_kernels(dur_ns=5_000))
    write_ncu(subset / "ncu.csv", NO_ISSUE_SLOTS, dur_ns=5_000)
    zero = write_run(runs, "ncu_zero_gpu_time", steps_with_kernels(dur_ns=0))
    write_ncu(zero / "ncu.csv", list(COUNTERS), dur_ns=0)
    devices = [{"id": i, "name": "A100", "numSms": SM_COUNT, "computeMajor": 8,
                "computeMinor": 0} for i in range(3)]
    idle = [*steps_with_kernels(dur_ns=5_000),
            kernel(90, 50_000, 0, device=1, cat="gpu_memcpy", name="Memcpy HtoD")]
    write_run(runs, "idle_devices", idle, deviceProperties=devices)  # 1: a 0 ns copy, 2: nothing


# ---- the corpus ----------------------------------------------------------------------------

def write_corpus_runs(runs: Path, skip: Collection[str] = ()) -> None:
    """Every corpus trace of test_corpus (but those named in `skip`), the ncu exports (alone
    and beside a trace), and the levels case of test_levels_rollup (a real trace with a
    matched raw page)."""
    from tests.load.test_corpus import RUNS
    from tests.views.test_levels_rollup import STEP, TRACE, ratios, step_kernels, write_raw_page

    for name, parts in RUNS.items():
        if name not in skip:
            copy_corpus_run(corpus_path(*parts), runs, name)
    for export in sorted(corpus_path("ncu").iterdir()):
        if export.suffix in (".csv", ".ncu-rep"):
            copy_corpus_run(export, runs, "ncu_" + export.stem.replace(".", "_"))
    both = copy_corpus_run(corpus_path("ncu", "a100_mistic_ilpProf.ncu-rep"), runs, "with_trace")
    (both / "trace.json.gz").symlink_to(corpus_path("hta", "nccl_parser_config",
                                                     "nccl_data.json.gz"))
    levels = runs / "levels"
    levels.mkdir()
    (levels / "trace.json.gz").symlink_to(corpus_path(*TRACE))
    with gzip.open(corpus_path(*TRACE), "rt") as fh:
        kernels = step_kernels(json.load(fh, parse_float=decimal.Decimal), STEP)
    write_raw_page(levels / "ncu_raw.csv", kernels, ratios(len(kernels)))
    (levels / "run.toml").write_text("batch_size = 32\n")
