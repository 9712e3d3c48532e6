"""Units an export reports that etl/extract/ncu/units.toml does not know: never a refusal.

The value is kept as reported with its unit verbatim, one anomaly per export and unit says
so, and a level that needs such a metric is NULL with the reason; only an export none of
whose metrics can be interpreted is refused. The .ncu-rep cases wrap a real corpus report
(ncu_report cannot write one) and add what ncu 2024 `--set full` on an A100 reports.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from etl.core.errors import InputError
from etl.extract.ncu.export import NcuExport
from etl.extract.ncu.levels import kernel_levels
from etl.extract.ncu.read import read_ncu

from tests.conftest import corpus_path

A100_REP = "a100_mistic_ilpProf.ncu-rep"
HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream",'
          '"Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit",'
          '"Metric Value"')
KERNEL = '"0","7","a.out","h","k(int)","1","7","(32, 1, 1)","(4, 1, 1)","0","8.0"'



@pytest.fixture(autouse=True)
def in_this_process(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests hold the reader against ncu_report as this process sees it (or edit
    ncu_report here): the report is read in this process, not in one of its own."""
    from etl.extract.ncu import decode_rep

    if "read_before" not in request.node.name:
        monkeypatch.setattr(decode_rep, "ISOLATE", False)

def ncu_report() -> Any:
    try:
        import ncu_report as module
    except ImportError:
        pytest.skip("ncu_report not installed (pip install 'gpu-util-warehouse[ncu]')")
    return module


# ---- a real report with metrics added or relabelled --------------------------------------

class Metric:
    """A double metric as ncu_report hands it out."""

    ValueKind_STRING = "string"

    def __init__(self, value: float, unit: str) -> None:
        self._value, self._unit = value, unit

    def has_value(self) -> bool:
        return True

    def value(self) -> float:
        return self._value

    def unit(self) -> str:
        return self._unit

    def kind(self) -> str:
        return "double"


class Edited:
    """A real action, report or range with metrics added (name → Metric) or relabelled
    (name → unit): everything else is the real object's."""

    def __init__(self, real: Any, added: dict[str, Metric], units: dict[str, str]) -> None:
        self._real, self._added, self._units = real, added, units

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def range_by_idx(self, index: int) -> Edited:
        return Edited(self._real.range_by_idx(index), self._added, self._units)

    def action_by_idx(self, index: int) -> Edited:
        return Edited(self._real.action_by_idx(index), self._added, self._units)

    def metric_names(self) -> list[str]:
        return [*self._real.metric_names(), *self._added]

    def metric_by_name(self, name: str) -> Any:
        if name in self._added:
            return self._added[name]
        real = self._real.metric_by_name(name)
        return Metric(real.value(), self._units[name]) if name in self._units else real


def read_edited(monkeypatch: pytest.MonkeyPatch, added: dict[str, Metric],
                units: dict[str, str] | None = None) -> NcuExport:
    module = ncu_report()
    load = module.load_report
    monkeypatch.setattr(module, "load_report",
                        lambda path: Edited(load(path), added, units or {}))
    [export] = read_ncu([corpus_path("ncu", A100_REP)])
    return export


def row(export: NcuExport, name: str) -> dict[str, Any]:
    [found] = [r for r in export.metrics.to_pylist() if r["metric_name"] == name]
    return found


SET_FULL_2024 = {  # what ncu 2024 --set full on an A100 adds to the corpus report
    "l1tex__data_pipe_lsu_wavefronts.avg.peak_sustained_elapsed.per_second":
        Metric(1_532_007_842.25, "1/s"),
    "profiler__pmsampler_dropped_samples": Metric(3.0, "sample"),
}


def test_set_full_report_of_ncu_2024_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    plain = read_edited(monkeypatch, {})
    export = read_edited(monkeypatch, SET_FULL_2024)
    rate = row(export, "l1tex__data_pipe_lsu_wavefronts.avg.peak_sustained_elapsed.per_second")
    assert (rate["value"], rate["unit"], rate["reported_unit"]) == (1_532_007_842.25, "1/s", "1/s")
    dropped = row(export, "profiler__pmsampler_dropped_samples")
    assert (dropped["value"], dropped["unit"]) == (3.0, "sample")
    assert not [a for a in export.anomalies if a[0] == "ncu_unknown_unit"]
    assert export.metrics.num_rows == plain.metrics.num_rows + 2 == 702


def test_unknown_unit_is_kept_as_reported_with_one_anomaly_per_unit(
        monkeypatch: pytest.MonkeyPatch) -> None:
    added = {"x__made_up_a.sum": Metric(2.5, "furlong"), "x__made_up_b.sum": Metric(7.0, "furlong"),
             "x__made_up_c.sum": Metric(1e3, "smoot/fortnight")}
    export = read_edited(monkeypatch, added)
    a, c = row(export, "x__made_up_a.sum"), row(export, "x__made_up_c.sum")
    assert (a["value"], a["unit"], a["reported_unit"], a["reported_value_text"]) == (
        2.5, "furlong", "furlong", "2.5")
    assert (c["value"], c["unit"]) == (1000.0, "smoot/fortnight")
    unknown = sorted(a[2] for a in export.anomalies if a[0] == "ncu_unknown_unit")
    assert len(unknown) == 2
    assert unknown[0].startswith("unit 'furlong' is not in etl/extract/ncu/units.toml: 2 "
                                 "metric values kept as reported (unconverted, unit 'furlong')")
    assert "x__made_up_a.sum, x__made_up_b.sum" in unknown[0]
    assert unknown[1].startswith("unit 'smoot/fortnight' is not in etl/extract/ncu/units.toml: "
                                 "1 metric values")


def test_level_counter_with_an_unknown_unit_falls_to_the_next_counter(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """smsp__inst_issued.sum in an unknown unit: the next counter of the sm_80 list
    (smsp__inst_issued.avg × 4 × 108 SMs) gives the same total; smsp__cycles_elapsed.sum,
    the report's only elapsed counter, leaves the levels over elapsed cycles NULL."""
    plain = read_edited(monkeypatch, {})
    [want] = kernel_levels(plain.metrics, plain.kernels, None, None).to_pylist()
    export = read_edited(monkeypatch, {}, {"smsp__inst_issued.sum": "jiffy",
                                           "smsp__cycles_elapsed.sum": "jiffy"})
    assert row(export, "smsp__inst_issued.sum")["unit"] == "jiffy"
    [got] = kernel_levels(export.metrics, export.kernels, None, None).to_pylist()
    assert got["instructions_issued_source"] == "smsp__inst_issued.avg × 4 × 108 SMs"
    assert math.isclose(got["instructions_issued"], want["instructions_issued"], rel_tol=1e-9)
    assert want["issue_slot_util"] is not None and got["issue_slot_util"] is None
    assert got["issue_slot_util_null_reason"] == (
        "smsp_elapsed_cycles: smsp__cycles_elapsed.sum has unit 'jiffy', which "
        "etl/extract/ncu/units.toml does not know (its value is kept unconverted in ncu_metrics)")


# ---- CSV: unknown units kept, a level NULL with the reason, refusal only when nothing reads

def details(tmp_path: Path, rows: list[tuple[str, str, str]]) -> Path:
    path = tmp_path / "details.csv"
    lines = [HEADER] + [f'{KERNEL},"Command line profiler metrics","{n}","{u}","{v}"'
                        for n, u, v in rows]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_level_needing_a_metric_in_an_unknown_unit_is_null_with_the_reason(
        tmp_path: Path) -> None:
    path = details(tmp_path, [("smsp__cycles_elapsed.sum", "jiffy", "1,000"),
                              ("smsp__inst_issued.sum", "inst", "400"),
                              ("smsp__inst_executed_pipe_tensor.sum", "inst", "50")])
    [export] = read_ncu([path])
    elapsed = row(export, "smsp__cycles_elapsed.sum")
    assert (elapsed["value"], elapsed["unit"]) == (1000.0, "jiffy")
    [levels] = kernel_levels(export.metrics, export.kernels, None, None).to_pylist()
    assert levels["smsp_elapsed_cycles"] is None
    assert levels["smsp_elapsed_cycles_null_reason"] == (
        "smsp__cycles_elapsed.sum has unit 'jiffy', which etl/extract/ncu/units.toml does not "
        "know (its value is kept unconverted in ncu_metrics)")
    assert levels["issue_slot_util"] is None
    assert levels["issue_slot_util_null_reason"].startswith("smsp_elapsed_cycles: "
                                                            "smsp__cycles_elapsed.sum has unit")
    assert levels["tc_inst_share"] == 50 / 400  # needs no elapsed cycles


def test_export_none_of_whose_units_is_known_is_refused(tmp_path: Path) -> None:
    path = details(tmp_path, [("smsp__cycles_elapsed.sum", "jiffy", "1,000"),
                              ("gpu__time_duration.sum", "fortnight", "2")])
    with pytest.raises(InputError) as info:
        read_ncu([path])
    assert "none of its 2 metric values has a unit etl/extract/ncu/units.toml knows " \
           "('fortnight', 'jiffy')" in info.value.line()


def test_text_under_a_unit_is_refused_only_for_a_counter_a_level_needs(tmp_path: Path) -> None:
    ok = details(tmp_path, [("smsp__cycles_elapsed.sum", "cycle", "1,000"),
                            ("l1tex__m_xbar2l1tex_read_bytes.sum", "byte", "pending")])
    [export] = read_ncu([ok])
    text = row(export, "l1tex__m_xbar2l1tex_read_bytes.sum")
    assert (text["value"], text["reported_value_text"]) == (None, "pending")
    assert ("ncu_value_not_a_number", 0, "l1tex__m_xbar2l1tex_read_bytes.sum = 'pending' "
            "under unit 'byte': value NULL, text kept") in export.anomalies
