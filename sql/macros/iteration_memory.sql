{#- iteration_memory.sql: peak device memory within each iteration window of `windows`
(_iteration_memory_v<N>): the larger of the level carried into the window (the last
memory event before it) and every event inside it. The carried level is found either by
joining every earlier event to the window (v1: arg_max, one of several events at the
same last instant) or, with `carried_by_sweep` (v2), in one sorted pass over the events
and the window starts (the largest of the events at that instant). -#}
{% macro iteration_memory(windows, carried_by_sweep) -%}
WITH gpu_memory AS (
    SELECT m.run_id, r.run_name, m.source_id, m.device_id, m.ts_ns, m.allocated_bytes,
           m.reserved_bytes
    FROM memory_events AS m
    JOIN runs AS r ON r.run_id = m.run_id
    WHERE m.device_type = 'GPU' AND m.device_id IS NOT NULL
),
described AS (
    SELECT DISTINCT run_id, run_name, source_id, device_id
    FROM gpu_memory
),
inside AS (
    SELECT w.run_id, w.run_name, w.source_id, w.device_id, w.window_start_ns, w.iteration,
           max(m.allocated_bytes) AS allocated_bytes, max(m.reserved_bytes) AS reserved_bytes
    FROM {{ windows }} AS w
    JOIN gpu_memory AS m
      ON m.run_id = w.run_id AND m.run_name = w.run_name AND m.source_id = w.source_id
     AND m.device_id = w.device_id
     AND m.ts_ns >= w.window_start_ns AND m.ts_ns <= w.window_end_ns
    GROUP BY w.run_id, w.run_name, w.source_id, w.device_id, w.window_start_ns, w.iteration
),
{%- if carried_by_sweep %}
timeline AS (
    -- memory events and window starts on one time line per device; at the same ns a window
    -- start sorts before the events, which are inside the window, not carried into it
    SELECT run_id, run_name, source_id, device_id, ts_ns, true AS is_event,
           allocated_bytes, reserved_bytes, CAST(NULL AS BIGINT) AS iteration
    FROM gpu_memory
    UNION ALL
    SELECT run_id, run_name, source_id, device_id, window_start_ns, false, NULL, NULL, iteration
    FROM {{ windows }}
),
last_before AS (
    -- for each window start, the instant of the last earlier event with allocated (reserved)
    -- bytes, in one sorted pass (v1 joined every earlier event to every window)
    SELECT run_id, run_name, source_id, device_id, ts_ns AS window_start_ns, iteration,
           is_event,
           max(CASE WHEN is_event AND allocated_bytes IS NOT NULL THEN ts_ns END) OVER earlier
               AS allocated_ts_ns,
           max(CASE WHEN is_event AND reserved_bytes IS NOT NULL THEN ts_ns END) OVER earlier
               AS reserved_ts_ns
    FROM timeline
    WINDOW earlier AS (PARTITION BY run_id, run_name, source_id, device_id
                       ORDER BY ts_ns, is_event ROWS UNBOUNDED PRECEDING)
),
carried AS (
    -- the level at that instant (the largest, when several events share it); two
    -- equi-joins, as one join on an OR of both instants pairs every window with every event
    SELECT b.run_id, b.run_name, b.source_id, b.device_id, b.window_start_ns, b.iteration,
           (SELECT max(m.allocated_bytes) FROM gpu_memory AS m
            WHERE m.run_id = b.run_id AND m.run_name = b.run_name
              AND m.source_id = b.source_id AND m.device_id = b.device_id
              AND m.ts_ns = b.allocated_ts_ns) AS allocated_bytes,
           (SELECT max(m.reserved_bytes) FROM gpu_memory AS m
            WHERE m.run_id = b.run_id AND m.run_name = b.run_name
              AND m.source_id = b.source_id AND m.device_id = b.device_id
              AND m.ts_ns = b.reserved_ts_ns) AS reserved_bytes
    FROM last_before AS b
    WHERE NOT b.is_event
),
{%- else %}
carried AS (
    SELECT w.run_id, w.run_name, w.source_id, w.device_id, w.window_start_ns, w.iteration,
           arg_max(m.allocated_bytes, m.ts_ns) AS allocated_bytes,
           arg_max(m.reserved_bytes, m.ts_ns) AS reserved_bytes
    FROM {{ windows }} AS w
    JOIN gpu_memory AS m
      ON m.run_id = w.run_id AND m.run_name = w.run_name AND m.source_id = w.source_id
     AND m.device_id = w.device_id AND m.ts_ns < w.window_start_ns
    GROUP BY w.run_id, w.run_name, w.source_id, w.device_id, w.window_start_ns, w.iteration
),
{%- endif %}
peaks AS (
    SELECT w.run_id, w.run_name, w.source_id, w.device_id, w.iteration, w.window_start_ns,
           (s.device_id IS NOT NULL) AS has_memory_events,
           -- greatest skips NULLs: a window without events inside keeps the carried level
           greatest(i.allocated_bytes, c.allocated_bytes) AS peak_allocated_bytes,
           greatest(i.reserved_bytes, c.reserved_bytes) AS peak_reserved_bytes
    FROM {{ windows }} AS w
    LEFT JOIN described AS s
      ON s.run_id = w.run_id AND s.run_name = w.run_name AND s.source_id = w.source_id
     AND s.device_id = w.device_id
    LEFT JOIN inside AS i
      ON i.run_id = w.run_id AND i.run_name = w.run_name AND i.source_id = w.source_id
     AND i.device_id = w.device_id AND i.window_start_ns = w.window_start_ns
     AND i.iteration IS NOT DISTINCT FROM w.iteration
    LEFT JOIN carried AS c
      ON c.run_id = w.run_id AND c.run_name = w.run_name AND c.source_id = w.source_id
     AND c.device_id = w.device_id AND c.window_start_ns = w.window_start_ns
     AND c.iteration IS NOT DISTINCT FROM w.iteration
)
SELECT
    p.run_id,
    p.run_name,
    p.source_id,
    p.device_id,
    p.iteration,
    p.window_start_ns,
    p.peak_allocated_bytes,
    p.peak_reserved_bytes,
    d.memory_bytes AS device_memory_bytes,
    p.peak_allocated_bytes / nullif(d.memory_bytes, 0) AS peak_memory_share,
    CASE WHEN NOT p.has_memory_events THEN 'no_memory_events'
         WHEN p.peak_allocated_bytes IS NULL THEN 'no_allocated_bytes'
         WHEN d.memory_bytes IS NULL THEN 'device_memory_unknown'
         ELSE 'measured' END AS memory_status
FROM peaks AS p
LEFT JOIN devices AS d
  ON d.run_id = p.run_id AND d.source_id = p.source_id AND d.device_id = p.device_id
{%- endmacro %}
