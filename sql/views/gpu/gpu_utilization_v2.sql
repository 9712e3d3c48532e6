-- gpu_utilization: GPU-level utilization (the paper's level 1: GPU busy time) per iteration.
-- Grain: one row per run, source (rank), device that ran kernels, and iteration.
-- busy_ns is the length of the union of ALL kernel intervals of the device (whichever
-- iteration launched them) clipped to the iteration window; gpu_util = busy_ns / window_ns.
-- activity_* counts memcpy and memset as busy too. kernel_time_ns sums the kernels'
-- clipped durations, so it exceeds busy_ns when streams overlap.
-- run_name comes from the helpers and is kept in every key and join, so that a filter on
-- it is pushed down to `runs` at the base and only that run's files are read.
-- [paper, level 1] gpu_util = GPU kernel execution time / total execution time of the
-- iteration. [project] Busy time is the union of kernel intervals clipped to the window
-- of _iteration_windows; activity_* and kernel_time_ns are this project's additions.
-- v2: an iteration a truncated source does not hold whole (complete = false, `cut` says
-- why) keeps the busy time that was recorded, but its gpu_util and activity_util are NULL:
-- kernels cut off would count, so the ratio is unknown, not low. complete, cut and
-- unlaunched_kernel_count come from _iteration_windows_v2.
WITH busy AS (
    SELECT
        w.run_id, w.run_name, w.source_id, w.device_id, w.host_start_ns, w.iteration,
        coalesce(sum(least(b.end_ns, w.window_end_ns) - greatest(b.start_ns, w.window_start_ns))
                 FILTER (WHERE b.scope = 'kernel'), 0) AS busy_ns,
        coalesce(sum(least(b.end_ns, w.window_end_ns) - greatest(b.start_ns, w.window_start_ns))
                 FILTER (WHERE b.scope = 'activity'), 0) AS activity_busy_ns
    FROM _iteration_windows_v2 AS w
    LEFT JOIN _busy_intervals_v1 AS b
      ON b.run_id = w.run_id AND b.run_name = w.run_name AND b.source_id = w.source_id
     AND b.device_id = w.device_id
     AND b.start_ns < w.window_end_ns AND b.end_ns > w.window_start_ns
    GROUP BY w.run_id, w.run_name, w.source_id, w.device_id, w.host_start_ns, w.iteration
),
run_kernels AS (
    SELECT k.run_id, r.run_name, k.source_id, k.device_id, k.kernel_id, k.ts_ns, k.dur_ns
    FROM kernels AS k
    JOIN runs AS r ON r.run_id = k.run_id
    WHERE k.kind = 'kernel' AND k.dur_ns >= 0
),
kernel_time AS (
    SELECT
        w.run_id, w.run_name, w.source_id, w.device_id, w.host_start_ns, w.iteration,
        -- least/greatest skip NULLs, so the unmatched row of the LEFT JOIN is filtered out
        coalesce(sum(least(k.ts_ns + k.dur_ns, w.window_end_ns)
                     - greatest(k.ts_ns, w.window_start_ns))
                 FILTER (WHERE k.kernel_id IS NOT NULL), 0) AS kernel_time_ns
    FROM _iteration_windows_v2 AS w
    LEFT JOIN run_kernels AS k
      ON k.run_id = w.run_id AND k.run_name = w.run_name AND k.source_id = w.source_id
     AND k.device_id = w.device_id
     AND k.ts_ns < w.window_end_ns AND k.ts_ns + k.dur_ns > w.window_start_ns
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
    b.busy_ns,
    w.kernel_count,
    CASE WHEN w.complete AND w.window_end_ns > w.window_start_ns
         THEN b.busy_ns / (w.window_end_ns - w.window_start_ns) END AS gpu_util,
    b.activity_busy_ns,
    CASE WHEN w.complete AND w.window_end_ns > w.window_start_ns
         THEN b.activity_busy_ns / (w.window_end_ns - w.window_start_ns) END AS activity_util,
    t.kernel_time_ns,
    w.complete,
    w.cut,
    w.unlaunched_kernel_count
FROM _iteration_windows_v2 AS w
JOIN busy AS b
  ON b.run_id = w.run_id AND b.run_name = w.run_name AND b.source_id = w.source_id AND b.device_id = w.device_id
 AND b.host_start_ns = w.host_start_ns AND b.iteration IS NOT DISTINCT FROM w.iteration
JOIN kernel_time AS t
  ON t.run_id = w.run_id AND t.run_name = w.run_name AND t.source_id = w.source_id AND t.device_id = w.device_id
 AND t.host_start_ns = w.host_start_ns AND t.iteration IS NOT DISTINCT FROM w.iteration
-- run_id: run; joins runs.run_id
-- run_name: the run folder's name
-- source_id: input file within the run (one per rank)
-- rank: distributed rank from distributedInfo; NULL when the trace has none
-- device_id: GPU index as the trace numbers it; joins devices.device_id
-- iteration: N of ProfilerStep#N; NULL for a trace without steps (one whole-trace window)
-- window_start_ns: start of the iteration window, ns since the trace's epoch
-- window_ns: length of the iteration window in ns (0 when a later-starting step ends first)
-- busy_ns: ns of the window during which at least one kernel ran on the device
-- kernel_count: kernels launched from this iteration that ran on the device (|K_i|)
-- gpu_util: busy_ns / window_ns in 0..1; NULL when window_ns = 0 or the iteration is not complete
-- activity_busy_ns: like busy_ns, memcpy and memset counted as busy too
-- activity_util: activity_busy_ns / window_ns in 0..1; NULL when window_ns = 0 or the iteration is not complete
-- kernel_time_ns: sum of kernel durations clipped to the window (exceeds busy_ns when streams overlap)
-- complete: false for an iteration of a truncated (salvaged) source that the cut may have reached; iterations.complete
-- cut: why the iteration is not complete (records_out_of_order, launch_calls_cut, gpu_activities_cut, trace_cut); NULL when complete
-- unlaunched_kernel_count: kernels of the device without a launch call in the trace that run inside the window (their time is in busy_ns)
