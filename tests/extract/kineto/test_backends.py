"""Kineto traces of other backends and of CUDA 13: Intel XPU, PrivateUse1 devices and MTIA
write their launch calls as xpu_runtime / privateuse1_runtime / mtia_runtime (kineto
output_json.cpp writes them as it writes cuda_runtime), XPU kernels name their queue
"sycl queue" instead of "stream", and CUDA 13 adds cuda_event marks on the GPU streams.
Each kernel must get its launch, op and iteration; no launch is an unknown category.
Devices that deviceProperties does not describe (old ROCm numbering) are said."""
from __future__ import annotations

from pathlib import Path

import pytest

import etl
from tests.conftest import event, step, write_trace


def _trace(folder: Path, runtime: str, queue_key: str, marks: bool = False) -> Path:
    """Two steps of 100 µs, each an aten::mm whose launch (correlation 10+i) starts a
    40 µs kernel 10 µs into the step."""
    events = []
    for i in range(2):
        t = 1_000_000 + i * 100_000
        events += [step(i + 1, t, 100_000),
                   event(name="aten::mm", ts=t + 2_000, dur=20_000, External_id=i + 1),
                   event(cat=runtime, name="urEnqueueKernelLaunch", ts=t + 5_000, dur=3_000,
                         correlation=10 + i, External_id=i + 1),
                   event(cat="kernel", name="gemm", ts=t + 10_000, dur=40_000, pid=0, tid=7,
                         correlation=10 + i, device=0, **{queue_key: 7})]
        if marks:
            events.append(event(cat="cuda_event", name="cudaEvent", ts=t + 50_000, dur=1,
                                pid=0, tid=7, correlation=20 + i, device=0, stream=7))
    return write_trace(folder / "rank0.pt.trace.json", events)


@pytest.mark.parametrize(("runtime", "queue_key"), [
    ("xpu_runtime", "sycl queue"), ("xpu_driver", "sycl queue"),
    ("privateuse1_runtime", "stream"), ("privateuse1_driver", "stream"),
    ("mtia_runtime", "stream")])
def test_launches_of_other_backends_link_their_kernels(tmp_path: Path, runtime: str,
                                                       queue_key: str) -> None:
    _trace(tmp_path / "run", runtime, queue_key)
    [result] = etl.ingest(tmp_path / "run", tmp_path / "wh", jobs=1)
    assert result.status == "ingested", result.error
    con = etl.connect(tmp_path / "wh")
    kernels = con.execute("SELECT correlation_id, stream_id, launch_event_id IS NOT NULL, op_name, "
                          "iteration FROM kernels ORDER BY ts_ns").fetchall()
    assert kernels == [(10, 7, True, "aten::mm", 1), (11, 7, True, "aten::mm", 2)]
    kinds = {k for (k,) in con.execute("SELECT DISTINCT kind FROM anomalies").fetchall()}
    assert not kinds & {"unknown_category", "kernel_without_launch"}, kinds
    # by hand: one 40 µs kernel in each 100 µs step
    assert con.execute("SELECT iteration, busy_ns, gpu_util FROM gpu_utilization "
                       "ORDER BY iteration").fetchall() == [(1, 40_000, 0.4), (2, 40_000, 0.4)]


def test_cuda13_event_marks_are_gpu_rows_never_busy(tmp_path: Path) -> None:
    _trace(tmp_path / "run", "cuda_runtime", "stream", marks=True)
    etl.ingest(tmp_path / "run", tmp_path / "wh", jobs=1)
    con = etl.connect(tmp_path / "wh")
    assert con.execute("SELECT kind, stream_id, dur_ns FROM kernels WHERE category = 'cuda_event'"
                       ).fetchall() == [("other", 7, 1), ("other", 7, 1)]
    assert con.execute("SELECT count(*) FROM host_events WHERE category = 'cuda_event'"
                       ).fetchall() == [(0,)]
    assert con.execute("SELECT count(*) FROM anomalies WHERE kind = 'unknown_category'"
                       ).fetchall() == [(0,)]
    assert con.execute("SELECT busy_ns FROM gpu_utilization ORDER BY iteration"
                       ).fetchall() == [(40_000,), (40_000,)]


@pytest.mark.parametrize("device", [0, 2])
def test_devices_deviceproperties_does_not_describe_are_said(tmp_path: Path,
                                                             device: int) -> None:
    # ROCm builds before kineto #926 numbered GPU activities' devices from 2 while
    # deviceProperties listed 0 (ROCm/roctracer#98)
    events = [step(1, 1_000_000, 100_000),
              event(cat="kernel", name="k", ts=1_010_000, dur=40_000, pid=device, tid=0,
                    correlation=1, device=device, stream=0)]
    write_trace(tmp_path / "run" / "rank0.pt.trace.json", events,
                deviceProperties=[{"id": 0, "name": "AMD Instinct MI300X"}])
    etl.ingest(tmp_path / "run", tmp_path / "wh", jobs=1)
    con = etl.connect(tmp_path / "wh")
    flags = con.execute("SELECT detail FROM anomalies WHERE kind = 'device_not_in_properties'"
                        ).fetchall()
    if device == 0:
        assert flags == []
    else:
        [(detail,)] = flags
        assert detail.startswith("GPU activities on device(s) [2], which deviceProperties "
                                 "does not describe (it lists [0])")
