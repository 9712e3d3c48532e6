-- gpu_utilization: GPU-level utilization (the paper's level 1: GPU busy time) per
-- iteration, with the device's peak memory within the iteration.
-- Grain: one row per run, source (rank), device that ran kernels, and iteration.
-- The columns of gpu_utilization_v2, unchanged, and the peak memory of _iteration_memory_v2:
-- peak_allocated_bytes / peak_reserved_bytes are the largest allocator totals the device
-- held at any instant of the iteration's window [window_start_ns, window_start_ns +
-- window_ns] (the level carried into the window counts); peak_memory_share is
-- peak_allocated_bytes over the device's total memory.
-- [paper, level 1] gpu_util = GPU kernel execution time / total execution time of the
-- iteration. [paper §V, Fig. 4] Memory usage. [project] The window, busy-time union and
-- the peak-memory definitions are this project's (see the helpers).
SELECT
    c.run_id,
    c.run_name,
    c.source_id,
    c.rank,
    c.device_id,
    c.iteration,
    c.window_start_ns,
    c.window_end_ns - c.window_start_ns AS window_ns,
    c.busy_ns,
    c.kernel_count,
    CASE WHEN c.complete AND c.window_end_ns > c.window_start_ns
         THEN c.busy_ns / (c.window_end_ns - c.window_start_ns) END AS gpu_util,
    c.activity_busy_ns,
    CASE WHEN c.complete AND c.window_end_ns > c.window_start_ns
         THEN c.activity_busy_ns / (c.window_end_ns - c.window_start_ns) END AS activity_util,
    c.kernel_time_ns,
    c.complete,
    c.cut,
    c.unlaunched_kernel_count,
    m.peak_allocated_bytes,
    m.peak_reserved_bytes,
    m.peak_memory_share,
    m.memory_status
FROM _window_coverage_v1 AS c
LEFT JOIN _iteration_memory_v2 AS m
  ON m.run_id = c.run_id AND m.run_name = c.run_name AND m.source_id = c.source_id
 AND m.device_id = c.device_id AND m.window_start_ns = c.window_start_ns
 AND m.iteration IS NOT DISTINCT FROM c.iteration
-- run_id: run; joins runs.run_id
-- run_name: the run folder's name
-- source_id: input file within the run (one per rank or host)
-- rank: distributed rank from distributedInfo; NULL when the trace has none
-- device_id: GPU index as the trace numbers it; joins devices.device_id
-- iteration: N of the step (ProfilerStep#N; xplane: step_num or step group); NULL for a trace without steps
-- window_start_ns: start of the iteration window, ns since the trace's epoch
-- window_ns: length of the iteration window in ns (0 when a later-starting step ends first)
-- busy_ns: ns of the window during which at least one kernel ran on the device
-- kernel_count: kernels launched from this iteration that ran on the device (|K_i|)
-- gpu_util: busy_ns / window_ns in 0..1; NULL when window_ns = 0 or the iteration is not complete
-- activity_busy_ns: like busy_ns, memcpy and memset counted as busy too
-- activity_util: activity_busy_ns / window_ns in 0..1; NULL when window_ns = 0 or the iteration is not complete
-- kernel_time_ns: sum of kernel durations clipped to the window (exceeds busy_ns when streams overlap)
-- complete: false for an iteration of a truncated (salvaged) source that the cut may have reached; iterations.complete
-- cut: why the iteration is not complete; NULL when complete
-- unlaunched_kernel_count: kernels of the device without a launch call in the trace that run inside the window
-- peak_allocated_bytes: the peak within the iteration's window of the allocator's allocated bytes on the device, bytes; NULL without memory events
-- peak_reserved_bytes: the peak within the iteration's window of the allocator's reserved bytes, bytes; NULL without memory events
-- peak_memory_share: peak_allocated_bytes / the device's total memory (devices.memory_bytes), 0..1; NULL when unknown (memory_status says why)
-- memory_status: measured, no_memory_events, no_allocated_bytes or device_memory_unknown: why peak_memory_share is NULL
