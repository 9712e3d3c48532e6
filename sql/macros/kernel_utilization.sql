{#- kernel_utilization.sql: each trace kernel matched to an ncu kernel, with its ncu levels
(kernel_utilization_v<N>); with `layers` (v2), the kernel's layer_kind, pass and
layer_status. -#}
{% macro kernel_utilization(layers) -%}
SELECT
    k.run_id,
    r.run_name,
    k.source_id,
    k.rank,
    k.device_id,
    k.kernel_id,
    m.ncu_source_id,
    m.ncu_id,
    m.score,
    k.name,
    k.op_name,
    k.layer,
    k.iteration,
    k.dur_ns,
    u.duration_ns AS ncu_duration_ns,
    u.smsp_active_util,
    u.issue_slot_util,
    u.tc_active_util,
    u.tc_issue_util,
    u.tc_inst_share,
    u.tc_active_share
{%- if layers %},
    k.layer_kind,
    k.pass,
    k.layer_status
{%- endif %}
FROM kernel_match AS m
JOIN kernels AS k
  ON k.run_id = m.run_id AND k.source_id = m.source_id AND k.kernel_id = m.kernel_id
JOIN ncu_kernel_utilization_v1 AS u
  ON u.run_id = m.run_id AND u.ncu_source_id = m.ncu_source_id AND u.ncu_id = m.ncu_id
JOIN runs AS r ON r.run_id = m.run_id
WHERE m.match_status = 'matched'
{%- endmacro %}
