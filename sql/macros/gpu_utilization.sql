{#- gpu_utilization.sql: busy time and kernel time per iteration window, from the windows
`windows` and the merged busy spans of _busy_intervals_v1 (gpu_utilization_v1 and v2;
v3 adds memory to v2, v4 reads _window_coverage_v1). With `completeness` (v2), an
iteration that is not complete has gpu_util and activity_util NULL, and the window's
complete, cut and unlaunched_kernel_count are kept. -#}
{% from 'type_breakdown.sql' import clipped_scopes %}
{% macro gpu_utilization(windows, completeness) -%}
WITH {{ clipped_scopes(windows, '_busy_intervals_v1', [('busy_ns', 'kernel'),
                                                        ('activity_busy_ns', 'activity')],
                       name='busy', span='b') }},
run_kernels AS (
    SELECT k.run_id, r.run_name, k.source_id, k.device_id, k.kernel_id, k.ts_ns, k.dur_ns
    FROM kernels AS k
    JOIN runs AS r ON r.run_id = k.run_id
    WHERE k.kind = 'kernel' AND k.dur_ns >= 0
),
kernel_time AS (
    SELECT
        w.run_id, w.run_name, w.source_id, w.device_id, w.host_start_ns, w.iteration,
        -- least/greatest skip NULLs, so the unmatched row of the LEFT JOIN is filtered out
        coalesce(sum(least(k.ts_ns + k.dur_ns, w.window_end_ns)
                     - greatest(k.ts_ns, w.window_start_ns))
                 FILTER (WHERE k.kernel_id IS NOT NULL), 0) AS kernel_time_ns
    FROM {{ windows }} AS w
    LEFT JOIN run_kernels AS k
      ON k.run_id = w.run_id AND k.run_name = w.run_name AND k.source_id = w.source_id
     AND k.device_id = w.device_id
     AND k.ts_ns < w.window_end_ns AND k.ts_ns + k.dur_ns > w.window_start_ns
    GROUP BY w.run_id, w.run_name, w.source_id, w.device_id, w.host_start_ns, w.iteration
)
{%- set known = "w.complete AND " if completeness else "" %}
SELECT
    w.run_id,
    w.run_name,
    w.source_id,
    w.rank,
    w.device_id,
    w.iteration,
    w.window_start_ns,
    w.window_end_ns - w.window_start_ns AS window_ns,
    b.busy_ns,
    w.kernel_count,
    CASE WHEN {{ known }}w.window_end_ns > w.window_start_ns
         THEN b.busy_ns / (w.window_end_ns - w.window_start_ns) END AS gpu_util,
    b.activity_busy_ns,
    CASE WHEN {{ known }}w.window_end_ns > w.window_start_ns
         THEN b.activity_busy_ns / (w.window_end_ns - w.window_start_ns) END AS activity_util,
    t.kernel_time_ns
{%- if completeness %},
    w.complete,
    w.cut,
    w.unlaunched_kernel_count
{%- endif %}
FROM {{ windows }} AS w
JOIN busy AS b
  ON b.run_id = w.run_id AND b.run_name = w.run_name AND b.source_id = w.source_id
 AND b.device_id = w.device_id
 AND b.host_start_ns = w.host_start_ns AND b.iteration IS NOT DISTINCT FROM w.iteration
JOIN kernel_time AS t
  ON t.run_id = w.run_id AND t.run_name = w.run_name AND t.source_id = w.source_id
 AND t.device_id = w.device_id
 AND t.host_start_ns = w.host_start_ns AND t.iteration IS NOT DISTINCT FROM w.iteration
{%- endmacro %}
