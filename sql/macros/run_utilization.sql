{#- run_utilization.sql: the paper's Fig. 5 row, utilization at four levels for one iteration
per run, rank and device (run_utilization_v<N>), from the kernels of each iteration
(_iteration_kernels_v1) and their ncu levels, the iteration's window and gpu_util from
`gpu_utilization`, and `run_summary`'s selected iteration (ties; with `every_device`,
the iteration of a device without matched kernels). With `every_device` (v2), a row
for every device of `run_summary`, its ncu levels NULL and `ncu_reason` saying why where
no kernel matched; without it (v1), rows only for devices with matched kernels. -#}
{% macro run_utilization(gpu_utilization, run_summary, every_device) -%}
{%- set levels = ["smsp_active_util", "issue_slot_util", "tc_active_util", "tc_issue_util"] -%}
{%- set shares = ["tc_inst_share", "tc_active_share"] -%}
WITH per_iteration AS (
    SELECT
        ik.run_id, ik.source_id, ik.device_id, ik.iteration,
        count(ik.ncu_id) AS matched_kernels,
        count(*) AS kernels,
        sum(ik.clipped_dur_ns) FILTER (WHERE ik.ncu_id IS NOT NULL) AS matched_ns,
        sum(ik.clipped_dur_ns) AS kernel_ns,
{%- for x in levels + shares %}
        sum(u.{{ x }} * ik.clipped_dur_ns)
            / nullif(sum(ik.clipped_dur_ns) FILTER (WHERE u.{{ x }} IS NOT NULL), 0)
            AS mean_{{ x }},
{%- endfor %}
        count(*) FILTER (WHERE u.smsp_active_util IS NULL AND ik.ncu_id IS NOT NULL)
            AS matched_without_counters
    FROM _iteration_kernels_v1 AS ik
    LEFT JOIN ncu_kernel_utilization_v1 AS u
      ON u.run_id = ik.run_id AND u.ncu_source_id = ik.ncu_source_id AND u.ncu_id = ik.ncu_id
    GROUP BY ik.run_id, ik.source_id, ik.device_id, ik.iteration
),
chosen AS (
    SELECT p.*
    FROM per_iteration AS p
    LEFT JOIN {{ run_summary }} AS s
      ON s.run_id = p.run_id AND s.source_id = p.source_id AND s.device_id = p.device_id
    WHERE p.matched_kernels > 0
    QUALIFY row_number() OVER (
        PARTITION BY p.run_id, p.source_id, p.device_id
        ORDER BY p.matched_kernels DESC,
                 (p.iteration IS NOT DISTINCT FROM s.selected_iteration) DESC,
                 p.iteration) = 1
)
{%- if every_device %},
exports AS (
    SELECT run_id, count(*) AS ncu_kernels
    FROM ncu_kernels
    GROUP BY run_id
),
rows AS (
    SELECT s.run_id, s.source_id, s.device_id,
           CASE WHEN c.run_id IS NULL THEN s.selected_iteration ELSE c.iteration END
               AS iteration,
           c.run_id IS NOT NULL AS has_levels,
           CASE WHEN c.run_id IS NOT NULL THEN NULL
                WHEN e.run_id IS NULL THEN 'no ncu export in the run'
                ELSE 'no kernel of this device matched the ncu export' END AS ncu_reason
    FROM {{ run_summary }} AS s
    LEFT JOIN chosen AS c
      ON c.run_id = s.run_id AND c.source_id = s.source_id AND c.device_id = s.device_id
    LEFT JOIN exports AS e ON e.run_id = s.run_id
)
{%- endif %}
SELECT
    g.run_id,
    g.run_name,
    g.source_id,
    g.rank,
    g.device_id,
    g.iteration,
    g.window_ns,
    g.gpu_util,
{%- for x in levels %}
    g.gpu_util * c.mean_{{ x }} AS {{ x }},
{%- endfor %}
{%- for x in shares %}
    c.mean_{{ x }} AS {{ x }},
{%- endfor %}
{%- if every_device %}
    x.ncu_reason,
    coalesce(c.matched_kernels, 0) AS matched_kernels,
    coalesce(c.kernels, g.kernel_count) AS kernels,
{%- else %}
    c.matched_kernels,
    c.kernels,
{%- endif %}
    c.matched_ns / nullif(c.kernel_ns, 0) AS matched_time_share,
    CASE WHEN g.window_ns > 0 THEN r.batch_size * 1e9 / g.window_ns END
        AS throughput_samples_per_s,
    r.model,
    r.framework,
    r.exec_mode,
    r.precision,
    r.batch_size,
    r.gpu
{%- if every_device %}
FROM rows AS x
JOIN {{ gpu_utilization }} AS g
  ON g.run_id = x.run_id AND g.source_id = x.source_id AND g.device_id = x.device_id
 AND g.iteration IS NOT DISTINCT FROM x.iteration
LEFT JOIN chosen AS c
  ON c.run_id = x.run_id AND c.source_id = x.source_id AND c.device_id = x.device_id
JOIN runs AS r ON r.run_id = x.run_id
{%- else %}
FROM chosen AS c
JOIN {{ gpu_utilization }} AS g
  ON g.run_id = c.run_id AND g.source_id = c.source_id AND g.device_id = c.device_id
 AND g.iteration IS NOT DISTINCT FROM c.iteration
JOIN runs AS r ON r.run_id = c.run_id
{%- endif %}
{%- endmacro %}
