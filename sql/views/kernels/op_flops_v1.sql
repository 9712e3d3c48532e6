-- op_flops: achieved FLOP/s per operator, from the flops PyTorch records (with_flops=True).
-- Grain: one row per run, source and outermost operator that launched kernels
-- (kernels.op_event_id, e.g. aten::linear, or an autograd evaluate_function in backward).
-- flops = the sum of host_events.flops over the events inside the operator (_flops_ops:
-- PyTorch records them on the inner op that has a formula, e.g. aten::addmm).
-- gpu_flops_per_s = flops / the sum of the durations of the operator's kernels (kind
-- kernel): the rate while its kernels ran (kernels overlapping on several streams count
-- each). host_flops_per_s = flops / the operator's host duration (its cpu_op span): the
-- rate as the host sees it, launch overhead and waits included.
-- [project] Both rates are this project's definitions; the flops are PyTorch's estimates
-- from input shapes (2 FLOP per multiply-add), not counted on the GPU.
WITH op_kernels AS (
    SELECT run_id, source_id, op_event_id, count(*) AS kernel_count,
           sum(dur_ns) AS gpu_time_ns
    FROM kernels
    WHERE kind = 'kernel' AND op_event_id IS NOT NULL AND dur_ns >= 0
    GROUP BY run_id, source_id, op_event_id
),
op_flops AS (
    SELECT run_id, source_id, op_event_id, sum(flops) AS flops,
           count(*) AS flops_event_count
    FROM _flops_ops_v1
    WHERE op_event_id IS NOT NULL
    GROUP BY run_id, source_id, op_event_id
),
sources_with_flops AS (
    SELECT DISTINCT run_id, source_id FROM host_events WHERE flops IS NOT NULL
)
SELECT
    o.run_id,
    r.run_name,
    o.source_id,
    h.rank,
    o.op_event_id,
    h.name AS op_name,
    h.iteration,
    o.kernel_count,
    o.gpu_time_ns,
    h.dur_ns AS host_dur_ns,
    f.flops,
    coalesce(f.flops_event_count, 0) AS flops_event_count,
    f.flops / nullif(o.gpu_time_ns, 0) * 1e9 AS gpu_flops_per_s,
    f.flops / nullif(h.dur_ns, 0) * 1e9 AS host_flops_per_s,
    CASE
        WHEN s.source_id IS NULL THEN 'no flops in the trace (profile with with_flops=True)'
        WHEN f.flops IS NULL THEN 'no op inside recorded flops (PyTorch has no formula for it)'
        WHEN o.gpu_time_ns = 0 THEN 'kernels of zero total duration'
    END AS flops_reason
FROM op_kernels AS o
JOIN runs AS r ON r.run_id = o.run_id
JOIN host_events AS h
  ON h.run_id = o.run_id AND h.source_id = o.source_id AND h.event_id = o.op_event_id
LEFT JOIN op_flops AS f
  ON f.run_id = o.run_id AND f.source_id = o.source_id AND f.op_event_id = o.op_event_id
LEFT JOIN sources_with_flops AS s ON s.run_id = o.run_id AND s.source_id = o.source_id
-- run_id: run; joins runs.run_id
-- run_name: the run folder's name
-- source_id: trace source within the run
-- rank: distributed rank of the source; NULL when the trace does not say
-- op_event_id: the outermost operator; joins host_events.event_id and kernels.op_event_id
-- op_name: its name (e.g. aten::linear)
-- iteration: host_events.iteration of the operator; NULL outside every step
-- kernel_count: kernels (kind kernel) the operator launched
-- gpu_time_ns: sum of those kernels' durations, ns
-- host_dur_ns: the operator's host duration, ns
-- flops: sum of host_events.flops of the events inside the operator, FLOP; NULL when none recorded flops (flops_reason says why)
-- flops_event_count: how many events inside the operator recorded flops
-- gpu_flops_per_s: flops / (gpu_time_ns / 1e9), FLOP/s; NULL when flops is NULL or gpu_time_ns is 0
-- host_flops_per_s: flops / (host_dur_ns / 1e9), FLOP/s; NULL when flops is NULL or host_dur_ns is 0
-- flops_reason: why flops or gpu_flops_per_s is NULL; NULL when both are known
