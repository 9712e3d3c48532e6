"""Pass 3 of the trace pipeline: each GPU activity joined to the first launch call with its
correlation id, in bounded memory.

GPU rows (spilled per slice) and launch calls (spilled by pass 2, with their op and layer)
are split into partitions by correlation id, so that one partition's join fits in a
fixed budget of rows whatever the trace size; each partition is joined in memory (binary
search in the partition's launches). With one partition (most traces) the rows come out
in event order; with several, in event order within each partition.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from etl.extract.kineto.decode import Anomaly
from etl.extract.prefetch import prefetched

PART_ROWS = 1 << 17     # GPU rows + launch rows joined at once (~25 MB of Arrow)
EMIT_ROWS = 1 << 16     # joined rows handed on at once (each is cast and copied again)
LAUNCH_COLUMNS = ["event_id", "correlation_id", "ts_ns", "op_event_id", "op_name", "layer",
                  "layer_kind", "pass", "layer_status"]
Emit = Callable[[pa.Table], None]


def join_kernels(spill: Path, gpu_rows: int, launch_rows: int, emit: Emit,
                 anomalies: list[Anomaly]) -> None:
    """Emit joined kernel rows (GPU columns + launch_event_id, launch_ts_ns, op_event_id,
    op_name, layer, layer_kind, pass, layer_status); duplicate launches become anomalies."""
    gpu_files = sorted(spill.glob("gpu-*.parquet"))
    launch_file = spill / "launch.parquet"
    parts = 1 + (gpu_rows + launch_rows) // PART_ROWS
    if parts == 1:
        _join(_read(gpu_files), _read([launch_file]), emit, anomalies)
        return
    folders = _split(gpu_files, launch_file, spill / "parts", parts)
    release_memory()
    for folder in folders:
        join_ipc_parts(folder / "gpu.arrow", folder / "launch.arrow", emit, anomalies)


def join_ipc_parts(gpu_path: Path, launch_path: Path, emit: Emit,
                   anomalies: list[Anomaly] | None = None) -> None:
    """Join one partition's GPU rows and launch calls, each an Arrow IPC file (absent: no
    rows), and emit the joined rows as join_kernels does, in event order. Duplicate
    launches go to `anomalies` (None: the first launch is used, unreported)."""
    _join(read_ipc(gpu_path), read_ipc(launch_path), emit,
          [] if anomalies is None else anomalies)


def _read(files: list[Path]) -> pa.Table | None:
    tables = [pq.read_table(f) for f in files if f.exists()]
    return pa.concat_tables(tables) if tables else None


def read_ipc(path: Path) -> pa.Table | None:
    """An Arrow IPC file of the spill, memory-mapped (None when absent: no rows)."""
    if not path.exists():
        return None
    with pa.memory_map(str(path)) as source:
        return pa.ipc.open_file(source).read_all()


def _split(gpu_files: list[Path], launch_file: Path, root: Path, parts: int) -> list[Path]:
    """Write the rows into root/<k>/{gpu,launch}.arrow by correlation id modulo `parts`
    (Arrow IPC: one open writer per partition holds no encoding buffers)."""
    folders = [root / str(k) for k in range(parts)]
    for folder in folders:
        folder.mkdir(parents=True)
    sides = [("gpu.arrow", gpu_files),
             ("launch.arrow", [launch_file] if launch_file.exists() else [])]
    for name, files in sides:
        writers: list[pa.ipc.RecordBatchFileWriter | None] = [None] * parts
        try:
            with prefetched(_batches(files)) as batches:  # read while scattering
                for batch in batches:
                    _scatter(batch, folders, name, writers)
        finally:
            for writer in writers:
                if writer is not None:
                    writer.close()
    return folders


def _batches(files: list[Path]) -> Iterator[pa.Table]:
    # pre_buffer off: on, pyarrow reads whole column chunks ahead of the batches (a row
    # group of a big spill file at once), which is the memory the partitions are to bound
    for path in files:
        for batch in pq.ParquetFile(path, pre_buffer=False).iter_batches(batch_size=1 << 17):
            yield pa.Table.from_batches([batch])


def _scatter(table: pa.Table, folders: list[Path], name: str,
             writers: list[pa.ipc.RecordBatchFileWriter | None]) -> None:
    corr = np.asarray(pc.fill_null(table["correlation_id"], 0).to_numpy(), dtype=np.int64)
    part = corr % len(folders)
    order = np.argsort(part, kind="stable")
    bounds = np.searchsorted(part[order], np.arange(len(folders) + 1))
    for k, folder in enumerate(folders):
        rows = order[bounds[k]:bounds[k + 1]]
        if len(rows) == 0:
            continue
        writer = writers[k]
        if writer is None:
            writer = writers[k] = pa.ipc.new_file(str(folder / name), table.schema)
        writer.write_table(table.take(pa.array(rows)))


def _join(gpu: pa.Table | None, launches: pa.Table | None, emit: Emit,
          anomalies: list[Anomaly]) -> None:
    if gpu is None or gpu.num_rows == 0:
        return
    first = _first_launches(launches, anomalies)
    joined = with_launch_columns(gpu, first)
    del gpu, first
    ids = np.asarray(joined["event_id"].to_numpy(), dtype=np.int64)
    if len(ids) > 1 and not bool(np.all(ids[1:] > ids[:-1])):  # B/E pairs are spilled last
        joined = joined.sort_by("event_id")
    for start in range(0, joined.num_rows, EMIT_ROWS):
        emit(joined.slice(start, EMIT_ROWS))
    del joined
    release_memory()


def with_launch_columns(gpu: pa.Table, first: pa.Table) -> pa.Table:
    """GPU rows, in their order, with the columns of the launch of their correlation id
    (NULL without one): a left join by binary search in the launches sorted by id, so the
    GPU rows (long kernel names) are never reordered or copied."""
    keys = np.asarray(first["correlation_id"].to_numpy(), dtype=np.int64)
    corr = gpu["correlation_id"]
    wanted = np.asarray(pc.fill_null(corr, 0).to_numpy(), dtype=np.int64)
    found = np.asarray(pc.is_valid(corr).to_numpy(zero_copy_only=False), dtype=bool)
    at = np.searchsorted(keys, wanted)
    if len(keys):
        at = np.minimum(at, len(keys) - 1)
        found &= keys[at] == wanted
    else:
        found[:] = False
    rows = pa.array(np.where(found, at, 0), pa.int64(), mask=~found)
    for column in first.column_names:
        if column != "correlation_id":
            gpu = gpu.append_column(column, first[column].take(rows))
    return gpu


def release_memory() -> None:
    """Hand freed Arrow memory back to the OS between passes: the allocator keeps it for
    reuse otherwise, and the process's resident size would add up the passes' peaks."""
    pa.default_memory_pool().release_unused()


def _first_launches(launches: pa.Table | None, anomalies: list[Anomaly]) -> pa.Table:
    """The earliest (lowest event id) launch per correlation id; later ones are flagged."""
    if launches is None:
        launches = pa.schema([("event_id", pa.int64()), ("correlation_id", pa.int64()),
                              ("ts_ns", pa.int64()), ("op_event_id", pa.int64()),
                              *((c, pa.string()) for c in LAUNCH_COLUMNS[4:])]).empty_table()
    first, later = first_of_each_id(launches.select(LAUNCH_COLUMNS))
    for event_id in later.to_pylist():
        anomalies.append(("duplicate_correlation", event_id, "a second launch call with the "
                          "same correlation id; the first is used"))
    return first.rename_columns(
        ["launch_event_id", "correlation_id", "launch_ts_ns", *LAUNCH_COLUMNS[3:]])


def first_of_each_id(launches: pa.Table) -> tuple[pa.Table, pa.Array]:
    """The launches (event_id, correlation_id, ...) with the lowest event id of their
    correlation id, sorted by id, and the event ids of the others."""
    if not _in_launch_order(launches):
        launches = launches.sort_by([("correlation_id", "ascending"),
                                     ("event_id", "ascending")])
    corr = np.asarray(launches["correlation_id"].to_numpy(), dtype=np.int64)
    first = np.ones(len(corr), dtype=bool)
    first[1:] = corr[1:] != corr[:-1]
    return (launches.filter(pa.array(first)),
            launches["event_id"].filter(pa.array(~first)).combine_chunks())


def _in_launch_order(launches: pa.Table) -> bool:
    """Sorted by (correlation id, event id) already? Launches from one thread come in
    id order, and a sort of the partition (strings included) costs ~8x this check."""
    if launches.num_rows < 2 or launches["correlation_id"].null_count:
        return launches.num_rows < 2
    corr = np.asarray(launches["correlation_id"].to_numpy(), dtype=np.int64)
    event = np.asarray(launches["event_id"].to_numpy(), dtype=np.int64)
    later = corr[1:] > corr[:-1]
    tie = (corr[1:] == corr[:-1]) & (event[1:] > event[:-1])
    return bool((later | tie).all())
