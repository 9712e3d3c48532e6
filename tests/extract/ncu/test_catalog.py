"""The metric catalog: a hand-computed levels example, catalog integrity and citations,
corpus CSV levels against a naive computation, the ncu command lines."""
from __future__ import annotations

import csv
import math
import os
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from etl.extract.ncu.export import catalog, ncu_schema
from etl.extract.ncu.read import read_ncu
from etl.extract.ncu.levels import (
    FORMS,
    arch_entry,
    arch_names,
    kernel_levels,
    level_names,
    levels_schema,
    ncu_metric_list,
    normalize_arch,
    profile_commands,
    quantity_order,
)

from tests.conftest import INPUTS, corpus_path

DATA = INPUTS / "ncu"


def corpus_file(name: str) -> Path:
    return corpus_path("ncu", name)  # fails instead of skipping when CI=true


# ---- a tiny export, worked by hand -------------------------------------------------------

KERNELS = [  # ncu_id, cc, sm_count
    (0, "8.0", 2), (1, "8.0", 2), (2, None, None), (3, "8.0", 2), (4, "12.0", 2),
    (5, "8.0", 2), (6, "10.0", 2)]
METRICS: list[tuple[int, str, float | None]] = [
    # k0: every quantity as a .sum; sm__cycles_active must NOT stand in for SMSP activity
    (0, "smsp__cycles_elapsed.sum", 1000), (0, "smsp__cycles_active.sum", 800),
    (0, "smsp__inst_issued.sum", 400), (0, "smsp__pipe_tensor_cycles_active.sum", 200),
    (0, "smsp__inst_executed_pipe_tensor.sum", 50), (0, "sm__cycles_active.avg", 999),
    # k1: .avg × 4 × 2 SMs, a pct-of-elapsed, a present zero, a NULL (text) counter
    (1, "smsp__cycles_elapsed.avg", 125), (1, "smsp__issue_active.avg", 30),
    (1, "sm__inst_executed_pipe_tensor.sum", 0),
    (1, "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed", 12.5),
    (1, "smsp__inst_issued.sum", None),
    # k2: no CC, no SM count in the export: per-SM clock average needs the caller's SM count
    (2, "sm__cycles_elapsed.avg", 100), (2, "sm__inst_executed_pipe_tensor.sum", 10),
    # k3: zero elapsed cycles
    (3, "smsp__cycles_elapsed.sum", 0), (3, "smsp__inst_issued.sum", 0),
    # k4: an architecture the catalog does not know
    (4, "smsp__cycles_elapsed.sum", 1000),
    # k5: only the HMMA tensor counter (misses IMMA/DMMA on sm_80)
    (5, "smsp__cycles_elapsed.sum", 1000), (5, "smsp__inst_executed_pipe_tensor_op_hmma.sum", 40),
    # k6: sm_100, no corpus file: unverified
    (6, "smsp__cycles_elapsed.sum", 1000), (6, "smsp__cycles_active.sum", 500),
]


def tiny_tables() -> tuple[pa.Table, pa.Table]:
    k_schema, m_schema = ncu_schema("ncu_kernels"), ncu_schema("ncu_metrics")
    kernels = pa.Table.from_pylist(
        [{"ncu_id": i, "cc": cc, "sm_count": sms, "metric_count": 0} for i, cc, sms in KERNELS],
        schema=k_schema)
    metrics = pa.Table.from_pylist(
        [{"ncu_id": i, "metric_name": n, "value": v,
          "reported_value_text": "x" if v is None else str(v)} for i, n, v in METRICS],
        schema=m_schema)
    return metrics, kernels


def levels(arch: str | None = "sm_70", sm_count: int | None = None) -> dict[int, dict[str, Any]]:
    table = kernel_levels(*tiny_tables(), arch, sm_count)
    assert table.schema.equals(levels_schema())
    return {r["ncu_id"]: r for r in table.to_pylist()}


def test_all_six_levels_by_hand() -> None:
    k0 = levels()[0]
    assert (k0["arch"], k0["sm_count"]) == ("sm_80", 2)  # the export's CC wins over arch=
    assert [k0[lv] for lv in level_names()] == [0.8, 0.4, 0.2, 0.05, 0.125, 0.25]
    assert level_names() == ["smsp_active_util", "issue_slot_util", "tc_active_util",
                             "tc_issue_util", "tc_inst_share", "tc_active_share"]
    assert k0["smsp_active_util_source"] == "(smsp__cycles_active.sum) / (smsp__cycles_elapsed.sum)"
    assert all(k0[f"{lv}_null_reason"] is None for lv in level_names())


def test_averages_percentages_and_zeros() -> None:
    k1 = levels()[1]
    assert (k1["smsp_elapsed_cycles"], k1["smsp_elapsed_cycles_source"]) == (
        1000.0, "smsp__cycles_elapsed.avg × 4 × 2 SMs")
    assert k1["smsp_issue_cycles"] == 240.0 and k1["issue_slot_util"] == 0.24
    assert k1["tensor_active_cycles"] == 125.0 and k1["tc_active_util"] == 0.125
    assert k1["tc_issue_util"] == 0.0 and k1["tc_issue_util_null_reason"] is None
    assert k1["smsp_active_util"] is None
    assert k1["smsp_active_util_null_reason"] == (
        "smsp_active_cycles: none of the 4 sm_80 counters for smsp_active_cycles is in the "
        "export (preferred: smsp__cycles_active.sum)")
    assert k1["tc_inst_share"] is None  # smsp__inst_issued.sum is NULL: absent, not zero
    assert k1["tc_inst_share_null_reason"].startswith("instructions_issued: none of the 4")


def test_sm_count_from_the_caller() -> None:
    k2 = levels()[2]
    assert (k2["arch"], k2["sm_count"], k2["tc_issue_util"]) == ("sm_70", None, None)
    assert k2["tc_issue_util_null_reason"] == (
        "smsp_elapsed_cycles: sm__cycles_elapsed.avg needs the SM count, which the export does "
        "not give: set sm_count in run.toml (or put the run's trace beside the export)")
    k2 = levels(sm_count=5)[2]
    assert (k2["smsp_elapsed_cycles"], k2["tc_issue_util"]) == (2000.0, 0.005)
    assert k2["smsp_elapsed_cycles_source"] == "sm__cycles_elapsed.avg × 5 SMs × 4"
    assert levels(sm_count=5)[0]["sm_count"] == 2  # the export's SM count wins


def test_zero_denominator_unknown_and_missing_architecture() -> None:
    rows = levels()
    assert rows[3]["issue_slot_util"] is None
    assert rows[3]["issue_slot_util_null_reason"] == "smsp_elapsed_cycles is 0"
    assert rows[4]["arch"] == "sm_120"
    assert rows[4]["smsp_elapsed_cycles"] == 1000.0
    assert rows[4]["smsp_elapsed_cycles_source"] == (
        "smsp__cycles_elapsed.sum [unverified: sm_120 read as sm_100]")
    assert rows[4]["smsp_active_util_null_reason"] == (
        "smsp_active_cycles: none of the 4 sm_100 (read for sm_120) counters for "
        "smsp_active_cycles is in the export (preferred: smsp__cycles_active.sum)")
    assert levels(arch=None)[2]["smsp_elapsed_cycles_null_reason"] == (
        "sm__cycles_elapsed.avg needs the SM count, which the export does not give: set "
        "sm_count in run.toml (or put the run's trace beside the export)")


# ---- what needs neither the architecture nor the SM count ---------------------------------

def no_arch_levels(metrics: dict[str, float], sm_count: int | None = None) -> dict[str, Any]:
    """Levels of one kernel whose export gives no CC, with no architecture passed."""
    kernels = pa.Table.from_pylist([{"ncu_id": 0, "cc": None, "sm_count": sm_count,
                                     "metric_count": 0}], schema=ncu_schema("ncu_kernels"))
    rows = pa.Table.from_pylist(
        [{"ncu_id": 0, "metric_name": n, "value": v, "reported_value_text": str(v),
          "reported_unit": ""} for n, v in metrics.items()], schema=ncu_schema("ncu_metrics"))
    [row] = kernel_levels(rows, kernels, None, None).to_pylist()
    return row


def test_same_form_ratios_need_neither_architecture_nor_sm_count() -> None:
    """smsp__*.avg over smsp__cycles_elapsed.avg: × 4 × SMs on both sides cancels; a percent
    of peak over elapsed is the level itself."""
    row = no_arch_levels({"smsp__cycles_elapsed.avg": 1200, "smsp__cycles_active.avg": 300,
                          "sm__issue_active.avg.pct_of_peak_sustained_elapsed": 40,
                          "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed": 5})
    assert row["arch"] is None
    assert (row["smsp_active_util"], row["issue_slot_util"], row["tc_active_util"]) == (
        0.25, 0.4, 0.05)
    assert row["tc_active_share"] == 0.05 / 0.25
    assert row["smsp_active_util_source"] == (
        "(smsp__cycles_active.avg × 4 × SMs [architecture unknown]) / (smsp__cycles_elapsed.avg "
        "× 4 × SMs [architecture unknown]) [the SM count cancels]")
    assert row["tc_active_util_source"].startswith(
        "(sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed ÷ 100 × "
        "smsp_elapsed_cycles [architecture unknown] [on sm_90, sm_100: counts non-MMA "
        "tensor-pipe activity on GH200]) / (")
    assert row["smsp_elapsed_cycles"] is None  # a total over SMSPs does need the SM count
    assert row["smsp_elapsed_cycles_null_reason"].startswith(
        "smsp__cycles_elapsed.avg needs the SM count")
    assert row["tc_inst_share_null_reason"] == (
        "tensor_instructions: none of the 4 architecture-independent counters for "
        "tensor_instructions is in the export (preferred: smsp__inst_executed_pipe_tensor.sum)")


def test_totals_without_architecture_and_their_caveats() -> None:
    row = no_arch_levels({"smsp__cycles_elapsed.sum": 1000, "smsp__inst_issued.sum": 500,
                          "smsp__inst_executed_pipe_tensor.sum": 20})
    assert (row["issue_slot_util"], row["tc_issue_util"], row["tc_inst_share"]) == (
        0.5, 0.02, 0.04)
    assert row["tensor_instructions_source"] == (
        "smsp__inst_executed_pipe_tensor.sum [architecture unknown] [on sm_80, sm_86: "
        "includes HFMA2.MMA]")


def test_counter_whose_reading_depends_on_the_architecture_names_the_fix() -> None:
    """The op_hmma counters are complete on sm_70 and miss IMMA/DMMA elsewhere."""
    row = no_arch_levels({"smsp__cycles_elapsed.sum": 1000,
                          "smsp__inst_executed_pipe_tensor_op_hmma.sum": 40})
    assert row["tc_issue_util"] is None
    assert row["tc_issue_util_null_reason"] == (
        "tensor_instructions: smsp__inst_executed_pipe_tensor_op_hmma.sum reads differently "
        "by architecture and the export does not say its own: set compute_capability in "
        'run.toml (e.g. compute_capability = "7.0" for a V100)')


def test_mixed_forms_need_the_sm_count() -> None:
    """A total over a per-SM average: the SM count does not cancel."""
    row = no_arch_levels({"smsp__cycles_elapsed.avg": 1200, "smsp__inst_issued.sum": 500})
    assert row["issue_slot_util"] is None
    assert row["issue_slot_util_null_reason"] == (
        "smsp_elapsed_cycles: smsp__cycles_elapsed.avg needs the SM count, which the export "
        "does not give: set sm_count in run.toml (or put the run's trace beside the export)")
    assert no_arch_levels({"smsp__cycles_elapsed.avg": 1200, "smsp__inst_issued.sum": 500},
                          sm_count=10)["issue_slot_util"] == 500 / (1200 * 4 * 10)


def test_per_sm_form_of_the_numerator_is_used_when_the_denominator_has_only_one() -> None:
    row = no_arch_levels({"smsp__cycles_elapsed.avg": 1000, "smsp__cycles_active.sum": 8,
                          "smsp__cycles_active.avg": 600})
    assert row["smsp_active_cycles"] == 8.0  # the total, as reported
    assert row["smsp_active_util"] == 0.6     # from the .avg, whose SM count cancels


def test_any_arch_lists_read_the_same_on_every_architecture() -> None:
    """Every counter of [any_arch] is in every architecture's list of its quantity."""
    lists = catalog()["any_arch"]
    assert set(lists) == set(quantity_order())
    for quantity, metrics in lists.items():
        for arch in arch_names():
            assert set(metrics) <= set(arch_entry(arch).lists[quantity]), (arch, quantity)
        assert not any("op_hmma" in m for m in metrics)


def test_caveats_and_unverified_entries_are_named_in_sources() -> None:
    rows = levels()
    assert rows[5]["tc_issue_util"] == 0.04
    assert rows[5]["tensor_instructions_source"] == (
        "smsp__inst_executed_pipe_tensor_op_hmma.sum [HMMA only (misses IMMA, DMMA)]")
    assert rows[6]["smsp_active_util"] == 0.5
    assert rows[6]["smsp_active_util_source"].endswith("[sm_100 catalog entry unverified])")


@pytest.mark.parametrize(("arch", "read_as"), [
    ("sm_120", "sm_100"), ("12.1", "sm_100"), ("sm_103", "sm_100"), ("sm_110", "sm_100"),
    ("10.1", "sm_100"), ("sm_87", "sm_86"), ("sm_72", "sm_70")])
def test_architecture_without_an_entry_reads_as_the_nearest_of_its_family(
        arch: str, read_as: str) -> None:
    entry = arch_entry(arch)
    assert (entry.arch, entry.read_as) == (read_as, normalize_arch(arch))
    assert entry.note == f"unverified: {normalize_arch(arch)} read as {read_as}"
    assert entry.lists == arch_entry(read_as).lists


def test_architecture_of_no_family_has_no_entry() -> None:
    with pytest.raises(KeyError, match=r"no catalog entry for sm_60, and no \[families\] list "
                       r"in etl/extract/ncu/metrics.toml names it"):
        arch_entry("sm_60")


def test_families_cover_every_entry_once() -> None:
    families = catalog()["families"]
    members = [a for names in families.values() for a in names]
    assert len(members) == len(set(members))
    assert set(arch_names()) <= set(members)


def test_rtx5090_details_2025_levels_by_hand() -> None:
    """CC 12.0 (an RTX 5090): every level from the sm_100 lists, each flagged unverified."""
    export = read_ncu([DATA / "details_2025_rules_rtx5090.csv"])[0]
    row = kernel_levels(export.metrics, export.kernels, None, None).to_pylist()[0]
    assert (row["arch"], row["sm_count"]) == ("sm_120", 170)
    assert row["smsp_elapsed_cycles"] == 10_000 * 4 * 170
    assert [row[lv] for lv in level_names()] == [0.75, 0.25, 0.125, 0.01, 0.04, 850_000 / 5_100_000]
    assert all("[unverified: sm_120 read as sm_100]" in row[f"{lv}_source"]
               for lv in level_names())


def test_a_default_details_page_gives_smsp_active_util_from_its_labels(
        tmp_path: Path) -> None:
    """`ncu --csv` with the default set prints the WorkloadDistribution section's labels,
    not metric names. By hand: 4 SMs × 4 SMSPs, 750 active cycles on average per SMSP over
    16 000 elapsed SMSP cycles in all: 750 × 16 / 16 000 = 0.75."""
    head = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream",'
            '"Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit",'
            '"Metric Value"\n')
    row = '"0","1","p","h","k","1","7","(128, 1, 1)","(8, 1, 1)","0","9.0",'
    path = tmp_path / "default_set.csv"
    path.write_text(head + row + '"Launch Statistics","# SMs","SM","4"\n'
                    + row + '"GPU and Memory Workload Distribution","Average SMSP Active '
                    'Cycles","cycle","750"\n'
                    + row + '"GPU and Memory Workload Distribution","Total SMSP Elapsed '
                    'Cycles","cycle","16,000"\n')
    export = read_ncu([path])[0]
    row_levels = kernel_levels(export.metrics, export.kernels, None, None).to_pylist()[0]
    assert row_levels["smsp_active_util"] == 0.75
    assert row_levels["smsp_active_util_source"] == (
        "(Average SMSP Active Cycles × 4 × 4 SMs) / (Total SMSP Elapsed Cycles)")


def test_duplicate_kernel_ids_are_refused() -> None:
    metrics, kernels = tiny_tables()
    with pytest.raises(ValueError, match="one export at a time"):
        kernel_levels(metrics, pa.concat_tables([kernels, kernels]), None, None)


# ---- corpus CSVs: levels against a naive computation --------------------------------------

def naive_values(path: Path) -> dict[tuple[int, str], Decimal]:
    lines = path.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith('"ID","Process ID"'))
    return {(int(r["ID"]), r["Metric Name"]): Decimal(r["Metric Value"].replace(",", ""))
            for r in csv.DictReader(lines[start:])}


@pytest.mark.parametrize("name", ["a100_details_cmdline-metrics_gardenia_gemm.csv",
                                  "a100_details_cmdline-metrics_gardenia_sgemm.csv"])
def test_a100_csv_tc_issue_util(name: str) -> None:
    """smsp__cycles_elapsed.avg needs the A100's 108 SMs, which the export lacks."""
    path = corpus_file(name)
    export = read_ncu([path])[0]
    assert {r["tc_issue_util"] for r in kernel_levels(export.metrics, export.kernels, None,
                                                      None).to_pylist()} == {None}
    naive = naive_values(path)
    for row in kernel_levels(export.metrics, export.kernels, None, 108).to_pylist():
        expected = naive[(row["ncu_id"], "smsp__inst_executed_pipe_tensor.sum")] / (
            naive[(row["ncu_id"], "smsp__cycles_elapsed.avg")] * 4 * 108)
        assert math.isclose(row["tc_issue_util"], float(expected), rel_tol=1e-9)
        assert row["tc_issue_util_source"].endswith(
            "(smsp__inst_executed_pipe_tensor.sum [includes HFMA2.MMA]) / "
            "(smsp__cycles_elapsed.avg × 4 × 108 SMs)")
        assert row["issue_slot_util"] is None


def test_a100_csv_tensor_pipe_counts_hfma() -> None:
    """The evidence for the sm_80 caveat: in these FP32 GEMMs every tensor-pipe warp
    instruction is an HFMA (thread-level HFMA count = 32 × tensor-pipe warp instructions)."""
    for name in ("a100_details_cmdline-metrics_gardenia_gemm.csv",
                 "a100_details_cmdline-metrics_gardenia_sgemm.csv"):
        naive = naive_values(corpus_file(name))
        tensor = naive[(2, "smsp__inst_executed_pipe_tensor.sum")]
        assert tensor > 0
        assert naive[(2, "smsp__sass_thread_inst_executed_op_hfma_pred_on.sum")] == 32 * tensor


def test_v100_merged_pair_tc_issue_util() -> None:
    stem = "v100_details_old-format_pytorch1.5_deepcam_O2_fw__"
    paths = [corpus_file(stem + "sm__cycles_elapsed.avg.txt"),
             corpus_file(stem + "sm__inst_executed_pipe_tensor.sum.txt")]
    export = read_ncu(paths)[0]
    naive = {**naive_values(paths[0]), **naive_values(paths[1])}
    rows = kernel_levels(export.metrics, export.kernels, "sm_70", 80).to_pylist()
    assert len(rows) == 644
    for row in rows:
        expected = naive[(row["ncu_id"], "sm__inst_executed_pipe_tensor.sum")] / (
            naive[(row["ncu_id"], "sm__cycles_elapsed.avg")] * 80 * 4)
        assert math.isclose(row["tc_issue_util"], float(expected), rel_tol=1e-9)
    assert sum(1 for r in rows if r["tc_issue_util"] > 0) == 79


def test_fixture_raw_page_levels() -> None:
    export = read_ncu([DATA / "raw_page_2023_a100.csv"])[0]
    rows = kernel_levels(export.metrics, export.kernels, None, None).to_pylist()
    assert [rows[0][lv] for lv in level_names()] == [0.8, 0.4, 0.2, 0.05, 0.125, 0.25]
    assert rows[1]["tc_active_util"] is None  # 'n/a' in the file
    assert rows[2]["tc_active_util"] == 0.0 and rows[2]["tc_issue_util"] == 0.0
    old = read_ncu([DATA / "raw_page_2020_v100.csv"])[0]
    v100 = kernel_levels(old.metrics, old.kernels, "sm_70", 80).to_pylist()
    assert [r["tc_issue_util"] for r in v100] == [0.2, 0.0]


# ---- catalog integrity -------------------------------------------------------------------

def test_architectures() -> None:
    assert arch_names() == ["sm_70", "sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_100"]
    assert not arch_entry("sm_100").verified and not arch_entry("sm_75").verified
    assert all(arch_entry(a).verified for a in ("sm_70", "sm_80", "sm_86", "sm_89", "sm_90"))
    for arch in arch_names():
        assert set(arch_entry(arch).lists) == set(quantity_order())


def test_every_counter_is_defined_used_and_has_a_known_form() -> None:
    counters = catalog()["counters"]
    used = {m for a in arch_names() for ms in arch_entry(a).lists.values() for m in ms}
    assert used == set(counters)
    assert {c["form"] for c in counters.values()} <= set(FORMS) == set(catalog()["forms"])
    for arch in arch_names():
        assert set(arch_entry(arch).caveats) <= used


def test_form_needs_come_earlier_in_resolution_order() -> None:
    order = quantity_order()
    forms, counters = catalog()["forms"], catalog()["counters"]
    for arch in arch_names():
        for quantity, metrics in arch_entry(arch).lists.items():
            for metric in metrics:
                for need in forms[counters[metric]["form"]]["needs"]:
                    if need != "sm_count":
                        assert order.index(need) < order.index(quantity), (arch, metric)


def test_levels_are_quantity_ratios() -> None:
    for spec in catalog()["levels"].values():
        assert {spec["numerator"], spec["denominator"]} <= set(quantity_order())


def test_query_metrics_citations_point_at_the_counter() -> None:
    """Every QM:<line> names the line of the corpus listing where the base counter is."""
    lines = corpus_file("query-metrics_medav_torchbench-ncu_all_metrics.txt").read_text() \
        .splitlines()
    cited = 0
    for metric, spec in catalog()["counters"].items():
        for ref in spec["seen_in"]:
            if ref.startswith("QM:"):
                base = metric.split(".")[0]
                assert lines[int(ref[3:]) - 1].split()[0] == base, (metric, ref)
                cited += 1
    assert cited >= 25


def test_roofline_counters_are_cited_where_they_are() -> None:
    """Every FLOP and DRAM counter of [roofline] is cited, in the listing's line or the
    A100 export (checked for every counter it names), and asked for by etl ncu-metrics."""
    table = catalog()["roofline"]
    counters = [c for group in ("vector", "tensor") for per in table[group].values()
                for c in per] + [c for alternative in table["dram_bytes"] for c in alternative]
    lines = corpus_file("query-metrics_medav_torchbench-ncu_all_metrics.txt").read_text() \
        .splitlines()
    a100 = corpus_file(EVIDENCE_CSV["A100CSV"]).read_text()
    for metric in counters:
        refs = table["seen_in"][metric]
        assert refs, metric
        for ref in refs:
            if ref.startswith("QM:"):
                assert lines[int(ref[3:]) - 1].split()[0] == metric.split(".")[0], (metric, ref)
            else:
                assert ref == "A100CSV" and f'"{metric}"' in a100, (metric, ref)
    asked = ncu_metric_list("sm_90")
    assert "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum" in asked
    assert "sm__ops_path_tensor_src_bf16_dst_fp32.sum" in asked
    assert {"dram__bytes_read.sum", "dram__bytes_write.sum"} <= set(asked)
    # Volta's ncu has no tensor-path op counters: not asked for
    assert not any("ops_path_tensor" in m for m in ncu_metric_list("sm_70"))


EVIDENCE_CSV = {"A100CSV": "a100_details_cmdline-metrics_gardenia_gemm.csv",
                "V100CSV": "v100_details_old-format_pytorch1.5_deepcam_O2_fw__*"}
EVIDENCE_REP = {"A100REP": ["a100_mistic_ilpProf.ncu-rep"],
                "GH200REP": ["gh200_cs599k_rms-norm-pytorch.ncu-rep"],
                "RTX30REP": ["rtx3070_speedy_scan_profile.ncu-rep",
                             "rtx3080_monte-carlo-pi_profile.ncu-rep"]}


def test_corpus_citations_hold() -> None:
    """A counter cited as seen in a corpus file is in that file."""
    folder = corpus_file("SOURCES.md").parent
    rep_names = _rep_metric_names(folder)
    for metric, spec in catalog()["counters"].items():
        for ref in spec["seen_in"]:
            if ref in EVIDENCE_CSV:
                text = "".join(p.read_text() for p in folder.glob(EVIDENCE_CSV[ref]))
                assert f'"{metric}"' in text, (metric, ref)
            elif ref in EVIDENCE_REP and rep_names is not None:
                assert any(metric in rep_names[f] for f in EVIDENCE_REP[ref]), (metric, ref)


def _rep_metric_names(folder: Path) -> dict[str, set[str]] | None:
    try:
        import ncu_report
    except ImportError:
        if os.environ.get("CI") == "true":
            pytest.fail("ncu_report missing: CI installs the [ncu] extra")
        return None
    out = {}
    for files in EVIDENCE_REP.values():
        for name in files:
            action = ncu_report.load_report(str(folder / name)).range_by_idx(0).action_by_idx(0)
            out[name] = set(action.metric_names())
    return out


# ---- command lines -----------------------------------------------------------------------

def test_metric_list() -> None:
    assert ncu_metric_list("sm_80") == [
        "smsp__cycles_elapsed.sum", "smsp__issue_active.sum", "smsp__cycles_active.sum",
        "smsp__pipe_tensor_cycles_active.sum", "smsp__inst_executed_pipe_tensor.sum",
        "smsp__inst_issued.sum", "gpu__time_duration.sum",
        "device__attribute_multiprocessor_count",
        *[c for per in catalog()["roofline"]["vector"].values() for c in per],
        *[c for per in catalog()["roofline"]["tensor"].values() for c in per],
        "dram__bytes_read.sum", "dram__bytes_write.sum"]
    assert ncu_metric_list("8.0") == ncu_metric_list("sm_80")
    assert "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed" \
        in ncu_metric_list("sm_90")
    assert not any("op_hmma" in m for m in ncu_metric_list("sm_90"))
    with pytest.raises(KeyError, match="no catalog entry for sm_60"):
        ncu_metric_list("sm_60")
    assert ncu_metric_list("sm_120") == ncu_metric_list("sm_100")


def test_profile_commands() -> None:
    metrics = ",".join(ncu_metric_list("sm_80"))
    (bracketed,) = profile_commands("sm_80")
    assert bracketed == (f"ncu --metrics {metrics} --target-processes all "
                         "--profile-from-start off -o ncu_sm_80_profiler_range python train.py")
    both = profile_commands("sm_80", kernels_per_iteration=120, warmup_iterations=5,
                            program="torchrun --nproc-per-node 1 train.py --amp")
    assert both[0].endswith(" torchrun --nproc-per-node 1 train.py --amp")
    assert re.search(r" --launch-skip 600 --launch-count 120 -o ncu_sm_80_iteration_5 ",
                     both[1])
    with pytest.raises(ValueError, match="give both"):
        profile_commands("sm_80", kernels_per_iteration=120)
    with pytest.raises(ValueError, match="must be > 0"):
        profile_commands("sm_80", kernels_per_iteration=0, warmup_iterations=5)


@pytest.mark.parametrize(("text", "arch"), [("sm_80", "sm_80"), ("8.0", "sm_80"), ("86", "sm_86"),
                                            ("SM90", "sm_90"), ("10.0", "sm_100")])
def test_normalize_arch(text: str, arch: str) -> None:
    assert normalize_arch(text) == arch


def test_normalize_arch_rejects_junk() -> None:
    with pytest.raises(ValueError, match="expected sm_XY"):
        normalize_arch("ampere")
