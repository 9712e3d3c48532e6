{#- kernel_summary.sql: time per kernel name and run (kernel_summary_v<N>); the share of the
run's kernel busy time is named `busy_share` (v1: busy_share_ratio). -#}
{% macro kernel_summary(busy_share) -%}
WITH run_busy AS (
    SELECT run_id, sum(end_ns - start_ns) AS busy_ns
    FROM _busy_intervals_v1
    WHERE scope = 'kernel'
    GROUP BY run_id
)
SELECT
    k.run_id,
    r.run_name,
    k.name AS kernel_name,
    count(*) AS kernel_count,
    sum(k.dur_ns) AS total_ns,
    avg(k.dur_ns) AS mean_ns,
    min(k.dur_ns) AS min_ns,
    max(k.dur_ns) AS max_ns,
    sum(k.dur_ns) / nullif(b.busy_ns, 0) AS {{ busy_share }}
FROM kernels AS k
JOIN runs AS r ON r.run_id = k.run_id
LEFT JOIN run_busy AS b ON b.run_id = k.run_id
WHERE k.kind = 'kernel' AND k.dur_ns >= 0
GROUP BY k.run_id, r.run_name, k.name, b.busy_ns
{%- endmacro %}
