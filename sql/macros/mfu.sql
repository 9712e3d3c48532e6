{#- mfu.sql: model FLOP utilization per iteration window of `windows` (mfu_v<N>): the flops of
the outermost operators that launched kernels on the device (_flops_ops_v1) over the
window, against the device's dense peak for the run's precision (gpu_peaks). With
`known_name_first` (v2 on), a device name the catalog does not know gives way to runs.gpu
when the catalog knows that. `catalog` is the file the reasons name. With `with_costs`
(v4 on), an operator's flops are op_flops_v2's (PyTorch's, else its kernels' costs from
their input shapes: kernel_costs), and the rows say their flops_source. -#}
{% macro mfu(windows, known_name_first, catalog, with_costs=false) -%}
WITH device_ops AS (
    SELECT DISTINCT run_id, source_id, device_id, op_event_id
    FROM kernels
    WHERE kind = 'kernel' AND op_event_id IS NOT NULL AND device_id IS NOT NULL
),
{%- if with_costs %}
window_flops AS (
    SELECT o.run_id, o.source_id, d.device_id, o.iteration, sum(o.flops) AS flops,
           CASE WHEN count(DISTINCT o.flops_source) > 1 THEN 'mixed'
                ELSE any_value(o.flops_source) END AS flops_source
    FROM op_flops_v2 AS o
    JOIN device_ops AS d
      ON d.run_id = o.run_id AND d.source_id = o.source_id AND d.op_event_id = o.op_event_id
    WHERE o.flops IS NOT NULL
    GROUP BY o.run_id, o.source_id, d.device_id, o.iteration
),
sources_with_flops AS (
    SELECT DISTINCT run_id, source_id FROM host_events WHERE flops IS NOT NULL
    UNION
    SELECT DISTINCT run_id, source_id FROM kernel_costs WHERE flops IS NOT NULL
),
computed AS (
    SELECT DISTINCT run_id FROM kernel_costs
),
{%- else %}
window_flops AS (
    SELECT f.run_id, f.source_id, d.device_id, f.iteration, sum(f.flops) AS flops
    FROM _flops_ops_v1 AS f
    JOIN device_ops AS d
      ON d.run_id = f.run_id AND d.source_id = f.source_id AND d.op_event_id = f.op_event_id
    GROUP BY f.run_id, f.source_id, d.device_id, f.iteration
),
sources_with_flops AS (
    SELECT DISTINCT run_id, source_id FROM host_events WHERE flops IS NOT NULL
),
{%- endif %}
windows AS (
    SELECT
        w.run_id, w.run_name, w.source_id, w.rank, w.device_id, w.iteration,
        w.window_start_ns, w.window_end_ns, w.complete,
{%- if known_name_first %}
        CASE WHEN lower(trim(dv.name)) IN (SELECT gpu_key FROM gpu_peaks) THEN dv.name
             WHEN lower(trim(r.gpu)) IN (SELECT gpu_key FROM gpu_peaks) THEN r.gpu
             ELSE coalesce(dv.name, r.gpu) END AS gpu_name,
{%- else %}
        coalesce(dv.name, r.gpu) AS gpu_name,
{%- endif %}
        lower(trim(r.precision)) AS run_precision,
        CASE WHEN s.source_id IS NOT NULL THEN coalesce(wf.flops, 0) END AS flops
{%- if with_costs %},
        wf.flops_source,
        m.run_id IS NOT NULL AS costs_computed
{%- endif %}
    FROM {{ windows }} AS w
    JOIN runs AS r ON r.run_id = w.run_id
    LEFT JOIN devices AS dv
      ON dv.run_id = w.run_id AND dv.source_id = w.source_id AND dv.device_id = w.device_id
    LEFT JOIN sources_with_flops AS s ON s.run_id = w.run_id AND s.source_id = w.source_id
    LEFT JOIN window_flops AS wf
      ON wf.run_id = w.run_id AND wf.source_id = w.source_id AND wf.device_id = w.device_id
     AND wf.iteration IS NOT DISTINCT FROM w.iteration
{%- if with_costs %}
    LEFT JOIN computed AS m ON m.run_id = w.run_id
{%- endif %}
),
peaks AS (
    SELECT w.*, pp.peak_precision, gp.peak_flops_per_s,
           flops / nullif(window_end_ns - window_start_ns, 0) * 1e9 AS achieved_flops_per_s,
           EXISTS (SELECT 1 FROM gpu_peaks AS g
                   WHERE g.gpu_key = lower(trim(w.gpu_name))) AS gpu_known
    FROM windows AS w
    LEFT JOIN peak_precisions AS pp ON pp.run_precision = w.run_precision
    LEFT JOIN gpu_peaks AS gp
      ON gp.gpu_key = lower(trim(w.gpu_name)) AND gp.peak_precision = pp.peak_precision
)
SELECT
    run_id,
    run_name,
    source_id,
    rank,
    device_id,
    iteration,
    window_start_ns,
    window_end_ns,
    complete,
    flops,
{%- if with_costs %}
    flops_source,
{%- endif %}
    achieved_flops_per_s,
    gpu_name,
    run_precision,
    peak_precision,
    peak_flops_per_s,
    achieved_flops_per_s / nullif(peak_flops_per_s, 0) AS mfu_util,
    CASE
{%- if with_costs %}
        WHEN flops IS NULL AND NOT costs_computed
            THEN 'no flops in the trace (profile with with_flops=True), and kernel costs not '
                 || 'computed (etl costs)'
        WHEN flops IS NULL
            THEN 'no flops in the trace (with_flops=True) and none from input shapes '
                 || '(record_shapes=True)'
{%- else %}
        WHEN flops IS NULL THEN 'no flops in the trace (profile with with_flops=True)'
{%- endif %}
        WHEN window_end_ns <= window_start_ns THEN 'empty iteration window'
        WHEN run_precision IS NULL THEN 'runs.precision not given (run.toml precision)'
        WHEN peak_precision IS NULL
            THEN 'precision ' || run_precision || ' not in {{ catalog }} [precisions]'
        WHEN gpu_name IS NULL THEN 'GPU model unknown (no device name, no run.toml gpu)'
        WHEN NOT gpu_known THEN 'GPU ' || gpu_name || ' not in {{ catalog }}'
        WHEN peak_flops_per_s IS NULL
            THEN 'no ' || peak_precision || ' peak for ' || gpu_name || ' in {{ catalog }}'
    END AS mfu_reason
FROM peaks
{%- endmacro %}
