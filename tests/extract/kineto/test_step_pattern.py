"""run.toml's step_pattern in Kineto traces: the user annotations it names are the
iterations (windows, kernels' iteration, layers), worked out by hand on a tiny trace."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tests.conftest import cli, event, kernel, launch, write_trace

#  thread 1:  train_step 1 [0, 100 µs)                  train_step 2 [100, 250 µs)
#    aten::mm [5, 60) > launches c1 @10, c2 @50           launch c3 @120     launch c4 @300
#  device 0:  k1 [20, 40)  k2 [60, 90)  k3 [130, 200)  k4 [310, 320)
US = 1000
EVENTS = [
    event(cat="user_annotation", name="train_step 1", ts=0, dur=100 * US),
    event(name="aten::mm", ts=5 * US, dur=55 * US),
    launch(1, 10 * US), launch(2, 50 * US),
    event(cat="user_annotation", name="train_step 2", ts=100 * US, dur=150 * US),
    launch(3, 120 * US), launch(4, 300 * US),
    kernel(1, 20 * US, 20 * US), kernel(2, 60 * US, 30 * US),
    kernel(3, 130 * US, 70 * US), kernel(4, 310 * US, 10 * US),
]
PATTERN = "step_pattern = 'train_step (\\d+)'\n"


def _ingest(tmp_path: Path, run_toml: str | None) -> Any:
    import etl

    folder = tmp_path / "runs" / "r"
    write_trace(folder / "trace.json", EVENTS)
    if run_toml is not None:
        (folder / "run.toml").write_text(run_toml)
    [run] = etl.ingest([tmp_path / "runs"], tmp_path / "wh")
    assert run.status == "ingested", run.error
    return etl.connect(tmp_path / "wh")


def test_step_pattern_annotations_are_the_iterations(tmp_path: Path) -> None:
    with _ingest(tmp_path, PATTERN) as con:
        assert con.execute("SELECT iteration, start_ns, end_ns, boundary FROM iterations "
                           "ORDER BY start_ns").fetchall() == [
            (1, 0, 100 * US, "ProfilerStep"), (2, 100 * US, 250 * US, "ProfilerStep")]
        # k4 is launched after the last step: in no iteration; the markers are no layer
        assert con.execute("SELECT iteration, layer FROM kernels ORDER BY ts_ns").fetchall() == [
            (1, None), (1, None), (2, None), (None, None)]
        # the views pick the windows up: step 1 [0, 100] busy 20 + 30 µs; step 2
        # [100, 250] busy 70 µs
        assert con.execute("SELECT iteration, window_start_ns, window_ns, busy_ns, "
                           "kernel_count, gpu_util FROM gpu_utilization_v3 "
                           "ORDER BY iteration").fetchall() == [
            (1, 0, 100 * US, 50 * US, 2, 0.5), (2, 100 * US, 150 * US, 70 * US, 1, 70 / 150)]
        assert con.execute("SELECT iteration FROM host_events WHERE name = 'aten::mm'"
                           ).fetchall() == [(1,)]


def test_without_run_toml_one_window_spans_the_trace(tmp_path: Path) -> None:
    with _ingest(tmp_path, None) as con:
        assert con.execute("SELECT iteration, start_ns, end_ns, boundary FROM iterations"
                           ).fetchall() == [(None, 0, 320 * US, "whole_trace")]
        # the annotations are then layers (user_annotation scopes)
        assert con.execute("SELECT iteration, layer FROM kernels ORDER BY ts_ns").fetchall() == [
            (None, "train_step 1"), (None, "train_step 1"), (None, "train_step 2"),
            (None, None)]
        assert con.execute("SELECT kernel_count, busy_ns, window_ns FROM gpu_utilization_v3"
                           ).fetchall() == [(4, 130 * US, 320 * US)]


def _tables(result: Any, parts: dict[str, list[pa.Table]]) -> dict[str, list[dict[str, Any]]]:
    return {"iterations": result.iterations.drop_columns(["complete", "cut"]).to_pylist(),
            **{t: pa.concat_tables(parts[t]).sort_by(key).to_pylist()
               for t, key in (("host_events", "event_id"), ("kernels", "kernel_id"))}}


@pytest.mark.parametrize("workers", [1, 2])
def test_streaming_equals_in_memory_with_a_step_pattern(tmp_path: Path, workers: int
                                                        ) -> None:
    """Slices decoded here or in worker processes (the markers travel to them) give the
    in-memory reading's rows."""
    from etl.extract.kineto.read import read as ingest_trace
    from etl.extract.kineto.decode import read_trace
    from etl.extract.kineto.rows import build
    from etl.extract.trace_role import PipelineOptions, Sinks

    padding = [event(name=f"pad{i}", ts=260 * US + i, dur=0, tid=2) for i in range(200)]
    path = write_trace(tmp_path / "t.json", EVENTS + padding)
    parts: dict[str, list[pa.Table]] = {"host_events": [], "kernels": [], "anomalies": []}
    sinks = Sinks(parts["host_events"].append, parts["kernels"].append,
                  parts["anomalies"].append)
    options = PipelineOptions(workers=workers, slice_bytes=4096, chunk_rows=50,
                              step_pattern="train_step (\\d+)")
    result = ingest_trace(path, 0, None, tmp_path / "spill", sinks, options)
    want = build(read_trace(path), 0, None, step_pattern="train_step (\\d+)")
    got = _tables(result, parts)
    assert got == _tables(want, {"host_events": [want.host_events],
                                 "kernels": [want.kernels]})
    assert [k["iteration"] for k in got["kernels"]] == [1, 1, 2, None]


def test_a_step_number_that_is_no_number_refuses_the_run_in_one_line(tmp_path: Path
                                                                       ) -> None:
    folder = tmp_path / "runs" / "r"
    write_trace(folder / "trace.json", EVENTS)
    (folder / "run.toml").write_text("step_pattern = 'train_(\\w+)'\n")
    result = cli("ingest", str(tmp_path / "runs"), "--warehouse", str(tmp_path / "wh"))
    assert result.returncode != 0
    [line] = [x for x in result.stderr.splitlines() if "trace.json" in x]
    assert "Traceback" not in result.stderr
    assert "'train_step 1'" in line and "group 1 ('step')" in line and "(\\d+)" in line
