"""What the replay costs: `etl critical-path` and `etl whatif` beside the ingest of the same
trace, and beside HTA's critical path (the peer) on the same files, in one run.

    .venv/bin/python bench/replay_bench.py [--mb 50] [--out /tmp/replay-bench] [--hta PYTHON]

The trace is HTA's own critical-path test trace (../shared/corpus, hta/critical_path/
alexnet: 7 ProfilerSteps of AlexNet with cuda_sync events) repeated to --mb megabytes by
bench/make_trace.py. Every figure is a whole process (start-up included) timed from
outside: CPU seconds (user + system of the process and its children) and wall seconds.
HTA computes the path of one annotation instance per call (critical_path_analysis(
annotation, instance_id): here one forward pass, as its own test does); ours computes every
iteration window's of the run, so the per-window figure is the one to compare. --hta names
a Python with traceinsight (HTA 0.6) installed; by default the tests' throwaway one
(tests/oracle/hta_env.py) if it exists, else HTA is skipped.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ETL = [sys.executable, "-c", "import sys; sys.argv[0] = 'etl'; from etl.cli import main; main()"]
SOURCE = ROOT.parent / "shared" / "corpus" / "hta" / "critical_path" / "alexnet"
# the annotation HTA's own critical-path test walks (one forward pass of the model)
ANNOTATION = "[param|pytorch.model.alex_net|0|0|0|measure|forward]"
HTA_SCRIPT = r"""
import logging, os, sys, warnings
logging.disable(logging.CRITICAL); warnings.simplefilter("ignore")
os.environ["CRITICAL_PATH_ADD_ZERO_WEIGHT_LAUNCH_EDGE"] = "1"
from hta.trace_analysis import TraceAnalysis
t = TraceAnalysis(trace_dir=sys.argv[1])
graph, ok = t.critical_path_analysis(rank=0, annotation=sys.argv[2], instance_id=int(sys.argv[3]))
print(len(graph.critical_path_nodes), ok)
"""


def timed(command: list[str]) -> tuple[float, float]:
    """(CPU seconds of the finished command and its children, wall seconds)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command[:4])}... failed: {done.stderr.strip()[-400:]}")
    return (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime), wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=int, default=50)
    parser.add_argument("--out", type=Path, default=Path("/tmp/replay-bench"))
    cache = Path(os.environ.get("ETL_CACHE_DIR", "/tmp/etl-test-cache-0"))
    parser.add_argument("--hta", default=str(cache / "oracles" / "traceinsight--0.6.1"
                                             / "bin" / "python"))
    args = parser.parse_args()
    shutil.rmtree(args.out, ignore_errors=True)
    run = args.out / "runs" / "alexnet"
    run.mkdir(parents=True)
    [trace] = SOURCE.glob("*.json.gz")
    subprocess.run([sys.executable, str(ROOT / "bench" / "make_trace.py"), str(trace),
                    str(run / "rank0.json"), "--mb", str(args.mb)], check=True, cwd=ROOT)
    size = (run / "rank0.json").stat().st_size / 1e6
    wh = str(args.out / "wh")
    rows = [("etl ingest", *timed([*ETL, "ingest", str(args.out / "runs"), "--warehouse", wh]))]
    rows.append(("etl critical-path (every iteration)",
                 *timed([*ETL, "critical-path", "--warehouse", wh])))
    rows.append(("etl whatif --scale all:0.5 (every iteration)",
                 *timed([*ETL, "whatif", "alexnet", "--scale", "all:0.5", "--warehouse", wh,
                         "--format", "csv"])))
    iterations = _iterations(wh)
    if Path(args.hta).exists():
        rows.append(("HTA critical_path_analysis (one iteration)",
                     *timed([args.hta, "-c", HTA_SCRIPT, str(run), ANNOTATION, "1"])))
    print(f"trace: {size:.0f} MB, {iterations} iterations (alexnet x {args.mb} MB)")
    print("| command | CPU s | wall s | CPU s per iteration |")
    print("|---|---|---|---|")
    for name, cpu, wall in rows:
        per = cpu if "one iteration" in name or name == "etl ingest" else cpu / iterations
        print(f"| {name} | {cpu:.1f} | {wall:.1f} | {per:.2f} |")
    ours = rows[1][1] / iterations
    if len(rows) > 3:
        print(f"\ncritical path per iteration: ours / HTA's = {ours / rows[3][1]:.3f}")
    print(f"critical path of every iteration / ingest: {rows[1][1] / rows[0][1]:.2f}")


def _iterations(wh: str) -> int:
    out = subprocess.run([*ETL, "query", "--warehouse", wh, "--format", "json",
                          "SELECT count(*) AS n FROM gpu_utilization"],
                         capture_output=True, text=True, cwd=ROOT, check=True).stdout
    return int(json.loads(out)[0]["n"])


if __name__ == "__main__":
    main()
