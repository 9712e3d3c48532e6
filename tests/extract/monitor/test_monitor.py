"""GPU monitor logs → gpu_samples: units, N/A, clocks, damaged logs (tiny inline inputs)."""
from __future__ import annotations

from pathlib import Path

import pytest

from etl.core.errors import InputError
from etl.extract.monitor import looks_like_dcgmi, looks_like_dmon, looks_like_smi_csv
from etl.extract.monitor.read import read as read_samples
from etl.extract.ncu import looks_like_ncu
from tests.conftest import INPUTS

DATA = INPUTS / "monitor"


def _read(tmp_path: Path, text: str | bytes, dims: dict | None = None, name: str = "smi.csv"):
    path = tmp_path / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    part = read_samples([path], dims or {}, 3)
    kinds = {a["kind"]: a["detail"] for a in (part.anomalies.to_pylist() if part.anomalies else [])}
    return part.tables["gpu_samples"].to_pylist(), kinds, part.sources


def test_units_in_header_and_values_any_order(tmp_path: Path) -> None:
    rows, _, sources = _read(tmp_path, (
        "power.draw [W], utilization.gpu [%], index, timestamp, memory.used [MiB]\n"
        "250.5 W, 22 %, 1, 2026/11/24 10:00:00.250, 841 MiB\n"), {"timezone": "Europe/Paris"})
    by = {r["metric"]: r for r in rows}
    assert by["gpu_util"]["value"] == 0.22 and by["gpu_util"]["reported_unit"] == "%"
    assert by["memory_used_bytes"]["value"] == 841 * 1048576
    assert by["power_w"]["value"] == 250.5 and by["power_w"]["device_index"] == 1
    # 10:00:00.250 in Paris (UTC+1 in November) is 09:00:00.250 UTC
    assert by["gpu_util"]["ts_ns"] == 1795510800_250_000_000
    assert by["gpu_util"]["clock"] == "timezone:Europe/Paris"
    assert by["gpu_util"]["clock_ts_ns"] - by["gpu_util"]["ts_ns"] == 3600 * 10**9
    assert {r["source_id"] for r in rows} == {3} and sources[0]["rows"] == 1


def test_nounits_uses_the_field_maps_default_unit(tmp_path: Path) -> None:
    rows, _, _ = _read(tmp_path, "timestamp, index, utilization.gpu, memory.used\n"
                                 "2026-11-24T10:00:00+02:00, 0, 35, 100\n")
    by = {r["metric"]: r for r in rows}
    assert by["gpu_util"]["value"] == 0.35 and by["gpu_util"]["reported_unit"] == "%"
    assert by["memory_used_bytes"]["value"] == 100 * 1048576
    assert by["gpu_util"]["clock"] == "utc" and by["gpu_util"]["ts_ns"] == 1795507200 * 10**9


def test_not_available_values_are_null_not_anomalies(tmp_path: Path) -> None:
    rows, kinds, _ = _read(tmp_path, "index, utilization.gpu [%], power.draw [W]\n"
                                     "0, [Not Supported], [N/A]\n0, 5 %, 1 W\n")
    assert [r["value"] for r in rows if r["metric"] == "gpu_util"] == [None, 0.05]
    assert "unparsed_value" not in kinds


def test_local_time_without_timezone_is_kept_unaligned(tmp_path: Path) -> None:
    rows, kinds, _ = _read(tmp_path, "timestamp, utilization.gpu [%]\n"
                                     "2026/11/24 10:00:00.000, 1 %\n")
    assert rows[0]["ts_ns"] is None and rows[0]["clock"] == "unaligned"
    assert rows[0]["clock_ts_ns"] == 1795514400 * 10**9
    assert "timezone" in kinds["clock_unaligned"]


def test_no_time_column_keeps_order(tmp_path: Path) -> None:
    rows, kinds, _ = _read(tmp_path, "index, utilization.gpu [%]\n0, 1 %\n0, 2 %\n0, 3 %\n")
    assert [(r["sample_index"], r["value"]) for r in rows] == [(0, 0.01), (1, 0.02), (2, 0.03)]
    assert all(r["ts_ns"] is None for r in rows) and "samples_without_time" in kinds


def test_two_writers_keep_the_rows_that_parse(tmp_path: Path) -> None:
    rows, kinds, _ = _read(tmp_path, (DATA / "smi_two_writers.csv").read_bytes())
    assert [r["value"] for r in rows] == [0.1, 0.2, 0.11, 0.21]
    assert "1 row(s)" in kinds["torn_rows"] and "4 NUL" in kinds["nul_bytes"]


def test_repeated_header_and_default_table(tmp_path: Path) -> None:
    rows, kinds, _ = _read(tmp_path, (DATA / "smi_units_repeated_header.csv").read_bytes())
    util = [r["value"] for r in rows if r["metric"] == "gpu_util"]
    assert util == [0.22, 1.0, None]
    assert {r["device_bus_id"] for r in rows} == {"00000000:07:00.0"}
    assert "7 line(s)" in kinds["preamble_skipped"] and "2 time" in kinds["header_repeated"]
    assert "torn_rows" in kinds


def test_out_of_order_repeated_and_jumps(tmp_path: Path) -> None:
    _, kinds, _ = _read(tmp_path, (
        "timestamp, index, utilization.gpu [%]\n"
        "2026-11-24T10:00:01Z, 0, 1 %\n2026-11-24T10:00:00Z, 0, 1 %\n"
        "2026-11-24T10:00:00Z, 0, 1 %\n2026-11-24T10:00:01Z, 0, 1 %\n"
        "2026-11-24T10:00:02Z, 0, 1 %\n2026-11-24T10:00:03Z, 0, 1 %\n"
        "2026-11-24T12:00:00Z, 0, 1 %\n"))
    assert {"samples_out_of_order", "samples_repeated", "clock_jump"} <= kinds.keys()


def test_dmon_units_row_and_dash(tmp_path: Path) -> None:
    rows, _, _ = _read(tmp_path, (DATA / "dmon.log").read_text(), {"timezone": "UTC"},
                       "dmon.log")
    by = {(r["metric"], r["sample_index"]): r for r in rows}
    assert by[("gpu_util", 1)]["value"] == 0.95 and by[("gpu_util", 1)]["device_index"] == 1
    assert by[("sm_clock_hz", 0)]["value"] == 1410e6
    assert by[("memory_temperature_c", 0)]["value"] is None
    assert by[("gpu_util", 0)]["ts_ns"] == 1795514400 * 10**9


def test_dcgmi_short_names_and_na(tmp_path: Path) -> None:
    rows, _, _ = _read(tmp_path, (DATA / "dcgmi_dmon.log").read_text(), name="d.log")
    by = {(r["metric"], r["sample_index"]): r["value"] for r in rows}
    assert by[("tensor_active", 0)] == 0.043 and by[("sm_active", 3)] is None
    assert by[("fp16_active", 1)] is None and by[("gr_engine_active", 2)] == 0.99


def test_dcgmi_fields_by_id(tmp_path: Path) -> None:
    rows, _, _ = _read(tmp_path, "#Entity   ID    1002   1004\nID\nGPU 0   0.5   0.25\n",
                       name="d.log")
    assert {r["metric"]: r["value"] for r in rows} == {"sm_active": 0.5, "tensor_active": 0.25}


def test_prometheus_scrapes(tmp_path: Path) -> None:
    rows, _, _ = _read(tmp_path, (DATA / "dcgm_exporter_scrapes.prom").read_text(),
                       name="s.prom")
    util = sorted((r["ts_ns"], r["value"]) for r in rows if r["metric"] == "gpu_util")
    assert util == [(1795514400 * 10**9, 1.0), (1795514401 * 10**9, 0.99)]
    assert {r["device_uuid"] for r in rows} == {"GPU-1b2c"}


def test_header_only_log_is_refused_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no nvidia_smi_csv sample"):
        _read(tmp_path, "timestamp, index, utilization.gpu [%]\n")


def test_sniffers_do_not_claim_each_others_files() -> None:
    ncu = b'"ID","Process ID","Process Name","Host Name","Kernel Name","utilization.gpu"\n'
    assert not looks_like_smi_csv(ncu) and looks_like_ncu(ncu)
    smi = b"timestamp, index, utilization.gpu [%]\n"
    assert looks_like_smi_csv(smi) and looks_like_ncu(smi) is None
    assert not looks_like_smi_csv(b"a,b,c\n1,2,3\n") and not looks_like_dmon(smi)
    assert not looks_like_dcgmi(smi)


def test_streaming_oracle_on_a_day_of_samples(tmp_path: Path) -> None:
    """The column-wise conversion against a naive per-row reading of the same log."""
    lines = ["timestamp, index, utilization.gpu [%], power.draw [W]"]
    for s in range(300):
        for gpu in range(8):
            lines.append(f"2026/11/24 10:{s // 60:02d}:{s % 60:02d}.000, {gpu}, "
                         f"{(s * 7 + gpu) % 101} %, {100 + gpu}.5 W")
    rows, _, _ = _read(tmp_path, "\n".join(lines) + "\n", {"timezone": "UTC"})
    naive = {}
    for i, line in enumerate(lines[1:]):
        t, gpu, util, _ = (p.strip() for p in line.split(","))
        naive[i] = (int(gpu), int(util.split()[0]) / 100)
    got = {r["sample_index"]: (r["device_index"], r["value"]) for r in rows
           if r["metric"] == "gpu_util"}
    assert got == naive
