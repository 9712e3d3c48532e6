"""HTA's own figures for a trace folder, computed by Holistic Trace Analysis in a Python
that has it (a throwaway venv: the project does not depend on HTA).

    python -m venv /tmp/hta-venv && /tmp/hta-venv/bin/pip install HolisticTraceAnalysis
    HTA_PYTHON=/tmp/hta-venv/bin/python pytest tests/views/test_hta_agreement.py

`figures(python, trace_dir)` runs SCRIPT there and returns, per rank: HTA's temporal
breakdown (µs), comm/comp overlap (%), idle time breakdown per stream and category (µs,
HTA's default consecutive_kernel_delay) and the number of launch-stat rows and short
kernels. HTA keeps the trace's time unit (µs for Kineto JSON) and, when it reads a trace,
leaves out the kernels launched after a cut-off: the last ProfilerStep, or part of it, or
nothing (`hta_kept_steps` says which steps it keeps).
"""
from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCRIPT = r"""
import json, logging, sys, warnings
logging.disable(logging.CRITICAL)
warnings.simplefilter("ignore")
from hta.trace_analysis import TraceAnalysis
t = TraceAnalysis(trace_dir=sys.argv[1])
out = {}
temporal = t.get_temporal_breakdown(visualize=False)
overlap = t.get_comm_comp_overlap(visualize=False)
for _, row in temporal.iterrows():
    rank = int(row["rank"])
    out[rank] = {"compute_us": float(row["compute_time(us)"]),
                 "non_compute_us": float(row["non_compute_time(us)"]),
                 "idle_us": float(row["idle_time(us)"]),
                 "kernel_us": float(row["kernel_time(us)"])}
for _, row in overlap.iterrows():
    out[int(row["rank"])]["overlap_pctg"] = float(row["comp_comm_overlap_pctg"])
for rank in list(out):
    idle, _ = t.get_idle_time_breakdown(ranks=[rank], visualize=False)
    out[rank]["idle"] = [[int(r["stream"]), str(r["idle_category"]), float(r["idle_time"])]
                         for _, r in idle.iterrows()]
    stats = t.get_cuda_kernel_launch_stats(ranks=[rank], visualize=False).get(rank)
    out[rank]["launches"] = 0 if stats is None else int(len(stats))
    out[rank]["short"] = 0 if stats is None else int(
        ((stats["gpu_duration"] < stats["cpu_duration"])
         & (stats["cpu_duration"] <= 50)).sum())
print(json.dumps(out))
"""


def available(python: str) -> str | None:
    """None when `python` can import hta, else why not."""
    try:
        done = subprocess.run([python, "-c", "import hta"], capture_output=True, text=True,
                              timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{python}: {exc}"
    return None if done.returncode == 0 else f"{python} cannot import hta"


def figures(python: str, trace_dir: Path) -> dict[int, dict[str, Any]]:
    done = subprocess.run([python, "-c", SCRIPT, str(trace_dir)], capture_output=True,
                          text=True, timeout=900, check=True)
    return {int(k): v for k, v in json.loads(done.stdout.strip().splitlines()[-1]).items()}


@dataclass(frozen=True)
class KeptSteps:
    """The steps of one source that HTA 0.5 measures: `whole` it keeps entirely, `part`
    it keeps in part (the kernels launched before its cut-off)."""

    whole: frozenset[int]
    part: frozenset[int]


def hta_kept_steps(con: Any, run: str) -> dict[int | None, KeptSteps]:
    """Per rank of `run` in a warehouse, the steps HTA 0.5 keeps when it reads the trace
    (hta/common/trace.py, Trace._filter_irrelevant_gpu_kernels):
    - with at most one distinct ProfilerStep name in the trace, it keeps everything;
    - else it keeps the CPU events that start before the latest start of a ProfilerStep
      event it counts as a CPU event, and the GPU kernels they launched. A GPU-side
      ProfilerStep annotation (gpu_user_annotation, no correlation) counts as a CPU
      event: where the GPU annotates the last step, the cut-off is its start on the GPU,
      after the host began that step, so HTA keeps part of the last step, not none.
    A step is kept whole when its host span ends by the cut-off, in part when it
    straddles it."""
    names = {n for (n,) in con.execute(
        "SELECT DISTINCT name FROM host_events JOIN runs USING (run_id) WHERE run_name = ? "
        "AND name LIKE '%ProfilerStep%' UNION SELECT DISTINCT name FROM kernels JOIN runs "
        "USING (run_id) WHERE run_name = ? AND name LIKE '%ProfilerStep%' AND "
        "correlation_id IS NULL", [run, run]).fetchall()}
    steps = con.execute(
        "SELECT i.source_id, i.rank, i.iteration, i.start_ns, i.end_ns, (SELECT max(ts) FROM "
        "(SELECT ts_ns AS ts FROM host_events AS h WHERE h.run_id = i.run_id AND h.source_id "
        "= i.source_id AND h.name LIKE '%ProfilerStep%' UNION ALL SELECT ts_ns FROM kernels "
        "AS k WHERE k.run_id = i.run_id AND k.source_id = i.source_id AND k.name LIKE "
        "'%ProfilerStep%' AND k.correlation_id IS NULL)) AS cutoff FROM iterations AS i JOIN "
        "runs AS r ON r.run_id = i.run_id WHERE r.run_name = ? AND i.iteration IS NOT NULL",
        [run]).fetchall()
    kept: dict[int | None, tuple[set[int], set[int]]] = {}
    for _source, rank, iteration, start, end, cutoff in steps:
        whole, part = kept.setdefault(rank, (set(), set()))
        if len(names) <= 1 or end <= cutoff:
            whole.add(iteration)
        elif start < cutoff:
            part.add(iteration)
    return {rank: KeptSteps(frozenset(w), frozenset(p)) for rank, (w, p) in kept.items()}
