"""Ingest benchmark: MB/s, events/s and peak memory of `etl ingest`, against HTA's load.

Builds traces of several sizes by repeating a real corpus trace (bench/make_trace.py),
ingests each in a fresh warehouse, samples the resident memory of the whole process tree,
and loads the same trace with Holistic Trace Analysis 0.5.0 installed in a throwaway venv
(bench/.cache/hta-venv; not a project dependency). Prints a table; asserts nothing.

    python bench/ingest_bench.py --sizes 10 100 1000 [--no-hta] [--jobs 2] [--many 32]
        [--source hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz]
    python bench/ingest_bench.py --truncated --sizes 100 1000

--truncated compares, at each size, the complete trace's ingest with `--salvage` of the
same trace cut inside its last event, and with the refusal of the cut trace (no --salvage).

The default source writes integer µs (2022 Kineto); --source picks another corpus trace,
e.g. one with `{µs}.{ns:03}` times (newer Kineto), whose decimal parse costs more.
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, NamedTuple

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / "bench" / ".cache"
CORPUS = ROOT.parent / "shared" / "corpus"
SOURCE = CORPUS / "hta" / "df_index_resolver" / "df_index_resolver.json.gz"
HTA_VENV = CACHE / "hta-venv"
HTA_LOAD = """
import sys, time
from hta.trace_analysis import TraceAnalysis
t = time.perf_counter()
TraceAnalysis(trace_dir=sys.argv[1])
print(time.perf_counter() - t)
"""


def tree_rss_kib(pid: int) -> tuple[int, int]:
    """(sum, largest) resident memory of a process and its descendants (KiB), from /proc."""
    total, largest, stack = 0, 0, [pid]
    while stack:
        current = stack.pop()
        try:
            status = Path(f"/proc/{current}/status").read_text()
            rss = int(next(line.split()[1] for line in status.splitlines()
                           if line.startswith("VmRSS:")))
            total, largest = total + rss, max(largest, rss)
            for task in Path(f"/proc/{current}/task").iterdir():
                stack += [int(c) for c in (task / "children").read_text().split()]
        except (FileNotFoundError, StopIteration, ProcessLookupError):
            continue
    return total, largest


def children_cpu_seconds() -> float:
    """User + system CPU seconds of every finished child of this process and, as each
    child waited for its own (the ingest joins its slice workers), of their children."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


class Measured(NamedTuple):
    seconds: float
    rss_mib: int        # peak RSS of the process tree
    rss_one_mib: int    # peak RSS of its largest process
    cpu_s: float        # user + system seconds of the process tree


def run_measured(cmd: list[str], env: dict[str, str] | None = None, expect: int = 0
                 ) -> Measured:
    """Wall time, peak RSS (sampled every 20 ms) and CPU time of a command that exits with
    `expect`."""
    cpu_before = children_cpu_seconds()
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, env=env)
    peak = [0, 0]

    def sample() -> None:
        while proc.poll() is None:
            total, largest = tree_rss_kib(proc.pid)
            peak[0], peak[1] = max(peak[0], total), max(peak[1], largest)
            time.sleep(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, err = proc.communicate()
    sampler.join()
    if proc.returncode != expect:
        raise SystemExit(f"{' '.join(cmd[:3])} failed:\n{err[-2000:]}")
    return Measured(time.perf_counter() - started, peak[0] // 1024, peak[1] // 1024,
                    children_cpu_seconds() - cpu_before)


def make_trace(mb: int, source: Path = SOURCE) -> Path:
    label = f"{mb}MB" if source == SOURCE else f"{_stem(source)}-{mb}MB"
    path = CACHE / f"trace-{label}" / "run" / "rank1.json"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, str(ROOT / "bench" / "make_trace.py"), str(source),
                        str(path), "--mb", str(mb)], check=True)
    return path


def _stem(source: Path) -> str:
    return source.name.split(".")[0]


def ensure_hta() -> Path | None:
    python = HTA_VENV / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(HTA_VENV)], check=True)
        done = subprocess.run([str(python), "-m", "pip", "install", "--quiet",
                               "HolisticTraceAnalysis==0.5.0", "pandas<3"])
        if done.returncode != 0:
            return None
    return python


def bench_size(mb: int, jobs: int, hta: Path | None, hta_max_mb: int, source: Path
               ) -> dict[str, float]:
    trace = make_trace(mb, source)
    size = trace.stat().st_size
    warehouse = CACHE / "wh"
    shutil.rmtree(warehouse, ignore_errors=True)
    etl = str(ROOT / ".venv" / "bin" / "etl")
    etl_run = run_measured([etl, "ingest", str(trace.parent.parent), "--warehouse",
                            str(warehouse), "--jobs", str(jobs)])
    seconds = etl_run.seconds
    counted = subprocess.run([etl, "query", "SELECT sum(event_count) FROM runs", "--warehouse",
                              str(warehouse), "--format", "csv"], capture_output=True,
                             text=True, check=True)
    events = int(counted.stdout.splitlines()[1])
    row = {"mb": size / 1e6, "seconds": seconds, "mb_s": size / 1e6 / seconds,
           "events_s": events / seconds, "rss_mib": etl_run.rss_mib,
           "rss_one_mib": etl_run.rss_one_mib, "events": events, "cpu_s": etl_run.cpu_s,
           "cpu_s_gb": etl_run.cpu_s / (size / 1e9)}
    shutil.rmtree(warehouse, ignore_errors=True)
    if hta is not None and mb <= hta_max_mb:
        hta_run = run_measured([str(hta), "-c", HTA_LOAD, str(trace.parent)])
        row.update(hta_seconds=hta_run.seconds, hta_rss_mib=hta_run.rss_mib,
                   speedup=hta_run.seconds / seconds)
    return row


def bench_many(runs: int, mb: int, source: Path) -> None:
    """`etl ingest` of a folder of `runs` run folders (each a link to the same `mb` trace),
    with one and with two jobs: what parallel runs buy."""
    trace = make_trace(mb, source)
    folder = CACHE / f"many-{runs}x{mb}MB"
    shutil.rmtree(folder, ignore_errors=True)
    for n in range(runs):
        (folder / f"run{n:03d}").mkdir(parents=True)
        os.symlink(trace, folder / f"run{n:03d}" / trace.name)
    etl = str(ROOT / ".venv" / "bin" / "etl")
    print(f"\n{runs} runs of {trace.stat().st_size / 1e6:.0f} MB:")
    print("| jobs | etl s | MB/s | runs/s | peak RSS MiB, all processes | largest process |")
    print("|---|---|---|---|---|---|")
    total_mb = runs * trace.stat().st_size / 1e6
    for jobs in (1, 2):
        warehouse = CACHE / "wh"
        shutil.rmtree(warehouse, ignore_errors=True)
        run = run_measured([etl, "ingest", str(folder), "--warehouse", str(warehouse),
                            "--jobs", str(jobs)])
        print(f"| {jobs} | {run.seconds:.1f} | {total_mb / run.seconds:.0f} | "
              f"{runs / run.seconds:.1f} | {run.rss_mib:,} | {run.rss_one_mib:,} |",
              flush=True)
        shutil.rmtree(warehouse, ignore_errors=True)
    shutil.rmtree(folder, ignore_errors=True)


def cut_trace(trace: Path) -> Path:
    """The trace cut inside its last event (a profiler killed while writing), in a run
    folder of its own beside the trace's (bench/.cache/cut-<label>/run/)."""
    folder = trace.parent.parent
    path = folder.with_name(f"cut-{folder.name}") / "run" / trace.name
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        size = trace.stat().st_size
        with open(trace, "rb") as fh:
            fh.seek(max(0, size - (1 << 20)))
            last_event = size - (1 << 20) + fh.read().rindex(b'{"ph"')
        with open(trace, "rb") as src, open(path, "wb") as dest:
            shutil.copyfileobj(_limited(src, last_event + 20), dest)
    return path


class _limited:
    """A file object reading at most `left` bytes (for shutil.copyfileobj)."""

    def __init__(self, fh: Any, left: int) -> None:
        self.fh, self.left = fh, left

    def read(self, n: int = -1) -> bytes:
        data = self.fh.read(self.left if n < 0 else min(n, self.left))
        self.left -= len(data)
        return data


def bench_truncated(mb: int, jobs: int, source: Path) -> None:
    """Complete ingest against --salvage and refusal of the same trace cut at its end."""
    trace = make_trace(mb, source)
    cut = cut_trace(trace)
    etl = str(ROOT / ".venv" / "bin" / "etl")
    times = []
    for folder, extra, code in ((trace.parent.parent, [], 0),
                                (cut.parent.parent, ["--salvage"], 0),
                                (cut.parent.parent, [], 1)):
        warehouse = CACHE / "wh"
        shutil.rmtree(warehouse, ignore_errors=True)
        run = run_measured([etl, "ingest", str(folder), "--warehouse", str(warehouse),
                            "--jobs", str(jobs), *extra], expect=code)
        times.append(run)
        shutil.rmtree(warehouse, ignore_errors=True)
    whole, salvaged, refused = times
    print(f"| {trace.stat().st_size / 1e6:.0f} | {cut.stat().st_size / 1e6:.0f} | "
          f"{whole.seconds:.1f} | {salvaged.seconds:.1f} | {refused.seconds:.1f} | "
          f"{salvaged.seconds / whole.seconds:.2f} | {whole.cpu_s:.1f} | "
          f"{salvaged.cpu_s:.1f} | {refused.cpu_s:.1f} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--no-hta", action="store_true")
    parser.add_argument("--many", type=int, default=0, metavar="N",
                        help="also ingest N run folders of the 10 MB trace, with 1 and 2 jobs")
    parser.add_argument("--hta-max-mb", type=int, default=1000,
                        help="skip HTA above this size (it needs ~6x the trace in RAM)")
    parser.add_argument("--truncated", action="store_true",
                        help="complete trace against the same trace cut at its end: "
                             "--salvage and refusal times")
    parser.add_argument("--source", type=Path, default=SOURCE,
                        help="the trace to repeat: a path, or one relative to the corpus")
    args = parser.parse_args()
    source = args.source if args.source.exists() else CORPUS / args.source
    if not source.exists():
        raise SystemExit(f"--source {args.source}: no such trace, as a path or under {CORPUS}")
    CACHE.mkdir(parents=True, exist_ok=True)
    if args.truncated:
        print(f"machine: {os.cpu_count()} CPUs; source trace {source.name}; the cut trace "
              "ends inside its last event")
        print("| JSON MB | cut MB | complete s | salvaged s | refused s | salvaged / complete "
              "| complete CPU s | salvaged CPU s | refused CPU s |")
        print("|" + "---|" * 9)
        for mb in args.sizes:
            bench_truncated(mb, args.jobs, source)
        return
    hta = None if args.no_hta else ensure_hta()
    print(f"machine: {os.cpu_count()} CPUs; source trace {source.name}")
    print("CPU s: user + system seconds of the ingest and its slice workers together")
    print("| JSON MB | events | etl s | MB/s | events/s | CPU s | CPU s/GB | "
          "peak RSS MiB, all processes | largest process | HTA s | HTA RSS MiB | speedup |")
    print("|" + "---|" * 12)
    for mb in args.sizes:
        r = bench_size(mb, args.jobs, hta, args.hta_max_mb, source)
        hta_cells = (f"{r['hta_seconds']:.1f} | {r['hta_rss_mib']:,} | {r['speedup']:.1f}x"
                     if "hta_seconds" in r else "not run | | ")
        print(f"| {r['mb']:.0f} | {r['events']:,.0f} | {r['seconds']:.1f} | {r['mb_s']:.0f} | "
              f"{r['events_s']:,.0f} | {r['cpu_s']:.1f} | {r['cpu_s_gb']:.1f} | "
              f"{r['rss_mib']:,} | {r['rss_one_mib']:,} | {hta_cells} |", flush=True)
    if args.many:
        bench_many(args.many, 10, source)


if __name__ == "__main__":
    main()
