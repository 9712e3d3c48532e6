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
-- v2: v1's rows, faster: reads _iteration_windows_v3 (v1's windows) and _type_coverage_v1
-- (the same unions, as disjoint pieces made in one sorted pass) instead of _type_spans_v1.
WITH clipped AS (
    SELECT
        w.run_id, w.run_name, w.source_id, w.device_id, w.host_start_ns, w.iteration,
        coalesce(sum(least(s.end_ns, w.window_end_ns) - greatest(s.start_ns, w.window_start_ns))
                 FILTER (WHERE s.scope = 'computation'), 0) AS comp_ns,
        coalesce(sum(least(s.end_ns, w.window_end_ns) - greatest(s.start_ns, w.window_start_ns))
                 FILTER (WHERE s.scope = 'computation_communication'), 0) AS comp_comm_ns,
        coalesce(sum(least(s.end_ns, w.window_end_ns) - greatest(s.start_ns, w.window_start_ns))
                 FILTER (WHERE s.scope = 'all'), 0) AS all_ns
    FROM _iteration_windows_v3 AS w
    LEFT JOIN _type_coverage_v1 AS s
      ON s.run_id = w.run_id AND s.run_name = w.run_name AND s.source_id = w.source_id
     AND s.device_id = w.device_id AND s.scope <> 'activity'
     AND s.start_ns < w.window_end_ns AND s.end_ns > w.window_start_ns
    GROUP BY w.run_id, w.run_name, w.source_id, w.device_id, w.host_start_ns, w.iteration
)
SELECT
    w.run_id,
    w.run_name,
    w.source_id,
    w.rank,
    w.device_id,
    w.iteration,
    w.window_start_ns,
    w.window_end_ns - w.window_start_ns AS window_ns,
    c.comp_ns AS computation_ns,
    c.comp_comm_ns - c.comp_ns AS communication_ns,
    c.all_ns - c.comp_comm_ns AS memory_ns,
    w.window_end_ns - w.window_start_ns - c.all_ns AS idle_ns,
    CASE WHEN w.window_end_ns > w.window_start_ns
         THEN c.comp_ns / (w.window_end_ns - w.window_start_ns) END AS computation_share,
    CASE WHEN w.window_end_ns > w.window_start_ns
         THEN (c.comp_comm_ns - c.comp_ns) / (w.window_end_ns - w.window_start_ns) END
        AS communication_share,
    CASE WHEN w.window_end_ns > w.window_start_ns
         THEN (c.all_ns - c.comp_comm_ns) / (w.window_end_ns - w.window_start_ns) END
        AS memory_share,
    CASE WHEN w.window_end_ns > w.window_start_ns
         THEN (w.window_end_ns - w.window_start_ns - c.all_ns)
              / (w.window_end_ns - w.window_start_ns) END AS idle_share
FROM _iteration_windows_v3 AS w
JOIN clipped AS c
  ON c.run_id = w.run_id AND c.run_name = w.run_name AND c.source_id = w.source_id
 AND c.device_id = w.device_id AND c.host_start_ns = w.host_start_ns
 AND c.iteration IS NOT DISTINCT FROM w.iteration
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
