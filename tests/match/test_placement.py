"""An ncu export that matches several identical iterations goes to the preferred one."""
from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from etl.demo.runs import NCU_STEP, write_demo
from etl.load.ingest import ingest_all
from etl.match.placement import place
from etl.warehouse.store import Warehouse
from tests.conftest import query_json


def _trace(iterations: list[int | None], names: list[str]) -> pa.Table:
    n = len(names)
    return pa.table({"source_id": [0] * n, "iteration": iterations, "name": names,
                     **{c: [1] * n for c in ("grid_x", "grid_y", "grid_z", "block_x",
                                             "block_y", "block_z")}})


def _result(ncu_ids: list[int | None]) -> pa.Table:
    return pa.table({"kernel_id": list(range(len(ncu_ids))), "ncu_id": ncu_ids,
                     "match_status": ["matched" if i is not None else "unmatched"
                                      for i in ncu_ids],
                     "reason": [None if i is not None else "outside" for i in ncu_ids],
                     "score": [1.0 if i is not None else None for i in ncu_ids]})


def test_the_docstring_example() -> None:
    trace = _trace([1, 1, 3, 3], ["a", "b", "a", "b"])
    placed, how = place(trace, _result([0, 1, None, None]), 3, dict)
    assert placed["ncu_id"].to_pylist() == [None, None, 0, 1]
    assert placed["reason"].to_pylist() == ["outside", "outside", None, None]
    assert how is not None and (how.iteration, how.aligned, how.candidates) == (3, 1, [1, 3])


@pytest.mark.parametrize("hint,selected,expected,why", [
    (None, {0: 2}, 2, "run_summary"), (None, {}, 3, "latest"), (2, {0: 3}, 2, "run.toml"),
    (7, {0: 1}, 1, "run_summary"),  # a hint that is not an equivalent iteration is ignored
])
def test_order_of_preference(hint: int | None, selected: dict[int, int], expected: int,
                             why: str) -> None:
    trace = _trace([1, 1, 2, 2, 3, 3], ["a", "b"] * 3)
    placed, how = place(trace, _result([0, 1, None, None, None, None]), hint,
                        lambda: selected)
    assert how is not None and how.iteration == expected and why in how.why
    matched = [i for i, v in enumerate(placed["ncu_id"].to_pylist()) if v is not None]
    assert [trace["iteration"][i].as_py() for i in matched] == [expected, expected]


def test_iterations_that_differ_are_not_equivalent() -> None:
    trace = _trace([1, 1, 2, 2], ["a", "b", "a", "c"])
    result = _result([0, 1, None, None])
    placed, how = place(trace, result, 2, dict)
    assert how is None and placed.equals(result)


def test_demo_views_agree(demo_warehouse: Path) -> None:
    """run_summary and run_utilization describe the same step of every run and device; the
    runs with an ncu export have their levels on the step the export profiled."""
    columns = "run_name, source_id, device_id, {it} AS it, gpu_util, throughput_samples_per_s"
    order = " ORDER BY run_name, source_id, device_id"
    summary = query_json(demo_warehouse, "SELECT " + columns.format(it="selected_iteration")
                         + " FROM run_summary" + order)
    levels = query_json(demo_warehouse, "SELECT " + columns.format(it="iteration")
                        + " FROM run_utilization" + order)
    assert len(summary) > 2 and summary == levels
    with_ncu = query_json(demo_warehouse, "SELECT run_name, iteration FROM run_utilization "
                          "WHERE ncu_reason IS NULL ORDER BY run_name")
    assert with_ncu == [{"run_name": "resnet_amp_eager", "iteration": NCU_STEP},
                        {"run_name": "resnet_fp32_eager", "iteration": NCU_STEP}]


def test_without_a_hint_the_export_goes_to_run_summarys_step(tmp_path: Path) -> None:
    write_demo(tmp_path / "runs")
    run = tmp_path / "runs" / "resnet_amp_eager"
    toml = run / "run.toml"
    toml.write_text(toml.read_text().replace(f"ncu_iteration = {NCU_STEP}\n", ""))
    ingest_all([run], Warehouse.at(tmp_path / "wh"))
    [row] = query_json(tmp_path / "wh", "SELECT detail FROM anomalies "
                       "WHERE kind = 'ncu_equivalent_iterations'")
    assert f"placed on iteration {NCU_STEP}: the iteration run_summary selects" in row["detail"]
    [used] = query_json(tmp_path / "wh", "SELECT iteration FROM run_utilization")
    assert used["iteration"] == NCU_STEP
