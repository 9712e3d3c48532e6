-- run_summary: one representative iteration per run, rank and device, with its GPU-level
-- utilization, the framework overhead and the throughput.
-- Grain: one row per run, source (rank) and device that ran kernels.
-- Selection: the first iteration, in step order, whose window is
-- within 5% of the median window of that device: |window - median| <= 0.05 * median. When
-- no iteration qualifies (e.g. two very different steps), the one closest to the median is
-- taken and `selection` says so; a trace without steps has its single whole-trace window.
-- run_name is kept in every key and join so that a filter on it reaches the scans.
-- [paper §IV] One iteration represents the run: "the first iteration with a stable
-- execution time"; idle_ns is the paper's ML framework overhead. [project] "Stable" read
-- as within 5% of the median window, and the fallback to the closest one, are this
-- project's rule (the paper gives no threshold); so is the throughput.
-- v2 [project]: candidates in this order: complete iterations first (a truncated source's
-- cut iterations have no gpu_util), then iterations whose window holds no kernel without
-- a launch call in the trace (kernels launched before profiling started inflate busy
-- time), then the 5% rule as in v1; the median counts complete iterations only.
-- `selection_note` says which iterations were passed over and why.
-- v3: the selected iteration's peak memory (gpu_utilization_v3), otherwise as v2.
-- v4: v3's rows, faster: reads gpu_utilization_v4 (v3's rows).
-- v5: v4's rows, with gpu_utilization_v5's memory columns (the carried level of
-- _iteration_memory_v3, memory_status memory_events_of_other_devices).
WITH ranked AS (
    SELECT
        g.*,
        median(CASE WHEN g.complete THEN g.window_ns END)
            OVER (PARTITION BY g.run_id, g.run_name, g.source_id, g.device_id)
            AS median_window_ns,
        count(*) OVER (PARTITION BY g.run_id, g.run_name, g.source_id, g.device_id)
            AS iteration_count,
        count(CASE WHEN NOT g.complete THEN 1 END)
            OVER (PARTITION BY g.run_id, g.run_name, g.source_id, g.device_id)
            AS incomplete_count,
        min(CASE WHEN NOT g.complete THEN g.iteration END)
            OVER (PARTITION BY g.run_id, g.run_name, g.source_id, g.device_id)
            AS first_incomplete,
        count(CASE WHEN g.complete AND g.unlaunched_kernel_count > 0 THEN 1 END)
            OVER (PARTITION BY g.run_id, g.run_name, g.source_id, g.device_id)
            AS unlaunched_count,
        min(CASE WHEN g.complete AND g.unlaunched_kernel_count > 0 THEN g.iteration END)
            OVER (PARTITION BY g.run_id, g.run_name, g.source_id, g.device_id)
            AS first_unlaunched
    FROM gpu_utilization_v5 AS g
),
scored AS (
    SELECT *,
           complete AND abs(window_ns - median_window_ns) <= 0.05 * median_window_ns AS stable,
           row_number() OVER (
               PARTITION BY run_id, run_name, source_id, device_id
               ORDER BY complete DESC,
                        (unlaunched_kernel_count = 0) DESC,
                        (abs(window_ns - median_window_ns) <= 0.05 * median_window_ns) DESC,
                        CASE WHEN abs(window_ns - median_window_ns) <= 0.05 * median_window_ns
                             THEN 0 ELSE abs(window_ns - median_window_ns) END,
                        window_start_ns
           ) AS pick
    FROM ranked
)
SELECT
    s.run_id,
    s.run_name,
    s.source_id,
    s.rank,
    s.device_id,
    d.name AS device_name,
    s.iteration AS selected_iteration,
    CASE WHEN NOT s.complete THEN 'none_complete'
         WHEN s.iteration IS NULL THEN 'whole_trace'
         WHEN s.stable THEN 'first_within_5pct_of_median'
         ELSE 'closest_to_median' END AS selection,
    nullif(concat_ws('; ',
        CASE WHEN s.incomplete_count > 0
             THEN 'passed over as incomplete (truncated source): '
                  || CAST(s.incomplete_count AS VARCHAR) || ' iteration(s), the first '
                  || CAST(s.first_incomplete AS VARCHAR) END,
        CASE WHEN s.unlaunched_kernel_count > 0
             THEN 'every complete iteration holds kernels without a launch call in the trace'
             WHEN s.unlaunched_count > 0
             THEN 'passed over for kernels without a launch call in the trace: '
                  || CAST(s.unlaunched_count AS VARCHAR) || ' iteration(s), the first '
                  || CAST(s.first_unlaunched AS VARCHAR) END), '') AS selection_note,
    s.iteration_count,
    s.unlaunched_kernel_count,
    s.peak_allocated_bytes,
    s.peak_reserved_bytes,
    s.peak_memory_share,
    s.memory_status,
    s.median_window_ns,
    s.window_ns,
    s.busy_ns,
    s.gpu_util,
    s.activity_util,
    s.kernel_count,
    s.kernel_time_ns,
    s.window_ns - s.busy_ns AS idle_ns,
    CASE WHEN s.window_ns > 0 THEN r.batch_size * 1e9 / s.window_ns END
        AS throughput_samples_per_s,
    r.model,
    r.framework,
    r.framework_version,
    r.exec_mode,
    r.precision,
    r.batch_size,
    coalesce(d.name, r.gpu) AS gpu
FROM scored AS s
JOIN runs AS r ON r.run_id = s.run_id AND r.run_name = s.run_name
LEFT JOIN devices AS d
  ON d.run_id = s.run_id AND d.source_id = s.source_id AND d.device_id = s.device_id
WHERE s.pick = 1
-- run_id: run; joins runs.run_id
-- run_name: the run folder's name
-- source_id: input file within the run (one per rank)
-- rank: distributed rank; NULL when the trace has no distributedInfo
-- device_id: GPU index as the trace numbers it
-- device_name: deviceProperties name of the device; NULL when the trace does not describe it
-- selected_iteration: N of the selected ProfilerStep#N; NULL for a trace without steps
-- selection: first_within_5pct_of_median, closest_to_median (none within 5%), whole_trace, or none_complete (no complete iteration: gpu_util NULL); the 5% rule is this project's reading of the paper's "stable execution time"
-- selection_note: iterations passed over and why (incomplete; kernels without a launch call in the trace); NULL when none was
-- iteration_count: iterations of this rank and device in the trace
-- unlaunched_kernel_count: kernels without a launch call in the trace inside the selected window
-- peak_allocated_bytes: the peak within the selected iteration's window of the allocator's allocated bytes on the device, bytes; NULL without memory events
-- peak_reserved_bytes: the peak within the selected iteration's window of the allocator's reserved bytes, bytes; NULL without memory events
-- peak_memory_share: peak_allocated_bytes / the device's total memory (devices.memory_bytes), 0..1; NULL when unknown (memory_status says why)
-- memory_status: measured, no_memory_events, memory_events_of_other_devices, no_allocated_bytes or device_memory_unknown: why peak_memory_share is NULL
-- median_window_ns: median window of the complete iterations of this device, ns
-- window_ns: the selected iteration's window, ns (the paper's total execution time)
-- busy_ns: ns of the window with at least one kernel running (GPU kernel exec. time)
-- gpu_util: busy_ns / window_ns in 0..1 (the paper's GPU utilization)
-- activity_util: like gpu_util with memcpy and memset counted as busy
-- kernel_count: kernels launched from the selected iteration on this device
-- kernel_time_ns: sum of kernel durations clipped to the window (exceeds busy_ns with overlapping streams)
-- idle_ns: window_ns - busy_ns, the ML framework overhead of the paper
-- throughput_samples_per_s: batch_size * 1e9 / window_ns; NULL without batch_size in run.toml
-- model: run.toml model
-- framework: run.toml framework
-- framework_version: run.toml framework_version
-- exec_mode: run.toml exec_mode (eager, jit, compile, xla, ...)
-- precision: run.toml precision (fp32, amp, bf16, ...)
-- batch_size: run.toml batch_size, samples per iteration per rank
-- gpu: device name from the trace, else run.toml gpu
