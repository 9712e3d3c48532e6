"""GPU_METRICS (nsys profile --gpu-metrics-devices) → gpu_samples, batch by batch.

Layout from NVIDIA's export documentation: a row is (timestamp, typeId, metricId, value),
typeId's low byte is the GPU, and TARGET_INFO_GPU_METRICS names each (typeId, metricId)
pair as "Name [Unit]". Values in % become ratios (unit "ratio", reported_unit the
original). A batch holds few distinct pairs (metrics × GPUs): each pair is described once
in Python and its columns are taken for the rows, so the cost is linear in the rows and
the memory one batch's. The corpus has no such export (tests make one).
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from etl.extract.nsys.decode import Export
from etl.extract.fields import field_map

if TYPE_CHECKING:
    import pyarrow as pa


@dataclass(frozen=True)
class Metric:
    """What one (typeId, metricId) pair means in gpu_samples."""

    device_index: int | None
    metric: str
    divisor: float         # 100 for % (a ratio), else 1
    unit: str | None
    reported_unit: str | None


def describe(type_id: int | None, metric_id: int | None, label: str | None) -> Metric:
    """A pair from its TARGET_INFO_GPU_METRICS name ("metric <id>" when unnamed)."""
    base, _, unit_text = (label or f"metric {metric_id}").partition(" [")
    percent = "%" in unit_text
    return Metric(type_id & 0xFF if type_id is not None else None,
                  field_map("nsys")["gpu_metric_map"].get(base, base), 100.0 if percent else 1.0,
                  "ratio" if percent else None, unit_text.rstrip("]") or None)


def sample_batches(export: Export, source_id: int, start_utc: int | None
                   ) -> Iterator[pa.Table]:
    """gpu_samples rows, a batch of the export at a time. `start_utc` None: the export
    has no session start, so ts_ns is NULL and the clock 'unaligned'."""
    import pyarrow as pa

    if "GPU_METRICS" not in export.tables:
        return
    i64 = pa.int64()
    labels = _labels(export)
    first = 0
    for batch in export.batches("GPU_METRICS", "gpu_metrics", {
            "timestamp": i64, "type_id": i64, "metric_id": i64, "value": pa.float64()}):
        n = len(batch["timestamp"])
        if n:
            yield _samples(batch, labels, source_id, start_utc, first)
        first += n


def _labels(export: Export) -> Callable[[Any, Any], str | None]:
    import pyarrow as pa

    i64 = pa.int64()
    names = export.read("TARGET_INFO_GPU_METRICS", "gpu_metric_names", {
        "type_id": i64, "metric_id": i64, "name": pa.string()})
    by_id = {(t, m): n for t, m, n in zip(names["type_id"].to_pylist(),
                                          names["metric_id"].to_pylist(),
                                          names["name"].to_pylist())}
    return lambda t, m: by_id.get((t, m))


def _samples(batch: dict[str, pa.Array], labels: Callable[[Any, Any], str | None],
             source_id: int, start_utc: int | None, first: int) -> pa.Table:
    import pyarrow as pa
    import pyarrow.compute as pc

    pair, pairs = _pair_codes(batch["type_id"], batch["metric_id"])
    metrics = [describe(t, m, labels(t, m)) for t, m in pairs]
    n = len(pair)
    clock = batch["timestamp"]
    divisor = np.array([m.divisor for m in metrics])[pair]
    return pa.table({
        "source_id": pa.repeat(pa.scalar(source_id, pa.int32()), n),
        "sample_index": pa.array(np.arange(first, first + n, dtype=np.int64)),
        "device_index": _take([m.device_index for m in metrics], pa.int32(), pair),
        "device_uuid": pa.nulls(n, pa.string()), "device_bus_id": pa.nulls(n, pa.string()),
        "device_name": pa.nulls(n, pa.string()),
        "ts_ns": (pc.add(clock, start_utc) if start_utc is not None
                  else pa.nulls(n, pa.int64())),
        "clock_ts_ns": clock,
        "clock": pa.repeat(pa.scalar("session_start" if start_utc is not None
                                     else "unaligned"), n),
        "instrument": pa.repeat(pa.scalar("nsys"), n),
        "metric": _take([m.metric for m in metrics], pa.string(), pair),
        "value": pc.divide(batch["value"], pa.array(divisor)),
        "unit": _take([m.unit for m in metrics], pa.string(), pair),
        "reported_unit": _take([m.reported_unit for m in metrics], pa.string(), pair)})


def _pair_codes(type_id: pa.Array, metric_id: pa.Array
                ) -> tuple[np.ndarray, list[tuple[Any, Any]]]:
    """Per row, the index of its (type_id, metric_id) pair in the returned list of pairs
    (NULL is a value of its own)."""
    import pyarrow.compute as pc

    codes, sizes, values = [], [], []
    for column in (type_id, metric_id):
        distinct = pc.unique(column)
        codes.append(np.asarray(pc.index_in(column, value_set=distinct, skip_nulls=False)
                                .to_numpy(zero_copy_only=False), np.int64))
        sizes.append(len(distinct))
        values.append(distinct.to_pylist())
    combined = codes[0] * sizes[1] + codes[1]
    used, pair = np.unique(combined, return_inverse=True)
    pairs = [(values[0][c // sizes[1]], values[1][c % sizes[1]]) for c in used.tolist()]
    return pair.reshape(-1), pairs


def _take(values: list[Any], type_: pa.DataType, rows: np.ndarray) -> pa.Array:
    import pyarrow as pa

    return pa.array(values, type_).take(pa.array(rows))


SAMPLES_FILE = "gpu_samples.arrow"   # in the spill folder, from a worker process


def spill_samples(path: Path, out: Path, source_id: int, start_utc: int | None) -> None:
    """sample_batches of the export at `path` written to `out` (Arrow IPC): in a worker
    process, while the reading process links the host rows."""
    import pyarrow as pa

    export = Export(path)
    writer = None
    try:
        for table in sample_batches(export, source_id, start_utc):
            if writer is None:
                writer = pa.ipc.new_file(str(out), table.schema)
            writer.write_table(table)
    finally:
        if writer is not None:
            writer.close()
        export.close()


def spilled_samples(path: Path) -> Iterator[pa.Table]:
    """The tables spill_samples wrote, a batch at a time (read, not memory-mapped: the
    mapped pages of a big file would count as this process's memory)."""
    import pyarrow as pa

    if not path.exists():
        return
    with pa.OSFile(str(path)) as source:
        reader = pa.ipc.open_file(source)
        for i in range(reader.num_record_batches):
            yield pa.Table.from_batches([reader.get_batch(i)])
