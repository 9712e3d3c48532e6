"""SYNTHETIC Nsight Systems export and GPU monitor logs for `etl demo` (nothing measured).

`write_nsys_demo` writes, into one run folder, what a profiled run of a training loop
with Nsight Systems and two monitors leaves behind:
- `profile.sqlite`: an nsys-like SQLite export (the tables and columns nsys 2024.6 writes,
  the subset this project reads): session start, one GPU, runtime launches, kernels that
  keep the GPU ~97% busy in each `ProfilerStep#N` NVTX range, and GPU_METRICS samples
  (SM active ~0.9, tensor active ~0.03) every 10 ms;
- `nvidia-smi.csv`: `--query-gpu=timestamp,index,utilization.gpu --format=csv` every 10 ms
  in local time (run.toml says `timezone`), reading ~100%;
- `dcgm-exporter.prom`: DCGM exporter scrapes (SMACT, SMOCC, TENSO, GRACT) every 10 ms.
So instrument_comparison shows the paper's gap: a GPU "100% busy" whose tensor cores are
active under 5% of the time. The same writer, with more steps, makes bench's big export.
"""
from __future__ import annotations

import random
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

SCHEMA = """
CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INT, utcTime TEXT, localTime TEXT);
CREATE TABLE TARGET_INFO_GPU (vmId INT, id INT, name TEXT, busLocation TEXT, totalMemory INT,
    smCount INT, uuid TEXT, computeMajor INT, computeMinor INT);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INT NOT NULL, end INT NOT NULL,
    eventClass INT NOT NULL, globalTid INT, correlationId INT, nameId INT NOT NULL,
    returnValue INT NOT NULL, callchainId INT);
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INT NOT NULL, end INT NOT NULL,
    deviceId INT NOT NULL, contextId INT NOT NULL, greenContextId INT, streamId INT NOT NULL,
    correlationId INT, globalPid INT, demangledName INT NOT NULL, shortName INT NOT NULL,
    mangledName INT, launchType INT, cacheConfig INT, registersPerThread INT NOT NULL,
    gridX INT NOT NULL, gridY INT NOT NULL, gridZ INT NOT NULL, blockX INT NOT NULL,
    blockY INT NOT NULL, blockZ INT NOT NULL, staticSharedMemory INT NOT NULL,
    dynamicSharedMemory INT NOT NULL, localMemoryPerThread INT NOT NULL,
    localMemoryTotal INT NOT NULL, gridId INT NOT NULL, sharedMemoryExecuted INT,
    graphNodeId INT, sharedMemoryLimitConfig INT);
CREATE TABLE NVTX_EVENTS (start INT NOT NULL, end INT, eventType INT NOT NULL, rangeId INT,
    category INT, color INT, text TEXT, globalTid INT, endGlobalTid INT, textId INT,
    domainId INT, uint64Value INT, int64Value INT, doubleValue REAL, uint32Value INT,
    int32Value INT, floatValue REAL, jsonTextId INT, jsonText TEXT, binaryData TEXT);
CREATE TABLE TARGET_INFO_GPU_METRICS (typeId INT NOT NULL, sourceId INT NOT NULL,
    typeName TEXT NOT NULL, metricId INT NOT NULL, metricName TEXT NOT NULL);
CREATE TABLE GPU_METRICS (rawTimestamp INT, timestamp INT, typeId INT NOT NULL,
    metricId INT NOT NULL, value INT NOT NULL);
"""
GLOBAL_TID = (4242 << 24) | 4242   # pid 4242, tid 4242, as nsys packs globalTid
GPU_TYPE_ID = 0x10000               # GPU_METRICS typeId of GPU 0
METRICS = ((1, "SM Active [Throughput %]", 90.0), (2, "SM Issue [Throughput %]", 41.0),
           (3, "Tensor Active [Throughput %]", 3.0))
KERNELS = ("sm80_xmma_fprop_implicit_gemm_f16f16_f16f32_f32_nhwckrsc_nhwc_tilesize128x128x32",
           "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>",
           "void cudnn::bn_fw_tr_1C11_singleread<float, 512, true, 1, 2, 0>")
SAMPLE_NS = 10_000_000


def write_nsys_export(path: Path, session_start_ns: int, steps: int, kernels_per_step: int,
                      step_ns: int, seed: str, busy: float = 0.97) -> list[tuple[int, int]]:
    """Write the export; return each step's [start, end) in ns since the session start."""
    rng = random.Random(seed)
    con = sqlite3.connect(path)
    con.executescript(SCHEMA)
    con.executemany("INSERT INTO StringIds VALUES (?, ?)",
                    [(1, "cudaLaunchKernel")] + [(10 + i, k) for i, k in enumerate(KERNELS)])
    start = datetime.fromtimestamp(session_start_ns / 1e9, UTC)
    con.execute("INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (?, ?, ?)",
                (session_start_ns, start.isoformat(), start.isoformat()))
    con.execute("INSERT INTO TARGET_INFO_GPU VALUES (0, 0, 'synthetic-A100', '0000:07:00.0', "
                "85899345920, 108, 'GPU-synthetic-0', 8, 0)")
    con.executemany("INSERT INTO TARGET_INFO_GPU_METRICS VALUES (?, 0, 'GPU', ?, ?)",
                    [(GPU_TYPE_ID, m, name) for m, name, _ in METRICS])
    windows = []
    t0 = 50_000_000
    for step in range(steps):
        begin = t0 + step * step_ns
        windows.append((begin, begin + step_ns))
        _write_step(con, rng, step, begin, step_ns, kernels_per_step, busy)
    con.executemany("INSERT INTO GPU_METRICS VALUES (?, ?, ?, ?, ?)", _metric_rows(
        rng, t0, t0 + steps * step_ns))
    con.commit()
    con.close()
    return windows


def _write_step(con: sqlite3.Connection, rng: random.Random, step: int, begin: int,
                step_ns: int, kernels: int, busy: float) -> None:
    con.execute("INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid) "
                "VALUES (?, ?, 59, ?, ?)", (begin, begin + step_ns, f"ProfilerStep#{step}",
                                           GLOBAL_TID))
    slot = step_ns // kernels
    runtime, gpu = [], []
    for k in range(kernels):
        corr = step * kernels + k + 1
        launch = begin + k * slot
        runtime.append((launch, launch + 4_000, 1, GLOBAL_TID, corr, 1, 0, None))
        start = launch + 6_000
        dur = int(slot * busy) - rng.randrange(1_000)
        name = 10 + k % len(KERNELS)
        gpu.append((start, start + dur, 0, 1, None, 7, corr, 4242 << 24, name, name, None, 1,
                    0, 64, 128, 1, 1, 256, 1, 1, 0, 16384, 0, 0, corr, 0, None, 0))
    con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?,?,?,?,?,?,?,?)", runtime)
    con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES "
                    "(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", gpu)


def _metric_rows(rng: random.Random, begin: int, end: int
                 ) -> Iterator[tuple[int, int, int, int, int]]:
    for ts in range(begin, end, SAMPLE_NS):
        for metric, _, level in METRICS:
            value = max(0, round(level + rng.uniform(-1, 1)))
            yield ts, ts, GPU_TYPE_ID, metric, value


def write_monitor_logs(folder: Path, session_start_ns: int, span: tuple[int, int],
                       timezone: str, seed: str) -> None:
    """nvidia-smi CSV (local time in `timezone`) and DCGM exporter scrapes over `span`."""
    rng = random.Random(seed)
    zone = ZoneInfo(timezone)
    smi = [SMI_HEADER]
    prom: list[str] = []
    for offset in range(span[0], span[1], SAMPLE_NS):
        moment = sample_moment(session_start_ns + offset + SAMPLE_NS // 2)
        smi.append(smi_line(moment, zone, rng))
        prom += dcgm_scrape(moment, rng)
    write_logs(folder, smi, prom)


SMI_HEADER = "timestamp, index, utilization.gpu [%], power.draw [W]"
MONITOR_NOTE = "# SYNTHETIC log written by `etl demo` (etl/demo/nsys.py): generated, not measured."


def sample_moment(ns: int) -> datetime:
    """A sample's instant, to the µs the logs print."""
    return datetime.fromtimestamp(ns // 10**9, UTC) + timedelta(microseconds=(ns % 10**9) // 1000)


def smi_line(moment: datetime, zone: ZoneInfo, rng: random.Random) -> str:
    """One nvidia-smi CSV row in local time (nvidia-smi prints no zone)."""
    local = moment.astimezone(zone).strftime("%Y/%m/%d %H:%M:%S.%f")[:-3]
    return f"{local}, 0, {rng.choice((99, 100, 100))} %, {rng.uniform(280, 320):.2f} W"


def dcgm_scrape(moment: datetime, rng: random.Random) -> list[str]:
    """One DCGM exporter scrape: its time, then SMACT, SMOCC, TENSO and GRACT of GPU 0."""
    labels = ('{gpu="0",UUID="GPU-synthetic-0",pci_bus_id="00000000:07:00.0",'
              'device="nvidia0",modelName="synthetic-A100",Hostname="synthetic"}')
    return [moment.isoformat()] + [
        f"{name}{labels} {level + rng.uniform(-0.01, 0.01):.3f}"
        for name, level in (("DCGM_FI_PROF_GR_ENGINE_ACTIVE", 0.98),
                            ("DCGM_FI_PROF_SM_ACTIVE", 0.90), ("DCGM_FI_PROF_SM_OCCUPANCY", 0.35),
                            ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", 0.03))]


def write_logs(folder: Path, smi: list[str], prom: list[str]) -> None:
    """nvidia-smi.csv and dcgm-exporter.prom, each only when it has samples."""
    if len(smi) > 1:
        (folder / "nvidia-smi.csv").write_text("\n".join(smi) + "\n", encoding="utf-8")
    if prom:
        (folder / "dcgm-exporter.prom").write_text("\n".join([MONITOR_NOTE, *prom]) + "\n",
                                                   encoding="utf-8")


def write_nsys_demo(folder: Path, seed: str, session_start_ns: int, timezone: str) -> None:
    windows = write_nsys_export(folder / "profile.sqlite", session_start_ns, steps=5,
                                kernels_per_step=40, step_ns=100_000_000, seed=seed)
    write_monitor_logs(folder, session_start_ns, (windows[0][0], windows[-1][1]), timezone,
                       seed)
