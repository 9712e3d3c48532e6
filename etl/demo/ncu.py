"""A SYNTHETIC Nsight Compute raw-page export for a demo run (generated, not measured).

Profiles, on paper, one iteration of the demo trace the way `ncu --page raw --csv` would
print it: the kernels launched in that step, in launch order, with counters drawn so that
tensor-core kernels (xmma / gemm names) use the tensor pipe and the others do not. It lets
`make demo` show all four levels on a machine without a GPU.
"""
from __future__ import annotations

import csv
import json
import random
from pathlib import Path
from typing import Any

SM_COUNT = 108
HEAD = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream",
        "Block Size", "Grid Size", "Device", "CC", "device__attribute_multiprocessor_count",
        "gpu__time_duration.sum", "smsp__cycles_elapsed.sum", "smsp__cycles_active.sum",
        "smsp__inst_issued.sum", "smsp__pipe_tensor_cycles_active.sum",
        "smsp__inst_executed_pipe_tensor.sum"]
UNITS = [""] * 12 + ["nsecond", "cycle", "cycle", "inst", "cycle", "inst"]


def write_ncu_export(trace_path: Path, dest: Path, step: int, seed: str) -> None:
    events = json.loads(trace_path.read_text(encoding="utf-8"))["traceEvents"]
    rng = random.Random(seed)
    with open(dest, "w", newline="", encoding="utf-8") as fh:
        fh.write("# SYNTHETIC ncu --csv --page raw export written by `etl demo`; not measured\n")
        writer = csv.writer(fh, quoting=csv.QUOTE_ALL, lineterminator="\n")
        writer.writerows([HEAD, UNITS])
        for ncu_id, kernel in enumerate(_step_kernels(events, step)):
            writer.writerow(_row(ncu_id, kernel, rng))


def _step_kernels(events: list[dict[str, Any]], step: int) -> list[dict[str, Any]]:
    span = next(e for e in events if e.get("name") == f"ProfilerStep#{step}")
    start, end = float(span["ts"]), float(span["ts"]) + float(span["dur"])
    launches = {e["args"]["correlation"]: float(e["ts"]) for e in events
                if e.get("cat") == "cuda_runtime" and start <= float(e["ts"]) <= end
                and "correlation" in e.get("args", {})}
    kernels = [e for e in events if e.get("cat") == "kernel"
               and e["args"].get("correlation") in launches]
    return sorted(kernels, key=lambda k: launches[k["args"]["correlation"]])


def _row(ncu_id: int, kernel: dict[str, Any], rng: random.Random) -> list[Any]:
    args = kernel["args"]
    dur_ns = round(float(kernel["dur"]) * 1000)
    elapsed = max(1, round(dur_ns * 1.41 * SM_COUNT * 4))  # 1.41 GHz, 4 SMSPs per SM
    tensor = any(t in kernel["name"] for t in ("xmma", "gemm", "wgrad", "dgrad"))
    active = rng.uniform(0.80, 0.98) if tensor else rng.uniform(0.4, 0.9)
    issue = active * rng.uniform(0.25, 0.55)
    tc_active = active * rng.uniform(0.3, 0.7) if tensor else 0.0
    tc_inst = issue * rng.uniform(0.05, 0.15) if tensor else 0.0
    dims = ["({}, {}, {})".format(*args.get(k, [1, 1, 1])) for k in ("block", "grid")]
    return [ncu_id, 1, "python", "synthetic-host", kernel["name"], 1, 7, *dims, 0, "8.0",
            SM_COUNT, dur_ns, elapsed, round(active * elapsed), round(issue * elapsed),
            round(tc_active * elapsed), round(tc_inst * elapsed)]
