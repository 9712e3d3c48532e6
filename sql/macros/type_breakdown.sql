{#- type_breakdown.sql: an iteration window's time by kernel type, from the unions of typed
activity intervals clipped to the window (temporal_breakdown and comm_overlap up to v2,
which read the merged spans of _type_spans_v1 or the pieces of _type_coverage_v1: the
sums below are the same for both, since pieces cover their scope's union once).
`windows` has _iteration_windows' columns; `spans` has run_id, run_name, source_id,
device_id, scope, start_ns and end_ns; `spans_condition` narrows the spans joined
(as `s`). gpu_utilization's busy time up to v2 is clipped_scopes too. -#}

{#- The CTE `name`: per window, for each (alias, scope) of `scopes`, the ns of the scope's
intervals inside the window (0 when none); the spans are joined as `span`. -#}
{% macro clipped_scopes(windows, spans, scopes, spans_condition=none, name='clipped',
                        span='s') -%}
{{ name }} AS (
    SELECT
        w.run_id, w.run_name, w.source_id, w.device_id, w.host_start_ns, w.iteration,
{%- for alias, scope in scopes %}
        coalesce(sum(least({{ span }}.end_ns, w.window_end_ns)
                     - greatest({{ span }}.start_ns, w.window_start_ns))
                 FILTER (WHERE {{ span }}.scope = '{{ scope }}'), 0) AS {{ alias }}
                 {{- "," if not loop.last }}
{%- endfor %}
    FROM {{ windows }} AS w
    LEFT JOIN {{ spans }} AS {{ span }}
      ON {{ span }}.run_id = w.run_id AND {{ span }}.run_name = w.run_name
     AND {{ span }}.source_id = w.source_id AND {{ span }}.device_id = w.device_id
     {%- if spans_condition %} AND {{ spans_condition }}{% endif %}
     AND {{ span }}.start_ns < w.window_end_ns AND {{ span }}.end_ns > w.window_start_ns
    GROUP BY w.run_id, w.run_name, w.source_id, w.device_id, w.host_start_ns, w.iteration
)
{%- endmacro %}

{#- The windows joined to their clipped CTE (`w`, `c`). -#}
{% macro windows_with_clipped(windows) -%}
FROM {{ windows }} AS w
JOIN clipped AS c
  ON c.run_id = w.run_id AND c.run_name = w.run_name AND c.source_id = w.source_id
 AND c.device_id = w.device_id AND c.host_start_ns = w.host_start_ns
 AND c.iteration IS NOT DISTINCT FROM w.iteration
{%- endmacro %}

{#- temporal_breakdown: each instant of the window in the first of computation,
communication, memory, idle. -#}
{% macro temporal_breakdown(windows, spans, spans_condition=none) -%}
WITH {{ clipped_scopes(windows, spans, [('comp_ns', 'computation'),
                                         ('comp_comm_ns', 'computation_communication'),
                                         ('all_ns', 'all')], spans_condition) }}
SELECT
    w.run_id,
    w.run_name,
    w.source_id,
    w.rank,
    w.device_id,
    w.iteration,
    w.window_start_ns,
    w.window_end_ns - w.window_start_ns AS window_ns,
    c.comp_ns AS computation_ns,
    c.comp_comm_ns - c.comp_ns AS communication_ns,
    c.all_ns - c.comp_comm_ns AS memory_ns,
    w.window_end_ns - w.window_start_ns - c.all_ns AS idle_ns,
    CASE WHEN w.window_end_ns > w.window_start_ns
         THEN c.comp_ns / (w.window_end_ns - w.window_start_ns) END AS computation_share,
    CASE WHEN w.window_end_ns > w.window_start_ns
         THEN (c.comp_comm_ns - c.comp_ns) / (w.window_end_ns - w.window_start_ns) END
        AS communication_share,
    CASE WHEN w.window_end_ns > w.window_start_ns
         THEN (c.all_ns - c.comp_comm_ns) / (w.window_end_ns - w.window_start_ns) END
        AS memory_share,
    CASE WHEN w.window_end_ns > w.window_start_ns
         THEN (w.window_end_ns - w.window_start_ns - c.all_ns)
              / (w.window_end_ns - w.window_start_ns) END AS idle_share
{{ windows_with_clipped(windows) }}
{%- endmacro %}

{#- comm_overlap: communication hidden by computation, |Comm ∩ Comp| = |Comm| + |Comp| -
|Comm ∪ Comp|. -#}
{% macro comm_overlap(windows, spans, spans_condition=none) -%}
WITH {{ clipped_scopes(windows, spans, [('comp_ns', 'computation'),
                                         ('comm_ns', 'communication'),
                                         ('comp_comm_ns', 'computation_communication')],
                       spans_condition) }}
SELECT
    w.run_id,
    w.run_name,
    w.source_id,
    w.rank,
    w.device_id,
    w.iteration,
    w.window_end_ns - w.window_start_ns AS window_ns,
    c.comm_ns AS communication_ns,
    c.comp_ns AS computation_ns,
    c.comm_ns + c.comp_ns - c.comp_comm_ns AS overlapped_ns,
    c.comp_comm_ns - c.comp_ns AS exposed_communication_ns,
    (c.comm_ns + c.comp_ns - c.comp_comm_ns) / nullif(c.comm_ns, 0) AS comm_overlap_share
{{ windows_with_clipped(windows) }}
{%- endmacro %}
