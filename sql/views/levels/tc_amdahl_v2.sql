-- tc_amdahl: Amdahl's law for tensor cores (the paper's takeaway 7): how much of the GPU
-- time is in kernels that issue no tensor-core instruction, and the most an iteration can
-- speed up if only the tensor-core kernels became k times faster (k = 2, 10, infinity).
-- Grain: one row per run, source (rank) and device that ran kernels, for the iteration
-- run_utilization selects (the one with the most matched kernels, else run_summary's).
-- Which kernels are tensor-core kernels, by `basis`:
--   'ncu': the device has kernels matched to an ncu export with a tensor-core issue
--     counter. A matched kernel is a tensor-core kernel when its tc_issue_util > 0 and a
--     non-tensor one when it is exactly 0; unmatched kernels are in neither (v1's rule).
--   'name_estimate': otherwise, every kernel of the iteration whose kernel_type is known
--     (kernels.tc_estimate, from names only: etl/extract/kernel_types.toml). A kernel is a
--     tensor-core kernel when tc_estimate is true; every other one (false, and the
--     communication and copy kernels, whose tc_estimate is NULL) is non-tensor. Names
--     hide what a kernel issues, so this undercounts tensor-core kernels: an estimate.
-- With d_k the kernel's duration clipped to the window:
--   tc_window_share p = least(1, sum(d_k, tensor-core kernels) / window_ns)
--   speed-up bound S(k) = 1 / ((1 - p) + p / k),   S(inf) = 1 / (1 - p)
-- Idle time and every kernel not counted as a tensor-core kernel keep their time.
-- A device with neither (no matched kernel with the counter, no typed kernel: a run
-- ingested before kernel types) has no row.
-- [paper §VI, takeaway 7] Time in kernels without tensor-core instructions bounds the
-- gain of faster tensor cores. [project] The k values, the window as the whole (idle
-- included), least(1, ...) for overlapping streams, the iteration choice and the
-- name-based fallback.
-- v2: the rows of tc_amdahl_v1 (basis 'ncu'), and for every other device of
-- run_utilization_v2 a row from the name-based estimate (v1 had none), for the iteration
-- run_utilization_v2 selects; `basis_note` says why the estimate was used.
WITH estimated_devices AS (
    SELECT u.run_id, u.run_name, u.source_id, u.rank, u.device_id, u.iteration, u.window_ns,
           coalesce(u.ncu_reason, 'the matched ncu kernels have no tensor-core issue '
                    || 'counter') AS basis_note
    FROM run_utilization_v2 AS u
    ANTI JOIN tc_amdahl_v1 AS a
      ON a.run_id = u.run_id AND a.source_id = u.source_id AND a.device_id = u.device_id
),
name_counts AS (
    SELECT
        c.run_id, c.run_name, c.source_id, c.rank, c.device_id, c.iteration, c.window_ns,
        c.basis_note,
        count(*) FILTER (WHERE k.tc_estimate) AS tc_kernels,
        count(*) FILTER (WHERE NOT coalesce(k.tc_estimate, false)) AS non_tc_kernels,
        coalesce(sum(ik.clipped_dur_ns) FILTER (WHERE k.tc_estimate), 0) AS tc_ns,
        coalesce(sum(ik.clipped_dur_ns) FILTER (WHERE NOT coalesce(k.tc_estimate, false)), 0)
            AS non_tc_ns
    FROM estimated_devices AS c
    JOIN _iteration_kernels_v1 AS ik
      ON ik.run_id = c.run_id AND ik.source_id = c.source_id AND ik.device_id = c.device_id
     AND ik.iteration IS NOT DISTINCT FROM c.iteration
    JOIN kernels AS k
      ON k.run_id = ik.run_id AND k.source_id = ik.source_id AND k.kernel_id = ik.kernel_id
    WHERE k.kernel_type IS NOT NULL
    GROUP BY ALL
),
estimated AS (
    SELECT
        *,
        non_tc_ns / nullif(tc_ns + non_tc_ns, 0) AS non_tc_time_share,
        least(1.0, tc_ns / nullif(window_ns, 0)) AS tc_window_share
    FROM name_counts
)
SELECT
    run_id, run_name, source_id, rank, device_id, iteration, basis,
    CAST(NULL AS VARCHAR) AS basis_note,
    window_ns, tc_kernels, non_tc_kernels, tc_ns, non_tc_ns, non_tc_time_share,
    tc_window_share, speedup_bound_k2_ratio, speedup_bound_k10_ratio,
    speedup_bound_inf_ratio, matched_time_share
FROM tc_amdahl_v1
UNION ALL
SELECT
    run_id,
    run_name,
    source_id,
    rank,
    device_id,
    iteration,
    'name_estimate' AS basis,
    basis_note,
    window_ns,
    tc_kernels,
    non_tc_kernels,
    tc_ns,
    non_tc_ns,
    non_tc_time_share,
    tc_window_share,
    1 / nullif((1 - tc_window_share) + tc_window_share / 2, 0) AS speedup_bound_k2_ratio,
    1 / nullif((1 - tc_window_share) + tc_window_share / 10, 0) AS speedup_bound_k10_ratio,
    1 / nullif(1 - tc_window_share, 0) AS speedup_bound_inf_ratio,
    CAST(NULL AS DOUBLE) AS matched_time_share
FROM estimated
-- run_id: run; joins runs.run_id
-- run_name: the run folder's name
-- source_id: trace file within the run
-- rank: distributed rank; NULL without distributedInfo
-- device_id: GPU index as the trace numbers it
-- iteration: the iteration run_utilization_v2 selects; NULL for a trace without steps
-- basis: how tensor-core kernels are told apart: 'ncu' (matched kernels, tc_issue_util > 0 vs = 0) or 'name_estimate' (kernels.tc_estimate from kernel names, an estimate)
-- basis_note: why the name estimate is used (run_utilization's ncu_reason, or an export without the tensor-core issue counter); NULL for basis 'ncu'
-- window_ns: the iteration's window (the whole that the speed-up is of), ns
-- tc_kernels: kernels of the iteration counted as tensor-core kernels (by basis)
-- non_tc_kernels: kernels of the iteration counted as without tensor-core instructions (by basis)
-- tc_ns: clipped durations of the tensor-core kernels summed, ns
-- non_tc_ns: clipped durations of the kernels without tensor-core instructions summed, ns
-- non_tc_time_share: non_tc_ns / (tc_ns + non_tc_ns), 0..1: the share of GPU time in kernels without tensor-core instructions; NULL when both are 0
-- tc_window_share: tc_ns / window_ns capped at 1 (overlapping streams), 0..1: the part of the iteration a faster tensor core can shorten; NULL when window_ns = 0
-- speedup_bound_k2_ratio: iteration speed-up bound if tensor-core kernels ran 2x faster, 1 / ((1 - p) + p / 2), >= 1
-- speedup_bound_k10_ratio: the bound for 10x faster tensor-core kernels, >= 1
-- speedup_bound_inf_ratio: the bound for infinitely fast tensor-core kernels, 1 / (1 - p); NULL when p = 1 (no bound)
-- matched_time_share: run_utilization's matched_time_share of the iteration, 0..1 (basis 'ncu': unmatched kernel time is counted as not accelerated); NULL for basis 'name_estimate'
