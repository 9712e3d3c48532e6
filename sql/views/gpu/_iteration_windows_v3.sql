-- _iteration_windows: private helper. The iteration windows of gpu_utilization.
-- Grain: one row per run, source, device that ran kernels, and iteration.
-- K_i = kernels (kind = kernel) whose launch call starts within ProfilerStep#i's host span
-- [hs, he] (kernels.iteration = i); for a trace without steps, every kernel with a launch.
-- raw window = [min(hs, first start in K_i), max(he, last end in K_i)] on that device; the
-- window's start is then raised to the latest raw end of the earlier iterations, so windows
-- never overlap (torch-tb-profiler's step rule).
-- run_name is joined at the base and kept in every key, so that a filter on it (e.g.
-- gpu_utilization WHERE run_name = ...) is pushed down to `runs` and prunes the scans.
-- [project] The window rule is torch-tb-profiler's step rule, a choice of this project.
-- v2: complete/cut from iterations (an iteration of a truncated, salvaged source that the
-- cut may have reached is not complete), and unlaunched_kernel_count: kernels of the
-- device without a launch call in the trace (kernels.launch_event_id NULL, e.g. launched
-- before profiling started) that run inside the window.
-- v3: v2's rows, faster: kernels meet their iteration by equi-joins (ProfilerStep and
-- whole-trace boundaries apart) instead of one join on an OR of both.
WITH gpu_devices AS (
    SELECT DISTINCT k.run_id, r.run_name, k.source_id, k.device_id
    FROM kernels AS k
    JOIN runs AS r ON r.run_id = k.run_id
    WHERE k.kind = 'kernel' AND k.device_id IS NOT NULL
),
launched_pairs AS (
    -- the two kinds of boundary apart, each an equi-join (one OR of both made a join on
    -- run and source alone: kernels x iterations rows, filtered afterwards)
    SELECT k.run_id, r.run_name, k.source_id, k.device_id, it.iteration, it.start_ns AS hs,
           k.ts_ns, k.dur_ns
    FROM kernels AS k
    JOIN runs AS r ON r.run_id = k.run_id
    JOIN iterations AS it
      ON it.run_id = k.run_id AND it.source_id = k.source_id AND it.iteration = k.iteration
    WHERE it.boundary = 'ProfilerStep' AND k.kind = 'kernel' AND k.device_id IS NOT NULL
    UNION ALL
    SELECT k.run_id, r.run_name, k.source_id, k.device_id, it.iteration, it.start_ns AS hs,
           k.ts_ns, k.dur_ns
    FROM kernels AS k
    JOIN runs AS r ON r.run_id = k.run_id
    JOIN iterations AS it ON it.run_id = k.run_id AND it.source_id = k.source_id
    WHERE it.boundary = 'whole_trace' AND k.launch_event_id IS NOT NULL
      AND k.kind = 'kernel' AND k.device_id IS NOT NULL
),
launched AS (
    SELECT
        run_id, run_name, source_id, device_id, iteration, hs,
        count(*) AS kernel_count,
        min(ts_ns) FILTER (WHERE ts_ns IS NOT NULL AND dur_ns >= 0) AS first_start_ns,
        max(ts_ns + dur_ns) FILTER (WHERE ts_ns IS NOT NULL AND dur_ns >= 0) AS last_end_ns
    FROM launched_pairs
    GROUP BY run_id, run_name, source_id, device_id, iteration, hs
),
raw AS (
    SELECT
        it.run_id, r.run_name, it.source_id, it.rank, d.device_id, it.iteration,
        it.start_ns AS hs, it.end_ns AS he, it.complete, it.cut,
        coalesce(l.kernel_count, 0) AS kernel_count,
        least(it.start_ns, coalesce(l.first_start_ns, it.start_ns)) AS raw_start_ns,
        greatest(it.end_ns, coalesce(l.last_end_ns, it.end_ns)) AS raw_end_ns
    FROM iterations AS it
    JOIN runs AS r ON r.run_id = it.run_id
    JOIN gpu_devices AS d
      ON d.run_id = it.run_id AND d.run_name = r.run_name AND d.source_id = it.source_id
    LEFT JOIN launched AS l
      ON l.run_id = it.run_id AND l.run_name = d.run_name AND l.source_id = it.source_id
     AND l.device_id = d.device_id
     AND l.hs = it.start_ns AND l.iteration IS NOT DISTINCT FROM it.iteration
),
raised AS (
    SELECT *,
           greatest(raw_start_ns, coalesce(max(raw_end_ns) OVER (
               PARTITION BY run_id, run_name, source_id, device_id
               ORDER BY hs, he, iteration
               ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), raw_start_ns))
               AS window_start_ns
    FROM raw
),
windows AS (
    SELECT *, greatest(raw_end_ns, window_start_ns) AS window_end_ns
    FROM raised
),
unlaunched AS (
    SELECT w.run_id, w.run_name, w.source_id, w.device_id, w.hs, w.iteration,
           count(k.kernel_id) AS unlaunched_kernel_count
    FROM windows AS w
    JOIN kernels AS k
      ON k.run_id = w.run_id AND k.source_id = w.source_id AND k.device_id = w.device_id
     AND k.ts_ns < w.window_end_ns AND k.ts_ns + k.dur_ns > w.window_start_ns
    WHERE k.kind = 'kernel' AND k.launch_event_id IS NULL
    GROUP BY w.run_id, w.run_name, w.source_id, w.device_id, w.hs, w.iteration
)
SELECT
    run_id,
    run_name,
    source_id,
    rank,
    device_id,
    iteration,
    hs AS host_start_ns,
    he AS host_end_ns,
    kernel_count,
    window_start_ns,
    window_end_ns,
    complete,
    cut,
    coalesce(u.unlaunched_kernel_count, 0) AS unlaunched_kernel_count
FROM windows
LEFT JOIN unlaunched AS u USING (run_id, run_name, source_id, device_id, hs, iteration)
-- run_id: run; joins runs.run_id
-- run_name: the run folder's name (carried so that a filter on it reaches the scans)
-- source_id: input file within the run
-- rank: distributed rank (NULL without distributedInfo)
-- device_id: GPU index as the trace numbers it
-- iteration: N of ProfilerStep#N; NULL for a trace without steps
-- host_start_ns: hs, start of the step's host span (ns since the trace's epoch)
-- host_end_ns: he, end of the step's host span (ns since the trace's epoch)
-- kernel_count: |K_i| on this device
-- window_start_ns: start of window_i (ns since the trace's epoch)
-- window_end_ns: end of window_i (ns since the trace's epoch)
-- complete: iterations.complete; false when a truncated source may not hold the iteration whole
-- cut: iterations.cut, why the iteration is not complete; NULL when complete
-- unlaunched_kernel_count: kernels of the device without a launch call in the trace that run inside the window
