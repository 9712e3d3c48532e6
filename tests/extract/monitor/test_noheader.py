"""nvidia-smi --format=csv,noheader[,nounits] logs: fields named by run.toml nvidia_smi_query,
else kept unnamed and flagged (hand-written logs)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import etl
from etl.extract.monitor import looks_like_smi_csv
from etl.extract.monitor.read import read as read_samples

QUERY = "timestamp,index,utilization.gpu,memory.used"
NOUNITS = ("2026/11/24 10:00:00.250, 1, 35, 841\n"
           "2026/11/24 10:00:01.250, 1, 36, 842\n")
WITH_UNITS = ("2026/11/24 10:00:00.250, 1, 35 %, 841 MiB\n"
              "2026/11/24 10:00:01.250, 1, [N/A], 842 MiB\n")


def _read(tmp_path: Path, text: str, **dims: Any) -> tuple[list[dict], dict[str, str]]:
    path = tmp_path / "smi.csv"
    path.write_text(text)
    part = read_samples([path], {"timezone": "UTC", **dims}, 0)
    kinds = {a["kind"]: a["detail"] for a in (part.anomalies.to_pylist() if part.anomalies else [])}
    return part.tables["gpu_samples"].to_pylist(), kinds


def _by_metric(rows: list[dict]) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for r in rows:
        out.setdefault(r["metric"], []).append(r["value"])
    return out


def test_noheader_rows_are_recognised_by_their_timestamp() -> None:
    assert looks_like_smi_csv(NOUNITS.encode()) and looks_like_smi_csv(WITH_UNITS.encode())
    assert looks_like_smi_csv(b"0, 2026/11/24 10:00:00.250, 35\n")  # any field order
    assert not looks_like_smi_csv(b"2026/11/24 10:00:00.250\n")       # a lone time: no log
    assert not looks_like_smi_csv(b"2026-11-24 10:00:00,35\n")        # not nvidia-smi's


def test_query_names_a_nounits_log(tmp_path: Path) -> None:
    rows, kinds = _read(tmp_path, NOUNITS, nvidia_smi_query=QUERY)
    assert _by_metric(rows) == {"gpu_util": [0.35, 0.36],
                                "memory_used_bytes": [841 * 2**20, 842 * 2**20]}
    assert {r["device_index"] for r in rows} == {1}
    assert sorted({r["ts_ns"] for r in rows}) == [1795514400_250_000_000, 1795514401_250_000_000]
    assert not kinds


def test_query_names_a_log_with_units_in_the_values(tmp_path: Path) -> None:
    rows, _ = _read(tmp_path, WITH_UNITS, nvidia_smi_query=" timestamp, index, "
                    "utilization.gpu, memory.used ")  # spaces as people write them
    assert _by_metric(rows) == {"gpu_util": [0.35, None],
                                "memory_used_bytes": [841 * 2**20, 842 * 2**20]}
    assert {r["reported_unit"] for r in rows} == {"%", "MiB"}


def test_without_query_fields_are_kept_unnamed_and_flagged(tmp_path: Path) -> None:
    rows, kinds = _read(tmp_path, NOUNITS)
    assert _by_metric(rows) == {"field_2": [1.0, 1.0], "field_3": [35.0, 36.0],
                                "field_4": [841.0, 842.0]}
    assert all(r["ts_ns"] is not None for r in rows)  # the timestamp column is recognised
    assert "nvidia_smi_query" in kinds["fields_unnamed"] and "4 fields" in kinds["fields_unnamed"]


def test_a_query_of_another_length_is_not_used(tmp_path: Path) -> None:
    rows, kinds = _read(tmp_path, NOUNITS, nvidia_smi_query="timestamp,utilization.gpu")
    assert set(_by_metric(rows)) == {"field_2", "field_3", "field_4"}
    assert "names 2 fields" in kinds["fields_unnamed"]


def test_default_table_and_torn_rows_before_and_among_noheader_rows(tmp_path: Path) -> None:
    text = ("+-----------------------------------------------------------------------------+\n"
            "| NVIDIA-SMI 535.104.05   Driver Version: 535.104.05   CUDA Version: 12.2     |\n"
            "+-----------------------------------------------------------------------------+\n"
            + NOUNITS + "2026/11/24 10:00:02.250, 1, 3\n" + "2026/11/24 10:00:0\0\0, 1, 37, 843\n")
    rows, kinds = _read(tmp_path, text, nvidia_smi_query=QUERY)
    assert _by_metric(rows)["gpu_util"] == [0.35, 0.36]
    assert "3 line(s)" in kinds["preamble_skipped"] and "2 row(s)" in kinds["torn_rows"]


def test_a_header_wins_over_a_differing_query(tmp_path: Path) -> None:
    rows, kinds = _read(tmp_path, "timestamp, utilization.gpu [%]\n2026/11/24 10:00:00.250, 5 %\n",
                        nvidia_smi_query=QUERY)
    assert _by_metric(rows) == {"gpu_util": [0.05]} and "nvidia_smi_query_ignored" in kinds


def test_ingest_reads_nvidia_smi_query_from_run_toml(tmp_path: Path) -> None:
    folder = tmp_path / "runs" / "r"
    folder.mkdir(parents=True)
    (folder / "gpu.log").write_text(NOUNITS)
    (folder / "run.toml").write_text(f'timezone = "UTC"\nnvidia_smi_query = "{QUERY}"\n')
    [result] = etl.ingest([folder], tmp_path / "wh")
    assert result.status == "ingested", result.error
    rows = etl.connect(tmp_path / "wh").execute(
        "SELECT metric, avg(value) FROM gpu_samples GROUP BY metric ORDER BY metric").fetchall()
    assert rows == [("gpu_util", pytest.approx(0.355)),
                    ("memory_used_bytes", pytest.approx(841.5 * 2**20))]


def test_a_query_that_is_not_text_is_refused_in_one_line(tmp_path: Path) -> None:
    folder = tmp_path / "runs" / "r"
    folder.mkdir(parents=True)
    (folder / "gpu.log").write_text(NOUNITS)
    (folder / "run.toml").write_text("nvidia_smi_query = [\"timestamp\"]\n")
    [result] = etl.ingest([folder], tmp_path / "wh")
    assert result.status == "refused" and "nvidia_smi_query" in (result.error or "")
