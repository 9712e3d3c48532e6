{% from 'issue_slot_distribution.sql' import issue_slot_distribution -%}
-- issue_slot_distribution: the distribution of kernels' SMSP issue-slot utilization (the
-- paper's Fig. 6: violin and mean per run).
-- Grain: one row per run (matched kernels of all iterations, all ranks and devices).
-- [paper Fig. 6] The distribution over kernels and its mean; the 0.6 threshold is the
-- paper's A100 vs V100 remark. [project] The quantiles and the duration-weighted mean.
{{ issue_slot_distribution('kernel_utilization_v2', above_60pct='above_60pct_share') }}
-- run_id: run; joins runs.run_id
-- run_name: the run folder's name
-- kernel_count: matched kernels with a known issue-slot ratio
-- mean_util: mean over kernels (each kernel counts once), 0..1
-- time_weighted_mean_util: mean weighted by trace duration, 0..1; NULL when those durations sum to 0
-- min_util: lowest kernel value, 0..1
-- p10_util: 10th percentile over kernels, 0..1
-- p25_util: 25th percentile over kernels, 0..1
-- p50_util: median over kernels, 0..1
-- p75_util: 75th percentile over kernels, 0..1
-- p90_util: 90th percentile over kernels, 0..1
-- max_util: highest kernel value, 0..1
-- above_60pct_share: share of kernels above 0.6 (the paper's A100 vs V100 remark), 0..1; NULL when no kernel has a known value
