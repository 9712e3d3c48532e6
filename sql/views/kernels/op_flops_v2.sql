-- op_flops: achieved FLOP/s per operator, from the flops PyTorch records (with_flops=True),
-- else from the op's input shapes.
-- Grain: one row per run, source and outermost operator that launched kernels
-- (kernels.op_event_id, e.g. aten::linear, or an autograd evaluate_function in backward).
-- flops = the sum of host_events.flops over the events inside the operator (_flops_ops:
-- PyTorch records them on the inner op that has a formula, e.g. aten::addmm) when any
-- recorded flops (flops_source profiler); else the sum of kernel_costs.flops over the
-- operator's kernels (flops_source shape or ncu: from the input shapes of the ops inside it,
-- etl/core/op_cost.py, or the matched Nsight Compute results' counters; etl costs).
-- gpu_flops_per_s = flops / the sum of the durations of the operator's kernels (kind
-- kernel); host_flops_per_s = flops / the operator's host duration (its cpu_op span).
-- [project] Both rates are this project's definitions; PyTorch's flops and the shape
-- formulas are estimates from input shapes (2 FLOP per multiply-add), not counted on the GPU.
-- v2: the FLOPs of the input shapes where PyTorch recorded none (v1: NULL), and
-- flops_source.
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
op_costs AS (
    SELECT k.run_id, k.source_id, k.op_event_id, sum(c.flops) AS flops,
           CASE WHEN count(DISTINCT c.cost_source) > 1 THEN 'shape+ncu'
                ELSE any_value(c.cost_source) END AS cost_source
    FROM kernels AS k
    JOIN kernel_costs AS c
      ON c.run_id = k.run_id AND c.source_id = k.source_id AND c.kernel_id = k.kernel_id
    WHERE k.kind = 'kernel' AND k.op_event_id IS NOT NULL AND c.flops IS NOT NULL
    GROUP BY k.run_id, k.source_id, k.op_event_id
),
sources_with_flops AS (
    SELECT DISTINCT run_id, source_id FROM host_events WHERE flops IS NOT NULL
),
computed AS (
    SELECT DISTINCT run_id FROM kernel_costs
),
chosen AS (
    SELECT o.*, f.flops AS profiler_flops, f.flops_event_count, c.flops AS shape_flops,
           c.cost_source, s.source_id IS NOT NULL AS source_has_flops,
           m.run_id IS NOT NULL AS costs_computed,
           coalesce(f.flops, c.flops) AS flops
    FROM op_kernels AS o
    LEFT JOIN op_flops AS f
      ON f.run_id = o.run_id AND f.source_id = o.source_id AND f.op_event_id = o.op_event_id
    LEFT JOIN op_costs AS c
      ON c.run_id = o.run_id AND c.source_id = o.source_id AND c.op_event_id = o.op_event_id
    LEFT JOIN sources_with_flops AS s ON s.run_id = o.run_id AND s.source_id = o.source_id
    LEFT JOIN computed AS m ON m.run_id = o.run_id
)
SELECT
    c.run_id,
    r.run_name,
    c.source_id,
    h.rank,
    c.op_event_id,
    h.name AS op_name,
    h.iteration,
    c.kernel_count,
    c.gpu_time_ns,
    h.dur_ns AS host_dur_ns,
    c.flops,
    CASE WHEN c.profiler_flops IS NOT NULL THEN 'profiler' ELSE c.cost_source END
        AS flops_source,
    coalesce(c.flops_event_count, 0) AS flops_event_count,
    c.flops / nullif(c.gpu_time_ns, 0) * 1e9 AS gpu_flops_per_s,
    c.flops / nullif(h.dur_ns, 0) * 1e9 AS host_flops_per_s,
    CASE
        WHEN c.flops IS NULL AND NOT c.costs_computed
            THEN 'no flops recorded (with_flops=True), and kernel costs not computed '
                 || '(etl costs)'
        WHEN c.flops IS NULL AND c.source_has_flops
            THEN 'no op inside recorded flops (PyTorch has no formula for it), and no op '
                 || 'with input shapes has a FLOP formula'
        WHEN c.flops IS NULL
            THEN 'no flops recorded (with_flops=True), and no op with input shapes has a '
                 || 'FLOP formula (record_shapes=True)'
        WHEN c.gpu_time_ns = 0 THEN 'kernels of zero total duration'
    END AS flops_reason
FROM chosen AS c
JOIN runs AS r ON r.run_id = c.run_id
JOIN host_events AS h
  ON h.run_id = c.run_id AND h.source_id = c.source_id AND h.event_id = c.op_event_id
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
-- flops: the flops PyTorch recorded inside the operator, else its kernels' kernel_costs.flops, FLOP; NULL when neither says (flops_reason)
-- flops_source: profiler (host_events.flops), shape (input shapes), ncu (counters) or shape+ncu; NULL when flops is NULL
-- flops_event_count: how many events inside the operator recorded flops
-- gpu_flops_per_s: flops / (gpu_time_ns / 1e9), FLOP/s; NULL when flops is NULL or gpu_time_ns is 0
-- host_flops_per_s: flops / (host_dur_ns / 1e9), FLOP/s; NULL when flops is NULL or host_dur_ns is 0
-- flops_reason: why flops or gpu_flops_per_s is NULL; NULL when both are known
