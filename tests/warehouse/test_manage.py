"""etl rm and etl mv: one publish each, readers see the warehouse before or after."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import cli, query_json, write_trace
from tests.views.test_tiny_trace import EVENTS

COUNTS = ("SELECT r.run_name, (SELECT count(*) FROM kernels k WHERE k.run_id = r.run_id) AS k "
          "FROM runs r ORDER BY r.run_name")


@pytest.fixture
def warehouse(tmp_path: Path) -> Path:
    for name in ("a", "b", "c"):
        write_trace(tmp_path / "runs" / name / "t.json", EVENTS)
    wh = tmp_path / "wh"
    assert cli("ingest", str(tmp_path / "runs"), "--warehouse", str(wh)).returncode == 0
    return wh


def test_rm_removes_runs_and_their_rows(warehouse: Path) -> None:
    before = query_json(warehouse, COUNTS)
    assert [r["run_name"] for r in before] == ["a", "b", "c"] and before[0]["k"] > 0
    out = cli("rm", "a", "c", "--warehouse", str(warehouse))
    assert out.returncode == 0, out.stderr
    assert query_json(warehouse, COUNTS) == [before[1]]
    assert query_json(warehouse, "SELECT count(*) AS n FROM gpu_utilization "
                      "WHERE run_name IN ('a', 'c')") == [{"n": 0}]
    missing = cli("rm", "b", "zzz", "--warehouse", str(warehouse))
    assert missing.returncode == 1 and "no run named 'zzz'" in missing.stderr
    assert query_json(warehouse, COUNTS) == [before[1]]  # all or nothing


def test_a_removed_name_can_be_ingested_again(warehouse: Path, tmp_path: Path) -> None:
    assert cli("rm", "a", "--warehouse", str(warehouse)).returncode == 0
    again = cli("ingest", str(tmp_path / "runs" / "a"), "--warehouse", str(warehouse))
    assert again.returncode == 0 and "1 ingested" in again.stdout, again.stdout
    assert [r["run_name"] for r in query_json(warehouse, COUNTS)] == ["a", "b", "c"]


def test_mv_renames_with_every_row(warehouse: Path) -> None:
    before = {r["run_name"]: r["k"] for r in query_json(warehouse, COUNTS)}
    util = query_json(warehouse, "SELECT iteration, gpu_util FROM gpu_utilization "
                      "WHERE run_name = 'b' ORDER BY iteration")
    assert cli("mv", "b", "b2", "--warehouse", str(warehouse)).returncode == 0
    after = {r["run_name"]: r["k"] for r in query_json(warehouse, COUNTS)}
    assert after == {"a": before["a"], "b2": before["b"], "c": before["c"]}
    assert query_json(warehouse, "SELECT iteration, gpu_util FROM gpu_utilization "
                      "WHERE run_name = 'b2' ORDER BY iteration") == util
    taken = cli("mv", "a", "c", "--warehouse", str(warehouse))
    assert taken.returncode == 1 and "a run named 'c' exists" in taken.stderr
