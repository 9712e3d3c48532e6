-- op_roofline: where each operator sits on its device's roofline.
-- Grain: one row per run, source, device and outermost operator that launched kernels
-- (kernels.op_event_id, e.g. aten::linear or an autograd evaluate_function: op_flops's).
-- Its kernels' costs added up (kernel_roofline_v1): gpu_time_ns = the sum of its kernels'
-- durations, costed_time_share = the share of that whose kernels have a cost; flops and
-- bytes = sums over the costed kernels; achieved_flops_per_s and achieved_bytes_per_s =
-- those over the costed kernels' time; the peak is the one of the precision with the most
-- FLOPs among them (kernel_roofline's rule); arithmetic_intensity, ridge_intensity,
-- attainable_flops_per_s, bound and roofline_util as kernel_roofline defines them.
-- [project] The roofline is Williams, Waterman and Patterson's (CACM 2009); adding an
-- operator's kernels up is this project's.
WITH kernels_of_ops AS (
    SELECT * FROM kernel_roofline_v1 WHERE op_event_id IS NOT NULL
),
ops AS (
    SELECT
        run_id, any_value(run_name) AS run_name, source_id, any_value(rank) AS rank,
        device_id, op_event_id, any_value(op_name) AS op_name,
        count(*) AS kernel_count,
        sum(dur_ns) AS gpu_time_ns,
        sum(dur_ns) FILTER (WHERE cost_source IS NOT NULL) AS costed_time_ns,
        CASE WHEN count(DISTINCT cost_source) > 1 THEN 'shape+ncu'
             ELSE any_value(cost_source) END AS cost_source,
        sum(flops) AS flops,
        sum(bytes) AS bytes,
        arg_max(peak_precision, coalesce(flops, 0)) FILTER (WHERE cost_source IS NOT NULL)
            AS peak_precision,
        arg_max(peak_flops_per_s, coalesce(flops, 0)) FILTER (WHERE cost_source IS NOT NULL)
            AS peak_flops_per_s,
        any_value(peak_bytes_per_s) AS peak_bytes_per_s,
        any_value(gpu_name) AS gpu_name,
        bool_and(roofline_reason IS NOT NULL) AS all_unknown,
        arg_min(roofline_reason, kernel_id) FILTER (WHERE roofline_reason IS NOT NULL)
            AS first_reason
    FROM kernels_of_ops
    GROUP BY run_id, source_id, device_id, op_event_id
),
rated AS (
    SELECT o.*, h.iteration,
           o.flops / nullif(o.bytes, 0) AS arithmetic_intensity,
           o.flops / nullif(o.costed_time_ns, 0) * 1e9 AS achieved_flops_per_s,
           o.bytes / nullif(o.costed_time_ns, 0) * 1e9 AS achieved_bytes_per_s,
           o.peak_flops_per_s / nullif(o.peak_bytes_per_s, 0) AS ridge_intensity
    FROM ops AS o
    LEFT JOIN host_events AS h
      ON h.run_id = o.run_id AND h.source_id = o.source_id AND h.event_id = o.op_event_id
)
SELECT
    run_id,
    run_name,
    source_id,
    rank,
    device_id,
    op_event_id,
    op_name,
    iteration,
    kernel_count,
    gpu_time_ns,
    costed_time_ns / nullif(gpu_time_ns, 0) AS costed_time_share,
    cost_source,
    flops,
    bytes,
    arithmetic_intensity,
    achieved_flops_per_s,
    achieved_bytes_per_s,
    gpu_name,
    peak_precision,
    peak_flops_per_s,
    peak_bytes_per_s,
    ridge_intensity,
    least(peak_flops_per_s, arithmetic_intensity * peak_bytes_per_s) AS attainable_flops_per_s,
    CASE WHEN flops > 0 AND arithmetic_intensity >= ridge_intensity THEN 'compute'
         WHEN flops > 0 AND arithmetic_intensity < ridge_intensity THEN 'memory'
         WHEN flops = 0 AND bytes > 0 THEN 'memory' END AS bound,
    CASE WHEN flops > 0 THEN achieved_flops_per_s
                             / nullif(least(peak_flops_per_s,
                                            arithmetic_intensity * peak_bytes_per_s), 0)
         WHEN flops = 0 THEN achieved_bytes_per_s / nullif(peak_bytes_per_s, 0)
    END AS roofline_util,
    CASE WHEN all_unknown THEN first_reason END AS roofline_reason
FROM rated
-- run_id: run; joins runs.run_id
-- run_name: the run folder's name
-- source_id: trace source within the run
-- rank: distributed rank of the source; NULL when the trace does not say
-- device_id: GPU index as the trace numbers it
-- op_event_id: the outermost operator; joins host_events.event_id and kernels.op_event_id
-- op_name: its name (e.g. aten::linear)
-- iteration: host_events.iteration of the operator; NULL outside every step
-- kernel_count: kernels (kind kernel) the operator launched on the device
-- gpu_time_ns: sum of those kernels' durations, ns
-- costed_time_share: the share of gpu_time_ns whose kernels have a cost (kernel_costs), 0..1; NULL when gpu_time_ns is 0
-- cost_source: shape, ncu, or shape+ncu when its kernels' costs come from both; NULL when none has a cost
-- flops: sum of the costed kernels' FLOPs, FLOP; NULL when none has a cost
-- bytes: sum of the costed kernels' bytes, byte; NULL when none has a cost
-- arithmetic_intensity: flops / bytes, FLOP per byte; NULL when unknown or bytes is 0
-- achieved_flops_per_s: flops / (the costed kernels' time / 1e9), FLOP/s; NULL when unknown
-- achieved_bytes_per_s: bytes / (the costed kernels' time / 1e9), byte/s; NULL when unknown
-- gpu_name: the device's name as kernel_roofline gives it
-- peak_precision: the precision of the costed kernels with the most FLOPs (kernel_roofline.peak_precision)
-- peak_flops_per_s: the device's dense peak at peak_precision, FLOP/s; NULL when unknown
-- peak_bytes_per_s: the device's memory bandwidth, byte/s; NULL when unknown
-- ridge_intensity: peak_flops_per_s / peak_bytes_per_s, FLOP per byte
-- attainable_flops_per_s: least(peak_flops_per_s, arithmetic_intensity x peak_bytes_per_s), FLOP/s
-- bound: compute or memory (kernel_roofline's rule); NULL when unknown
-- roofline_util: achieved over attainable FLOP/s, or achieved over peak bytes/s for an op without FLOPs, 0..1; NULL with roofline_reason when unknown
-- roofline_reason: when no kernel of the op has a roofline: the first kernel's kernel_roofline.roofline_reason; NULL otherwise
