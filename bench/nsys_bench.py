"""nsys SQLite and monitor-log benchmark: MB/s, CPU seconds and peak memory.

1. An nsys export of --mb MB (bench/make_nsys_export.py, from the corpus export's schema,
   with GPU_METRICS samples at --metrics-hz; 0: none, the export of the first figures)
   read by the nsys_sqlite reader into the trace tables and gpu_samples (the writers
   discard the rows).
2. A day of 1 s nvidia-smi samples of 8 GPUs (691 200 rows, 3 metrics: 2.07 M samples)
   read by the monitor reader.
Each runs in a fresh process; peak memory is that process's maximum RSS (and its GPU
table worker's, with --workers 2: the default, as `etl ingest` of one run on 2 cores);
CPU s counts both processes. Prints a table;
asserts nothing (the issue's targets: >= 100 MB/s and < 512 MiB per process for 1 GB;
< 2 s for the day of samples).

    python bench/nsys_bench.py [--mb 1000] [--metrics-hz 1000] [--skip-nsys] [--skip-samples]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / "bench" / ".cache"

NSYS = """
import json, resource, sys, tempfile, time
from pathlib import Path
from etl.extract.nsys.read import read as ingest_sqlite
from etl.extract.trace_role import PipelineOptions, Sinks
rows = [0]
def count(table): rows[0] += table.num_rows
sinks = Sinks(count, count, count, lambda: None, lambda name, table: count(table))
wall, cpu = time.perf_counter(), time.process_time()
with tempfile.TemporaryDirectory() as spill:
    ingest_sqlite(Path(sys.argv[1]), 0, None, Path(spill) / "spill", sinks,
                  PipelineOptions(workers=int(sys.argv[2])))
worker = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"wall": time.perf_counter() - wall,
                  "cpu": time.process_time() - cpu + worker.ru_utime + worker.ru_stime,
                  "rows": rows[0],
                  "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "worker_rss_mib": worker.ru_maxrss / 1024}))
"""
SAMPLES = """
import json, resource, sys, time
from pathlib import Path
from etl.extract.monitor.read import read as read_samples
wall, cpu = time.perf_counter(), time.process_time()
part = read_samples([Path(sys.argv[1])], {"timezone": "Europe/Berlin"}, 0)
print(json.dumps({"wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu,
                  "rows": part.tables["gpu_samples"].num_rows,
                  "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def write_day(path: Path) -> Path:
    """nvidia-smi --query-gpu=timestamp,index,pci.bus_id,utilization.gpu,memory.used,
    power.draw --format=csv -l 1, for 24 h on 8 GPUs."""
    from datetime import datetime, timedelta

    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    start = datetime(2026, 11, 24)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("timestamp, index, pci.bus_id, utilization.gpu [%], memory.used [MiB], "
                 "power.draw [W]\n")
        for second in range(86400):
            ts = (start + timedelta(seconds=second)).strftime("%Y/%m/%d %H:%M:%S.000")
            fh.writelines(f"{ts}, {g}, 00000000:{g + 7:02X}:00.0, {(second + g) % 101} %, "
                          f"{1000 + g} MiB, {200 + g}.25 W\n" for g in range(8))
    return path


def measure(script: str, path: Path, *args: str) -> dict[str, float]:
    done = subprocess.run([sys.executable, "-c", script, str(path), *args], capture_output=True,
                          text=True, check=True, cwd=ROOT)
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=1000)
    parser.add_argument("--metrics-hz", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=2,
                        help="processes for one export (etl ingest of one run: --jobs, 2)")
    parser.add_argument("--processes", type=int, default=1,
                        help="the export as P processes profiled together (P runs of calls)")
    parser.add_argument("--skip-nsys", action="store_true")
    parser.add_argument("--skip-samples", action="store_true")
    args = parser.parse_args()
    print("| input | MB | rows | wall s | CPU s | MB/s (wall) | MB/s (CPU) | peak RSS MiB "
          "| worker's peak MiB |")
    print("|---|---|---|---|---|---|---|---|---|")
    if not args.skip_nsys:
        sys.path.insert(0, str(ROOT / "bench"))
        from make_nsys_export import as_processes, make

        hz = args.metrics_hz
        path = CACHE / (f"nsys_{args.mb}mb_metrics{hz}hz.sqlite" if hz else
                        f"nsys_{args.mb}mb.sqlite")
        if not path.exists():
            make(path, args.mb, metrics_hz=hz)
        if args.processes > 1:
            single, path = path, path.with_name(f"{path.stem}_{args.processes}proc.sqlite")
            if not path.exists():
                as_processes(single, path, args.processes)
        what = f"nsys SQLite export ({args.processes} profiled)"
        _row(f"{what}, {args.workers} process(es)", path, measure(NSYS, path, str(args.workers)))
    if not args.skip_samples:
        path = write_day(CACHE / "nvidia_smi_day_8gpu.csv")
        _row("nvidia-smi, 1 day x 8 GPUs", path, measure(SAMPLES, path))


def _row(what: str, path: Path, m: dict[str, float]) -> None:
    mb = path.stat().st_size / 1e6
    print(f"| {what} | {mb:.0f} | {m['rows']:,.0f} | {m['wall']:.2f} | {m['cpu']:.2f} | "
          f"{mb / m['wall']:.0f} | {mb / m['cpu']:.0f} | {m['rss_mib']:.0f} | "
          f"{_mib(m.get('worker_rss_mib'))} |")


def _mib(value: float | None) -> str:
    return f"{value:.0f}" if value else "-"


if __name__ == "__main__":
    main()
