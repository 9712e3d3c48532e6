{#- issue_slot_distribution.sql: the distribution of the kernels' issue-slot ratios per run
(issue_slot_distribution_v<N>) over the matched kernels of `kernel_utilization`; the
share of kernels above 0.6 is named `above_60pct` (v1: above_60pct_ratio). -#}
{% macro issue_slot_distribution(kernel_utilization, above_60pct) -%}
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
        AS {{ above_60pct }}
FROM {{ kernel_utilization }}
GROUP BY run_id, run_name
{%- endmacro %}
