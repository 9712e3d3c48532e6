{#- batch_scaling.sql: throughput, memory and utilization against batch size, per configuration
(batch_scaling_v<N>), from each device's representative iteration (`run_summary`) and its
ncu levels (`run_utilization`). -#}
{% macro batch_scaling(run_summary, run_utilization) -%}
WITH devices_summary AS (
    SELECT
        s.run_id, s.source_id, s.device_id, s.model, s.framework, s.exec_mode, s.precision,
        s.gpu, s.batch_size, s.throughput_samples_per_s, s.gpu_util, s.peak_memory_share,
        s.peak_allocated_bytes, u.smsp_active_util, u.issue_slot_util, u.tc_active_util
    FROM {{ run_summary }} AS s
    LEFT JOIN {{ run_utilization }} AS u
      ON u.run_id = s.run_id AND u.source_id = s.source_id AND u.device_id = s.device_id
    WHERE s.batch_size IS NOT NULL
),
configurations AS (
    SELECT
        model, framework, exec_mode, precision, gpu, batch_size,
        count(DISTINCT run_id) AS run_count,
        count(*) AS device_count,
        avg(throughput_samples_per_s) AS throughput_samples_per_s,
        avg(gpu_util) AS gpu_util,
        max(peak_memory_share) AS peak_memory_share,
        max(peak_allocated_bytes) AS peak_allocated_bytes,
        avg(smsp_active_util) AS smsp_active_util,
        avg(issue_slot_util) AS issue_slot_util,
        avg(tc_active_util) AS tc_active_util
    FROM devices_summary
    GROUP BY model, framework, exec_mode, precision, gpu, batch_size
),
with_smaller AS (
    SELECT *,
           lag(batch_size) OVER same_configuration AS smaller_batch_size,
           lag(throughput_samples_per_s) OVER same_configuration AS smaller_throughput
    FROM configurations
    WINDOW same_configuration AS (
        PARTITION BY model, framework, exec_mode, precision, gpu ORDER BY batch_size)
)
SELECT
    c.model,
    c.framework,
    c.exec_mode,
    c.precision,
    c.gpu,
    c.batch_size,
    c.run_count,
    c.device_count,
    c.throughput_samples_per_s,
    c.gpu_util,
    c.smsp_active_util,
    c.issue_slot_util,
    c.tc_active_util,
    c.peak_allocated_bytes,
    c.peak_memory_share,
    c.smaller_batch_size,
    c.throughput_samples_per_s / nullif(c.smaller_throughput, 0) AS throughput_gain_ratio,
    b.throughput_samples_per_s AS eager_fp32_throughput_samples_per_s,
    c.throughput_samples_per_s / nullif(b.throughput_samples_per_s, 0) AS eager_fp32_ratio
FROM with_smaller AS c
LEFT JOIN configurations AS b
  ON b.model IS NOT DISTINCT FROM c.model AND b.framework IS NOT DISTINCT FROM c.framework
 AND b.gpu IS NOT DISTINCT FROM c.gpu AND b.batch_size = c.batch_size
 AND lower(b.exec_mode) = 'eager' AND lower(b.precision) = 'fp32'
{%- endmacro %}
