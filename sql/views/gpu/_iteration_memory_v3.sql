-- _iteration_memory: private helper. Peak device memory within each iteration window.
-- Grain: one row per run, source, device that ran kernels, and iteration (the windows of
-- _iteration_windows_v3).
-- The allocator's totals are a step function of time: after each memory event of the
-- device (memory_events, device_type GPU) they hold until the next one. The peak within
-- [window_start_ns, window_end_ns] is therefore the larger of the level carried into the
-- window (the last event before it: of several at that instant, the last written, the
-- allocator's own order) and every event inside it; the window is the one of
-- gpu_utilization (the iteration's host span widened to its kernels).
-- peak_memory_share = peak_allocated_bytes / devices.memory_bytes (the device's total
-- memory as the trace describes it: Kineto deviceProperties totalGlobalMem, the xplane's
-- memory_size; else run.toml gpu_memory_bytes, filled into devices at ingest); NULL when
-- either is unknown, and memory_status says which.
-- [paper §V, Fig. 4] Memory usage against batch size. [project] The peak over the window
-- and the share of allocated (not reserved) bytes are this project's definitions.
-- v2: faster: reads _iteration_windows_v3 (v1's windows, joined to kernels by two
-- equi-joins instead of one OR), and finds the level carried into a window in one sorted
-- pass over the events and the window starts. v1's rows, except that when several events share the last instant before the
-- window, the carried level is the largest of them (v1 took one of them arbitrarily).
-- v3: of several events at the last instant before a window, the carried level is the
-- last one written (memory_events.event_id: the allocator's order, as the profiler wrote
-- it), not the largest: an allocation and a free at one ns leave the level after the free.
-- A device with no memory event in a source that has GPU memory events of other devices
-- is memory_status memory_events_of_other_devices, not no_memory_events (ROCm traces
-- number memory events by PyTorch's device index, their kernels by another id).
WITH gpu_memory AS (
    SELECT m.run_id, r.run_name, m.source_id, m.device_id, m.ts_ns, m.event_id,
           m.allocated_bytes, m.reserved_bytes
    FROM memory_events AS m
    JOIN runs AS r ON r.run_id = m.run_id
    WHERE m.device_type = 'GPU' AND m.device_id IS NOT NULL
),
described AS (
    SELECT DISTINCT run_id, run_name, source_id, device_id
    FROM gpu_memory
),
described_sources AS (
    SELECT DISTINCT run_id, run_name, source_id
    FROM gpu_memory
),
inside AS (
    SELECT w.run_id, w.run_name, w.source_id, w.device_id, w.window_start_ns, w.iteration,
           max(m.allocated_bytes) AS allocated_bytes, max(m.reserved_bytes) AS reserved_bytes
    FROM _iteration_windows_v3 AS w
    JOIN gpu_memory AS m
      ON m.run_id = w.run_id AND m.run_name = w.run_name AND m.source_id = w.source_id
     AND m.device_id = w.device_id
     AND m.ts_ns >= w.window_start_ns AND m.ts_ns <= w.window_end_ns
    GROUP BY w.run_id, w.run_name, w.source_id, w.device_id, w.window_start_ns, w.iteration
),
timeline AS (
    -- memory events and window starts on one time line per device; at the same ns a window
    -- start sorts before the events, which are inside the window, not carried into it, and
    -- events of one ns keep the order they were written in (event_id)
    SELECT run_id, run_name, source_id, device_id, ts_ns, true AS is_event, event_id,
           allocated_bytes, reserved_bytes, CAST(NULL AS BIGINT) AS iteration
    FROM gpu_memory
    UNION ALL
    SELECT run_id, run_name, source_id, device_id, window_start_ns, false, NULL, NULL, NULL,
           iteration
    FROM _iteration_windows_v3
),
carried AS (
    -- for each window start, the level of the last earlier event with allocated (reserved)
    -- bytes, in one sorted pass
    SELECT run_id, run_name, source_id, device_id, window_start_ns, iteration,
           allocated_bytes, reserved_bytes
    FROM (
        SELECT run_id, run_name, source_id, device_id, ts_ns AS window_start_ns, iteration,
               is_event,
               last_value(allocated_bytes IGNORE NULLS) OVER earlier AS allocated_bytes,
               last_value(reserved_bytes IGNORE NULLS) OVER earlier AS reserved_bytes
        FROM timeline
        WINDOW earlier AS (PARTITION BY run_id, run_name, source_id, device_id
                           ORDER BY ts_ns, is_event, event_id ROWS UNBOUNDED PRECEDING)
    )
    WHERE NOT is_event
),
peaks AS (
    SELECT w.run_id, w.run_name, w.source_id, w.device_id, w.iteration, w.window_start_ns,
           (s.device_id IS NOT NULL) AS has_memory_events,
           (o.source_id IS NOT NULL) AS source_has_memory_events,
           -- greatest skips NULLs: a window without events inside keeps the carried level
           greatest(i.allocated_bytes, c.allocated_bytes) AS peak_allocated_bytes,
           greatest(i.reserved_bytes, c.reserved_bytes) AS peak_reserved_bytes
    FROM _iteration_windows_v3 AS w
    LEFT JOIN described AS s
      ON s.run_id = w.run_id AND s.run_name = w.run_name AND s.source_id = w.source_id
     AND s.device_id = w.device_id
    LEFT JOIN described_sources AS o
      ON o.run_id = w.run_id AND o.run_name = w.run_name AND o.source_id = w.source_id
    LEFT JOIN inside AS i
      ON i.run_id = w.run_id AND i.run_name = w.run_name AND i.source_id = w.source_id
     AND i.device_id = w.device_id AND i.window_start_ns = w.window_start_ns
     AND i.iteration IS NOT DISTINCT FROM w.iteration
    LEFT JOIN carried AS c
      ON c.run_id = w.run_id AND c.run_name = w.run_name AND c.source_id = w.source_id
     AND c.device_id = w.device_id AND c.window_start_ns = w.window_start_ns
     AND c.iteration IS NOT DISTINCT FROM w.iteration
)
SELECT
    p.run_id,
    p.run_name,
    p.source_id,
    p.device_id,
    p.iteration,
    p.window_start_ns,
    p.peak_allocated_bytes,
    p.peak_reserved_bytes,
    d.memory_bytes AS device_memory_bytes,
    p.peak_allocated_bytes / nullif(d.memory_bytes, 0) AS peak_memory_share,
    CASE WHEN NOT p.has_memory_events AND p.source_has_memory_events
             THEN 'memory_events_of_other_devices'
         WHEN NOT p.has_memory_events THEN 'no_memory_events'
         WHEN p.peak_allocated_bytes IS NULL THEN 'no_allocated_bytes'
         WHEN d.memory_bytes IS NULL THEN 'device_memory_unknown'
         ELSE 'measured' END AS memory_status
FROM peaks AS p
LEFT JOIN devices AS d
  ON d.run_id = p.run_id AND d.source_id = p.source_id AND d.device_id = p.device_id
-- run_id: run; joins runs.run_id
-- run_name: the run folder's name (carried so that a filter on it reaches the scans)
-- source_id: input file within the run
-- device_id: GPU index as the trace numbers it
-- iteration: N of the step; NULL for a trace without steps
-- window_start_ns: start of the iteration window (joins _iteration_windows_v3), ns since the trace's epoch
-- peak_allocated_bytes: largest allocator total of allocated bytes on the device within the window, bytes; NULL without memory events
-- peak_reserved_bytes: largest allocator total of reserved bytes within the window, bytes; NULL without memory events
-- device_memory_bytes: the device's total memory (devices.memory_bytes: the trace's device description, else run.toml gpu_memory_bytes), bytes
-- peak_memory_share: peak_allocated_bytes / device_memory_bytes in 0..1; NULL when either is unknown (memory_status says why)
-- memory_status: measured, no_memory_events (PyTorch without profile_memory=True; TF without allocator events), memory_events_of_other_devices (the source has GPU memory events, none of this device: anomaly memory_device_unmatched), no_allocated_bytes, or device_memory_unknown
