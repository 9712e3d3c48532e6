-- _iteration_kernels: private helper. The kernels K_i of every iteration window, with their
-- durations clipped to the window and their ncu match, if any.
-- Grain: one row per run, source, device, iteration and trace kernel in K_i.
-- K_i follows gpu_utilization: kernels launched within ProfilerStep#i's host span, or for a
-- trace without steps every kernel with a launch. When a kernel matched kernels of several
-- ncu exports, the lowest ncu_source_id is used.
-- [project] K_i (as gpu_utilization's) and the choice among several exports are this
-- project's.
WITH matched AS (
    SELECT run_id, source_id, kernel_id, ncu_source_id, ncu_id, score
    FROM kernel_match
    WHERE match_status = 'matched'
    QUALIFY row_number() OVER (PARTITION BY run_id, source_id, kernel_id
                               ORDER BY ncu_source_id) = 1
)
SELECT
    g.run_id,
    g.source_id,
    g.rank,
    g.device_id,
    g.iteration,
    k.kernel_id,
    k.name,
    k.op_name,
    k.layer,
    greatest(0, least(k.ts_ns + k.dur_ns, g.window_start_ns + g.window_ns)
                - greatest(k.ts_ns, g.window_start_ns)) AS clipped_dur_ns,
    m.ncu_source_id,
    m.ncu_id
FROM gpu_utilization_v1 AS g
JOIN iterations AS it
  ON it.run_id = g.run_id AND it.source_id = g.source_id
 AND it.iteration IS NOT DISTINCT FROM g.iteration
JOIN kernels AS k
  ON k.run_id = g.run_id AND k.source_id = g.source_id AND k.device_id = g.device_id
 AND k.kind = 'kernel' AND k.dur_ns >= 0
 AND ((it.boundary = 'ProfilerStep' AND k.iteration = it.iteration)
      OR (it.boundary = 'whole_trace' AND k.launch_event_id IS NOT NULL))
LEFT JOIN matched AS m
  ON m.run_id = k.run_id AND m.source_id = k.source_id AND m.kernel_id = k.kernel_id
-- run_id: run; joins runs.run_id
-- source_id: trace file within the run
-- rank: distributed rank; NULL without distributedInfo
-- device_id: GPU index as the trace numbers it
-- iteration: N of ProfilerStep#N; NULL for a trace without steps
-- kernel_id: trace kernel; joins kernels.kernel_id within source_id
-- name: kernel name as the trace writes it
-- op_name: outermost cpu_op enclosing the launch; NULL when none
-- layer: innermost nn.Module / record_function scope of the launch; NULL when none
-- clipped_dur_ns: the kernel's duration clipped to the iteration window (d_k), ns
-- ncu_source_id: ncu export of the match; NULL when the kernel is not matched
-- ncu_id: matched ncu kernel; NULL when the kernel is not matched
