"""One GPU index that names two GPU models (two jobs on two machines writing one log): the
samples keep their model, and an anomaly says the views would average them as one GPU."""
from __future__ import annotations

from pathlib import Path

from tests.extract.monitor.test_monitor import _read

SMI = """timestamp, index, name, utilization.gpu [%]
2026/11/24 10:00:00.000, 0, NVIDIA A100-SXM4-80GB, 90 %
2026/11/24 10:00:00.000, 0, NVIDIA H100 80GB HBM3, 10 %
2026/11/24 10:00:01.000, 0, NVIDIA A100-SXM4-80GB, 92 %
2026/11/24 10:00:01.000, 1, NVIDIA A100-SXM4-80GB, 50 %
"""
DCGM = """DCGM_FI_PROF_SM_ACTIVE{gpu="0",modelName="NVIDIA A100-SXM4-80GB"} 0.9
DCGM_FI_PROF_SM_ACTIVE{gpu="0",modelName="NVIDIA L4"} 0.2
"""


def test_an_index_with_two_models_keeps_them_and_says_so(tmp_path: Path) -> None:
    rows, kinds, sources = _read(tmp_path, SMI, {"timezone": "UTC"})
    by_model = sorted((r["device_index"], r["device_name"], r["value"]) for r in rows)
    assert by_model == [(0, "NVIDIA A100-SXM4-80GB", 0.9), (0, "NVIDIA A100-SXM4-80GB", 0.92),
                        (0, "NVIDIA H100 80GB HBM3", 0.1), (1, "NVIDIA A100-SXM4-80GB", 0.5)]
    assert kinds["device_models_mixed"] == (
        "smi.csv: GPU index 0 names 2 GPU models: 'NVIDIA A100-SXM4-80GB' (2 samples), "
        "'NVIDIA H100 80GB HBM3' (1 sample); two jobs or machines writing one log? The "
        "samples keep their device_name, but the views know a GPU by its index and average "
        "them as one (filter gpu_samples by device_name, or split the log)")
    assert sources[0]["gpu_names"] == ["NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3"]


def test_the_dcgm_exporter_model_label_too(tmp_path: Path) -> None:
    rows, kinds, _ = _read(tmp_path, DCGM, name="scrape.prom")
    assert sorted(r["device_name"] for r in rows) == ["NVIDIA A100-SXM4-80GB", "NVIDIA L4"]
    assert "GPU index 0 names 2 GPU models" in kinds["device_models_mixed"]


def test_one_model_per_index_is_not_flagged(tmp_path: Path) -> None:
    one = "\n".join(line for line in SMI.splitlines() if "H100" not in line) + "\n"
    rows, kinds, _ = _read(tmp_path, one, {"timezone": "UTC"})
    assert len(rows) == 3 and "device_models_mixed" not in kinds
