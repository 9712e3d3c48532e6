{#- tc_time_cdf.sql: the cumulative distribution of GPU time over the kernels'
tensor-instruction issue ratio per run (tc_time_cdf_v<N>) over the matched kernels of
`kernel_utilization`; the cumulative share is named `cumulative_share` (v1:
time_share_at_most_ratio). -#}
{% macro tc_time_cdf(kernel_utilization, cumulative_share) -%}
WITH per_value AS (
    SELECT run_id, run_name, tc_issue_util AS t, sum(dur_ns) AS gpu_time_ns,
           count(*) AS kernel_count
    FROM {{ kernel_utilization }}
    WHERE tc_issue_util IS NOT NULL
    GROUP BY run_id, run_name, tc_issue_util
)
SELECT
    run_id,
    run_name,
    t AS tc_issue_util,
    kernel_count,
    gpu_time_ns,
    sum(gpu_time_ns) OVER (PARTITION BY run_id ORDER BY t)
        / nullif(sum(gpu_time_ns) OVER (PARTITION BY run_id), 0) AS {{ cumulative_share }}
FROM per_value
{%- endmacro %}
