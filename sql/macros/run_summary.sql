{#- run_summary.sql: one representative iteration per run, rank and device, chosen among the
rows of `gpu_utilization` (run_summary_v<N>).

The 5% rule (v1): the first iteration, in step order, whose window is within 5% of the
device's median window, else the one closest to the median. With `complete_first` (v2
on), complete iterations come first, then those without kernels lacking a launch call,
then the 5% rule over the median of the complete ones; `selection_note` says which were
passed over. With `memory` (v3 on), the selected iteration's peak memory columns. -#}
{% macro run_summary(gpu_utilization, complete_first, memory) -%}
{%- set device = "PARTITION BY g.run_id, g.run_name, g.source_id, g.device_id" %}
{%- set within_5pct = "abs(window_ns - median_window_ns) <= 0.05 * median_window_ns" %}
WITH ranked AS (
    SELECT
        g.*,
{%- if complete_first %}
        median(CASE WHEN g.complete THEN g.window_ns END)
            OVER ({{ device }})
            AS median_window_ns,
        count(*) OVER ({{ device }})
            AS iteration_count,
        count(CASE WHEN NOT g.complete THEN 1 END)
            OVER ({{ device }})
            AS incomplete_count,
        min(CASE WHEN NOT g.complete THEN g.iteration END)
            OVER ({{ device }})
            AS first_incomplete,
        count(CASE WHEN g.complete AND g.unlaunched_kernel_count > 0 THEN 1 END)
            OVER ({{ device }})
            AS unlaunched_count,
        min(CASE WHEN g.complete AND g.unlaunched_kernel_count > 0 THEN g.iteration END)
            OVER ({{ device }})
            AS first_unlaunched
{%- else %}
        median(g.window_ns) OVER ({{ device }})
            AS median_window_ns,
        count(*) OVER ({{ device }})
            AS iteration_count
{%- endif %}
    FROM {{ gpu_utilization }} AS g
),
scored AS (
    SELECT *,
           {% if complete_first %}complete AND {% endif %}{{ within_5pct }} AS stable,
           row_number() OVER (
               PARTITION BY run_id, run_name, source_id, device_id
               ORDER BY {% if complete_first -%}
                        complete DESC,
                        (unlaunched_kernel_count = 0) DESC,
                        {% endif -%}
                        ({{ within_5pct }}) DESC,
                        CASE WHEN {{ within_5pct }}
                             THEN 0 ELSE abs(window_ns - median_window_ns) END,
                        window_start_ns
           ) AS pick
    FROM ranked
)
SELECT
    s.run_id,
    s.run_name,
    s.source_id,
    s.rank,
    s.device_id,
    d.name AS device_name,
    s.iteration AS selected_iteration,
    CASE {% if complete_first %}WHEN NOT s.complete THEN 'none_complete'
         {% endif %}WHEN s.iteration IS NULL THEN 'whole_trace'
         WHEN s.stable THEN 'first_within_5pct_of_median'
         ELSE 'closest_to_median' END AS selection,
{%- if complete_first %}
    nullif(concat_ws('; ',
        CASE WHEN s.incomplete_count > 0
             THEN 'passed over as incomplete (truncated source): '
                  || CAST(s.incomplete_count AS VARCHAR) || ' iteration(s), the first '
                  || CAST(s.first_incomplete AS VARCHAR) END,
        CASE WHEN s.unlaunched_kernel_count > 0
             THEN 'every complete iteration holds kernels without a launch call in the trace'
             WHEN s.unlaunched_count > 0
             THEN 'passed over for kernels without a launch call in the trace: '
                  || CAST(s.unlaunched_count AS VARCHAR) || ' iteration(s), the first '
                  || CAST(s.first_unlaunched AS VARCHAR) END), '') AS selection_note,
    s.iteration_count,
    s.unlaunched_kernel_count,
{%- if memory %}
    s.peak_allocated_bytes,
    s.peak_reserved_bytes,
    s.peak_memory_share,
    s.memory_status,
{%- endif %}
{%- else %}
    s.iteration_count,
{%- endif %}
    s.median_window_ns,
    s.window_ns,
    s.busy_ns,
    s.gpu_util,
    s.activity_util,
    s.kernel_count,
    s.kernel_time_ns,
    s.window_ns - s.busy_ns AS idle_ns,
    CASE WHEN s.window_ns > 0 THEN r.batch_size * 1e9 / s.window_ns END
        AS throughput_samples_per_s,
    r.model,
    r.framework,
    r.framework_version,
    r.exec_mode,
    r.precision,
    r.batch_size,
    coalesce(d.name, r.gpu) AS gpu
FROM scored AS s
JOIN runs AS r ON r.run_id = s.run_id AND r.run_name = s.run_name
LEFT JOIN devices AS d
  ON d.run_id = s.run_id AND d.source_id = s.source_id AND d.device_id = s.device_id
WHERE s.pick = 1
{%- endmacro %}
