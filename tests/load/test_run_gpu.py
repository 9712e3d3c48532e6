"""runs.gpu from whichever file of the run names the GPU (a trace, an ncu export, a
monitor log), and the counts an unchanged re-ingest reports are the first ingest's."""
from __future__ import annotations

from pathlib import Path

from tests.conftest import cli, copy_corpus_run, corpus_path, query_json

SMI = """timestamp, index, name, utilization.gpu [%]
2026/11/24 10:00:00.000, 0, NVIDIA H100 80GB HBM3, 10 %
2026/11/24 10:00:01.000, 0, NVIDIA H100 80GB HBM3, 20 %
"""
PROMETHEUS = """DCGM_FI_PROF_SM_ACTIVE{gpu="0",UUID="GPU-1",modelName="NVIDIA A100-SXM4-80GB"} 0.5
"""


def gpus(warehouse: Path) -> dict[str, tuple[str | None, str | None]]:
    return {r["run_name"]: (r["gpu"], r["gpu_source"]) for r in query_json(
        warehouse, "SELECT run_name, gpu, gpu_source FROM runs")}


def ingest(runs: Path, warehouse: Path) -> str:
    done = cli("ingest", str(runs), "--warehouse", str(warehouse))
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_monitor_ncu_and_jax_runs_name_their_gpu(tmp_path: Path) -> None:
    from tests.extract.xplane.test_jax import A100, AMD, BASE_NS
    from tests.extract.xplane.xspace_writer import Event, Line, Plane, xspace

    runs = tmp_path / "runs"
    (runs / "smi").mkdir(parents=True)
    (runs / "smi" / "gpu.csv").write_text(SMI)
    (runs / "dcgm").mkdir()
    (runs / "dcgm" / "scrape.prom").write_text(PROMETHEUS)
    copy_corpus_run(corpus_path("ncu", "rtx3080_monte-carlo-pi_profile.ncu-rep"), runs, "ncu")
    host = Plane(1, "/host:CPU", [Line(1, "python3", BASE_NS, [Event("train", 0, 1000)])])
    for name, stats in (("jax", dict(A100, gpu_device_name="NVIDIA A100-SXM4-40GB")),
                        ("jaxrocm", dict(AMD, gpu_device_name="gfx90a"))):
        gpu = Plane(2, "/device:GPU:0", [Line(14, "Stream #14(Compute)", BASE_NS, [
            Event("gemm", 100, 500, {"correlation_id": 1})])], stats)
        folder = runs / name / "plugins" / "profile" / "s"
        folder.mkdir(parents=True)
        (folder / "h.xplane.pb").write_bytes(xspace([host, gpu]))
    ingest(runs, tmp_path / "wh")
    assert gpus(tmp_path / "wh") == {
        "smi": ("NVIDIA H100 80GB HBM3", "monitor"),
        "dcgm": ("NVIDIA A100-SXM4-80GB", "monitor"),
        "ncu": ("GeForce RTX 3080", "ncu"),               # device__attribute_display_name
        "jax": ("NVIDIA A100-SXM4-40GB", "trace"),        # XLA's gpu_device_name
        "jaxrocm": ("gfx90a", "trace")}
    names = query_json(tmp_path / "wh", "SELECT DISTINCT device_name FROM gpu_samples "
                       "ORDER BY 1")
    assert names == [{"device_name": "NVIDIA A100-SXM4-80GB"},
                     {"device_name": "NVIDIA H100 80GB HBM3"}]
    listed = cli("runs", "--warehouse", str(tmp_path / "wh"), env={"COLUMNS": "200"})
    assert "GeForce RTX 3080" in listed.stdout and "gfx90a" in listed.stdout


def test_an_unchanged_reingest_reports_the_first_counts(tmp_path: Path) -> None:
    copy_corpus_run(corpus_path("ncu", "a100_details_cmdline-metrics_gardenia_gemm.csv"),
                    tmp_path / "runs", "ncu")
    first = ingest(tmp_path / "runs", tmp_path / "wh")
    again = ingest(tmp_path / "runs", tmp_path / "wh")
    [row1] = [line for line in first.splitlines() if "│ ncu " in line]
    [row2] = [line for line in again.splitlines() if "│ ncu " in line]
    cells = [c.strip() for c in row2.split("│")]
    assert cells[2] == "unchanged" and cells[5] == "3"       # ncu kernels, as the first time
    assert [c.strip() for c in row1.split("│")][5] == "3"
    assert query_json(tmp_path / "wh", "SELECT ncu_kernel_count FROM runs") == [
        {"ncu_kernel_count": 3}]
