"""ncu .ncu-rep reports: the reader against the ncu_report API, cross-checks between counters,
and every level computable from a report computed."""
from __future__ import annotations

import math
import os
import sys
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pytest

from etl.core.errors import InputError
from etl.extract.ncu.export import (
    NcuExport,
    catalog,
    name_forms,
    ncu_schema,
)
from etl.extract.ncu.read import read_ncu
from etl.extract.ncu.levels import arch_entry, kernel_levels, level_names

from tests.conftest import INPUTS, ROOT, corpus_path

DATA = INPUTS / "ncu"

# file → (kernels, architecture, levels that must be non-NULL for every kernel)
REPORTS = {
    "a100_mistic_ilpProf.ncu-rep": (1, "sm_80", {"issue_slot_util", "tc_active_util"}),
    "gh200_cs599k_rms-norm-pytorch.ncu-rep": (1, "sm_90", {
        "smsp_active_util", "issue_slot_util", "tc_active_util", "tc_active_share"}),
    "rtx3070_speedy_scan_profile.ncu-rep": (1, "sm_86", {"issue_slot_util", "tc_active_util"}),
    "rtx3080_monte-carlo-pi_profile.ncu-rep": (2, "sm_86", {"issue_slot_util",
                                                            "tc_active_util"}),
    "rtx4090_lashi_readSegmentUnroll.ncu-rep": (36, "sm_89", set()),
}



@pytest.fixture(autouse=True)
def in_this_process(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests hold the reader against ncu_report as this process sees it (or edit
    ncu_report here): the report is read in this process, not in one of its own."""
    from etl.extract.ncu import decode_rep

    if "read_before" not in request.node.name:
        monkeypatch.setattr(decode_rep, "ISOLATE", False)

def corpus_file(name: str) -> Path:
    return corpus_path("ncu", name)  # fails instead of skipping when CI=true


def api() -> Any:
    """NVIDIA's ncu_report (the optional extra); CI must have it."""
    try:
        import ncu_report
    except ImportError:
        if os.environ.get("CI") == "true":
            pytest.fail("ncu_report missing: CI installs the [ncu] extra")
        pytest.skip("ncu_report not installed (pip install 'gpu-util-warehouse[ncu]')")
    return ncu_report


def actions(path: Path) -> list[Any]:
    report = api().load_report(str(path))
    return [report.range_by_idx(r).action_by_idx(a) for r in range(report.num_ranges())
            for a in range(report.range_by_idx(r).num_actions())]


def read_one(name: str) -> NcuExport:
    api()
    exports = read_ncu([corpus_file(name)])
    assert len(exports) == 1
    return exports[0]


@pytest.mark.parametrize("name", sorted(REPORTS))
def test_values_equal_the_api(name: str) -> None:
    """Every valued metric of every action, straight from ncu_report, is one row."""
    export = read_one(name)
    got = {(r["ncu_id"], r["metric_name"]): r for r in export.metrics.to_pylist()}
    expected = 0
    for ncu_id, action in enumerate(actions(corpus_file(name))):
        for metric_name in action.metric_names():
            metric = action.metric_by_name(metric_name)
            if not metric.has_value():
                continue
            expected += 1
            row, value = got[(ncu_id, metric_name)], metric.value()
            assert row["reported_unit"] == metric.unit()
            if isinstance(value, str):
                assert (row["value"], row["reported_value_text"]) == (None, value)
            else:
                assert math.isclose(row["value"], float(value), rel_tol=1e-12), metric_name
    assert len(got) == expected
    assert export.kernels.num_rows == REPORTS[name][0]
    assert export.kernels.schema.equals(ncu_schema("ncu_kernels"))
    assert export.metrics.schema.equals(ncu_schema("ncu_metrics"))


@pytest.mark.parametrize("name", sorted(REPORTS))
def test_kernel_identity_from_the_api(name: str) -> None:
    export = read_one(name)
    for kernel, action in zip(export.kernels.to_pylist(), actions(corpus_file(name))):
        def value(metric: str, action: Any = action) -> Any:
            return action.metric_by_name(metric).value()

        assert kernel["kernel_base_name"] == action.name(action.NameBase_FUNCTION)
        assert kernel["kernel_name_mangled"] == action.name(action.NameBase_MANGLED)
        assert (kernel["grid_x"], kernel["block_x"]) == (
            int(value("launch__grid_dim_x")), int(value("launch__block_dim_x")))
        assert kernel["sm_count"] == value("device__attribute_multiprocessor_count")
        assert kernel["cc"] == (f"{value('device__attribute_compute_capability_major')}."
                                f"{value('device__attribute_compute_capability_minor')}")
        assert kernel["duration_ns"] == round(value("gpu__time_duration.sum"))
        assert kernel["device_name"] == value("device__attribute_display_name")


@pytest.mark.parametrize("name", sorted(REPORTS))
def test_name_derivation_matches_ncu_function_names(name: str) -> None:
    """What the CSV readers derive from a name equals ncu's own function-only base."""
    for action in actions(corpus_file(name)):
        function = action.name(action.NameBase_FUNCTION)
        assert name_forms(action.name(action.NameBase_MANGLED))[2] == function
        assert name_forms(action.name(action.NameBase_DEMANGLED))[2] == function


def test_rtx4090_report_keeps_launch_order() -> None:
    kernels = read_one("rtx4090_lashi_readSegmentUnroll.ncu-rep").kernels.to_pylist()
    assert [k["ncu_id"] for k in kernels] == list(range(36))
    assert [k["kernel_base_name"] for k in kernels[:4]] == [
        "readOffset", "readOffsetUnroll2", "readOffsetUnroll4", "readOffset"]
    assert kernels[35]["duration_ns"] == 27_296


def test_rule_results_of_a_report_are_read() -> None:
    rules = read_one("gh200_cs599k_rms-norm-pytorch.ncu-rep").rules.to_pylist()
    assert [(r["rule_index"], r["section_name"], r["rule_name"], r["rule_type"],
             r["estimated_speedup_type"], r["estimated_speedup"]) for r in rules] == [
        (0, "SpeedOfLight", "SOLBottleneck", "OPT", None, None),
        (1, "Occupancy", "AchievedOccupancy", "OPT", "local", 18.52053778250346),
        (2, "LaunchStats", "LaunchConfiguration", "OPT", "global", 50.0),
        (3, rules[3]["section_name"], rules[3]["rule_name"], "OPT", "local", 37.5)]
    assert rules[1]["rule_description"].startswith(
        "The difference between calculated theoretical (62.5%) and measured achieved "
        "occupancy (50.9%)")
    assert (rules[0]["estimated_speedup_text"], rules[2]["estimated_speedup_text"]) == (
        None, "50.0")


@pytest.mark.parametrize(("name", "count", "types"), [
    ("a100_mistic_ilpProf.ncu-rep", 18, {"INF", "OK", "WRN"}),
    ("rtx3080_monte-carlo-pi_profile.ncu-rep", 30, {"OK", "WRN"}),
    ("rtx4090_lashi_readSegmentUnroll.ncu-rep", 0, set())])
def test_rule_counts_of_each_report(name: str, count: int, types: set[str]) -> None:
    rules = read_one(name).rules
    assert rules.num_rows == count
    assert set(rules.column("rule_type").to_pylist()) == types
    assert rules.schema.equals(ncu_schema("ncu_rules"))


# ---- cross-checks between counters -------------------------------------------------------

def values_of(export: NcuExport, ncu_id: int) -> dict[str, float]:
    rows = export.metrics.filter(pc.equal(export.metrics.column("ncu_id"), ncu_id)).to_pylist()
    return {r["metric_name"]: r["value"] for r in rows if r["value"] is not None}


@pytest.mark.parametrize("name", ["a100_mistic_ilpProf.ncu-rep",
                                  "rtx3070_speedy_scan_profile.ncu-rep",
                                  "rtx3080_monte-carlo-pi_profile.ncu-rep"])
def test_issue_percent_agrees_with_issue_counter(name: str) -> None:
    """sm__issue_active pct-of-elapsed × smsp__cycles_elapsed.sum = smsp__inst_issued.sum:
    the pct_of_elapsed form and the one-issue-per-cycle reading of inst_issued agree."""
    export = read_one(name)
    for ncu_id in range(export.kernels.num_rows):
        v = values_of(export, ncu_id)
        from_pct = v["sm__issue_active.avg.pct_of_peak_sustained_elapsed"] / 100 \
            * v["smsp__cycles_elapsed.sum"]
        assert math.isclose(from_pct, v["smsp__inst_issued.sum"], rel_tol=1e-9)
        sms = v["device__attribute_multiprocessor_count"]
        assert math.isclose(v["smsp__inst_issued.avg"] * 4 * sms, v["smsp__inst_issued.sum"],
                            rel_tol=1e-9)


def test_gh200_cycle_counters_agree_across_forms() -> None:
    """4 SMSPs per SM: the .avg and sm__ forms give the .sum totals."""
    v = values_of(read_one("gh200_cs599k_rms-norm-pytorch.ncu-rep"), 0)
    smsps = 4 * v["device__attribute_multiprocessor_count"]
    assert smsps == 528
    assert math.isclose(v["smsp__cycles_elapsed.avg"] * smsps, v["smsp__cycles_elapsed.sum"],
                        rel_tol=1e-12)
    assert v["sm__cycles_elapsed.sum"] * 4 == v["smsp__cycles_elapsed.sum"]
    assert math.isclose(v["sm__cycles_elapsed.avg"] * smsps, v["smsp__cycles_elapsed.sum"],
                        rel_tol=1e-12)
    assert math.isclose(v["smsp__cycles_active.avg"] * smsps, v["smsp__cycles_active.sum"],
                        rel_tol=1e-12)


# The one place the corpus contradicts the catalog's equivalences: on GH200 the all-pipe
# tensor counter reads 1.21 % of elapsed for a kernel without MMA, the all-MMA-types one 0.
KNOWN_DISAGREEMENTS = {
    ("gh200_cs599k_rms-norm-pytorch.ncu-rep", "tensor_active_cycles",
     "sm__pipe_tensor_type_hmma_hgmma_qgmma_imma_igmma_bmma_bgmma_cycles_active.avg"
     ".pct_of_peak_sustained_elapsed"): (0.0, 287_234.0),
}


@pytest.mark.parametrize("name", sorted(REPORTS))
def test_every_present_candidate_of_a_quantity_agrees(name: str) -> None:
    """Each quantity recomputed from every one of its present counters alone is the same."""
    from etl.extract.ncu.levels import resolve_quantities

    export = read_one(name)
    entry = arch_entry(REPORTS[name][1])
    hits = set()
    for ncu_id in range(export.kernels.num_rows):
        v = values_of(export, ncu_id)
        sms = int(v["device__attribute_multiprocessor_count"])
        base = resolve_quantities(v, entry.arch, sms)
        for quantity, candidates in entry.lists.items():
            for metric in [c for c in candidates if c in v]:
                others = set(entry.lists[quantity]) - {metric}
                alone = resolve_quantities({k: x for k, x in v.items() if k not in others},
                                           entry.arch, sms)[quantity]
                assert alone.value is not None and base[quantity].value is not None
                known = KNOWN_DISAGREEMENTS.get((name, quantity, metric))
                if known:
                    assert (alone.value, round(base[quantity].value)) == known
                    hits.add((name, quantity, metric))
                    continue
                assert math.isclose(alone.value, base[quantity].value, rel_tol=1e-9), metric
    assert hits == {k for k in KNOWN_DISAGREEMENTS if k[0] == name}


# ---- every computable level is computed --------------------------------------------------

@pytest.mark.parametrize("name", sorted(REPORTS))
def test_levels_computable_from_each_report(name: str) -> None:
    export = read_one(name)
    levels = kernel_levels(export.metrics, export.kernels, None, None).to_pylist()
    expected_arch, must = REPORTS[name][1], REPORTS[name][2]
    counters = catalog()["counters"]
    for row, action in zip(levels, actions(corpus_file(name))):
        assert row["arch"] == expected_arch
        present = set(action.metric_names())
        assert {lv for lv in level_names() if row[lv] is not None} == must
        for level in set(level_names()) - must:
            # a NULL level: none of the catalogued counters of a quantity it needs is present
            quantity = row[f"{level}_null_reason"].split(":")[0]
            candidates = arch_entry(expected_arch).lists[quantity]
            assert not present & set(candidates), (level, quantity)
            assert all(c in counters for c in candidates)


def test_gh200_levels_by_hand() -> None:
    v = {a: b for a, b in (
        (m, actions(corpus_file("gh200_cs599k_rms-norm-pytorch.ncu-rep"))[0]
         .metric_by_name(m).value())
        for m in ("smsp__cycles_active.sum", "smsp__cycles_elapsed.sum",
                  "sm__issue_active.avg.pct_of_peak_sustained_elapsed",
                  "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed"))}
    export = read_one("gh200_cs599k_rms-norm-pytorch.ncu-rep")
    row = kernel_levels(export.metrics, export.kernels, None, None).to_pylist()[0]
    active = v["smsp__cycles_active.sum"] / v["smsp__cycles_elapsed.sum"]
    assert math.isclose(row["smsp_active_util"], active, rel_tol=1e-12)
    assert math.isclose(row["issue_slot_util"],
                        v["sm__issue_active.avg.pct_of_peak_sustained_elapsed"] / 100,
                        rel_tol=1e-12)
    tensor = v["sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed"] / 100
    assert math.isclose(row["tc_active_util"], tensor, rel_tol=1e-12)
    assert math.isclose(row["tc_active_share"], tensor / active, rel_tol=1e-12)
    assert row["tc_active_util_source"].startswith(
        "(sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed ÷ 100")


def test_present_zero_tensor_counter_gives_zero() -> None:
    export = read_one("rtx3070_speedy_scan_profile.ncu-rep")
    row = kernel_levels(export.metrics, export.kernels, None, None).to_pylist()[0]
    assert row["tc_active_util"] == 0.0 and row["tc_active_util_null_reason"] is None
    assert row["tc_issue_util"] is None
    assert row["tc_issue_util_null_reason"].startswith("tensor_instructions: none of the 6")


# ---- refusals ----------------------------------------------------------------------------

def test_missing_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ncu_report", None)  # import now raises ImportError
    with pytest.raises(InputError) as info:
        read_ncu([DATA / "broken" / "ncu_rep-empty.ncu-rep"])
    assert "pip install 'gpu-util-warehouse[ncu]'" in info.value.line()
    assert "ncu --import ncu_rep-empty.ncu-rep --csv --page raw > ncu_rep-empty.csv" \
        in info.value.line()


def test_report_without_kernels_is_refused() -> None:
    api()
    with pytest.raises(InputError, match="the report holds no profiled kernel"):
        read_ncu([DATA / "broken" / "ncu_rep-empty.ncu-rep"])


def test_truncated_report_is_refused(tmp_path: Path) -> None:
    api()
    cut = tmp_path / "cut.ncu-rep"  # a truncated copy, outside the repository
    cut.write_bytes(corpus_file("rtx3070_speedy_scan_profile.ncu-rep").read_bytes()[:100_000])
    with pytest.raises(InputError) as info:
        read_ncu([cut])
    assert info.value.place == "kernel ID 0" and "truncated" in info.value.problem


UNITS_OF_ALONE = """
import json, sys
from pathlib import Path
from etl.extract.ncu.decode_rep import read_rep_here
rows = read_rep_here(Path(sys.argv[1])).metrics.to_pylist()
print(json.dumps(sorted({(r["metric_name"], r["unit"] or "") for r in rows})))
"""


@pytest.mark.parametrize(("first", "then"), [
    ("a100_mistic_ilpProf", "rtx3070_speedy_scan_profile"),
    ("rtx3070_speedy_scan_profile", "a100_mistic_ilpProf")])
def test_units_do_not_depend_on_the_report_read_before(first: str, then: str) -> None:
    """ncu_report gives a derived metric (derived__*_x2) the unit it had in the first report
    its process loaded ('inst' or 'thread'): each report is read in a process of its own."""
    import json
    import subprocess

    api()
    from etl.extract.ncu.decode_rep import read_rep

    read_rep(corpus_path("ncu", f"{first}.ncu-rep"))
    after = sorted({(r["metric_name"], r["unit"] or "") for r in
                    read_rep(corpus_path("ncu", f"{then}.ncu-rep")).metrics.to_pylist()})
    alone = subprocess.run([sys.executable, "-c", UNITS_OF_ALONE,
                            str(corpus_path("ncu", f"{then}.ncu-rep"))], capture_output=True,
                           text=True, check=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert [tuple(pair) for pair in json.loads(alone.stdout)] == after
    assert any(name.startswith("derived__") and name.endswith("_x2") for name, _ in after)
