-- issue_slot_distribution: the distribution of kernels' SMSP issue-slot utilization (the
-- paper's Fig. 6: violin and mean per run).
-- Grain: one row per run (matched kernels of all iterations, all ranks and devices).
-- [paper Fig. 6] The distribution over kernels and its mean; the 0.6 threshold is the
-- paper's A100 vs V100 remark. [project] The quantiles and the duration-weighted mean.
-- v2: the same rows as v1; above_60pct_ratio is above_60pct_share (ratio names: levels
-- *_util, fractions of a whole *_share, comparisons *_ratio; sql/CHANGELOG.md
-- 2026-11-25).
SELECT
    run_id,
    run_name,
    count(issue_slot_util) AS kernel_count,
    avg(issue_slot_util) AS mean_util,
    sum(issue_slot_util * dur_ns)
        / nullif(sum(dur_ns) FILTER (WHERE issue_slot_util IS NOT NULL), 0)
        AS time_weighted_mean_util,
    min(issue_slot_util) AS min_util,
    quantile_cont(issue_slot_util, 0.1) AS p10_util,
    quantile_cont(issue_slot_util, 0.25) AS p25_util,
    quantile_cont(issue_slot_util, 0.5) AS p50_util,
    quantile_cont(issue_slot_util, 0.75) AS p75_util,
    quantile_cont(issue_slot_util, 0.9) AS p90_util,
    max(issue_slot_util) AS max_util,
    count(*) FILTER (WHERE issue_slot_util > 0.6) / nullif(count(issue_slot_util), 0)
        AS above_60pct_share
FROM kernel_utilization_v1
GROUP BY run_id, run_name
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
