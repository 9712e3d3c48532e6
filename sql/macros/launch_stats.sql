{#- launch_stats.sql: the CTEs of launch_stats_v<N>: each activity with its launch call,
whether the call is a graph launch, the calls' statistics once per call, and the
activities' statistics per name (v1 shares which activities are read). -#}

{#- The kernels, copies and sets with a timed launch call (kernels AS k, runs AS r, the call
as host_events AS h). -#}
{% macro with_launch_call() -%}
    FROM kernels AS k
    JOIN runs AS r ON r.run_id = k.run_id
    JOIN host_events AS h
      ON h.run_id = k.run_id AND h.source_id = k.source_id AND h.event_id = k.launch_event_id
    WHERE k.kernel_type IN ('computation', 'communication', 'memory')
      AND k.ts_ns IS NOT NULL AND k.dur_ns >= 0 AND h.ts_ns IS NOT NULL AND h.dur_ns >= 0
{%- endmacro %}

{#- launched: each kernel, copy or set with its launch call (kernels.launch_event_id) and
how many activities that call enqueued; `first_of_call` adds whether the activity is the
call's first (earliest start, then lowest kernel_id). -#}
{% macro launched(first_of_call=false) -%}
launched AS (
    SELECT k.run_id, r.run_name, k.source_id, k.rank, k.name, k.kernel_type,
           k.launch_event_id, h.name AS call_name,
           k.dur_ns, h.dur_ns AS launch_ns,
           greatest(k.ts_ns - (h.ts_ns + h.dur_ns), 0) AS launch_delay_ns,
           k.ts_ns - h.ts_ns AS queue_delay_ns,
           count(*) OVER (PARTITION BY k.run_id, k.source_id, k.launch_event_id)
               AS call_activities
{%- if first_of_call %},
           row_number() OVER (PARTITION BY k.run_id, k.source_id, k.launch_event_id
                              ORDER BY k.ts_ns, k.kernel_id) = 1 AS first_of_call
{%- endif %}
{{ with_launch_call() }}
)
{%- endmacro %}

{#- The CTE `name`: launched with graph_launch, true for the activities of a graph launch
(a call that enqueued several activities, or named *GraphLaunch). -#}
{% macro graphed(name) -%}
{{ name }} AS (
    SELECT *,
           call_activities > 1 OR regexp_matches(call_name, '(?i)graphlaunch') AS graph_launch
    FROM launched
)
{%- endmacro %}

{#- calls and call_stats: each launch call once per name (from `typed`), then their count,
mean and longest duration and the calls over 50 µs. -#}
{% macro call_stats() -%}
calls AS (
    -- each launch call once per name, for the call's own statistics
    SELECT run_id, run_name, source_id, name, kernel_type, graph_launch, launch_event_id,
           any_value(launch_ns) AS launch_ns
    FROM typed
    GROUP BY run_id, run_name, source_id, name, kernel_type, graph_launch, launch_event_id
),
call_stats AS (
    SELECT run_id, run_name, source_id, name, kernel_type, graph_launch,
           count(*) AS launch_call_count, avg(launch_ns) AS mean_launch_ns,
           max(launch_ns) AS max_launch_ns,
           count(*) FILTER (WHERE launch_ns > 50000) AS call_outlier_count
    FROM calls
    GROUP BY run_id, run_name, source_id, name, kernel_type, graph_launch
)
{%- endmacro %}

{#- kernel_stats: the activities of `typed` per name, their delays read from the columns
`delay` and `queue` (NULL where a delay is not counted); `delay_count` adds how many
delays are counted. -#}
{% macro kernel_stats(delay='launch_delay_ns', queue='queue_delay_ns', delay_count=false) -%}
kernel_stats AS (
    SELECT run_id, run_name, source_id, rank, name, kernel_type, graph_launch,
           count(*) AS launch_count,
{%- if delay_count %}
           count({{ delay }}) AS delay_count,
{%- endif %}
           avg({{ delay }}) AS mean_launch_delay_ns,
           quantile_disc({{ delay }}, 0.9) AS p90_launch_delay_ns,
           avg({{ queue }}) AS mean_queue_delay_ns,
           avg(dur_ns) AS mean_kernel_ns,
           count(*) FILTER (WHERE dur_ns < launch_ns AND launch_ns <= 50000)
               AS short_kernel_count,
           count(*) FILTER (WHERE {{ delay }} > 100000) AS delay_outlier_count
    FROM typed
    GROUP BY run_id, run_name, source_id, rank, name, kernel_type, graph_launch
)
{%- endmacro %}

{#- The activities' statistics beside their calls', by name and graph_launch. -#}
{% macro stats_joined() -%}
FROM kernel_stats AS k
JOIN call_stats AS c
  ON c.run_id = k.run_id AND c.run_name = k.run_name AND c.source_id = k.source_id
 AND c.name = k.name AND c.kernel_type = k.kernel_type AND c.graph_launch = k.graph_launch
{%- endmacro %}
