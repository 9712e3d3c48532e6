-- kernel_roofline: where each GPU kernel sits on its device's roofline.
-- Grain: one row per run, source and GPU kernel (kernels.kind kernel).
-- flops and bytes: kernel_costs (etl costs): from the input shapes of the op that launched
-- the kernel, or the counters of its matched Nsight Compute result (cost_source).
-- arithmetic_intensity = flops / bytes; achieved_flops_per_s = flops / the kernel's
-- duration, achieved_bytes_per_s = bytes / duration. peak_flops_per_s: the device's dense
-- peak (gpu_peaks) at peak_precision: the kernel's precision for GEMM-like work
-- (kernel_costs.matrix: matrix units; fp32 read as tf32 when runs.precision is tf32), fp64
-- for other fp64 work, else fp32 (vector units); peak_bytes_per_s: the device's memory
-- bandwidth (gpu_specs). ridge_intensity = peak_flops_per_s / peak_bytes_per_s;
-- attainable_flops_per_s = least(peak_flops_per_s, arithmetic_intensity ×
-- peak_bytes_per_s); bound = compute when arithmetic_intensity ≥ ridge_intensity, else
-- memory; roofline_util = achieved_flops_per_s / attainable_flops_per_s, or for a kernel
-- that computes nothing (a copy, an embedding lookup) achieved_bytes_per_s /
-- peak_bytes_per_s. The device is the catalog's row for devices.name, else for runs.gpu.
-- [project] The roofline is Williams, Waterman and Patterson's (CACM 2009); the costs from
-- shapes and the peak a kernel is held to are this project's.
WITH computed AS (
    SELECT DISTINCT run_id FROM kernel_costs
),
placed AS (
    SELECT
        k.run_id, r.run_name, k.source_id, k.rank, k.device_id, k.kernel_id,
        k.name AS kernel_name, k.op_event_id, k.op_name, k.layer, k.iteration, k.dur_ns,
        c.cost_source, c.op_family, c.precision, c.matrix, c.flops, c.bytes, c.cost_reason,
        c.kernel_id IS NOT NULL AS has_cost_row, m.run_id IS NOT NULL AS run_computed,
        CASE WHEN lower(trim(dv.name)) IN (SELECT gpu_key FROM gpu_specs) THEN dv.name
             WHEN lower(trim(r.gpu)) IN (SELECT gpu_key FROM gpu_specs) THEN r.gpu
             ELSE coalesce(dv.name, r.gpu) END AS gpu_name,
        CASE WHEN c.matrix AND c.precision = 'fp32' AND lower(trim(r.precision)) = 'tf32'
                 THEN 'tf32'
             WHEN c.matrix THEN c.precision
             WHEN c.precision = 'fp64' THEN 'fp64'
             WHEN c.cost_source IS NOT NULL THEN 'fp32' END AS peak_precision
    FROM kernels AS k
    JOIN runs AS r ON r.run_id = k.run_id
    LEFT JOIN devices AS dv
      ON dv.run_id = k.run_id AND dv.source_id = k.source_id AND dv.device_id = k.device_id
    LEFT JOIN kernel_costs AS c
      ON c.run_id = k.run_id AND c.source_id = k.source_id AND c.kernel_id = k.kernel_id
    LEFT JOIN computed AS m ON m.run_id = k.run_id
    WHERE k.kind = 'kernel'
),
peaked AS (
    SELECT p.*, gp.peak_flops_per_s, gs.memory_bytes_per_s AS peak_bytes_per_s,
           gs.gpu_key IS NOT NULL AS gpu_known,
           p.flops / nullif(p.bytes, 0) AS arithmetic_intensity,
           p.flops / nullif(p.dur_ns, 0) * 1e9 AS achieved_flops_per_s,
           p.bytes / nullif(p.dur_ns, 0) * 1e9 AS achieved_bytes_per_s
    FROM placed AS p
    LEFT JOIN gpu_specs AS gs ON gs.gpu_key = lower(trim(p.gpu_name))
    LEFT JOIN gpu_peaks AS gp
      ON gp.gpu_key = lower(trim(p.gpu_name)) AND gp.peak_precision = p.peak_precision
),
bounded AS (
    SELECT *,
           peak_flops_per_s / nullif(peak_bytes_per_s, 0) AS ridge_intensity,
           least(peak_flops_per_s, arithmetic_intensity * peak_bytes_per_s)
               AS attainable_flops_per_s
    FROM peaked
)
SELECT
    run_id,
    run_name,
    source_id,
    rank,
    device_id,
    kernel_id,
    kernel_name,
    op_event_id,
    op_name,
    layer,
    iteration,
    dur_ns,
    cost_source,
    op_family,
    precision,
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
    attainable_flops_per_s,
    CASE WHEN flops > 0 AND arithmetic_intensity >= ridge_intensity THEN 'compute'
         WHEN flops > 0 AND arithmetic_intensity < ridge_intensity THEN 'memory'
         WHEN flops = 0 AND bytes > 0 THEN 'memory' END AS bound,
    CASE WHEN flops > 0 THEN achieved_flops_per_s / nullif(attainable_flops_per_s, 0)
         WHEN flops = 0 THEN achieved_bytes_per_s / nullif(peak_bytes_per_s, 0)
    END AS roofline_util,
    CASE
        WHEN NOT run_computed THEN 'kernel costs not computed for this run (etl costs)'
        WHEN NOT has_cost_row THEN 'kernel not in kernel_costs (computed before it was ingested)'
        WHEN cost_source IS NULL THEN cost_reason
        WHEN dur_ns = 0 THEN 'kernel of zero duration'
        WHEN gpu_name IS NULL THEN 'GPU model unknown (no device name, no run.toml gpu)'
        WHEN NOT gpu_known THEN 'GPU ' || gpu_name || ' not in etl/core/gpus.toml'
        WHEN flops > 0 AND peak_flops_per_s IS NULL
            THEN 'no ' || peak_precision || ' peak for ' || gpu_name || ' in etl/core/gpus.toml'
        WHEN peak_bytes_per_s IS NULL
            THEN 'no memory bandwidth for ' || gpu_name || ' in etl/core/gpus.toml'
        WHEN flops = 0 AND bytes = 0 THEN 'the kernel computes and moves nothing'
    END AS roofline_reason
FROM bounded
-- run_id: run; joins runs.run_id
-- run_name: the run folder's name
-- source_id: trace source within the run
-- rank: distributed rank of the source; NULL when the trace does not say
-- device_id: GPU index as the trace numbers it
-- kernel_id: the kernel; joins kernels.kernel_id (with source_id) and kernel_costs
-- kernel_name: the kernel's name (kernels.name)
-- op_event_id: the outermost op that launched it (kernels.op_event_id); NULL when none
-- op_name: its name (kernels.op_name); NULL when none
-- layer: kernels.layer; NULL when the source has none
-- iteration: kernels.iteration; NULL outside every step
-- dur_ns: the kernel's duration, ns
-- cost_source: shape or ncu (kernel_costs); NULL when no cost is known (roofline_reason)
-- op_family: the cost formula's family (gemm, conv, attention, norm, softmax, elementwise, reduction, embedding, copy, foreach); NULL for ncu costs
-- precision: fp64, fp32, fp16, bf16 or fp8 of the kernel's work; NULL when unknown
-- flops: the kernel's FLOPs (kernel_costs), FLOP; NULL when unknown
-- bytes: the kernel's bytes (shapes: inputs read and output written once; ncu: DRAM bytes), byte; NULL when unknown
-- arithmetic_intensity: flops / bytes, FLOP per byte; NULL when either is unknown or bytes is 0
-- achieved_flops_per_s: flops / (dur_ns / 1e9), FLOP/s; NULL when flops is NULL or dur_ns is 0
-- achieved_bytes_per_s: bytes / (dur_ns / 1e9), byte/s; NULL when bytes is NULL or dur_ns is 0
-- gpu_name: the device's name when the catalog knows it, else runs.gpu when it knows that, else whichever is given
-- peak_precision: the peak the kernel is held to (gpu_peaks.peak_precision); NULL when no cost is known
-- peak_flops_per_s: the device's dense peak at peak_precision, FLOP/s; NULL when the catalog has none
-- peak_bytes_per_s: the device's memory bandwidth (gpu_specs), byte/s; NULL when the catalog has none
-- ridge_intensity: peak_flops_per_s / peak_bytes_per_s, FLOP per byte: where the roofline turns
-- attainable_flops_per_s: least(peak_flops_per_s, arithmetic_intensity x peak_bytes_per_s), FLOP/s
-- bound: compute (arithmetic_intensity >= ridge_intensity) or memory (below it, or no FLOPs); NULL when unknown
-- roofline_util: achieved over attainable FLOP/s, or achieved over peak bytes/s for a kernel without FLOPs, 0..1 (above 1: more than the datasheet's peak, e.g. caches serving the bytes); NULL with roofline_reason when unknown
-- roofline_reason: why roofline_util is NULL; NULL when it is known
