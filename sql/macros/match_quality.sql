{#- match_quality.sql: how well the trace's kernels matched each ncu export, per device
(match_quality_v<N>); the two shares are named `count_share` and `time_share` (v1:
count_coverage_ratio, time_coverage_ratio; v2: matched_count_share, matched_time_share). -#}
{% macro match_quality(count_share, time_share) -%}
WITH rows AS (
    SELECT m.*, k.device_id, k.ts_ns, k.dur_ns
    FROM kernel_match AS m
    JOIN kernels AS k
      ON k.run_id = m.run_id AND k.source_id = m.source_id AND k.kernel_id = m.kernel_id
),
bounds AS (
    SELECT run_id, source_id, device_id, ncu_source_id,
           min(ts_ns) FILTER (WHERE match_status = 'matched') AS first_ns,
           max(ts_ns) FILTER (WHERE match_status = 'matched') AS last_ns
    FROM rows
    GROUP BY run_id, source_id, device_id, ncu_source_id
),
ncu_side AS (
    SELECT n.run_id, n.ncu_source_id, count(*) AS ncu_kernels,
           count(*) FILTER (WHERE NOT EXISTS (
               SELECT 1 FROM kernel_match AS m
               WHERE m.run_id = n.run_id AND m.ncu_source_id = n.ncu_source_id
                 AND m.ncu_id = n.ncu_id AND m.match_status = 'matched')) AS ncu_unmatched
    FROM ncu_kernels AS n
    GROUP BY n.run_id, n.ncu_source_id
)
SELECT
    r.run_id,
    r.source_id,
    r.device_id,
    r.ncu_source_id,
    count(*) FILTER (WHERE r.ts_ns BETWEEN b.first_ns AND b.last_ns) AS trace_kernels_in_range,
    any_value(s.ncu_kernels) AS ncu_kernels,
    count(*) FILTER (WHERE r.match_status = 'matched') AS matched,
    count(*) FILTER (WHERE r.match_status = 'ambiguous') AS ambiguous,
    count(*) FILTER (WHERE r.match_status = 'unmatched'
                     AND r.ts_ns BETWEEN b.first_ns AND b.last_ns) AS trace_unmatched_in_range,
    any_value(s.ncu_unmatched) AS ncu_unmatched,
    count(*) FILTER (WHERE r.match_status = 'matched')
        / nullif(count(*) FILTER (WHERE r.ts_ns BETWEEN b.first_ns AND b.last_ns), 0)
        AS {{ count_share }},
    sum(r.dur_ns) FILTER (WHERE r.match_status = 'matched')
        / nullif(sum(r.dur_ns) FILTER (WHERE r.ts_ns BETWEEN b.first_ns AND b.last_ns), 0)
        AS {{ time_share }}
FROM rows AS r
JOIN bounds AS b
  ON b.run_id = r.run_id AND b.source_id = r.source_id
 AND b.device_id IS NOT DISTINCT FROM r.device_id AND b.ncu_source_id = r.ncu_source_id
JOIN ncu_side AS s ON s.run_id = r.run_id AND s.ncu_source_id = r.ncu_source_id
GROUP BY r.run_id, r.source_id, r.device_id, r.ncu_source_id
{%- endmacro %}
