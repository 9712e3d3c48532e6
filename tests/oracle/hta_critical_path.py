"""HTA's critical path of one window of a trace folder, computed by HTA 0.6 (traceinsight)
in a throwaway Python (tests/oracle/hta_env.py).

`critical_path(python, trace_dir, annotation, instance)` returns the GPU activities on
HTA's path (correlation id, name) and its time by `bound_by` (µs). HTA builds its graph
with CRITICAL_PATH_ADD_ZERO_WEIGHT_LAUNCH_EDGE=1, as its own tests do.
"""
from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

SCRIPT = r"""
import json, logging, os, sys, warnings
logging.disable(logging.CRITICAL)
warnings.simplefilter("ignore")
os.environ["CRITICAL_PATH_ADD_ZERO_WEIGHT_LAUNCH_EDGE"] = "1"
from hta.trace_analysis import TraceAnalysis
trace_dir, annotation, instance = sys.argv[1], sys.argv[2], sys.argv[3]
t = TraceAnalysis(trace_dir=trace_dir)
graph, ok = t.critical_path_analysis(
    rank=0, annotation=annotation, instance_id=None if instance == "none" else int(instance))
trace = t.t.get_trace(0)
names = t.t.symbol_table.get_sym_table()
gpu = []
for e in sorted(graph.critical_path_events_set):
    row = trace.loc[e]
    if int(row["stream"]) >= 0 and not names[int(row["name"])].endswith(("Sync", "Wait Event")):
        gpu.append([int(row["correlation"]), names[int(row["name"])]])
breakdown = graph.get_critical_path_breakdown()
print(json.dumps({"ok": bool(ok), "nodes": len(graph.critical_path_nodes), "gpu": gpu,
                  "bound_us": {str(k): float(v) for k, v in
                               breakdown.groupby("bound_by")["duration"].sum().items()}}))
"""


def critical_path(python: str, trace_dir: Path, annotation: str, instance: int | None
                  ) -> dict[str, Any]:
    done = subprocess.run([python, "-c", SCRIPT, str(trace_dir), annotation,
                           "none" if instance is None else str(instance)],
                          capture_output=True, text=True, timeout=600, check=True)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))
