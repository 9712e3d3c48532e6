"""One read of an nsys export by the nsys reader (rows discarded), for whole-process timing:

    farm-bench -n 5 --timeout 500 --vs 'python bench/nsys_once.py EXPORT 1' -- \
        python bench/nsys_once.py EXPORT 2

EXPORT: e.g. bench/.cache/nsys_1000mb.sqlite (made by bench/nsys_bench.py); the second
argument is PipelineOptions.workers (2: the activity tables in a second process).
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path


def main() -> None:
    from etl.extract.nsys.read import read as ingest_sqlite
    from etl.extract.trace_role import PipelineOptions, Sinks

    def discard(*_: object) -> None:
        return None

    sinks = Sinks(discard, discard, discard, lambda: None, discard)
    with tempfile.TemporaryDirectory() as spill:
        ingest_sqlite(Path(sys.argv[1]), 0, None, Path(spill) / "spill", sinks,
                      PipelineOptions(workers=int(sys.argv[2])))


if __name__ == "__main__":  # the worker process is spawned: it imports this file again
    main()
