"""Time etl.connect() on one warehouse: N connections in one process (a notebook, the
report, the tests), each closed before the next; prints wall and CPU ms per connection.

    python bench/connect_bench.py WAREHOUSE [--repeat 20]

To compare two revisions, run it under each one's checkout in turn:
    PYTHONPATH=OLD_CHECKOUT python bench/connect_bench.py WAREHOUSE
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("warehouse", type=Path)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    import etl

    etl.connect(args.warehouse).close()  # the first one may write the views
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(args.repeat):
        etl.connect(args.warehouse).close()
    print(f"{etl.__file__}: {args.repeat} connections, "
          f"{(time.perf_counter() - wall) / args.repeat * 1000:.1f} ms wall and "
          f"{(time.process_time() - cpu) / args.repeat * 1000:.1f} ms CPU each")


if __name__ == "__main__":
    main()
