"""The local path against Spark local[2]: ingest, one-run and all-runs view queries.

Two workloads:
  folders    --folders run folders (each a symlink to one corpus trace, under its own name)
             ingested by `etl ingest` locally (--jobs 2) and by --engine spark;
  warehouse  a --runs-run warehouse written directly (bench/query_bench.py's generator,
             --kernels kernels a run) queried through etl query (DuckDB) and through
             register_warehouse in Spark: one run of gpu_utilization, all runs of
             run_summary.
Spark's start-up (the JVM and the SparkSession) is timed apart and not in the figures;
registering the warehouse (listing the publishes, one DataFrame per table, the views) is
shown on its own line. Prints a table; asserts nothing.

    python bench/spark_bench.py                               # 32 folders, 1000 runs
    python bench/spark_bench.py --folders 4 --runs 20 --kernels 2000 --dest /tmp/sb
"""
from __future__ import annotations

import argparse
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
TRACE = ROOT.parent / "shared" / "corpus" / "hta" / "critical_path" / "alexnet"


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    value = fn()
    return time.perf_counter() - started, value


def make_folders(dest: Path, count: int) -> list[Path]:
    folders = []
    for n in range(count):
        folder = dest / f"run_{n:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        for f in TRACE.iterdir():
            if f.is_file() and f.name != "SOURCES.md" and not (folder / f.name).exists():
                (folder / f.name).symlink_to(f)
        folders.append(folder)
    return folders


def bench_folders(spark: Any, dest: Path, count: int) -> list[tuple[str, float, float]]:
    from etl.load.ingest import Options, ingest_all
    from etl.spark.ingest import ingest_spark
    from etl.warehouse.store import Warehouse

    folders = make_folders(dest / "runs", count)
    local_wh, spark_wh = dest / "wh_local", dest / "wh_spark"
    for wh in (local_wh, spark_wh):
        shutil.rmtree(wh, ignore_errors=True)
    local, _ = timed(lambda: ingest_all(folders, Warehouse.at(local_wh), Options(jobs=2)))
    distributed, _ = timed(lambda: ingest_spark(spark, folders, Warehouse.at(spark_wh),
                                                Options()))
    return [(f"ingest {count} run folders", local, distributed)]


def bench_warehouse(spark: Any, dest: Path, runs: int, kernels: int
                    ) -> list[tuple[str, float, float]]:
    from query_bench import build, run_name

    from etl.views.query import run_query
    from etl.spark import register_warehouse
    from etl.views.database import ensure_views
    from etl.warehouse.store import Warehouse

    root = dest / f"wh_{runs}"
    build(root, runs, kernels, 8, 2)
    ensure_views(Warehouse.at(root))
    register, _ = timed(lambda: register_warehouse(spark, root))
    rows = []
    for label, sql in [
            ("gpu_utilization, one run", "SELECT * FROM gpu_utilization WHERE run_name = "
             f"'{run_name(runs // 2)}'"),
            ("run_summary, all runs", "SELECT count(*), avg(gpu_util) FROM run_summary")]:
        local, _ = timed(lambda sql=sql: run_query(root, sql))
        distributed, _ = timed(lambda sql=sql: spark.sql(sql).collect())
        rows.append((f"{runs} runs: {label}", local, distributed))
    rows.append((f"{runs} runs: register_warehouse (Spark only)", 0.0, register))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folders", type=int, default=32)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--kernels", type=int, default=10_000)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--dest", type=Path, default=Path("/tmp/spark-bench"))
    args = parser.parse_args()
    from etl.spark import local_session

    startup, spark = timed(lambda: local_session(args.master, "spark-bench"))
    spark.sparkContext.setLogLevel("ERROR")
    rows = bench_folders(spark, args.dest, args.folders)
    rows += bench_warehouse(spark, args.dest, args.runs, args.kernels)
    print(f"Spark start-up ({args.master}): {startup:.1f} s, not counted below")
    print(f"{'workload':<48} {'local (s)':>10} {'spark (s)':>10}")
    for label, local, distributed in rows:
        print(f"{label:<48} {local:>10.2f} {distributed:>10.2f}")
    spark.stop()


if __name__ == "__main__":
    main()
