{% from 'tc_amdahl.sql' import ncu_basis, ncu_columns, name_estimate, both_bases -%}
-- tc_amdahl: Amdahl's law for tensor cores (the paper's takeaway 7): how much of the GPU
-- time is in kernels that issue no tensor-core instruction, and the most an iteration can
-- speed up if only the tensor-core kernels became k times faster (k = 2, 10, infinity).
-- Grain: one row per run, source (rank) and device that ran kernels, for the iteration
-- run_utilization_v2 selects (the one with the most matched kernels, else run_summary's),
-- whichever the basis.
-- Which kernels are tensor-core kernels, by `basis`:
--   'ncu': the device has kernels matched to an ncu export with a tensor-core issue
--     counter. A matched kernel is a tensor-core kernel when its tc_issue_util > 0 and a
--     non-tensor one when it is exactly 0; unmatched kernels are in neither.
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
WITH utilization AS (
    -- read once for both bases (Spark's analyser ran out of memory on two expansions)
    SELECT run_id, run_name, source_id, rank, device_id, iteration, window_ns,
           matched_time_share, ncu_reason
    FROM run_utilization_v2
),
iteration_kernels AS (
    SELECT run_id, source_id, device_id, iteration, kernel_id, clipped_dur_ns,
           ncu_source_id, ncu_id
    FROM _iteration_kernels_v1
),
{{ ncu_basis('utilization', iteration_kernels='iteration_kernels') }},
ncu AS (
{{ ncu_columns() }}
    FROM shares
),
{{ name_estimate('utilization', ncu_rows='ncu', iteration_kernels='iteration_kernels') }}
{{ both_bases(ncu_rows='ncu') }}
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
