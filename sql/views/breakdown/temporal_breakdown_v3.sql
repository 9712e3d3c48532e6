-- temporal_breakdown: where each iteration's time goes on a device: computation,
-- communication, memory and idle, adding up to the window.
-- Grain: one row per run, source (rank), device that ran kernels, and iteration (the
-- windows of gpu_utilization).
-- Each instant of the window counts once, in the first of: computation (a computation
-- kernel runs), communication (a communication kernel runs, no computation), memory (a
-- copy or set runs, neither of the others), idle (nothing runs). Unions of intervals
-- (_type_spans), so overlapping streams are not counted twice; computation_ns +
-- communication_ns + memory_ns + idle_ns = window_ns, and the first three add up to
-- gpu_utilization's activity_busy_ns.
-- [project] HTA's temporal breakdown (get_temporal_breakdown) is per rank over one span,
-- from the first kernel's start to the last kernel's end, with compute = the union of
-- computation kernels, idle = the span minus the union of all GPU activities, and
-- non-compute = the rest (here communication_ns + memory_ns). Here: per iteration window
-- (the paper's window, gpu_utilization's), and non-compute split into communication and
-- memory, computation first.
SELECT
    run_id,
    run_name,
    source_id,
    rank,
    device_id,
    iteration,
    window_start_ns,
    window_end_ns - window_start_ns AS window_ns,
    computation_ns,
    computation_communication_ns - computation_ns AS communication_ns,
    all_ns - computation_communication_ns AS memory_ns,
    window_end_ns - window_start_ns - all_ns AS idle_ns,
    CASE WHEN window_end_ns > window_start_ns
         THEN computation_ns / (window_end_ns - window_start_ns) END AS computation_share,
    CASE WHEN window_end_ns > window_start_ns
         THEN (computation_communication_ns - computation_ns)
              / (window_end_ns - window_start_ns) END AS communication_share,
    CASE WHEN window_end_ns > window_start_ns
         THEN (all_ns - computation_communication_ns) / (window_end_ns - window_start_ns) END
        AS memory_share,
    CASE WHEN window_end_ns > window_start_ns
         THEN (window_end_ns - window_start_ns - all_ns) / (window_end_ns - window_start_ns) END
        AS idle_share
FROM _window_coverage_v1
-- run_id: run; joins runs.run_id
-- run_name: the run folder's name
-- source_id: input file within the run (one per rank)
-- rank: distributed rank; NULL when the trace has no distributedInfo
-- device_id: GPU index as the trace numbers it; joins devices.device_id
-- iteration: N of ProfilerStep#N; NULL for a trace without steps (one whole-trace window)
-- window_start_ns: start of the iteration window (gpu_utilization's), ns since the trace's epoch
-- window_ns: length of the window, ns
-- computation_ns: ns of the window during which a computation kernel ran
-- communication_ns: ns during which a communication kernel ran and no computation kernel (communication not hidden by computation)
-- memory_ns: ns during which only copies or sets ran (no computation or communication kernel)
-- idle_ns: ns during which no GPU activity ran; window_ns minus the three above
-- computation_share: computation_ns / window_ns; NULL when window_ns = 0
-- communication_share: communication_ns / window_ns; NULL when window_ns = 0
-- memory_share: memory_ns / window_ns; NULL when window_ns = 0
-- idle_share: idle_ns / window_ns; NULL when window_ns = 0
