"""Same rows? Every row of the given views, under this checkout's SQL and under a git revision's.

A performance-only edit of a released view must not change its rows (etl/views/rewrites.py:
tests/views/test_rewrites.py makes the same comparison of every recorded rewrite on the
test warehouses; this script makes it on any). For each warehouse,
this script exports the base revision's code (`git archive REV` into a temporary folder),
dumps each view's full output with that code and with this checkout's (each in a process of
its own, whose `etl` package and sql/ are the tree's), and compares the two with EXCEPT ALL
both ways (duplicates count). Prints one line per warehouse and view; exits 1 on a
difference. Each dump recreates the views of warehouse.duckdb, which is the next query's
job anyway.

    python bench/same_rows.py --base ea66f52 --warehouse /tmp/demo-wh /tmp/corpus-wh
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BREAKDOWN = ("kernel_breakdown_v1", "temporal_breakdown_v1", "idle_breakdown_v1",
             "comm_overlap_v1", "stragglers_v1", "launch_stats_v1", "queue_length_v1",
             "memcpy_bandwidth_v1", "_type_spans_v1")

DUMP = r"""
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import pyarrow.parquet as pq
from etl.api import connect
con = connect(sys.argv[2])
con.execute("SET enable_progress_bar = false")
con.execute(f"SET threads = {int(sys.argv[4])}")
for view in sys.argv[5:]:
    pq.write_table(con.execute(f"SELECT * FROM {view}").to_arrow_table(),
                   Path(sys.argv[3]) / f"{view}.parquet")
"""


def dump(code: Path, warehouse: Path, out: Path, views: list[str], threads: int) -> None:
    out.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-c", DUMP, str(code), str(warehouse), str(out),
                    str(threads), *views],
                   check=True, cwd=code,
                   env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})


def differences(before: Path, after: Path) -> tuple[int, int, int, bool]:
    """Rows of `before`, rows only in `before`, rows only in `after` (EXCEPT ALL), and
    whether the columns (names, types) agree: etl/views/rewrites.py's rows_apart, the
    check tests/views/test_rewrites.py makes of every recorded rewrite."""
    import duckdb

    from etl.views.rewrites import rows_apart

    apart = rows_apart(duckdb.connect(), f"FROM read_parquet('{before}')",
                       f"FROM read_parquet('{after}')")
    return (apart.rows_before, apart.only_before, apart.only_after,
            apart.columns_before == apart.columns_after)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="git revision of the SQL before")
    parser.add_argument("--warehouse", type=Path, nargs="+", required=True)
    parser.add_argument("--views", nargs="+", default=list(BREAKDOWN))
    parser.add_argument("--threads", type=int, default=1,
                        help="DuckDB threads of each dump; more than 1 lets floating-point "
                             "sums add in another order at each run (rows apart in the "
                             "last bits)")
    args = parser.parse_args()
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "base"
        base.mkdir()
        archive = subprocess.run(["git", "archive", args.base], cwd=ROOT, check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(base)], input=archive, check=True)
        for number, warehouse in enumerate(args.warehouse):
            before, after = Path(tmp) / f"{number}-before", Path(tmp) / f"{number}-after"
            dump(base, warehouse.resolve(), before, args.views, args.threads)
            dump(ROOT, warehouse.resolve(), after, args.views, args.threads)
            for view in args.views:
                rows, lost, new, same_columns = differences(before / f"{view}.parquet",
                                                            after / f"{view}.parquet")
                failed |= bool(lost or new) or not same_columns
                print(f"{warehouse} {view}: {rows} rows, {lost} only before, {new} only after"
                      + ("" if same_columns else ", other columns"), flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
