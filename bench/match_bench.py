"""Time and peak memory of match_kernels at 10^3, 10^4 and 10^5 kernels a side.

Both sides are built by repeating a corpus trace's kernels (launch order, kind = kernel):
the trace side is the repetition, the ncu side the same sequence written in ncu's base
style, with 2% other algorithms, ±30% durations and one kernel in 500 dropped (so the
alignment has gaps to bridge and drift to follow). Prints one line per size: seconds of
one call, peak memory it allocated (tracemalloc), kernels matched; asserts nothing.

    .venv/bin/python bench/match_bench.py [trace.json.gz]
"""
from __future__ import annotations

import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pyarrow as pa

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from etl.match.align import match_kernels  # noqa: E402
from tests.match import synth  # noqa: E402

DEFAULT = ROOT.parent / "shared" / "corpus" / "hta" / "trace_diff" / "control" / "control.json.gz"
SIZES = (1_000, 10_000, 100_000)


def repeated(kernels: synth.TraceKernels, size: int) -> pa.Table:
    """The trace's kernels in launch order, repeated to `size` rows with fresh ids/times."""
    base = kernels.table.take(pa.array(kernels.order))
    rows = np.arange(size) % base.num_rows
    table = base.take(pa.array(rows))
    step = int(np.asarray(base["ts_ns"]).max() - np.asarray(base["ts_ns"]).min()) + 1
    shift = (np.arange(size) // base.num_rows) * step
    for column in ("ts_ns", "launch_ts_ns"):
        values = np.asarray(table[column].fill_null(0)) + shift
        table = table.set_column(table.schema.get_field_index(column), column, pa.array(values))
    return table.set_column(0, "kernel_id", pa.array(np.arange(size, dtype=np.int64)))


def ncu_side(trace: pa.Table, rng: np.random.Generator) -> pa.Table:
    kept = np.flatnonzero(rng.random(trace.num_rows) >= 1 / 500)
    names = trace["name"].to_pylist()
    grid = np.asarray(trace["grid_x"].fill_null(1))
    ncu_names, ncu_grid = [], []
    for row in kept.tolist():
        name, gx = names[row], int(grid[row])
        if rng.random() < 0.02 and (variant := synth.swapped_variant(name, gx)) is not None:
            name, gx = variant
        ncu_names.append(synth.base_name(name))
        ncu_grid.append(gx)
    take = pa.array(kept)
    dur = np.asarray(trace["dur_ns"].fill_null(1000))[kept] * rng.uniform(0.7, 1.3, len(kept))
    return pa.table({
        "ncu_id": pa.array(np.arange(len(kept), dtype=np.int64)),
        "kernel_name": pa.array(ncu_names, pa.string()),
        "grid_x": pa.array(ncu_grid, pa.int64()),
        **{c: trace[c].take(take) for c in ("grid_y", "grid_z", "block_x", "block_y",
                                             "block_z")},
        "duration_ns": pa.array(dur.astype(np.int64)),
        "device": pa.array(np.zeros(len(kept), dtype=np.int64)),
        "stream": pa.array(np.full(len(kept), 13, dtype=np.int64)),
    })


def measure(trace: pa.Table, ncu: pa.Table) -> tuple[float, float, pa.Table]:
    """Wall time of a plain call, then peak traced allocation (numpy and Arrow buffers made
    by the call) of a second call: tracing slows the call, so it is not timed."""
    started = time.perf_counter()
    result = match_kernels(trace, ncu)
    seconds = time.perf_counter() - started
    tracemalloc.start()
    match_kernels(trace, ncu)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return seconds, peak / 2**20, result


def main() -> None:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT
    kernels = synth.load(str(path))
    rng = np.random.default_rng(0)
    print(f"source: {path.name} ({kernels.table.num_rows} kernels), repeated")
    print(f"{'trace':>8} {'ncu':>8} {'seconds':>8} {'peak MiB':>9} {'matched':>8}")
    for size in SIZES:
        trace = repeated(kernels, size)
        ncu = ncu_side(trace, rng)
        seconds, peak, result = measure(trace, ncu)
        matched = sum(s == "matched" for s in result["match_status"].to_pylist())
        print(f"{size:>8} {ncu.num_rows:>8} {seconds:>8.2f} {peak:>9.1f} {matched:>8}")


if __name__ == "__main__":
    main()
