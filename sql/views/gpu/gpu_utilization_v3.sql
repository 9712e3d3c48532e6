-- gpu_utilization: GPU-level utilization (the paper's level 1: GPU busy time) per
-- iteration, with the device's peak memory within the iteration.
-- Grain: one row per run, source (rank), device that ran kernels, and iteration.
-- The columns of gpu_utilization_v2, unchanged, and the peak memory of _iteration_memory_v1:
-- peak_allocated_bytes / peak_reserved_bytes are the largest allocator totals the device
-- held at any instant of the iteration's window [window_start_ns, window_start_ns +
-- window_ns] (the level carried into the window counts); peak_memory_share is
-- peak_allocated_bytes over the device's total memory.
-- [paper, level 1] gpu_util = GPU kernel execution time / total execution time of the
-- iteration. [paper §V, Fig. 4] Memory usage. [project] The window, busy-time union and
-- the peak-memory definitions are this project's (see the helpers).
SELECT
    g.run_id,
    g.run_name,
    g.source_id,
    g.rank,
    g.device_id,
    g.iteration,
    g.window_start_ns,
    g.window_ns,
    g.busy_ns,
    g.kernel_count,
    g.gpu_util,
    g.activity_busy_ns,
    g.activity_util,
    g.kernel_time_ns,
    g.complete,
    g.cut,
    g.unlaunched_kernel_count,
    m.peak_allocated_bytes,
    m.peak_reserved_bytes,
    m.peak_memory_share,
    m.memory_status
FROM gpu_utilization_v2 AS g
LEFT JOIN _iteration_memory_v1 AS m
  ON m.run_id = g.run_id AND m.run_name = g.run_name AND m.source_id = g.source_id
 AND m.device_id = g.device_id AND m.window_start_ns = g.window_start_ns
 AND m.iteration IS NOT DISTINCT FROM g.iteration
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
