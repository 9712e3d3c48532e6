"""Monitor logs as people keep them, one hand-written input per variant the other monitor
tests do not cover: the rows that parse are kept, the rest counted, never a traceback."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from etl.extract.monitor.read import read as read_samples

DMON_HEAD = ("# gpu   pwr  gtemp  mtemp    sm   mem   enc   dec  mclk  pclk\n"
             "# Idx     W      C      C     %     %     %     %   MHz   MHz\n")


def _read(tmp_path: Path, data: str | bytes, name: str, **dims: Any
          ) -> tuple[list[dict], dict[str, str]]:
    path = tmp_path / name
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    part = read_samples([path], dims, 0)
    kinds = {a["kind"]: a["detail"] for a in (part.anomalies.to_pylist() if part.anomalies else [])}
    return part.tables["gpu_samples"].to_pylist(), kinds


def _values(rows: list[dict], metric: str) -> list[Any]:
    return [r["value"] for r in sorted(rows, key=lambda r: r["sample_index"])
            if r["metric"] == metric]


def test_csv_header_before_every_row(tmp_path: Path) -> None:
    header = "timestamp, index, utilization.gpu [%]\n"
    text = "".join(f"{header}2026/11/24 10:00:0{s}.000, 0, {s * 10} %\n" for s in range(4))
    rows, kinds = _read(tmp_path, text, "smi.csv", timezone="UTC")
    assert _values(rows, "gpu_util") == [0.0, 0.1, 0.2, 0.3]
    assert "3 time(s)" in kinds["header_repeated"] and "torn_rows" not in kinds


def test_dmon_without_date_keeps_order_and_says_why(tmp_path: Path) -> None:
    text = ("#Time        gpu   pwr    sm\n#HH:MM:SS    Idx     W     %\n"
            " 10:00:00      0    43    97\n 10:00:01      0    45     -\n")
    rows, kinds = _read(tmp_path, text, "dmon.log", timezone="UTC")
    assert _values(rows, "gpu_util") == [0.97, None] and all(r["ts_ns"] is None for r in rows)
    assert "-o DT" in kinds["time_without_date"]


def test_dmon_header_repeated_every_page(tmp_path: Path) -> None:
    page = " 0    43     48      -    97    40     0     0  1215  1410\n"
    rows, kinds = _read(tmp_path, DMON_HEAD + page + DMON_HEAD + page.replace("97", "12"),
                        "dmon.log")
    assert _values(rows, "gpu_util") == [0.97, 0.12] and "torn_rows" not in kinds


def test_dmon_two_writers(tmp_path: Path) -> None:
    good = " 0    43     48      -    97    40     0     0  1215  1410\n"
    data = (DMON_HEAD + good + " 0    44     4\0\0\0\0 0  1215\n"
            + good.replace("97", "98")).encode()
    rows, kinds = _read(tmp_path, data, "dmon.log")
    assert _values(rows, "gpu_util") == [0.97, 0.98]
    assert "1 dmon line(s)" in kinds["torn_rows"] and "4 NUL" in kinds["nul_bytes"]


def test_dcgmi_two_writers_and_no_time(tmp_path: Path) -> None:
    data = (b"#Entity   ID    SMACT   TENSO\nID\nGPU 0           0.871   0.043\n"
            b"GPU 0           0.8\0\0GPU 0   0.5\n"
            b"GPU 0           N/A     0.045\n")
    rows, kinds = _read(tmp_path, data, "dcgmi.log")
    assert _values(rows, "sm_active") == [0.871, None]
    assert _values(rows, "tensor_active") == [0.043, 0.045]
    assert "1 dcgmi line(s)" in kinds["torn_rows"] and "2 NUL" in kinds["nul_bytes"]
    assert "samples_without_time" in kinds and all(r["ts_ns"] is None for r in rows)


def test_prometheus_millisecond_timestamps_and_a_torn_line(tmp_path: Path) -> None:
    text = ('DCGM_FI_PROF_SM_ACTIVE{gpu="0"} 0.5 1795514400000\n'
            'DCGM_FI_PROF_SM_ACT\n'
            'DCGM_FI_PROF_SM_ACTIVE{gpu="0"} 0.25 1795514401500\n')
    rows, kinds = _read(tmp_path, text, "scrape.prom")
    assert [(r["ts_ns"], r["value"]) for r in rows] == [
        (1795514400_000_000_000, 0.5), (1795514401_500_000_000, 0.25)]
    assert {r["clock"] for r in rows} == {"utc"} and "1 line(s)" in kinds["torn_rows"]


def test_dcgm_no_value_sentinels_are_null_and_counted(tmp_path: Path) -> None:
    # the exporter prints what DCGM returns for a field without a value: its README's
    # sample has DCGM_FI_DEV_MEMORY_TEMP 9223372036854775794 (int64 not supported);
    # 140737488355330 is 2^47 + 2 (double not supported), 2147483633 int32 not found
    text = ('DCGM_FI_DEV_GPU_TEMP{gpu="0"} 9223372036854775794 1795514400000\n'
            'DCGM_FI_DEV_GPU_TEMP{gpu="1"} 41 1795514400000\n'
            'DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{gpu="0"} 140737488355330 1795514400000\n'
            'DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{gpu="1"} 0.123 1795514400000\n'
            'DCGM_FI_DEV_POWER_USAGE{gpu="0"} 2147483633 1795514400000\n'
            'DCGM_FI_DEV_POWER_USAGE{gpu="1"} 2147483.5 1795514400000\n')
    path = tmp_path / "scrape.prom"
    path.write_text(text)
    part = read_samples([path], {}, 0)
    by = {(r["metric"], r["device_index"]): r["value"]
          for r in part.tables["gpu_samples"].to_pylist()}
    assert by[("temperature_c", 0)] is None and by[("temperature_c", 1)] == 41.0
    assert by[("tensor_active", 0)] is None and by[("tensor_active", 1)] == 0.123
    assert by[("power_w", 0)] is None and by[("power_w", 1)] == 2147483.5
    details = [a["detail"] for a in part.anomalies.to_pylist() if a["kind"] == "dcgm_no_value"]
    assert len(details) == 3 and all("1 value(s)" in d for d in details)
    assert not any(a["kind"] == "unparsed_value" for a in part.anomalies.to_pylist())


def test_dmon_gpm_metrics_are_dcgm_s_profiling_quantities(tmp_path: Path) -> None:
    # nvidia-smi dmon --gpm-metrics=1,2,3,5,20 on a Hopper GPU (the header and units rows as
    # `nvidia-smi dmon --help` names them); "-" before the first GPM interval ends
    text = ("# gpu    pwr     sm   gract  smutil   smocc  mmaact     pcitx  mystery\n"
            "# Idx      W      %   GPM:%   GPM:%   GPM:%   GPM:% GPM:MiB/s     GPM:x\n"
            "    0     12      0       -       -       -       -         -        -\n"
            "    0    312     99      97      88      35      12         2        7\n")
    rows, kinds = _read(tmp_path, text, "dmon.log")
    assert _values(rows, "gr_engine_active") == [None, 0.97]
    assert _values(rows, "sm_active") == [None, 0.88]
    assert _values(rows, "sm_occupancy") == [None, 0.35]
    assert _values(rows, "tensor_active") == [None, 0.12]
    assert _values(rows, "pcie_tx_bytes_per_s") == [None, 2 * 1048576.0]
    # a unit the catalog does not know is kept as written, and said
    assert _values(rows, "mystery") == [None, 7.0]
    assert "mystery in 'GPM:x'" in kinds["unknown_unit"]


def test_smi_bitmasks_in_hex_are_numbers(tmp_path: Path) -> None:
    # clocks_event_reasons.active: nvidia-smi writes the reasons bitmask in hex
    text = ("timestamp, index, clocks_event_reasons.active, utilization.gpu [%]\n"
            "2025/05/01 12:00:00.123, 0, 0x0000000000000000, 97 %\n"
            "2025/05/01 12:00:01.124, 0, 0x0000000000000004, 98 %\n"
            "2025/05/01 12:00:02.125, 0, [N/A], 99 %\n")
    rows, kinds = _read(tmp_path, text, "smi.csv", timezone="UTC")
    assert _values(rows, "clocks_event_reasons.active") == [0.0, 4.0, None]
    assert "unparsed_value" not in kinds
