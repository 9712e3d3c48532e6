{% from 'tc_amdahl.sql' import ncu_basis, ncu_columns -%}
-- tc_amdahl: Amdahl's law for tensor cores (the paper's takeaway 7): how much of the GPU
-- time is in kernels that issue no tensor-core instruction, and the most an iteration can
-- speed up if only the tensor-core kernels became k times faster (k = 2, 10, infinity).
-- Grain: one row per run, source (rank) and device that ran matched kernels, for the
-- iteration run_utilization selects (the one with the most matched kernels).
-- A matched kernel is a tensor-core kernel when its ncu tc_issue_util > 0 and a non-tensor
-- one when it is exactly 0 (basis = 'ncu'). With d_k its duration clipped to the window:
--   tc_window_share p = least(1, sum(d_k, tensor-core kernels) / window_ns)
--   speed-up bound S(k) = 1 / ((1 - p) + p / k),   S(inf) = 1 / (1 - p)
-- Idle time, non-tensor kernels and kernels not matched to ncu keep their time, so an
-- unmatched tensor-core kernel lowers the bound (matched_time_share says how much it rests
-- on). Runs without an ncu export have no row: the name-based estimate is not used here.
-- [paper §VI, takeaway 7] Time in kernels without tensor-core instructions bounds the
-- gain of faster tensor cores. [project] The k values, the window as the whole (idle
-- included), least(1, ...) for overlapping streams and the iteration choice.
WITH {{ ncu_basis('run_utilization_v1') }}
{{ ncu_columns() }}
FROM shares
-- run_id: run; joins runs.run_id
-- run_name: the run folder's name
-- source_id: trace file within the run
-- rank: distributed rank; NULL without distributedInfo
-- device_id: GPU index as the trace numbers it
-- iteration: the iteration run_utilization selects; NULL for a trace without steps
-- basis: how tensor-core kernels are told apart: 'ncu' (tc_issue_util > 0 vs = 0)
-- window_ns: the iteration's window (the whole that the speed-up is of), ns
-- tc_kernels: matched kernels of the iteration with tc_issue_util > 0
-- non_tc_kernels: matched kernels of the iteration with tc_issue_util = 0
-- tc_ns: clipped durations of the tensor-core kernels summed, ns
-- non_tc_ns: clipped durations of the kernels without tensor-core instructions summed, ns
-- non_tc_time_share: non_tc_ns / (tc_ns + non_tc_ns), 0..1: the share of GPU time in kernels without tensor-core instructions; NULL when both are 0
-- tc_window_share: tc_ns / window_ns capped at 1 (overlapping streams), 0..1: the part of the iteration a faster tensor core can shorten; NULL when window_ns = 0
-- speedup_bound_k2_ratio: iteration speed-up bound if tensor-core kernels ran 2x faster, 1 / ((1 - p) + p / 2), >= 1
-- speedup_bound_k10_ratio: the bound for 10x faster tensor-core kernels, >= 1
-- speedup_bound_inf_ratio: the bound for infinitely fast tensor-core kernels, 1 / (1 - p); NULL when p = 1 (no bound)
-- matched_time_share: run_utilization's matched_time_share of the iteration, 0..1: unmatched kernel time is counted as not accelerated
