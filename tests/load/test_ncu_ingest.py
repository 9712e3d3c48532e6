"""Nsight Compute exports through `etl ingest`: tables, the per-kernel levels view, refusals."""
from __future__ import annotations

import csv
from decimal import Decimal
from pathlib import Path

import pytest

from tests.conftest import INPUTS, cli, copy_corpus_run, corpus_path, query_json

V100 = "v100_details_old-format_pytorch1.5_deepcam_O2_fw__"


def _naive_column(path: Path) -> dict[int, Decimal]:
    """ID → Metric Value of a one-metric ncu details export, read with the csv module."""
    lines = path.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith('"ID","Process ID"'))
    rows = csv.DictReader(lines[start:])
    return {int(r["ID"]): Decimal(r["Metric Value"].replace(",", "")) for r in rows}


@pytest.fixture(scope="module")
def ncu_wh(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("ncu")
    runs = root / "runs"
    v100 = runs / "v100pt"
    v100.mkdir(parents=True)
    for metric in ("sm__cycles_elapsed.avg", "sm__inst_executed_pipe_tensor.sum"):
        (v100 / f"{metric}.txt").symlink_to(corpus_path("ncu", f"{V100}{metric}.txt"))
    (v100 / "run.toml").write_text('compute_capability = "7.0"\nsm_count = 80\n')
    both = copy_corpus_run(corpus_path("ncu", "a100_mistic_ilpProf.ncu-rep"), runs, "with_trace")
    (both / "trace.json.gz").symlink_to(corpus_path("hta", "nccl_parser_config",
                                                     "nccl_data.json.gz"))
    result = cli("ingest", str(runs), "--warehouse", str(root / "wh"))
    assert result.returncode == 0, result.stderr
    return root / "wh"


def test_one_metric_files_merge_into_one_export(ncu_wh: Path) -> None:
    rows = query_json(ncu_wh, "SELECT ncu_source_id, count(DISTINCT ncu_id) AS kernels, "
                      "count(*) AS metrics FROM ncu_metrics JOIN runs USING (run_id) "
                      "WHERE run_name = 'v100pt' GROUP BY ALL")
    assert rows == [{"ncu_source_id": 0, "kernels": 644, "metrics": 1288}]


def test_tc_issue_util_equals_a_naive_reading(ncu_wh: Path) -> None:
    cycles = _naive_column(corpus_path("ncu", f"{V100}sm__cycles_elapsed.avg.txt"))
    tensor = _naive_column(corpus_path("ncu", f"{V100}sm__inst_executed_pipe_tensor.sum.txt"))
    got = {r["ncu_id"]: r["tc_issue_util"] for r in query_json(
        ncu_wh, "SELECT ncu_id, tc_issue_util FROM ncu_kernel_utilization "
        "JOIN runs USING (run_id) WHERE run_name = 'v100pt'")}
    # SMSP elapsed cycles = SM elapsed cycles (avg) x 4 SMSPs x 80 SMs, from run.toml
    want = {i: float(tensor[i] / (cycles[i] * 4 * 80)) for i in cycles}
    assert got.keys() == want.keys()
    assert all(got[i] == pytest.approx(want[i], rel=1e-9, abs=0) for i in want)
    assert max(want.values()) > 0.3  # the cuDNN HMMA kernels


def test_absent_counters_are_null_with_a_reason(ncu_wh: Path) -> None:
    rows = query_json(ncu_wh, "SELECT smsp_active_util, smsp_active_util_reason FROM "
                      "ncu_kernel_utilization JOIN runs USING (run_id) WHERE run_name = "
                      "'v100pt' LIMIT 1")
    assert rows[0]["smsp_active_util"] is None and rows[0]["smsp_active_util_reason"]


def test_report_beside_a_trace_takes_the_sm_count_of_its_devices(ncu_wh: Path) -> None:
    [row] = query_json(ncu_wh, "SELECT arch, sm_count, issue_slot_util, issue_slot_util_source "
                       "FROM ncu_kernel_utilization JOIN runs USING (run_id) "
                       "WHERE run_name = 'with_trace'")
    assert row["arch"] == "sm_80" and row["sm_count"] == 108
    assert 0 < row["issue_slot_util"] < 1 and row["issue_slot_util_source"]
    kernels = query_json(ncu_wh, "SELECT count(*) AS n FROM kernels JOIN runs USING (run_id) "
                         "WHERE run_name = 'with_trace'")
    assert kernels == [{"n": 3804}]


def test_text_page_is_refused_with_the_export_command(tmp_path: Path) -> None:
    copy_corpus_run(corpus_path("ncu", "gh200_cs599k_silu-pytorch_details-page.txt"),
                    tmp_path / "runs", "text")
    result = cli("ingest", str(tmp_path / "runs"), "--warehouse", str(tmp_path / "wh"))
    assert result.returncode == 1
    assert "--csv --page raw" in result.stderr and "text/gh200" in result.stderr


def test_ncu_metrics_command_for_an_architecture_newer_than_the_catalog() -> None:
    result = cli("ncu-metrics", "--arch", "sm_120")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == ("# sm_120 has no catalog entry: these are the counters of sm_100, the "
                        "nearest known architecture of its family (blackwell); unverified on "
                        "sm_120")
    assert lines[2] == cli("ncu-metrics", "--arch", "sm_100").stdout.splitlines()[1]
    assert "-o ncu_sm_120_profiler_range" in result.stdout
    unknown = cli("ncu-metrics", "--arch", "sm_60")
    assert unknown.returncode == 1 and "no catalog entry for sm_60" in unknown.stderr


def test_ncu_metrics_command_prints_a_usable_profile_line() -> None:
    out = cli("ncu-metrics", "--arch", "sm_90", "--kernels-per-iteration", "100",
              "--warmup-iterations", "3").stdout
    lines = [line for line in out.splitlines() if not line.startswith("#")]
    assert "smsp__cycles_elapsed" in lines[0]
    assert "--profile-from-start off" in lines[1]
    assert "--launch-skip 300 --launch-count 100" in lines[2]


# ---- an unreadable export does not take the run's trace down ------------------------------

TRACE = ("hta", "nccl_parser_config", "nccl_data.json.gz")
TRACE_KERNELS = 3804
BROKEN_CSV = INPUTS / "ncu" / "broken" / \
    "ncu_details_csv-truncated.csv"


def trace_and_broken_export(root: Path, with_good_export: bool = False) -> Path:
    run = root / "runs" / "mixed"
    run.mkdir(parents=True)
    (run / "trace.json.gz").symlink_to(corpus_path(*TRACE))
    (run / "counters.csv").write_bytes(BROKEN_CSV.read_bytes())
    if with_good_export:
        (run / "good.csv").symlink_to(corpus_path(
            "ncu", "a100_details_cmdline-metrics_gardenia_gemm.csv"))
    return root / "runs"


def test_unreadable_export_beside_a_trace_is_reported_and_the_trace_ingested(
        tmp_path: Path) -> None:
    runs = trace_and_broken_export(tmp_path, with_good_export=True)
    result = cli("ingest", str(runs), "--warehouse", str(tmp_path / "wh"), "--jobs", "1")
    assert result.returncode == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if "counters.csv" in line]
    assert warnings == [
        "warning: mixed/counters.csv: ncu export refused, the run was ingested without it: "
        "line 5: last row has 8 fields, the header has 15: the file is truncated. re-export "
        "or re-copy the ncu output (etl ingest --strict refuses the run instead)"]
    assert "1 export refused: mixed/counters.csv" in result.stdout
    [run] = query_json(tmp_path / "wh", "SELECT run_id, [s.path FOR s IN sources] AS sources, "
                       "skipped FROM runs WHERE run_name = 'mixed'")
    assert run["sources"] == ["trace.json.gz", "good.csv"]
    assert run["skipped"] == [{"path": "counters.csv", "reason": (
        "ncu export refused: line 5: last row has 8 fields, the header has 15: the file is "
        "truncated. re-export or re-copy the ncu output")}]
    counts = query_json(tmp_path / "wh", (
        "SELECT (SELECT count(*) FROM kernels k WHERE k.run_id = r.run_id) AS kernels, "
        "(SELECT count(*) FROM ncu_kernels n WHERE n.run_id = r.run_id) AS ncu_kernels, "
        "(SELECT list(detail) FROM anomalies a WHERE a.run_id = r.run_id AND "
        "a.kind = 'ncu_export_refused') AS refused FROM runs r"))
    assert counts == [{"kernels": TRACE_KERNELS, "ncu_kernels": 3, "refused": [
        "counters.csv: line 5: last row has 8 fields, the header has 15: the file is "
        "truncated. re-export or re-copy the ncu output"]}]


def test_strict_refuses_the_run_of_an_unreadable_export(tmp_path: Path) -> None:
    runs = trace_and_broken_export(tmp_path)
    result = cli("ingest", str(runs), "--warehouse", str(tmp_path / "wh"), "--strict")
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert errors == ["error: mixed/counters.csv: line 5: last row has 8 fields, the header "
                      "has 15: the file is truncated. re-export or re-copy the ncu output"]
    assert query_json(tmp_path / "wh", "SELECT run_name FROM runs") == []


def test_run_of_only_an_unreadable_export_is_refused_in_one_line(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "alone"
    run.mkdir(parents=True)
    (run / "counters.csv").write_bytes(BROKEN_CSV.read_bytes())
    result = cli("ingest", str(tmp_path / "runs"), "--warehouse", str(tmp_path / "wh"))
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith("error: alone/counters.csv: line 5: ")


# ---- ncu 2025 details page: rules get a table of their own --------------------------------

DETAILS_2025 = INPUTS / "ncu" / \
    "details_2025_rules_rtx5090.csv"


def test_rules_of_a_2025_details_page_are_in_ncu_rules(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "rtx5090"
    run.mkdir(parents=True)
    (run / "details.csv").write_bytes(DETAILS_2025.read_bytes())
    result = cli("ingest", str(tmp_path / "runs"), "--warehouse", str(tmp_path / "wh"))
    assert result.returncode == 0, result.stderr
    rows = query_json(tmp_path / "wh", (
        "SELECT k.kernel_base_name, r.rule_name, r.estimated_speedup_type, "
        "r.estimated_speedup FROM ncu_rules r JOIN ncu_kernels k USING (run_id, "
        "ncu_source_id, ncu_id) WHERE r.estimated_speedup IS NOT NULL "
        "ORDER BY r.ncu_id, r.rule_index"))
    assert rows == [
        {"kernel_base_name": "Kernel2", "rule_name": "LaunchConfiguration",
         "estimated_speedup_type": "global", "estimated_speedup": 50.0},
        {"kernel_base_name": "Kernel2", "rule_name": "SharedMemoryConflicts",
         "estimated_speedup_type": "local", "estimated_speedup": 12.75},
        {"kernel_base_name": "Kernel2", "rule_name": "SharedMemoryConflicts",
         "estimated_speedup_type": "local", "estimated_speedup": 3.9}]
    assert query_json(tmp_path / "wh", "SELECT count(*) AS n FROM ncu_rules") == [{"n": 5}]


# ---- an old details export alone: what needs no architecture is computed -------------------

def v100_run(root: Path, name: str, run_toml: str | None) -> None:
    run = root / "runs" / name
    run.mkdir(parents=True)
    for metric in ("sm__cycles_elapsed.avg", "sm__inst_executed_pipe_tensor.sum"):
        (run / f"{metric}.txt").symlink_to(corpus_path("ncu", f"{V100}{metric}.txt"))
    if run_toml is not None:
        (run / "run.toml").write_text(run_toml)


def test_old_details_export_without_cc_or_trace(tmp_path: Path) -> None:
    """The 2020 V100 pair has no CC column: tensor instructions are counted anyway, and
    tc_issue_util, which divides a total by a per-SM average, needs only the SM count."""
    v100_run(tmp_path, "alone", None)
    v100_run(tmp_path, "with_sms", "sm_count = 80\n")
    result = cli("ingest", str(tmp_path / "runs"), "--warehouse", str(tmp_path / "wh"))
    assert result.returncode == 0, result.stderr
    cycles = _naive_column(corpus_path("ncu", f"{V100}sm__cycles_elapsed.avg.txt"))
    tensor = _naive_column(corpus_path("ncu", f"{V100}sm__inst_executed_pipe_tensor.sum.txt"))
    rows = query_json(tmp_path / "wh", (
        "SELECT run_name, ncu_id, arch, tensor_instructions, tensor_instructions_source, "
        "tc_issue_util, tc_issue_util_source, tc_issue_util_null_reason FROM ncu_levels "
        "JOIN runs USING (run_id) ORDER BY run_name, ncu_id"))
    alone = [r for r in rows if r["run_name"] == "alone"]
    assert len(alone) == len(tensor) == 644
    assert all(r["arch"] is None and r["tensor_instructions"] == float(tensor[r["ncu_id"]])
               for r in alone)
    assert alone[0]["tensor_instructions_source"] == (
        "sm__inst_executed_pipe_tensor.sum [architecture unknown] [on sm_80, sm_86: includes "
        "HFMA2.MMA]")
    assert {r["tc_issue_util_null_reason"] for r in alone} == {
        "smsp_elapsed_cycles: sm__cycles_elapsed.avg needs the SM count, which the export does "
        "not give: set sm_count in run.toml (or put the run's trace beside the export)"}
    with_sms = [r for r in rows if r["run_name"] == "with_sms"]
    want = {i: float(tensor[i] / (cycles[i] * 80 * 4)) for i in cycles}
    assert all(r["tc_issue_util"] == pytest.approx(want[r["ncu_id"]], rel=1e-9, abs=0)
               for r in with_sms)
    assert with_sms[0]["tc_issue_util_source"].endswith(
        "/ (sm__cycles_elapsed.avg × 80 SMs × 4 [architecture unknown])")


# ---- a .csv that holds only ncu's own error text ------------------------------------------

CONSOLE = INPUTS / "ncu" / \
    "console_err_nvgpuctrperm.csv"
PERMISSION = ("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA "
              "GPU Performance Counters on the target device 0.")


def test_csv_of_ncu_error_text_alone_refuses_its_run_with_that_text(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "noperm"
    run.mkdir(parents=True)
    (run / "kernels.csv").write_bytes(CONSOLE.read_bytes())
    result = cli("ingest", str(tmp_path / "runs"), "--warehouse", str(tmp_path / "wh"))
    assert result.returncode == 1
    [error] = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert error.startswith("error: noperm/kernels.csv: line 2: ncu wrote no export, only its "
                            f"error: {PERMISSION}")


def test_csv_of_ncu_error_text_beside_a_trace_is_a_refused_export(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "noperm"
    run.mkdir(parents=True)
    (run / "trace.json.gz").symlink_to(corpus_path(*TRACE))
    (run / "kernels.csv").write_bytes(CONSOLE.read_bytes())
    (run / "ncu.log").write_bytes(CONSOLE.read_bytes())  # a log, not an export: skipped
    result = cli("ingest", str(tmp_path / "runs"), "--warehouse", str(tmp_path / "wh"),
                 "--strict")
    assert result.returncode == 1 and "noperm/kernels.csv: line 2: ncu wrote no export" \
        in result.stderr
    result = cli("ingest", str(tmp_path / "runs"), "--warehouse", str(tmp_path / "wh"))
    assert result.returncode == 0, result.stderr
    [row] = query_json(tmp_path / "wh", "SELECT skipped FROM runs")
    reasons = {s["path"]: s["reason"] for s in row["skipped"]}
    assert reasons["kernels.csv"].startswith(f"ncu export refused: line 2: ncu wrote no "
                                             f"export, only its error: {PERMISSION}")
    assert reasons["ncu.log"].startswith("ncu's console output, not an export (only .csv "
                                         f"names claim one): line 2: {PERMISSION}")


def test_ingest_summary_counts_the_kernels_of_an_ncu_only_run(tmp_path: Path) -> None:
    v100_run(tmp_path, "v100", None)
    result = cli("ingest", str(tmp_path / "runs"), "--warehouse", str(tmp_path / "wh"))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    header = next(line for line in lines if "status" in line)
    [row] = [line for line in lines if line.startswith("│ v100 ")]
    cells = dict(zip([c.strip() for c in header.strip("┃").split("┃")],
                     [c.strip() for c in row.strip("│").split("│")]))
    assert (cells["events"], cells["kernels"], cells["ncu kernels"]) == ("0", "0", "644")


def test_compute_capability_of_run_toml_that_is_not_x_y_is_one_line(tmp_path: Path) -> None:
    v100_run(tmp_path, "badcc", 'compute_capability = "Ampere"\n')
    result = cli("ingest", str(tmp_path / "runs"), "--warehouse", str(tmp_path / "wh"))
    assert result.returncode == 1
    [error] = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert error == ('error: badcc/run.toml: key compute_capability: "Ampere" is not a compute '
                     'capability. write it as major.minor, e.g. compute_capability = "7.0"')
