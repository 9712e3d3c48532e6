"""HTA's own figures for a trace folder, computed by Holistic Trace Analysis in a Python
that has it (a throwaway venv: the project does not depend on HTA).

    python -m venv /tmp/hta-venv && /tmp/hta-venv/bin/pip install HolisticTraceAnalysis
    HTA_PYTHON=/tmp/hta-venv/bin/python pytest tests/views/test_hta_agreement.py

`figures(python, trace_dir)` runs SCRIPT there and returns, per rank: HTA's temporal
breakdown (µs), comm/comp overlap (%), idle time breakdown per stream and category (µs,
HTA's default consecutive_kernel_delay) and the number of launch-stat rows and short
kernels. HTA keeps the trace's time unit (µs for Kineto JSON) and drops the last
ProfilerStep when it reads a trace.
"""
from __future__ import annotations

import json
import subprocess
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
