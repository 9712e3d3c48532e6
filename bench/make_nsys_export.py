"""Write a big nsys SQLite export for bench/nsys_bench.py, from the corpus export's schema.

The tables this project reads are created with the corpus nsys 2024.6 export's own DDL
(read from its sqlite_master at generation time: nothing of the corpus is copied into the
repository), seeded with that export's rows, and the GPU activities and runtime calls
are repeated, shifted in time and correlation id, until the file reaches --mb. The seed
has no GPU metrics: GPU_METRICS gets METRICS samples of one GPU every 1/--metrics-hz s over
the seed's span (nsys --gpu-metrics-frequency; its default is 10 000 Hz), repeated with
the rest (1 000 Hz: about as many rows as the runtime calls).

    python bench/make_nsys_export.py --mb 1000 --out bench/.cache/nsys_1000mb.sqlite

--processes P rewrites such an export as P processes profiled together, the way nsys
writes a multi-process export (two 2-GPU exports in nsys-ai's test fixtures): copy k of
the seed runs in process k mod P (its own pid in the calls' globalTid and the GPU rows'
globalPid, and its own GPU) at time slot k div P, and each
table lists one process's rows after the other's, so the runtime calls are P runs in start
order, overlapping in time.
"""
from __future__ import annotations

import argparse
import sqlite3
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SEED = ROOT.parent / "shared" / "corpus" / "nsys" / "rtxa4500_flame_resnet18-fwd_nsys2024.6.sqlite"
TABLES = ("StringIds", "TARGET_INFO_SESSION_START_TIME", "TARGET_INFO_GPU",
          "CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_KERNEL",
          "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET", "NVTX_EVENTS")
REPEATED = ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_KERNEL",
            "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")
COPIES_PER_BATCH = 20
METRICS_HZ = 1000
GPU_TYPE_ID = 0x10000     # GPU 0 (typeId's low byte)
METRICS = ("GR Active [Throughput %]", "SM Active [Throughput %]", "SM Issue [Throughput %]",
           "Tensor Active [Throughput %]", "SM Warp Occupancy [Throughput %]",
           "DRAM Read Bandwidth [Throughput %]", "DRAM Write Bandwidth [Throughput %]",
           "PCIe RX Throughput [Throughput MB/s]")
METRICS_DDL = """
CREATE TABLE TARGET_INFO_GPU_METRICS (typeId INTEGER NOT NULL, sourceId INTEGER NOT NULL,
    typeName TEXT NOT NULL, metricId INTEGER NOT NULL, metricName TEXT NOT NULL);
CREATE TABLE GPU_METRICS (timestamp INTEGER, typeId INTEGER NOT NULL,
    metricId INTEGER NOT NULL, value INTEGER NOT NULL);
"""


def make(out: Path, megabytes: int, seed: Path = SEED, metrics_hz: int = METRICS_HZ) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.unlink(missing_ok=True)
    con = sqlite3.connect(out)
    con.execute("PRAGMA journal_mode = OFF")
    con.execute("PRAGMA synchronous = OFF")
    con.execute(f"ATTACH DATABASE '{seed.resolve().as_uri()}?mode=ro' AS seed")
    for table in TABLES:
        [(ddl,)] = con.execute("SELECT sql FROM seed.sqlite_master WHERE name = ?", (table,))
        con.execute(ddl)
        con.execute(f"INSERT INTO main.{table} SELECT * FROM seed.{table}")
    con.commit()
    first, span, corr = con.execute(
        "SELECT min(start), max(end) - min(start) + 1000000, max(correlationId) + 1 "
        "FROM seed.CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()
    metrics = _gpu_metrics(con, first, span, metrics_hz)
    copy = 1
    while out.stat().st_size < megabytes * 1_000_000:
        for table in REPEATED:
            _repeat(con, table, copy, span, corr)
        _repeat_metrics(con, copy, span, metrics)
        con.commit()
        copy += COPIES_PER_BATCH
    con.execute("DETACH DATABASE seed")
    con.close()
    return out


def as_processes(single: Path, out: Path, processes: int, seed: Path = SEED) -> Path:
    """`single` (made by `make`) as `processes` processes profiled together."""
    out.unlink(missing_ok=True)
    con = sqlite3.connect(out)
    con.execute("PRAGMA journal_mode = OFF")
    con.execute("PRAGMA synchronous = OFF")
    con.execute(f"ATTACH DATABASE '{single.resolve().as_uri()}?mode=ro' AS single")
    con.execute(f"ATTACH DATABASE '{seed.resolve().as_uri()}?mode=ro' AS seed")
    span, corr = con.execute(
        "SELECT max(end) - min(start) + 1000000, max(correlationId) + 1 "
        "FROM seed.CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()
    names = [r[0] for r in con.execute("SELECT name FROM single.sqlite_master "
                                       "WHERE type = 'table'")]
    for table in names:
        [(ddl,)] = con.execute("SELECT sql FROM single.sqlite_master WHERE name = ?", (table,))
        con.execute(ddl)
        columns = [r[1] for r in con.execute(f"PRAGMA single.table_info({table})")]
        if table not in REPEATED:
            con.execute(f"INSERT INTO main.{table} SELECT * FROM single.{table}")
            con.commit()
            continue
        copy = f"(correlationId / {corr})"
        moved = {"start": f"start - ({copy} - {copy} / {processes}) * {span}",
                 "end": f"end - ({copy} - {copy} / {processes}) * {span}",
                 "globalTid": f"globalTid + ({copy} % {processes}) * 16777216",
                 "globalPid": f"globalPid + ({copy} % {processes}) * 16777216",
                 "deviceId": f"deviceId + {copy} % {processes}"}
        select = ", ".join(moved.get(c, f'"{c}"') for c in columns)
        con.execute(f"INSERT INTO main.{table} SELECT {select} FROM single.{table} "
                    f"ORDER BY {copy} % {processes}, rowid")
        con.commit()
    con.close()
    return out


def _repeat(con: sqlite3.Connection, table: str, first: int, span: int, corr: int) -> None:
    columns = [r[1] for r in con.execute(f"PRAGMA seed.table_info({table})")]
    shifted = {"start": f"start + k * {span}", "end": f"end + k * {span}",
               "correlationId": f"correlationId + k * {corr}"}
    select = ", ".join(shifted.get(c, f'"{c}"') for c in columns)
    con.execute(f"""
        WITH RECURSIVE copies(k) AS (
            SELECT {first} UNION ALL SELECT k + 1 FROM copies
            WHERE k + 1 < {first + COPIES_PER_BATCH})
        INSERT INTO main.{table} SELECT {select} FROM seed.{table}, copies""")


def _gpu_metrics(con: sqlite3.Connection, first: int, span: int, hz: int) -> int:
    """The seed's GPU_METRICS: every metric every 1/hz s over the span; returns its rows."""
    con.executescript(METRICS_DDL)
    con.executemany("INSERT INTO TARGET_INFO_GPU_METRICS VALUES (?, 0, 'GPU', ?, ?)",
                    [(GPU_TYPE_ID, m, name) for m, name in enumerate(METRICS)])
    times = range(first, first + span, 1_000_000_000 // hz) if hz else range(0)
    con.executemany("INSERT INTO GPU_METRICS VALUES (?, ?, ?, ?)", (
        (ts, GPU_TYPE_ID, m, (i * 7 + m * 13) % 101)
        for i, ts in enumerate(times) for m in range(len(METRICS))))
    return len(times) * len(METRICS)


def _repeat_metrics(con: sqlite3.Connection, first: int, span: int, seed_rows: int) -> None:
    con.execute(f"""
        WITH RECURSIVE copies(k) AS (
            SELECT {first} UNION ALL SELECT k + 1 FROM copies
            WHERE k + 1 < {first + COPIES_PER_BATCH})
        INSERT INTO main.GPU_METRICS
        SELECT timestamp + k * {span}, typeId, metricId, value
        FROM (SELECT * FROM main.GPU_METRICS WHERE rowid <= {seed_rows}), copies""")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=1000)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / ".cache" / "nsys.sqlite")
    parser.add_argument("--metrics-hz", type=int, default=METRICS_HZ)
    parser.add_argument("--processes", type=int, default=1)
    args = parser.parse_args()
    if args.processes > 1:
        single = args.out.with_name(args.out.stem + "-single.sqlite")
        make(single, args.mb, metrics_hz=args.metrics_hz)
        path = as_processes(single, args.out, args.processes)
        single.unlink()
    else:
        path = make(args.out, args.mb, metrics_hz=args.metrics_hz)
    print(f"wrote {path} ({path.stat().st_size / 1e6:.0f} MB)")


if __name__ == "__main__":
    main()
