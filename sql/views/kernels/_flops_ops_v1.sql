-- _flops_ops: private helper. The operators that recorded flops, each with the outermost
-- operator enclosing it that launched kernels (the op kernels.op_event_id names).
-- Grain: one row per host event with flops (host_events.flops, PyTorch's with_flops=True).
-- PyTorch records flops on the op that has a formula (aten::addmm, aten::mm, aten::conv2d,
-- ...), often not the outermost op the kernels are attributed to (aten::linear encloses
-- aten::addmm; an autograd evaluate_function encloses the backward's aten::mm). An event is
-- inside an outermost op when it lies within the op's span on the op's thread: outermost
-- ops of one thread never overlap, so a sweep in start order finds it (the latest
-- outermost op started at or before the event, if the event ends within it).
-- [project] The attribution of flops to the op that launched the kernels is this project's.
WITH outer_ops AS (
    SELECT DISTINCT h.run_id, h.source_id, h.pid, h.tid, h.event_id, h.ts_ns,
           h.ts_ns + h.dur_ns AS end_ns
    FROM host_events AS h
    JOIN (SELECT DISTINCT run_id, source_id, op_event_id FROM kernels
          WHERE op_event_id IS NOT NULL) AS k
      ON k.run_id = h.run_id AND k.source_id = h.source_id AND k.op_event_id = h.event_id
    WHERE h.ts_ns IS NOT NULL AND h.dur_ns >= 0
),
points AS (
    SELECT run_id, source_id, pid, tid, ts_ns, 0 AS is_flops_event, event_id AS op_id,
           end_ns AS op_end_ns, CAST(NULL AS BIGINT) AS event_id,
           CAST(NULL AS BIGINT) AS end_ns, CAST(NULL AS BIGINT) AS flops
    FROM outer_ops
    UNION ALL
    SELECT run_id, source_id, pid, tid, ts_ns, 1 AS is_flops_event,
           CAST(NULL AS BIGINT) AS op_id, CAST(NULL AS BIGINT) AS op_end_ns, event_id,
           ts_ns + coalesce(dur_ns, 0) AS end_ns, flops
    FROM host_events
    WHERE flops IS NOT NULL
),
swept AS (
    SELECT *,
           last_value(op_id IGNORE NULLS) OVER w AS enclosing_op_id,
           last_value(op_end_ns IGNORE NULLS) OVER w AS enclosing_end_ns
    FROM points
    WINDOW w AS (PARTITION BY run_id, source_id, pid, tid ORDER BY ts_ns, is_flops_event
                 ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
)
SELECT
    s.run_id,
    s.source_id,
    s.event_id,
    h.name,
    h.iteration,
    s.flops,
    CASE WHEN s.end_ns <= s.enclosing_end_ns THEN s.enclosing_op_id END AS op_event_id
FROM swept AS s
JOIN host_events AS h
  ON h.run_id = s.run_id AND h.source_id = s.source_id AND h.event_id = s.event_id
WHERE s.is_flops_event = 1
-- run_id: run; joins runs.run_id
-- source_id: trace source within the run
-- event_id: the host event that recorded flops; joins host_events.event_id
-- name: its name (e.g. aten::addmm)
-- iteration: host_events.iteration of that event; NULL outside every step
-- flops: host_events.flops, FLOP
-- op_event_id: the outermost operator enclosing it that launched kernels (kernels.op_event_id); NULL when no such op encloses it (a CPU-only op, or ts NULL)
