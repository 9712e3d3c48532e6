"""The samples-role reader of the monitor family: every monitor log of a run → gpu_samples.

decode.py parses each layout into Frames; rows.py turns a Frame into gpu_samples rows.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from etl.core.errors import InputError
from etl.extract.monitor.decode import read_file
from etl.extract.monitor.rows import anomaly_table, to_table


@dataclass
class SamplesPart:
    tables: dict[str, Any]
    anomalies: Any
    sources: list[dict[str, Any]]


def read(files: list[Path], dims: dict[str, Any], first_source_id: int) -> SamplesPart:
    """The samples-role reader (etl/extract/registry.py): every monitor file of a run."""
    import pyarrow as pa

    tables, found, sources = [], [], []
    for i, path in enumerate(files):
        source_id = first_source_id + i
        fmt, frames = read_file(path, dims.get("nvidia_smi_query"))
        what = path.name
        for frame in frames:
            tables.append(to_table(frame, source_id, dims.get("timezone"), what))
            found += [(source_id, kind, detail if detail.startswith(what) else f"{what}: {detail}")
                      for kind, detail in frame.anomalies]
        rows = sum(f.rows for f in frames)
        if rows == 0:
            raise InputError(path, f"no {fmt.name} sample could be read", None,
                             "check that the log holds samples below its header")
        sources.append({"path": path, "format": fmt.name, "rows": rows,
                        "gpu_names": _gpu_names(frames)})
    table = pa.concat_tables(tables) if tables else None
    return SamplesPart({"gpu_samples": table} if table is not None else {},
                       anomaly_table(found) if found else None, sources)


def _gpu_names(frames: list[Any]) -> list[str]:
    """The GPU models a log names (nvidia-smi name, DCGM modelName), in order of first
    appearance: runs.gpu of a run whose traces name none."""
    import pyarrow as pa

    names: list[str] = []
    for frame in frames:
        if frame.device_name is None:
            continue
        for name in pa.array(frame.device_name, pa.string()).unique().to_pylist():
            if name and name not in names:
                names.append(name)
    return names
