-- critical_path_summary: where the critical path of each iteration goes, by kind and name.
-- Grain: one row per run, source, device, iteration, segment kind, kernel type, name and
-- layer on the iteration's critical path. path_share is the part of the iteration's
-- replayed time (the sum of its segments, = gpu_utilization.window_ns) spent there:
-- summed over a kind it says how host-bound an iteration is, ordered by dur_ns which ops
-- or kernels make most of it.
-- [project] A breakdown of this project's critical path (critical_path_v1).
WITH per_window AS (
    SELECT run_id, source_id, device_id, iteration, sum(dur_ns) AS path_ns
    FROM critical_path_v1
    GROUP BY run_id, source_id, device_id, iteration
)
SELECT
    c.run_id,
    c.run_name,
    c.source_id,
    c.rank,
    c.device_id,
    c.iteration,
    c.segment_kind,
    c.kernel_type,
    c.name,
    c.layer,
    count(*) AS segment_count,
    sum(c.dur_ns) AS dur_ns,
    w.path_ns,
    sum(c.dur_ns) / nullif(w.path_ns, 0) AS path_share
FROM critical_path_v1 AS c
JOIN per_window AS w
  ON w.run_id = c.run_id AND w.source_id = c.source_id AND w.device_id = c.device_id
 AND w.iteration IS NOT DISTINCT FROM c.iteration
GROUP BY c.run_id, c.run_name, c.source_id, c.rank, c.device_id, c.iteration,
         c.segment_kind, c.kernel_type, c.name, c.layer, w.path_ns
-- run_id: run; joins runs.run_id
-- run_name: the run folder's name
-- source_id: trace source (rank's file) whose window this is
-- rank: distributed rank (NULL when the trace does not say)
-- device_id: GPU index of the window
-- iteration: N of the step; NULL for a trace without steps
-- segment_kind: host, launch, queue, gpu, sync_wait or comm_wait
-- kernel_type: kernels.kernel_type of the segments' activity; NULL for host segments
-- name: what the segments are (critical_path_v1.name)
-- layer: the layer of the segments (critical_path_v1.layer)
-- segment_count: segments of the path in this group
-- dur_ns: their time on the critical path in ns
-- path_ns: the iteration's critical path in ns (its replayed window_ns)
-- path_share: dur_ns / path_ns, the part of the iteration's time spent here (0..1)
