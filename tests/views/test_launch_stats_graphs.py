"""launch_stats_v2 keeps the kernels of a CUDA-graph launch apart, worked by hand: one
cudaGraphLaunch call of 80 µs enqueues gemm, gemm, relu; one cudaLaunchKernel of 10 µs a
relu of 5 µs (a short kernel). v1 credited each graph kernel with the whole 80 µs call."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import etl
from tests.conftest import kernel, launch, step, write_trace

EVENTS = [step(1, 0, 400_000),
          launch(7, 1_000, dur=80_000, name="cudaGraphLaunch"),
          kernel(7, 100_000, 30_000, name="gemm"), kernel(7, 140_000, 30_000, name="gemm"),
          kernel(7, 180_000, 5_000, name="relu"),
          launch(8, 300_000, dur=10_000), kernel(8, 320_000, 5_000, name="relu")]
COLUMNS = ("kernel_name, graph_launch, launch_count, launch_call_count, mean_launch_ns, "
           "mean_launch_delay_ns, short_kernel_count, short_kernel_share, "
           "launch_outlier_count, graph_note IS NOT NULL")


def answers(tmp_path: Path, events: list[dict[str, Any]], *queries: str
            ) -> list[list[tuple[Any, ...]]]:
    """The rows of each query (ORDER BY ALL added) over a warehouse of `events` alone."""
    write_trace(tmp_path / "runs" / "graph" / "trace.json", events)
    [result] = etl.ingest([tmp_path / "runs" / "graph"], tmp_path / "wh")
    assert result.status == "ingested", result.error
    con = etl.connect(tmp_path / "wh")
    try:
        return [con.execute(f"{query} ORDER BY ALL").fetchall() for query in queries]
    finally:
        con.close()


def test_graph_kernels_apart(tmp_path: Path) -> None:
    v2, v1 = answers(tmp_path, EVENTS, f"SELECT {COLUMNS} FROM launch_stats_v2",
                     "SELECT kernel_name, launch_count, launch_outlier_count, "
                     "short_kernel_count FROM launch_stats_v1")
    # delays from the graph call's end (81 µs): gemm 19 and 59 µs, relu 99 µs
    assert v2 == [("gemm", True, 2, 1, 80_000.0, 39_000.0, None, None, None, True),
                  ("relu", False, 1, 1, 10_000.0, 10_000.0, 1, 1.0, 0, False),
                  ("relu", True, 1, 1, 80_000.0, 99_000.0, None, None, None, True)]
    assert v1 == [("gemm", 2, 2, 0), ("relu", 2, 1, 1)]  # one slow graph call, two outliers


# v3: a graph's delays are those of its first activity. The relu closing the graph starts
# 169 µs after the 81 µs call ends, because the gemms ran before it: v2 counted it a delay
# outlier. Two plain relu launches wait 10 and 165 µs (one real outlier).
V3_EVENTS = [step(1, 0, 600_000),
             launch(7, 1_000, dur=80_000, name="cudaGraphLaunch"),
             kernel(7, 100_000, 30_000, name="gemm"), kernel(7, 140_000, 30_000, name="gemm"),
             kernel(7, 250_000, 5_000, name="relu"),
             launch(8, 300_000, dur=10_000), kernel(8, 320_000, 5_000, name="relu"),
             launch(9, 330_000, dur=5_000), kernel(9, 500_000, 5_000, name="relu")]
V3_COLUMNS = ("kernel_name, graph_launch, launch_count, launch_call_count, delay_count, "
              "mean_launch_delay_ns, p90_launch_delay_ns, mean_queue_delay_ns, "
              "delay_outlier_count")


def test_graph_delays_are_those_of_its_first_activity(tmp_path: Path) -> None:
    v3, v2, stable = answers(tmp_path, V3_EVENTS, f"SELECT {V3_COLUMNS} FROM launch_stats_v3",
                             "SELECT kernel_name, graph_launch, delay_outlier_count "
                             "FROM launch_stats_v2", f"SELECT {V3_COLUMNS} FROM launch_stats")
    # the graph: call 1..81 µs, first gemm at 100 µs (delay 19, queue 99); the relus outside
    # it: calls end at 310 and 335 µs, kernels start at 320 and 500 µs
    assert v3 == [("gemm", True, 2, 1, 1, 19_000.0, 19_000, 99_000.0, 0),
                  ("relu", False, 2, 2, 2, 87_500.0, 165_000, 95_000.0, 1),
                  ("relu", True, 1, 1, 0, None, None, None, None)]
    assert stable == v3
    assert ("relu", True, 1) in v2  # the graph's last kernel, counted a delay outlier
