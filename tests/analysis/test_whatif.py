"""`etl whatif`: scales refused in one line, and what every what-if must satisfy whatever
the trace: scaling by at most 1 never lengthens an iteration (the replay is a max-plus
system whose weights grow with the factors), and removing communication is at least as
fast as removing nothing and at most as fast as removing every communication kernel's time.
The hand-made trace with the answers stated is tests/replay/test_hand_trace.py.
"""
from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

import etl
from etl.analysis.whatif import WhatIf, WhatIfError, answer, parse_scale, prepare
from tests.conftest import cli


@pytest.mark.parametrize(("text", "says"), [
    ("all", "no factor"), ("all:", "not a non-negative number"),
    ("all:-1", "not a non-negative number"), ("all:nan", "not a non-negative number"),
    ("all:inf", "not a non-negative number"), ("gpu:0.5", "unknown selector"),
    ("kernel_type=tensor:0.5", "kernel_type is one of"), ("rank=x:2", "rank=N"),
    ("kernel=(:0.5", "not a regular expression"), ("op=:0.5", "unknown selector")])
def test_scales_that_cannot_be_read_are_refused(text: str, says: str) -> None:
    with pytest.raises(WhatIfError, match=says.replace("(", r"\(")):
        parse_scale(text)


def test_the_factor_is_after_the_last_colon() -> None:
    scale = parse_scale("op=aten::conv2d:0.25")
    assert (scale.selector, scale.value, scale.factor) == ("op", "aten::conv2d", 0.25)


def test_a_scale_that_matches_nothing_is_refused(timeline_warehouse: Path) -> None:
    with pytest.raises(WhatIfError, match="matches nothing"):
        etl.api.whatif("ns_resolution_trace", ["kernel=^no such kernel$:0"],
                       timeline_warehouse)
    with pytest.raises(WhatIfError, match="no run named"):
        etl.api.whatif("nonexistent", ["all:0.5"], timeline_warehouse)


RUNS = ("ns_resolution_trace", "negative_queue", "nccl_parser_config", "trace_filter",
        "nsys_rtxa4500", "tf_v100", "test")
SMALLER = (["all:0.5"], ["host:0"], ["all:0", "host:0"], ["kernel_type=memory:0.2"],
           ["op=aten::.*:0.7", "host:0.9"], ["kernel_type=computation:0.9"])


@pytest.mark.parametrize("run", RUNS)
def test_scaling_by_at_most_one_never_lengthens_an_iteration(timeline_warehouse: Path,
                                                             run: str) -> None:
    """The run read and replayed once (prepare), each what-if answered from it, as the
    report asks several of one run; the first is asked of `etl.api.whatif` too, whole."""
    con = etl.connect(timeline_warehouse)
    try:
        prepared = prepare(con, run)
    finally:
        con.close()

    def whatif(scales: list[str]) -> WhatIf:
        return answer(prepared, [parse_scale(t) for t in scales])

    assert whatif(SMALLER[0]).rows == etl.api.whatif(run, SMALLER[0], timeline_warehouse).rows
    for scales in SMALLER:
        try:
            result = whatif(scales)
        except WhatIfError as exc:  # a kind of activity the run does not have
            assert "matches nothing" in str(exc)
            continue
        for row in result.rows:
            assert row["whatif_ns"] <= row["replayed_ns"], (scales, row)
        longer = whatif([s.replace(":", ":1.0") if s.endswith(":0") else
                         s.rsplit(":", 1)[0] + ":1.5" for s in scales])
        for row in longer.rows:
            assert row["whatif_ns"] >= row["replayed_ns"], (scales, row)


@pytest.mark.parametrize("run", ["nccl_parser_config", "trace_filter"])
def test_free_communication_is_bounded_by_its_time(timeline_warehouse: Path, run: str) -> None:
    result = etl.api.whatif(run, ["kernel_type=communication:0"], timeline_warehouse)
    con = etl.connect(timeline_warehouse)
    comm = dict(((r, d, i), ns) for r, d, i, ns in con.execute(
        "SELECT k.rank, k.device_id, k.iteration, sum(k.dur_ns) FROM kernels AS k "
        "JOIN runs USING (run_id) WHERE run_name = ? AND k.kernel_type = 'communication' "
        "GROUP BY ALL", [run]).fetchall())
    assert comm  # the run has collectives
    for row in result.rows:
        spent = comm.get((row["rank"], row["device_id"], row["iteration"]), 0)
        assert row["replayed_ns"] - spent <= row["whatif_ns"] <= row["replayed_ns"], row


def test_a_rank_is_scaled_alone(timeline_warehouse: Path) -> None:
    result = etl.api.whatif("trace_filter", ["rank=1:0.5"], timeline_warehouse)
    ranks = {r["rank"] for r in result.rows}
    assert ranks == {0, 1}
    assert any(r["whatif_ns"] < r["replayed_ns"] for r in result.rows if r["rank"] == 1)


def test_the_command_line_prints_rows_alone_as_csv(timeline_warehouse: Path) -> None:
    done = cli("whatif", "ns_resolution_trace", "--scale", "all:0.5", "--warehouse",
               str(timeline_warehouse), "--format", "csv")
    assert done.returncode == 0, done.stderr
    rows = list(csv.DictReader(io.StringIO(done.stdout)))
    assert list(rows[0]) == ["run_name", "rank", "device_id", "iteration", "measured_ns",
                             "replayed_ns", "whatif_ns", "speedup_ratio"]
    assert len(rows) == 5 and all(float(r["speedup_ratio"]) > 1 for r in rows)


def test_the_table_says_when_a_run_has_no_steps(timeline_warehouse: Path) -> None:
    done = cli("whatif", "alexnet", "--scale", "host:0", "--warehouse",
               str(timeline_warehouse))
    assert done.returncode == 0, done.stderr
    assert "replayed over its whole window" in done.stdout
    assert "critical path of the what-if" in done.stdout
    refused = cli("whatif", "alexnet", "--scale", "all:-2", "--warehouse",
                  str(timeline_warehouse))
    assert refused.returncode == 1 and refused.stderr.count("\n") == 1
