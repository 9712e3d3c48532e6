"""The device's total memory from run.toml (gpu_memory_bytes) where the trace lacks it, and
the precedence of the trace's own description (etl/load/device_memory.py), worked by hand."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import etl
from etl.load.ingest import ingest_all
from etl.warehouse.store import Warehouse
from tests.extract.xplane.test_xplane import run_folder
from tests.extract.xplane.xspace_writer import V100, profile_bytes

GIB, MIB = 1 << 30, 1 << 20
PEAK_STEP_0 = GIB + 64 * MIB      # the writer's allocator peak in step 0
WITHOUT_MEMORY = {k: v for k, v in V100.items() if k != "memory_size"}


def _ingest(tmp_path: Path, device_stats: dict[str, Any], run_toml: str
            ) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """devices (memory_bytes, properties_source), the memory anomalies (kind, detail) and
    gpu_utilization's (iteration, peak_memory_share, memory_status) of a one-GPU run."""
    folder = run_folder(tmp_path / "runs", {"h": profile_bytes(steps=2,
                                                               device_stats=device_stats)})
    (folder / "run.toml").write_text(run_toml, encoding="utf-8")
    [result] = ingest_all([folder], Warehouse.at(tmp_path / "wh"))
    assert result.status == "ingested", result.error
    with etl.connect(tmp_path / "wh") as con:
        devices = con.execute("SELECT memory_bytes, properties_source FROM devices").fetchall()
        anomalies = con.execute("SELECT kind, detail FROM anomalies WHERE kind LIKE "
                                "'device_memory%'").fetchall()
        shares = con.execute("SELECT iteration, peak_memory_share, memory_status FROM "
                             "gpu_utilization ORDER BY iteration").fetchall()
    return devices, anomalies, shares


def test_run_toml_gives_the_memory_the_xplane_lacks(tmp_path: Path) -> None:
    devices, anomalies, shares = _ingest(tmp_path, WITHOUT_MEMORY,
                                         "gpu_memory_bytes = 8589934592\n")
    assert devices == [(8 * GIB, "xplane")]
    [(kind, detail)] = anomalies
    assert kind == "device_memory_from_run_toml" and "8589934592 (8.00 GiB)" in detail
    # step 0 peaks at 1 GiB + 64 MiB, step 1 at 1 GiB + 128 MiB: over 8 GiB by hand
    assert shares == [(0, pytest.approx(1088 / 8192), "measured"),
                      (1, pytest.approx(1152 / 8192), "measured")]


def test_an_undescribed_device_takes_run_toml_as_its_source(tmp_path: Path) -> None:
    devices, anomalies, shares = _ingest(tmp_path, {}, "gpu_memory_bytes = 4294967296\n")
    assert devices == [(4 * GIB, "run.toml")] and anomalies == []
    assert shares[0] == (0, pytest.approx(PEAK_STEP_0 / (4 * GIB)), "measured")


def test_without_the_key_the_share_stays_null_with_its_reason(tmp_path: Path) -> None:
    devices, anomalies, shares = _ingest(tmp_path, WITHOUT_MEMORY, 'gpu = "V100"\n')
    assert devices == [(None, "xplane")] and anomalies == []
    assert shares == [(0, None, "device_memory_unknown"), (1, None, "device_memory_unknown")]


def test_the_trace_wins_and_a_disagreement_is_flagged(tmp_path: Path) -> None:
    devices, anomalies, shares = _ingest(tmp_path, V100, "gpu_memory_bytes = 17179869184\n")
    traced = V100["memory_size"]
    assert devices == [(traced, "xplane")]
    [(kind, detail)] = anomalies
    assert kind == "device_memory_disagrees"
    # 16 GiB against the V100's 16945512448 bytes (15.78 GiB): 1.4 % more
    assert f"says {traced} bytes (15.78 GiB)" in detail and "17179869184 (16.00 GiB, +1.4%)" \
        in detail and "the trace's value is used" in detail
    assert shares[0] == (0, pytest.approx(PEAK_STEP_0 / traced), "measured")


def test_an_agreeing_run_toml_is_silent(tmp_path: Path) -> None:
    devices, anomalies, _ = _ingest(tmp_path, V100, f"gpu_memory_bytes = {V100['memory_size']}\n")
    assert devices == [(V100["memory_size"], "xplane")] and anomalies == []


@pytest.mark.parametrize(("value", "fragment"), [
    ("-1", "gpu_memory_bytes must be a positive number of bytes"),
    ('"16GB"', "key 'gpu_memory_bytes' has a str, expected int")])
def test_a_bad_value_refuses_the_run_in_one_line(tmp_path: Path, value: str,
                                                 fragment: str) -> None:
    folder = run_folder(tmp_path / "runs", {"h": profile_bytes(steps=1)})
    (folder / "run.toml").write_text(f"gpu_memory_bytes = {value}\n", encoding="utf-8")
    [result] = ingest_all([folder], Warehouse.at(tmp_path / "wh"))
    assert result.status == "refused" and result.error is not None
    assert fragment in result.error and "\n" not in result.error
