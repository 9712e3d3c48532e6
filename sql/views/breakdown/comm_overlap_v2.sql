-- comm_overlap: how much of each iteration's communication is hidden by computation on the
-- same device.
-- Grain: one row per run, source (rank), device that ran kernels, and iteration (the
-- windows of gpu_utilization).
-- communication_ns = |Comm ∩ W| and computation_ns = |Comp ∩ W|, unions of the
-- communication and computation kernel intervals clipped to the window W; overlapped_ns =
-- |Comm ∩ Comp ∩ W| = communication_ns + computation_ns - |(Comm ∪ Comp) ∩ W|.
-- [project] The ratio is HTA's (get_comm_comp_overlap: time during which communication
-- and computation kernels both run, over the communication time, both unions of
-- intervals), taken per iteration window instead of over the whole trace of a rank; the
-- kernel types are this project's rules (etl/extract/kernel_types.toml), which also count
-- symmetric-memory all-reduce kernels as communication.
-- v2: v1's rows, faster: reads _iteration_windows_v3 (v1's windows) and _type_coverage_v1
-- (the same unions, as disjoint pieces made in one sorted pass) instead of _type_spans_v1.
WITH clipped AS (
    SELECT
        w.run_id, w.run_name, w.source_id, w.device_id, w.host_start_ns, w.iteration,
        coalesce(sum(least(s.end_ns, w.window_end_ns) - greatest(s.start_ns, w.window_start_ns))
                 FILTER (WHERE s.scope = 'computation'), 0) AS comp_ns,
        coalesce(sum(least(s.end_ns, w.window_end_ns) - greatest(s.start_ns, w.window_start_ns))
                 FILTER (WHERE s.scope = 'communication'), 0) AS comm_ns,
        coalesce(sum(least(s.end_ns, w.window_end_ns) - greatest(s.start_ns, w.window_start_ns))
                 FILTER (WHERE s.scope = 'computation_communication'), 0) AS comp_comm_ns
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
    w.window_end_ns - w.window_start_ns AS window_ns,
    c.comm_ns AS communication_ns,
    c.comp_ns AS computation_ns,
    c.comm_ns + c.comp_ns - c.comp_comm_ns AS overlapped_ns,
    c.comp_comm_ns - c.comp_ns AS exposed_communication_ns,
    (c.comm_ns + c.comp_ns - c.comp_comm_ns) / nullif(c.comm_ns, 0) AS comm_overlap_share
FROM _iteration_windows_v3 AS w
JOIN clipped AS c
  ON c.run_id = w.run_id AND c.run_name = w.run_name AND c.source_id = w.source_id
 AND c.device_id = w.device_id AND c.host_start_ns = w.host_start_ns
 AND c.iteration IS NOT DISTINCT FROM w.iteration
-- run_id: run; joins runs.run_id
-- run_name: the run folder's name
-- source_id: input file within the run (one per rank)
-- rank: distributed rank; NULL when the trace has no distributedInfo
-- device_id: GPU index as the trace numbers it
-- iteration: N of ProfilerStep#N; NULL for a trace without steps
-- window_ns: length of the iteration window (gpu_utilization's), ns
-- communication_ns: ns of the window during which a communication kernel ran (union)
-- computation_ns: ns of the window during which a computation kernel ran (union)
-- overlapped_ns: ns during which both ran
-- exposed_communication_ns: communication_ns - overlapped_ns, communication not hidden by computation (temporal_breakdown's communication_ns)
-- comm_overlap_share: overlapped_ns / communication_ns in 0..1 (HTA's comp_comm_overlap ratio); NULL without communication
