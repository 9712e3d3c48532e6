"""`etl report` of the demo and `etl compare` of two demo runs: this checkout against an
older revision, on the same warehouse, in the same run.

The demo's runs are written and ingested by this checkout; the older revision's code
(`git archive REV`, default: where this branch left main) reads a copy of that warehouse,
so both answer the same data. Each command runs as a process of its own, the two codes in
turn (A B A B ...) after one warm-up each (which also computes the critical paths and lets
each code write its views), and the figures are the medians of wall and CPU seconds (the
process and its children: RUSAGE_CHILDREN) with the ratio old / new of each pair.

    python bench/report_bench.py [--baseline REV] [--repeat 5]
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASELINE = "bd1e7fb"  # main when issue #33's report work began
COMPARED = ("resnet_fp32_eager", "resnet_amp_eager")


def checkout(rev: str, dest: Path) -> Path:
    """The package of revision `rev` (git archive), unpacked at `dest`."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], check=True,
                             capture_output=True).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(dest, filter="data")
    return dest


def timed(code: Path, args: list[str], cwd: Path) -> tuple[float, float]:
    """(wall s, CPU s) of `python -m etl.cli ARGS` with the package at `code`."""
    env = {**os.environ, "PYTHONPATH": str(code)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "etl.cli", *args], cwd=cwd, env=env, check=True,
                   capture_output=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def head() -> str:
    return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True).stdout.strip()


def demo_warehouse(root: Path) -> Path:
    """The demo's runs, ingested by this checkout."""
    for args in (["demo", "runs"], ["ingest", "runs", "--warehouse", "wh"]):
        subprocess.run([sys.executable, "-m", "etl.cli", *args], cwd=root, check=True,
                       capture_output=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    return root / "wh"


def compare_codes(name: str, codes: dict[str, Path], args: dict[str, list[str]], cwd: Path,
                  repeat: int) -> None:
    for label, code in codes.items():  # warm-up: views written, critical paths computed
        timed(code, args[label], cwd)
    walls: dict[str, list[float]] = {label: [] for label in codes}
    cpus: dict[str, list[float]] = {label: [] for label in codes}
    for _ in range(repeat):
        for label, code in codes.items():
            wall, cpu = timed(code, args[label], cwd)
            walls[label].append(wall)
            cpus[label].append(cpu)
    ratios = [o / n for o, n in zip(walls["old"], walls["new"])]
    print(f"{name}: old {statistics.median(walls['old']):.2f} s wall "
          f"({statistics.median(cpus['old']):.2f} CPU s), new "
          f"{statistics.median(walls['new']):.2f} s wall ({statistics.median(cpus['new']):.2f}"
          f" CPU s); old / new {statistics.median(ratios):.2f}x "
          f"({min(ratios):.2f}-{max(ratios):.2f}) over {repeat} pairs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default=BASELINE, help="the older revision")
    parser.add_argument("--repeat", type=int, default=5)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="report-bench-") as tmp:
        root = Path(tmp)
        codes = {"old": checkout(options.baseline, root / "old"), "new": ROOT}
        warehouse = demo_warehouse(root)
        shutil.copytree(warehouse, root / "wh-old")
        runs = len(list((root / "runs").iterdir()))
        print(f"baseline {options.baseline}, this checkout at "
              f"{head()}; "
              f"the demo's {runs} runs; load {os.getloadavg()[0]:.1f} at the start")
        report = {label: ["report", "--warehouse", f"wh-{label}" if label == "old" else "wh",
                          "-o", f"{label}.html"] for label in codes}
        compare_codes("etl report (all demo runs)", codes, report, root, options.repeat)
        compare = {label: ["compare", *COMPARED, "--warehouse", report[label][2]]
                   for label in codes}
        compare_codes(f"etl compare {' '.join(COMPARED)}", codes, compare, root,
                      options.repeat)


if __name__ == "__main__":
    main()
