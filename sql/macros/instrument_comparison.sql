{#- instrument_comparison.sql: the monitor instruments' values in each trace window
(instrument_comparison_v<N>). Each version writes how its windows are placed on the wall
clock (its CTEs trace_clock, traced and untraced, and the window columns); these are the
pieces they share. -#}
{#- (column prefix, instrument family, metric) of every monitor metric compared -#}
{% set instruments = [
    ("smi_gpu", "nvidia-smi", "gpu_util"),
    ("dcgm_gr_engine_active", "dcgm", "gr_engine_active"),
    ("dcgm_sm_active", "dcgm", "sm_active"),
    ("dcgm_sm_occupancy", "dcgm", "sm_occupancy"),
    ("dcgm_tensor_active", "dcgm", "tensor_active"),
    ("nsys_sm_active", "nsys", "sm_active"),
    ("nsys_sm_issue", "nsys", "sm_issue"),
    ("nsys_tensor_active", "nsys", "tensor_active"),
] %}

{#- The CTE samples: gpu_samples with the instrument family (nvidia-smi, dcgm, nsys). -#}
{% macro samples() -%}
samples AS (
    SELECT
        s.run_id, s.device_index, s.ts_ns, s.metric, s.value,
        CASE WHEN s.instrument LIKE 'nvidia-smi%' THEN 'nvidia-smi'
             WHEN s.instrument LIKE 'dcgm%' THEN 'dcgm'
             ELSE s.instrument END AS family
    FROM gpu_samples AS s
)
{%- endmacro %}

{#- The CTEs windows (the union of the view's CTEs traced and untraced), steps,
intervals, presence and per_window: each instrument's samples in each window, placed by
the window's `window_start` column on the wall clock. -#}
{% macro monitor_values(window_start) -%}
windows AS (
    SELECT * FROM traced
    UNION ALL
    SELECT * FROM untraced
),
steps AS (
    SELECT run_id, family, metric,
           ts_ns - lag(ts_ns) OVER (PARTITION BY run_id, family, metric, device_index
                                    ORDER BY ts_ns) AS step_ns
    FROM samples
    WHERE ts_ns IS NOT NULL
),
intervals AS (
    SELECT run_id,
{%- for col, family, metric in instruments %}
        median(step_ns) FILTER (WHERE family = '{{ family }}' AND metric = '{{ metric }}')
            AS {{ col }}_interval_ns,
{%- endfor %}
        count(*) AS steps
    FROM steps
    WHERE step_ns > 0
    GROUP BY run_id
),
presence AS (
    SELECT run_id,
{%- for col, family, metric in instruments %}
        count(*) FILTER (WHERE family = '{{ family }}' AND metric = '{{ metric }}')
            AS {{ col }}_all,
        count(ts_ns) FILTER (WHERE family = '{{ family }}' AND metric = '{{ metric }}')
            AS {{ col }}_timed,
{%- endfor %}
        count(*) AS sample_rows
    FROM samples
    GROUP BY run_id
),
per_window AS (
    SELECT
        w.run_id, w.source_id, w.device_id, w.iteration, w.window_start_ns,
{%- for col, family, metric in instruments %}
        avg(s.value) FILTER (WHERE s.family = '{{ family }}' AND s.metric = '{{ metric }}')
            AS {{ col }}_mean,
        count(s.metric) FILTER (WHERE s.family = '{{ family }}' AND s.metric = '{{ metric }}')
            AS {{ col }}_n,
{%- endfor %}
        count(s.metric) AS window_samples
    FROM windows AS w
    LEFT JOIN samples AS s
      ON s.run_id = w.run_id
     AND (s.device_index = w.device_id OR s.device_index IS NULL OR w.device_id IS NULL)
     AND w.on_wall_clock
     AND (w.whole_run OR (s.ts_ns >= w.{{ window_start }}
                          AND s.ts_ns < w.{{ window_start }} + w.window_ns))
    GROUP BY w.run_id, w.source_id, w.device_id, w.iteration, w.window_start_ns
)
{%- endmacro %}

{#- Per instrument: its mean in the window, sample count, covered share and the reason it
is NULL (`off_clock_reason` when the window is not on the wall clock). -#}
{% macro monitor_columns(off_clock_reason) -%}
{%- for col, family, metric in instruments %}
    p.{{ col }}_mean AS {{ col }}_util,
    p.{{ col }}_n AS {{ col }}_samples,
    least(1.0, p.{{ col }}_n * i.{{ col }}_interval_ns / nullif(w.window_ns, 0))
        AS {{ col }}_covered_share,
    CASE WHEN p.{{ col }}_mean IS NOT NULL THEN NULL
         WHEN coalesce(a.{{ col }}_all, 0) = 0
             THEN 'no {{ family }} {{ metric }} samples in the run'
         WHEN NOT w.on_wall_clock
             THEN {{ off_clock_reason }}
         WHEN a.{{ col }}_timed = 0 AND NOT w.whole_run
             THEN 'the samples have no wall-clock time (gpu_samples.clock)'
         WHEN p.{{ col }}_n = 0 THEN 'no sample in the window'
         ELSE 'the samples in the window are N/A' END AS {{ col }}_reason,
{%- endfor %}
{%- endmacro %}

{#- The ncu levels of `run_utilization` for the window's source and device, the last
columns, and the FROM of the final SELECT. -#}
{% macro ncu_levels(run_utilization, no_counters_reason) -%}
    u.iteration AS ncu_iteration,
    u.smsp_active_util AS ncu_smsp_active_util,
    u.issue_slot_util AS ncu_issue_slot_util,
    u.tc_active_util AS ncu_tc_active_util,
    CASE WHEN u.run_id IS NULL THEN 'no ncu export matched to this trace source'
         WHEN u.smsp_active_util IS NULL
             THEN {{ no_counters_reason }}
         END AS ncu_reason
FROM windows AS w
JOIN per_window AS p
  ON p.run_id = w.run_id AND p.source_id IS NOT DISTINCT FROM w.source_id
 AND p.device_id IS NOT DISTINCT FROM w.device_id
 AND p.iteration IS NOT DISTINCT FROM w.iteration
 AND p.window_start_ns IS NOT DISTINCT FROM w.window_start_ns
LEFT JOIN presence AS a ON a.run_id = w.run_id
LEFT JOIN intervals AS i ON i.run_id = w.run_id
LEFT JOIN {{ run_utilization }} AS u
  ON u.run_id = w.run_id AND u.source_id = w.source_id AND u.device_id = w.device_id
{%- endmacro %}
