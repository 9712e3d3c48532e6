"""Fixed cost of one ingest: where the time of a small trace goes, beside HTA's load.

Most traces are small, so what an ingest costs before and after reading the file decides
how the tool feels. Runs, in fresh processes, `--repeat` times each (median printed):
  - the interpreter alone, and importing the CLI;
  - one phase-timed ingest of a small real trace into a new warehouse, in-process: imports,
    the warehouse layout, extraction, publish (with its visibility margin), the views
    database (built, or copied from the machine's template: etl/views/template.py);
  - the whole `etl ingest` command into a new warehouse, with an empty template cache
    (the first warehouse on a machine) and with the template in place;
  - HTA 0.5.0's TraceAnalysis load of the same trace (bench/.cache/hta-venv, as
    bench/ingest_bench.py makes it), unless --no-hta.

    python bench/fixed_cost.py [--trace corpus/relative/path] [--repeat 5] [--no-hta]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ingest_bench import CORPUS, ROOT, ensure_hta, run_measured  # noqa: E402

TRACE = "hta/trace_file_list/inference_rank_1.json.gz"
PHASES = """
import json, sys, time
from pathlib import Path
t0 = time.perf_counter()
from etl.load.ingest import Options, ingest_all
from etl.load.runfolder import find_run_folders
from etl.views.database import ensure_views
from etl.warehouse.store import Warehouse
t1 = time.perf_counter()
warehouse = Warehouse.at(sys.argv[2])
warehouse.init()
t2 = time.perf_counter()
from etl.load.ingest import prepare_folder, publish_all
[folder] = find_run_folders([Path(sys.argv[1])], False, None)
prepared = prepare_folder(folder, warehouse, Options())
t3 = time.perf_counter()
publish_all([prepared], warehouse)
t4 = time.perf_counter()
ensure_views(warehouse)
t5 = time.perf_counter()
print(json.dumps({"imports": t1 - t0, "warehouse layout": t2 - t1, "extract": t3 - t2,
                  "publish (incl. margin)": t4 - t3, "views database": t5 - t4}))
"""


def median_of(runs: list[float]) -> str:
    return f"{statistics.median(runs):.3f} s"


def python_alone(repeat: int) -> dict[str, str]:
    rows = {}
    for label, code in (("interpreter", "pass"), ("import etl.cli", "import etl.cli")):
        rows[label] = median_of([run_measured([sys.executable, "-c", code]).seconds
                                 for _ in range(repeat)])
    return rows


def phases(run: Path, scratch: Path, repeat: int, cache: Path, template: bool
           ) -> dict[str, str]:
    env = {**os.environ, "ETL_CACHE_DIR": str(cache)}
    got: dict[str, list[float]] = {}
    for i in range(repeat):
        if not template:
            shutil.rmtree(cache, ignore_errors=True)
        warehouse = scratch / f"phases-{template}-{i}"
        out = subprocess.run([sys.executable, "-c", PHASES, str(run), str(warehouse)],
                             capture_output=True, text=True, check=True, env=env, cwd=ROOT)
        for phase, seconds in json.loads(out.stdout.splitlines()[-1]).items():
            got.setdefault(phase, []).append(seconds)
    return {phase: median_of(values) for phase, values in got.items()}


def whole(run: Path, scratch: Path, repeat: int, cache: Path, template: bool
          ) -> tuple[float, int]:
    env = {**os.environ, "ETL_CACHE_DIR": str(cache)}
    etl = str(ROOT / ".venv" / "bin" / "etl")
    seconds, rss = [], []
    for i in range(repeat):
        if not template:
            shutil.rmtree(cache, ignore_errors=True)
        done = run_measured([etl, "ingest", str(run), "--warehouse",
                             str(scratch / f"whole-{template}-{i}")], env=env)
        seconds.append(done.seconds)
        rss.append(done.rss_mib)
    return statistics.median(seconds), int(statistics.median(rss))


def hta_load(run: Path, repeat: int) -> tuple[float, int] | None:
    python = ensure_hta()
    if python is None:
        return None
    code = "import sys\nfrom hta.trace_analysis import TraceAnalysis\n" \
           "TraceAnalysis(trace_dir=sys.argv[1])\n"
    done = [run_measured([str(python), "-c", code, str(run)]) for _ in range(repeat)]
    return (statistics.median(d.seconds for d in done),
            int(statistics.median(d.rss_mib for d in done)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", default=TRACE, help="corpus-relative trace")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-hta", action="store_true")
    args = parser.parse_args()
    source = CORPUS / args.trace
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        run = scratch / "run"
        run.mkdir()
        shutil.copy(source, run)  # HTA reads every trace in the folder: this one alone
        cache = scratch / "cache"
        print(f"trace: {args.trace} ({source.stat().st_size:,} bytes), median of "
              f"{args.repeat}, load {os.getloadavg()[0]:.1f}")
        print("\n| step | seconds |\n|---|---|")
        for label, value in python_alone(args.repeat).items():
            print(f"| {label} | {value} |")
        for template in (False, True):
            title = "template copied" if template else "views built (empty cache)"
            for phase, value in phases(run, scratch, args.repeat, cache, template).items():
                print(f"| {phase}, {title} | {value} |")
        first = whole(run, scratch, args.repeat, cache, template=False)
        later = whole(run, scratch, args.repeat, cache, template=True)
        hta = None if args.no_hta else hta_load(run, args.repeat)
        print("\n| whole command | seconds | peak RSS MiB | ratio to HTA |\n|---|---|---|---|")
        for label, (seconds, rss) in (("etl ingest, first warehouse on the machine", first),
                                      ("etl ingest, later warehouses", later)):
            ratio = f"{hta[0] / seconds:.2f}x" if hta else "not run"
            print(f"| {label} | {seconds:.3f} | {rss} | {ratio} |")
        if hta:
            print(f"| HTA 0.5.0 TraceAnalysis load | {hta[0]:.3f} | {hta[1]} | 1x |")
        print(f"\nload at the end {os.getloadavg()[0]:.1f}; {time.strftime('%Y-%m-%d %H:%M')}")


if __name__ == "__main__":
    main()
