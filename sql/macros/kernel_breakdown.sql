{#- kernel_breakdown.sql: GPU time by kernel type per iteration, with the top kernels of each
type (kernel_breakdown_v<N>). The caller's block is the SELECT of the CTE `busy`: run_id,
run_name, source_id, device_id, iteration and activity_busy_ns, the iteration's busy
time with copies and sets (gpu_utilization's). -#}
{% macro kernel_breakdown() -%}
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
{{ caller() }}
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
{%- endmacro %}
