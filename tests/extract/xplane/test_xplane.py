"""The xplane_pb reader: against a naive decoding of the corpus file, and on small XSpaces
written by tests/extract/xplane/xspace_writer.py for what the corpus lacks."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from etl.load.ingest import RunResult, ingest_all
from etl.load.runfolder import find_run_folders, scan
from etl.warehouse.store import Warehouse
from tests.conftest import corpus_path
from tests.extract.xplane.xspace_writer import Event, Line, Plane, Profile, profile_bytes, xspace

SAMPLE = ("tf", "v100x8_tfprofiler-demo_GPU-multi-worker_34.83.195.179_6003.xplane.pb")


def run_folder(root: Path, files: dict[str, bytes], name: str = "run") -> Path:
    folder = root / name
    for host, data in files.items():
        path = folder / "plugins" / "profile" / "2024_01_01_00_00_00" / f"{host}.xplane.pb"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return folder


def ingest(tmp_path: Path, files: dict[str, bytes]) -> tuple[RunResult, dict[str, pa.Table]]:
    warehouse = Warehouse.at(tmp_path / "wh")
    [result] = ingest_all([run_folder(tmp_path / "runs", files)], warehouse)
    if result.status != "ingested":
        return result, {}
    [folder] = [p for p in warehouse.data.iterdir() if not p.name.startswith("_")]
    tables = {p.stem: pq.read_table(p) for p in folder.glob("*.parquet")}
    return result, tables


# ---- a naive decoding: a generic protobuf parser into nested dicts ---------------------

def _naive(data: bytes) -> dict[int, list[Any]]:
    out: dict[int, list[Any]] = {}
    i = 0
    while i < len(data):
        key, i = _naive_varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _naive_varint(data, i)
        elif wire == 2:
            size, i = _naive_varint(data, i)
            value, i = data[i:i + size], i + size
        elif wire == 1:
            value, i = data[i:i + 8], i + 8
        else:
            raise AssertionError(wire)
        out.setdefault(number, []).append(value)
    return out


def _naive_varint(data: bytes, i: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        value |= (data[i] & 0x7F) << shift
        shift += 7
        i += 1
        if data[i - 1] < 0x80:
            return value, i


def naive_gpu_events(data: bytes) -> list[tuple[int, str, int, int]]:
    """(device, name, ts_ns, dur_ns) of every event on a GPU plane's stream line."""
    found = []
    for plane_bytes in _naive(data).get(1, []):
        plane = _naive(plane_bytes)
        name = plane[2][0].decode()
        if not name.startswith("/device:GPU:"):
            continue
        names = {}
        for entry in plane.get(4, []):
            meta = _naive(_naive(entry)[2][0])
            names[meta.get(1, [0])[0]] = meta.get(2, [b""])[0].decode()
        for line_bytes in plane.get(3, []):
            line = _naive(line_bytes)
            if not line[2][0].decode().startswith("Stream #"):
                continue
            base = line.get(3, [0])[0]
            for event_bytes in line.get(4, []):
                event = _naive(event_bytes)
                found.append((int(name.rsplit(":", 1)[1]), names[event.get(1, [0])[0]],
                              base + event.get(2, [0])[0] // 1000,
                              event.get(3, [0])[0] // 1000))
    return sorted(found)


def test_corpus_kernels_match_a_naive_decoding(tmp_path: Path) -> None:
    data = corpus_path(*SAMPLE).read_bytes()
    result, tables = ingest(tmp_path, {"host": data})
    assert result.status == "ingested", result.error
    kernels = tables["kernels"]
    got = sorted(zip(kernels["device_id"].to_pylist(), kernels["name"].to_pylist(),
                     kernels["ts_ns"].to_pylist(), kernels["dur_ns"].to_pylist()))
    expected = naive_gpu_events(data)
    assert len(expected) == 1556 and got == expected
    # every activity of the sample has its launch on the host plane, and kernel details
    assert kernels.filter(pa.compute.is_null(kernels["launch_event_id"])).num_rows == 0
    k = kernels.filter(pa.compute.equal(kernels["kind"], "kernel")).to_pylist()[0]
    assert (k["registers_per_thread"], k["grid_x"], k["block_x"]) == (38, 160, 1024)
    devices = tables["devices"].to_pylist()
    assert [(d["device_id"], d["compute_capability"], d["sm_count"], d["memory_bytes"])
            for d in devices][:1] == [(0, "7.0", 80, 16945512448)] and len(devices) == 8


def test_run_folder_is_the_folder_holding_plugins(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    folder = run_folder(root, {"host_a": profile_bytes(), "host_b": profile_bytes(gpus=2)},
                        name="tf_bert_b32")
    targets = find_run_folders([root])
    assert [(t.path, t.name) for t in targets] == [(folder, "tf_bert_b32")]
    inputs = [(p.name, f.name) for p, f in scan(folder, "tf_bert_b32").inputs]
    assert inputs == [("host_a.xplane.pb", "xplane_pb"), ("host_b.xplane.pb", "xplane_pb")]


def test_steps_gpus_launches_and_exact_times(tmp_path: Path) -> None:
    profile = Profile(gpus=2, steps=3, kernels=2)
    result, tables = ingest(tmp_path, {"h": xspace(profile.planes())})
    assert result.status == "ingested", result.error
    iterations = tables["iterations"].to_pylist()
    # step s starts at base + s ms + 1000 ns + 7 ps: floored to the ns, integers throughout
    assert [(i["iteration"], i["start_ns"], i["end_ns"], i["boundary"]) for i in iterations] \
        == [(s, 1_000_000_000 + s * 1_000_000 + 1000, 1_000_000_000 + s * 1_000_000 + 999_000,
             "ProfilerStep") for s in range(3)]
    kernels = tables["kernels"].sort_by("kernel_id").to_pylist()
    assert len(kernels) == 12 and {k["device_id"] for k in kernels} == {0, 1}
    first = kernels[0]
    assert (first["ts_ns"], first["dur_ns"]) == (1_000_000_000 + 1000 + 10_000, 200_000)
    assert (first["op_name"], first["layer"], first["iteration"]) == (
        "MatMul", "model/layer_0/dense", 0)
    assert (first["grid_x"], first["grid_y"], first["block_x"], first["registers_per_thread"],
            first["shared_memory_bytes"], first["stream_id"]) == (80, 2, 256, 32, 1024, 10)
    host = {h["event_id"]: h for h in tables["host_events"].to_pylist()}
    launch = host[first["launch_event_id"]]
    assert (launch["name"], launch["category"], launch["correlation_id"]) == (
        "cuLaunchKernel", "launch", first["correlation_id"])
    assert host[first["op_event_id"]]["name"] == "model/layer_0/dense/MatMul:MatMul"
    assert launch["parent_event_id"] == first["op_event_id"]
    assert sorted(k["iteration"] for k in kernels) == [0] * 4 + [1] * 4 + [2] * 4


def test_gpu_utilization_by_hand(tmp_path: Path) -> None:
    import etl

    ingest(tmp_path, {"h": profile_bytes(gpus=2, steps=3, kernels=2)})
    with etl.connect(tmp_path / "wh") as con:
        rows = con.execute("SELECT device_id, iteration, window_ns, busy_ns, kernel_count "
                           "FROM gpu_utilization ORDER BY device_id, iteration").fetchall()
    # host span 998 µs; two 200 µs kernels 100 µs apart: a busy union of 300 µs
    assert rows == [(d, s, 998_000, 300_000, 2) for d in (0, 1) for s in range(3)]


def test_xla_kernels_take_the_hlo_op(tmp_path: Path) -> None:
    _, tables = ingest(tmp_path, {"h": profile_bytes(xla=True, kernels=2)})
    kernels = tables["kernels"].sort_by("kernel_id").to_pylist()
    assert [(k["name"], k["op_name"], k["layer"]) for k in kernels[:2]] == [
        ("fusion_0", "fusion.0", "cluster_0__XlaCompiledKernel_true"),
        ("fusion_1", "fusion.1", "cluster_0__XlaCompiledKernel_true")]


def test_kernel_without_launch(tmp_path: Path) -> None:
    _, tables = ingest(tmp_path, {"h": profile_bytes(orphan=True)})
    kernels = tables["kernels"].sort_by("kernel_id").to_pylist()
    orphan = kernels[0]
    assert orphan["launch_event_id"] is None and orphan["iteration"] is None
    kinds = tables["anomalies"].to_pylist()
    assert [a["event_id"] for a in kinds if a["kind"] == "kernel_without_launch"] == [
        orphan["kernel_id"]]


def test_cpu_only_profile_ingests_its_host_side_with_an_anomaly(tmp_path: Path) -> None:
    planes = [Plane(1, "/host:CPU", [Line(1, "python3", 5, [Event("a:MatMul", 1000, 2000)])]),
              Plane(2, "/device:TPU:0")]
    result, tables = ingest(tmp_path, {"h": xspace(planes)})
    assert result.status == "ingested", result.error
    assert tables["host_events"].num_rows == 1 and tables["kernels"].num_rows == 0
    anomalies = {a["kind"]: a["detail"] for a in tables["anomalies"].to_pylist()}
    assert "no /device:GPU:N plane" in anomalies["no_gpu_activity"]
    assert "/device:TPU:0" in anomalies["xplane_plane_not_read"]


@pytest.mark.parametrize("defect", ["truncated", "garbage", "empty"])
def test_bad_input_refuses_the_run_in_one_line(tmp_path: Path, defect: str) -> None:
    data = profile_bytes()
    broken = {"truncated": data[:len(data) // 2 + 3], "garbage": b"\x0a\xff\xff\xff\x7f" * 20,
              "empty": b""}[defect]
    result, _ = ingest(tmp_path, {"host": broken})
    assert result.status == "refused"
    assert result.error is not None and "\n" not in result.error
    assert "host.xplane.pb" in result.error and "re-export" in result.error


def test_steps_from_step_groups_say_so(tmp_path: Path) -> None:
    _, tables = ingest(tmp_path, {"h": profile_bytes(step_markers=False, steps=2)})
    assert tables["iterations"]["iteration"].to_pylist() == [0, 1]
    kinds = [a["kind"] for a in tables["anomalies"].to_pylist()]
    assert "xplane_steps" in kinds


def test_unknown_stats_are_counted(tmp_path: Path) -> None:
    _, tables = ingest(tmp_path, {"h": profile_bytes(steps=1, kernels=1)})
    [detail] = [a["detail"] for a in tables["anomalies"].to_pylist()
                if a["kind"] == "xplane_stats_not_stored"]
    assert "context_id (1)" in detail and "_r (1)" in detail


def test_allocator_events_become_memory_events(tmp_path: Path) -> None:
    _, tables = ingest(tmp_path, {"h": profile_bytes(gpus=1, steps=2)})
    rows = tables["memory_events"].sort_by("ts_ns").to_pylist()
    assert [(r["device_id"], r["device_type"], r["allocated_bytes"], r["delta_bytes"])
            for r in rows] == [
        (0, "GPU", (1 << 30) + (64 << 20), 64 << 20), (0, "GPU", 1 << 30, -(64 << 20)),
        (0, "GPU", (1 << 30) + (128 << 20), 128 << 20), (0, "GPU", 1 << 30, -(128 << 20))]
    assert {r["reserved_bytes"] for r in rows} == {2 << 30}
