-- _window_coverage: private helper. For each iteration window on a device, the ns during
-- which each scope's activities ran: the unions of their intervals clipped to the window;
-- and the kernels' summed time in it.
-- Grain: one row per run, source, device that ran kernels and iteration window
-- (_iteration_windows_v3's, gpu_utilization's windows).
-- <scope>_ns = sum over the activities overlapping the window of
-- max(0, min(end_ns, window end) - max(<scope>_from_ns, window start)), the scope's
-- pieces (_activity_pieces_v1, disjoint) clipped to the window; 0 when none ran. Each sum
-- keeps only rows with the scope's piece: least/greatest skip NULLs, so a window without
-- activities (the LEFT JOIN's NULL row) would otherwise count as covered whole.
-- kernel_time_ns = sum over kernels overlapping the window of
-- min(end_ns, window end) - max(start_ns, window start).
-- [project] Shared by temporal_breakdown_v3, comm_overlap_v3 and gpu_utilization_v4; the
-- same sums as their predecessors' over _type_coverage_v1 and _busy_intervals_v1, with one
-- joined row per activity instead of one per scope.
SELECT
    w.run_id,
    w.run_name,
    w.source_id,
    w.rank,
    w.device_id,
    w.host_start_ns,
    w.iteration,
    w.window_start_ns,
    w.window_end_ns,
    w.kernel_count,
    w.complete,
    w.cut,
    w.unlaunched_kernel_count,
    coalesce(sum(greatest(0, least(p.end_ns, w.window_end_ns)
                             - greatest(p.computation_from_ns, w.window_start_ns)))
             FILTER (WHERE p.computation_from_ns IS NOT NULL), 0) AS computation_ns,
    coalesce(sum(greatest(0, least(p.end_ns, w.window_end_ns)
                             - greatest(p.communication_from_ns, w.window_start_ns)))
             FILTER (WHERE p.communication_from_ns IS NOT NULL), 0) AS communication_ns,
    coalesce(sum(greatest(0, least(p.end_ns, w.window_end_ns)
                             - greatest(p.computation_communication_from_ns, w.window_start_ns)))
             FILTER (WHERE p.computation_communication_from_ns IS NOT NULL), 0)
        AS computation_communication_ns,
    coalesce(sum(greatest(0, least(p.end_ns, w.window_end_ns)
                             - greatest(p.all_from_ns, w.window_start_ns)))
             FILTER (WHERE p.all_from_ns IS NOT NULL), 0) AS all_ns,
    coalesce(sum(greatest(0, least(p.end_ns, w.window_end_ns)
                             - greatest(p.kernel_from_ns, w.window_start_ns)))
             FILTER (WHERE p.kernel_from_ns IS NOT NULL), 0) AS busy_ns,
    coalesce(sum(greatest(0, least(p.end_ns, w.window_end_ns)
                             - greatest(p.activity_from_ns, w.window_start_ns)))
             FILTER (WHERE p.activity_from_ns IS NOT NULL), 0) AS activity_busy_ns,
    coalesce(sum(least(p.end_ns, w.window_end_ns) - greatest(p.start_ns, w.window_start_ns))
             FILTER (WHERE p.kind = 'kernel'), 0) AS kernel_time_ns
FROM _iteration_windows_v3 AS w
LEFT JOIN _activity_pieces_v1 AS p
  ON p.run_id = w.run_id AND p.run_name = w.run_name AND p.source_id = w.source_id
 AND p.device_id = w.device_id
 AND p.start_ns < w.window_end_ns AND p.end_ns > w.window_start_ns
GROUP BY w.run_id, w.run_name, w.source_id, w.rank, w.device_id, w.host_start_ns, w.iteration,
         w.window_start_ns, w.window_end_ns, w.kernel_count, w.complete, w.cut,
         w.unlaunched_kernel_count
-- run_id: run; joins runs.run_id
-- run_name: the run folder's name
-- source_id: input file within the run (one per rank)
-- rank: distributed rank; NULL when the trace has no distributedInfo
-- device_id: GPU index as the trace numbers it
-- host_start_ns: start of the host step the window belongs to, ns (part of the window's key)
-- iteration: N of ProfilerStep#N; NULL for a trace without steps (one whole-trace window)
-- window_start_ns: start of the window, ns since the trace's epoch
-- window_end_ns: end of the window, ns since the trace's epoch
-- kernel_count: kernels launched from the window's host step (_iteration_windows_v3's)
-- complete: the window's step is complete (_iteration_windows_v3's)
-- cut: the trace ends inside the window (_iteration_windows_v3's)
-- unlaunched_kernel_count: kernels in the window without a launch event (_iteration_windows_v3's)
-- computation_ns: ns of the window during which a computation kernel ran
-- communication_ns: ns of the window during which a communication kernel ran
-- computation_communication_ns: ns during which a computation or a communication kernel ran
-- all_ns: ns during which a computation, communication or memory activity ran
-- busy_ns: ns during which a kernel ran (the union of kernels: gpu_utilization's busy_ns)
-- activity_busy_ns: ns during which a kernel, copy or set ran
-- kernel_time_ns: sum of the kernels' durations clipped to the window (overlaps count twice)
