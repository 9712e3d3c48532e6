"""run_summary passes over iterations whose window holds kernels launched before profiling
(no launch call in the trace) when another iteration qualifies, and says so."""
from __future__ import annotations

from pathlib import Path

from tests.conftest import cli, kernel, launch, query_json, step, write_trace


def steps_with_an_early_kernel() -> list[dict]:
    events = []
    for n in (1, 2, 3):
        start = (n - 1) * 100_000
        events += [step(n, start, 100_000), launch(n, start + 1_000),
                   kernel(n, start + 10_000, 40_000)]
    # launched before profiling started: no launch call in the trace, runs in step 1
    events.append(kernel(99, 60_000, 30_000))
    return events


def test_a_step_with_unlaunched_kernels_is_passed_over(tmp_path: Path) -> None:
    write_trace(tmp_path / "runs" / "r" / "t.json", steps_with_an_early_kernel())
    wh = tmp_path / "wh"
    assert cli("ingest", str(tmp_path / "runs"), "--warehouse", str(wh)).returncode == 0
    [v1] = query_json(wh, "SELECT selected_iteration, gpu_util FROM run_summary_v1")
    assert v1 == {"selected_iteration": 1, "gpu_util": 0.7}  # (40 + 30 us) / 100 us
    [v2] = query_json(wh, "SELECT selected_iteration, gpu_util, selection, selection_note, "
                      "unlaunched_kernel_count FROM run_summary")
    assert v2 == {"selected_iteration": 2, "gpu_util": 0.4,
                  "selection": "first_within_5pct_of_median",
                  "selection_note": "passed over for kernels without a launch call in the "
                                    "trace: 1 iteration(s), the first 1",
                  "unlaunched_kernel_count": 0}
    rows = query_json(wh, "SELECT iteration, unlaunched_kernel_count, complete FROM "
                      "gpu_utilization ORDER BY iteration")
    assert rows == [{"iteration": 1, "unlaunched_kernel_count": 1, "complete": True},
                    {"iteration": 2, "unlaunched_kernel_count": 0, "complete": True},
                    {"iteration": 3, "unlaunched_kernel_count": 0, "complete": True}]
