"""Query cost of the trace-breakdown views for one run of a 1 GB Kineto trace, compacted.

Issue #19 asks every view of sql/views/breakdown/ (and op_flops, mfu) to answer in under
1 s for one run of a 1 GB trace on a compacted warehouse; gpu_utilization is printed
too. This builds that warehouse once (bench/.cache): a 1 GB trace made by
bench/make_trace.py from the corpus (as bench/ingest_bench.py does), `etl ingest`, then
`etl compact`. It then runs, for each view,

  SELECT * FROM <view> WHERE run_name = '<the run>'             (the rows, as Arrow)
  SELECT count(*) FROM <view> WHERE run_name = '<the run>'

in a new process on a read-only connection of warehouse.duckdb (as `duckdb -readonly`
has), the warehouse's files evicted from the page cache first (cold), then again on the
same connection (warm, the median of --repeat). It prints wall seconds, the CPU seconds of
the process during the query (user + system, all DuckDB threads: the figure to trust on a
shared machine) and the process's peak RSS, and the load average. Asserts nothing.

    python bench/breakdown_bench.py                 # 1 GB trace
    python bench/breakdown_bench.py --mb 100 --views temporal_breakdown
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from ingest_bench import CACHE, make_trace  # noqa: E402
from query_bench import evict  # noqa: E402

VIEWS = ("kernel_breakdown", "temporal_breakdown", "idle_breakdown", "comm_overlap",
         "stragglers", "launch_stats", "queue_length", "memcpy_bandwidth", "op_flops", "mfu",
         "gpu_utilization")
RUN = "run"  # make_trace writes CACHE/trace-<size>/run/rank1.json

TIMER = r"""
import json, resource, sys, time
import duckdb
con = duckdb.connect(sys.argv[1], read_only=True)
con.execute("SET enable_progress_bar = false")
def cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime
out = []
for _ in range(1 + int(sys.argv[3])):
    wall, used = time.perf_counter(), cpu()
    rows = con.execute(sys.argv[2]).to_arrow_table().num_rows
    out.append({"wall": time.perf_counter() - wall, "cpu": cpu() - used, "rows": rows})
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"runs": out, "peak_mib": peak}))
"""


def warehouse_of(mb: int) -> Path:
    """The compacted warehouse of one run of an `mb` MB trace, built once. A lone run is
    never compacted: the 2026-11-25 figures came from this run ingested beside the 16 hta
    corpus runs (one folder each), then `etl compact` and garbage collection."""
    root = CACHE / f"breakdown-{mb}MB"
    if (root / "compacted").exists():
        return root
    shutil.rmtree(root, ignore_errors=True)
    trace = make_trace(mb)
    etl = [sys.executable, "-m", "etl.cli"]
    subprocess.run([*etl, "ingest", str(trace.parent.parent), "--warehouse", str(root),
                    "--jobs", "2"], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    subprocess.run([*etl, "compact", "--warehouse", str(root)], cwd=ROOT, check=True)
    subprocess.run([*etl, "views", "--warehouse", str(root)], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL)
    (root / "compacted").touch()
    return root


def measure(root: Path, sql: str, repeat: int) -> dict[str, Any]:
    evict(root)
    done = subprocess.run([sys.executable, "-c", TIMER, str(root / "warehouse.duckdb"), sql,
                           str(repeat)], capture_output=True, text=True, check=True)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    cold, warm = result["runs"][0], sorted(result["runs"][1:], key=lambda r: r["wall"])
    middle = warm[len(warm) // 2] if warm else cold
    return {"rows": cold["rows"], "cold": cold["wall"], "cold_cpu": cold["cpu"],
            "warm": middle["wall"], "warm_cpu": middle["cpu"], "peak_mib": result["peak_mib"]}


def table_counts(root: Path) -> str:
    import duckdb

    con = duckdb.connect(str(root / "warehouse.duckdb"), read_only=True)
    sql = "SELECT count(*) FROM {} JOIN runs USING (run_id) WHERE run_name = ?"
    counts = [f"{t} {con.execute(sql.format(t), [RUN]).fetchone()[0]:,}"  # type: ignore[index]
              for t in ("host_events", "kernels", "iterations")]
    return ", ".join(counts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=1000, help="trace size, MB")
    parser.add_argument("--views", nargs="+", default=list(VIEWS))
    parser.add_argument("--repeat", type=int, default=3, help="warm repetitions")
    args = parser.parse_args()
    root = warehouse_of(args.mb)
    # refresh the stored views: this checkout's SQL, not the one the warehouse was built with
    subprocess.run([sys.executable, "-m", "etl.cli", "views", "--warehouse", str(root)],
                   cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    print(f"warehouse {root}: one run, {table_counts(root)}; cores {os.cpu_count()}, "
          f"load {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print("| view | query | rows | cold s | cold CPU s | warm s | warm CPU s | peak RSS MiB |")
    print("|---|---|---|---|---|---|---|---|")
    for view in args.views:
        where = f"FROM {view} WHERE run_name = '{RUN}'"
        for label, sql in (("rows", f"SELECT * {where}"), ("count", f"SELECT count(*) {where}")):
            m = measure(root, sql, args.repeat)
            print(f"| {view} | {label} | {m['rows']:,} | {m['cold']:.2f} | {m['cold_cpu']:.2f} "
                  f"| {m['warm']:.2f} | {m['warm_cpu']:.2f} | {m['peak_mib']:.0f} |", flush=True)
    print(f"load at the end {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
