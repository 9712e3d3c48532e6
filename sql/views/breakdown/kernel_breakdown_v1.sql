-- kernel_breakdown: GPU time by kernel type (computation, communication, memory), with the
-- top kernels of each type.
-- Grain: one row per run, source (rank), device, iteration and kernel_type.
-- An activity belongs to the iteration whose ProfilerStep launched it (kernels.iteration,
-- K_i of gpu_utilization); iteration NULL holds the activities launched outside every step
-- (and every activity of a trace without steps). time_ns sums durations (not a union:
-- activities overlapping on several streams add up), as HTA's per-kernel table does.
-- [project] Not HTA's percentages: HTA 0.5's get_gpu_kernel_breakdown (memory kernels
-- included by default) merges each type's intervals into a union and splits a rank's
-- whole trace into disjoint pieces, one per type and one per overlap of types
-- ("COMPUTATION overlapping COMMUNICATION"), each a share of their total, the union of
-- all activity. This view shares summed durations out of their sum over the types, per
-- iteration (kernel_time_share), and against the iteration's union-based busy time
-- (busy_share); the union-based split is temporal_breakdown's (computation first) and
-- comm_overlap's. Its top kernels are HTA's without its "others" grouping. Kernel types and tc_estimate: etl/extract/kernel_types.toml (tc_estimate_time_share
-- is the TensorBoard profiler's "kernel time using tensor cores", an estimate from names).
WITH typed AS (
    SELECT k.run_id, r.run_name, k.source_id, k.rank, k.device_id, k.iteration,
           k.kernel_type, k.name, k.dur_ns, k.tc_estimate
    FROM kernels AS k
    JOIN runs AS r ON r.run_id = k.run_id
    WHERE k.kernel_type IN ('computation', 'communication', 'memory') AND k.dur_ns >= 0
),
by_type AS (
    SELECT run_id, run_name, source_id, rank, device_id, iteration, kernel_type,
           count(*) AS kernel_count,
           sum(dur_ns) AS time_ns,
           sum(dur_ns) FILTER (WHERE tc_estimate) AS tc_estimate_ns
    FROM typed
    GROUP BY run_id, run_name, source_id, rank, device_id, iteration, kernel_type
),
by_name AS (
    SELECT run_id, run_name, source_id, device_id, iteration, kernel_type, name,
           count(*) AS kernel_count, sum(dur_ns) AS time_ns,
           row_number() OVER (
               PARTITION BY run_id, run_name, source_id, device_id, iteration, kernel_type
               ORDER BY sum(dur_ns) DESC, name) AS place
    FROM typed
    GROUP BY run_id, run_name, source_id, device_id, iteration, kernel_type, name
),
top AS (
    SELECT run_id, run_name, source_id, device_id, iteration, kernel_type,
           list({'name': name, 'kernel_count': kernel_count, 'time_ns': time_ns}
                ORDER BY place) AS top_kernels
    FROM by_name
    WHERE place <= 5
    GROUP BY run_id, run_name, source_id, device_id, iteration, kernel_type
),
busy AS (
    SELECT run_id, run_name, source_id, device_id, iteration, activity_busy_ns
    FROM gpu_utilization_v1
)
SELECT
    t.run_id,
    t.run_name,
    t.source_id,
    t.rank,
    t.device_id,
    t.iteration,
    t.kernel_type,
    t.kernel_count,
    t.time_ns,
    t.time_ns / nullif(sum(t.time_ns) OVER (
        PARTITION BY t.run_id, t.run_name, t.source_id, t.device_id, t.iteration), 0)
        AS kernel_time_share,
    t.time_ns / nullif(b.activity_busy_ns, 0) AS busy_share,
    CASE WHEN t.kernel_type = 'computation'
         THEN coalesce(t.tc_estimate_ns, 0) / nullif(t.time_ns, 0) END
        AS tc_estimate_time_share,
    p.top_kernels
FROM by_type AS t
LEFT JOIN busy AS b
  ON b.run_id = t.run_id AND b.run_name = t.run_name AND b.source_id = t.source_id
 AND b.device_id = t.device_id AND b.iteration IS NOT DISTINCT FROM t.iteration
LEFT JOIN top AS p
  ON p.run_id = t.run_id AND p.run_name = t.run_name AND p.source_id = t.source_id
 AND p.device_id IS NOT DISTINCT FROM t.device_id
 AND p.iteration IS NOT DISTINCT FROM t.iteration AND p.kernel_type = t.kernel_type
-- run_id: run; joins runs.run_id
-- run_name: the run folder's name
-- source_id: input file within the run (one per rank)
-- rank: distributed rank; NULL when the trace has no distributedInfo
-- device_id: GPU index as the trace numbers it; NULL for activities without a device
-- iteration: N of the ProfilerStep#N that launched the activities; NULL: launched outside every step, or a trace without steps
-- kernel_type: computation, communication or memory (kernels.kernel_type)
-- kernel_count: activities of this type
-- time_ns: sum of their durations, ns (overlapping activities add up)
-- kernel_time_share: time_ns / the time_ns of all types of this rank, device and iteration (sums of durations; HTA's percentages are of interval unions, see the comment above)
-- busy_share: time_ns / gpu_utilization's activity_busy_ns of the iteration (union of all GPU activity); above 1 when activities of the type overlap; NULL without a window (launched outside every step) or when that busy time is 0
-- tc_estimate_time_share: computation only: the share of time_ns in kernels whose name says tensor cores (tc_estimate); NULL for other types
-- top_kernels: the 5 names of the type with the most time: list of {name, kernel_count, time_ns}, most time first
