{% from 'tc_time_cdf.sql' import tc_time_cdf -%}
-- tc_time_cdf: share of GPU time spent in kernels whose tensor-core issue-slot utilization
-- is at most t (the paper's Fig. 8), for every value t observed in the run.
-- Grain: one row per run and distinct tc_issue_util value of its matched kernels.
-- [paper Fig. 8] The cumulative share of GPU time by tensor-core issue-slot utilization.
-- [project] t ranges over the observed values; GPU time is the matched kernels' trace
-- durations.
{{ tc_time_cdf('kernel_utilization_v1', cumulative_share='time_share_at_most_ratio') }}
-- run_id: run; joins runs.run_id
-- run_name: the run folder's name
-- tc_issue_util: the threshold t, a kernel value of tensor instructions / SMSP elapsed cycles
-- kernel_count: matched kernels with exactly this value
-- gpu_time_ns: their trace durations summed, ns
-- time_share_at_most_ratio: GPU time of kernels with tc_issue_util <= t / GPU time of all matched kernels with a known value, 0..1; NULL when that time is 0
