"""Same tables? Ingest run folders with a git revision's code and with this checkout's, then
compare every table and every view of the two warehouses.

A restructuring (files moved, code shared, extractors renamed) must not change a row. For
the base revision, the script exports its tree (`git archive REV`) into a temporary
folder; each side ingests the same run folders into a warehouse of its own, in a process
whose `etl` package, sql/ and schemas/ are that tree's, and dumps the full output of every
table and view to Parquet. The dumps are compared with EXCEPT ALL both ways (duplicates
count), leaving out the columns that name an ingest rather than its content (run_id,
ingested_at, extractor_version, ...). Prints one line per relation; exits 1 on a
difference or on a relation only one side has (a view added since REV is listed, not
failed, with --allow-new).

    python bench/same_tables.py --base f54481b RUNS_DIR [--allow-new]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# what differs between two ingests of the same files by design (publish_seq: the order
# in which parallel jobs finished)
VOLATILE = {"run_id", "ingested_at", "extractor_version", "publish_id", "publish_seq"}

DUMP = r"""
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import duckdb
import pyarrow.parquet as pq
from etl.api import connect
con = connect(sys.argv[2])
con.execute("SET enable_progress_bar = false")
names = [r[0] for r in con.execute(
    "SELECT view_name FROM duckdb_views() WHERE NOT internal AND database_name = "
    "current_database() AND view_name NOT LIKE 'pg_%' ORDER BY 1").fetchall()]
out = Path(sys.argv[3])
for name in names:
    try:
        table = con.execute(f'SELECT * FROM "{name}"').to_arrow_table()
    except duckdb.Error as exc:
        (out / f"{name}.error").write_text(str(exc))
        continue
    pq.write_table(table, out / f"{name}.parquet")
"""


def ingest_and_dump(tree: Path, runs: Path, work: Path) -> Path:
    env = {**os.environ, "PYTHONPATH": str(tree), "ETL_CACHE_DIR": str(work / "cache")}
    warehouse, dump = work / "wh", work / "dump"
    dump.mkdir(parents=True)
    subprocess.run([sys.executable, "-m", "etl.cli", "ingest", str(runs), "--warehouse",
                    str(warehouse)], env=env, cwd=tree, check=False,
                   stdout=subprocess.DEVNULL)
    subprocess.run([sys.executable, "-c", DUMP, str(tree), str(warehouse), str(dump)],
                   env=env, cwd=tree, check=True)
    return dump


def export_tree(rev: str, dest: Path) -> Path:
    dest.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest


def compare(base: Path, head: Path, name: str) -> int:
    """Rows in one dump and not the other, both ways (0 when equal)."""
    import duckdb

    con = duckdb.connect()
    columns = [r[0] for r in con.execute(
        f"DESCRIBE SELECT * FROM read_parquet('{head / name}.parquet')").fetchall()]
    base_columns = {r[0] for r in con.execute(
        f"DESCRIBE SELECT * FROM read_parquet('{base / name}.parquet')").fetchall()}
    kept = ", ".join(f'"{c}"' for c in columns if c not in VOLATILE and c in base_columns)
    if not kept:
        return 0
    one = f"SELECT {kept} FROM read_parquet('{base / name}.parquet')"
    two = f"SELECT {kept} FROM read_parquet('{head / name}.parquet')"
    apart = con.execute(f"SELECT (SELECT count(*) FROM ({one} EXCEPT ALL {two})) + "
                        f"(SELECT count(*) FROM ({two} EXCEPT ALL {one}))").fetchone()
    return int(apart[0]) if apart else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", type=Path)
    parser.add_argument("--base", required=True)
    parser.add_argument("--allow-new", action="store_true")
    parser.add_argument("--keep", type=Path, help="keep the dumps in this folder")
    args = parser.parse_args()
    failed = False
    with tempfile.TemporaryDirectory(prefix="same-tables-") as scratch:
        tmp = str(args.keep) if args.keep else scratch
        base_tree = export_tree(args.base, Path(tmp) / "tree")
        base = ingest_and_dump(base_tree, args.runs.resolve(), Path(tmp) / "base")
        head = ingest_and_dump(ROOT, args.runs.resolve(), Path(tmp) / "head")
        names = sorted({p.stem for p in base.iterdir()} | {p.stem for p in head.iterdir()})
        for name in names:
            sides = [(d / f"{name}.parquet").exists() for d in (base, head)]
            if sides == [True, True]:
                apart = compare(base, head, name)
                print(f"{name}: {'same' if apart == 0 else f'{apart} rows apart'}")
                failed |= apart != 0
            else:
                where = "only in " + ("base" if sides[0] else "head")
                errors = [d / f"{name}.error" for d in (base, head)
                          if (d / f"{name}.error").exists()]
                print(f"{name}: {where}" + (f" ({errors[0].read_text()[:120]})" if errors else ""))
                failed |= not (args.allow_new and sides == [False, True])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
