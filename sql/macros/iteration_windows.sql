{#- iteration_windows.sql: the iteration windows of gpu_utilization (_iteration_windows_v<N>).

K_i, the kernels of iteration i, meet their iteration either by one join on an OR of the
two boundary kinds (v1, v2) or by two equi-joins, one per kind (`equi_joins`, v3: the
same pairs, without a join on run and source alone). With `completeness` (v2, v3), each
window carries the iteration's complete and cut and counts the kernels without a launch
call that run inside it. -#}
{% macro iteration_windows(equi_joins, completeness) -%}
WITH gpu_devices AS (
    SELECT DISTINCT k.run_id, r.run_name, k.source_id, k.device_id
    FROM kernels AS k
    JOIN runs AS r ON r.run_id = k.run_id
    WHERE k.kind = 'kernel' AND k.device_id IS NOT NULL
),
{%- if equi_joins %}
launched_pairs AS (
    -- the two kinds of boundary apart, each an equi-join (one OR of both made a join on
    -- run and source alone: kernels x iterations rows, filtered afterwards)
    SELECT k.run_id, r.run_name, k.source_id, k.device_id, it.iteration, it.start_ns AS hs,
           k.ts_ns, k.dur_ns
    FROM kernels AS k
    JOIN runs AS r ON r.run_id = k.run_id
    JOIN iterations AS it
      ON it.run_id = k.run_id AND it.source_id = k.source_id AND it.iteration = k.iteration
    WHERE it.boundary = 'ProfilerStep' AND k.kind = 'kernel' AND k.device_id IS NOT NULL
    UNION ALL
    SELECT k.run_id, r.run_name, k.source_id, k.device_id, it.iteration, it.start_ns AS hs,
           k.ts_ns, k.dur_ns
    FROM kernels AS k
    JOIN runs AS r ON r.run_id = k.run_id
    JOIN iterations AS it ON it.run_id = k.run_id AND it.source_id = k.source_id
    WHERE it.boundary = 'whole_trace' AND k.launch_event_id IS NOT NULL
      AND k.kind = 'kernel' AND k.device_id IS NOT NULL
),
launched AS (
    SELECT
        run_id, run_name, source_id, device_id, iteration, hs,
        count(*) AS kernel_count,
        min(ts_ns) FILTER (WHERE ts_ns IS NOT NULL AND dur_ns >= 0) AS first_start_ns,
        max(ts_ns + dur_ns) FILTER (WHERE ts_ns IS NOT NULL AND dur_ns >= 0) AS last_end_ns
    FROM launched_pairs
    GROUP BY run_id, run_name, source_id, device_id, iteration, hs
),
{%- else %}
launched AS (
    SELECT
        k.run_id, r.run_name, k.source_id, k.device_id, it.iteration, it.start_ns AS hs,
        count(*) AS kernel_count,
        min(k.ts_ns) FILTER (WHERE k.ts_ns IS NOT NULL AND k.dur_ns >= 0) AS first_start_ns,
        max(k.ts_ns + k.dur_ns) FILTER (WHERE k.ts_ns IS NOT NULL AND k.dur_ns >= 0)
            AS last_end_ns
    FROM kernels AS k
    JOIN runs AS r ON r.run_id = k.run_id
    JOIN iterations AS it
      ON it.run_id = k.run_id AND it.source_id = k.source_id
     AND ((it.boundary = 'ProfilerStep' AND k.iteration = it.iteration)
          OR (it.boundary = 'whole_trace' AND k.launch_event_id IS NOT NULL))
    WHERE k.kind = 'kernel' AND k.device_id IS NOT NULL
    GROUP BY k.run_id, r.run_name, k.source_id, k.device_id, it.iteration, it.start_ns
),
{%- endif %}
raw AS (
    SELECT
        it.run_id, r.run_name, it.source_id, it.rank, d.device_id, it.iteration,
        it.start_ns AS hs, it.end_ns AS he, {%- if completeness %} it.complete, it.cut,{% endif %}
        coalesce(l.kernel_count, 0) AS kernel_count,
        least(it.start_ns, coalesce(l.first_start_ns, it.start_ns)) AS raw_start_ns,
        greatest(it.end_ns, coalesce(l.last_end_ns, it.end_ns)) AS raw_end_ns
    FROM iterations AS it
    JOIN runs AS r ON r.run_id = it.run_id
    JOIN gpu_devices AS d
      ON d.run_id = it.run_id AND d.run_name = r.run_name AND d.source_id = it.source_id
    LEFT JOIN launched AS l
      ON l.run_id = it.run_id AND l.run_name = d.run_name AND l.source_id = it.source_id
     AND l.device_id = d.device_id
     AND l.hs = it.start_ns AND l.iteration IS NOT DISTINCT FROM it.iteration
),
raised AS (
    SELECT *,
           greatest(raw_start_ns, coalesce(max(raw_end_ns) OVER (
               PARTITION BY run_id, run_name, source_id, device_id
               ORDER BY hs, he, iteration
               ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), raw_start_ns))
               AS window_start_ns
    FROM raw
)
{%- if completeness %},
windows AS (
    SELECT *, greatest(raw_end_ns, window_start_ns) AS window_end_ns
    FROM raised
),
unlaunched AS (
    SELECT w.run_id, w.run_name, w.source_id, w.device_id, w.hs, w.iteration,
           count(k.kernel_id) AS unlaunched_kernel_count
    FROM windows AS w
    JOIN kernels AS k
      ON k.run_id = w.run_id AND k.source_id = w.source_id AND k.device_id = w.device_id
     AND k.ts_ns < w.window_end_ns AND k.ts_ns + k.dur_ns > w.window_start_ns
    WHERE k.kind = 'kernel' AND k.launch_event_id IS NULL
    GROUP BY w.run_id, w.run_name, w.source_id, w.device_id, w.hs, w.iteration
)
{%- endif %}
SELECT
    run_id,
    run_name,
    source_id,
    rank,
    device_id,
    iteration,
    hs AS host_start_ns,
    he AS host_end_ns,
    kernel_count,
    window_start_ns,
{%- if completeness %}
    window_end_ns,
    complete,
    cut,
    coalesce(u.unlaunched_kernel_count, 0) AS unlaunched_kernel_count
FROM windows
LEFT JOIN unlaunched AS u USING (run_id, run_name, source_id, device_id, hs, iteration)
{%- else %}
    greatest(raw_end_ns, window_start_ns) AS window_end_ns
FROM raised
{%- endif %}
{%- endmacro %}
