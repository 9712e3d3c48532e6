"""The device's total memory from run.toml (`gpu_memory_bytes`) where a trace lacks it.

Precedence: the trace's own device description first (Kineto deviceProperties
totalGlobalMem, the xplane device plane's memory_size, nsys TARGET_INFO_GPU): the
profiler read it from the device the run used, while run.toml is written by a person and
applies to every GPU of the run. run.toml fills `devices.memory_bytes` only where the
trace gives none:

=================================  ==============  ==========================================
the trace's row                    memory_bytes    properties_source / anomaly
=================================  ==============  ==========================================
not described (properties NULL)    run.toml        'run.toml'
described, without memory          run.toml        the trace's; device_memory_from_run_toml
described, with memory             the trace's     the trace's; device_memory_disagrees when
                                                   run.toml says another number
=================================  ==============  ==========================================
"""
from __future__ import annotations

from typing import Any

RUN_TOML_KEY = "gpu_memory_bytes"
GIB = 1 << 30
Anomaly = tuple[int, str, str]   # source_id, kind, detail


def with_run_toml_memory(devices: Any, dims: dict[str, Any]) -> tuple[Any, list[Anomaly]]:
    """`devices` (one reader's rows, or several concatenated) with memory_bytes filled
    from run.toml where the trace gives none, and the anomalies of the table above."""
    import pyarrow as pa

    stated = dims.get(RUN_TOML_KEY)
    if devices is None or stated is None or devices.num_rows == 0:
        return devices, []
    rows = devices.to_pylist()
    anomalies = [found for row in rows if (found := _fill(row, stated)) is not None]
    return pa.Table.from_pylist(rows, schema=devices.schema), anomalies


def _fill(row: dict[str, Any], stated: int) -> Anomaly | None:
    """Fill one devices row in place; the anomaly it calls for, if any."""
    traced, source = row["memory_bytes"], row["properties_source"]
    where = f"device {row['device_id']}"
    if traced is None:
        row["memory_bytes"] = stated
        if source is None or source == "run.toml":
            row["properties_source"] = "run.toml"
            return None
        return (row["source_id"], "device_memory_from_run_toml",
                f"{where}: the trace's description ({source}) has no total memory; "
                f"memory_bytes is run.toml {RUN_TOML_KEY} = {stated} ({_gib(stated)})")
    if traced == stated:
        return None
    return (row["source_id"], "device_memory_disagrees",
            f"{where}: the trace ({source}) says {traced} bytes ({_gib(traced)}) of device "
            f"memory, run.toml {RUN_TOML_KEY} says {stated} ({_gib(stated)}, "
            f"{(stated - traced) / traced:+.1%}); the trace's value is used (correct "
            f"run.toml, or remove the key when the trace describes the device)")


def _gib(value: int) -> str:
    return f"{value / GIB:.2f} GiB"


def anomaly_table(anomalies: list[Anomaly]) -> Any:
    import pyarrow as pa

    n = len(anomalies)
    return pa.table({
        "source_id": pa.array([a[0] for a in anomalies], pa.int32()),
        "kind": pa.array([a[1] for a in anomalies], pa.string()),
        "event_id": pa.nulls(n, pa.int64()),
        "detail": pa.array([a[2] for a in anomalies], pa.string()),
        "ncu_source_id": pa.nulls(n, pa.int32()),
        "ncu_id": pa.nulls(n, pa.int64())})
