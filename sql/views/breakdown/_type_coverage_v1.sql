{% from 'intervals.sql' import earlier_ends -%}
-- _type_coverage: private helper. GPU activity intervals cut into disjoint pieces whose
-- union, per scope, is the union of the scope's intervals: what _type_spans_v1 and
-- _busy_intervals_v1 give as merged spans, in one sorted pass instead of two.
-- Grain: one row per run, source, device, scope and activity that adds time to its scope.
-- Sorted by start (then end) on each device, an activity adds [max(start, latest end of the
-- earlier activities of the scope), end] when that is not empty; these pieces never
-- overlap, and they cover the same instants as the merged spans, so lengths clipped to a
-- window add up to the same ns. scope 'computation', 'communication',
-- 'computation_communication' and 'all' are _type_spans_v1's (kernel_type from
-- etl/extract/kernel_types.toml); 'activity' is _busy_intervals_v1's (every kernel, copy and
-- set, whatever its type). Activities without a device, a start or a non-negative duration
-- cannot be placed and are left out (flagged at ingest).
-- [project] The sweep that merges intervals, written so that one window pass gives the
-- latest earlier end of every scope at once.
WITH placed AS (
    SELECT k.run_id, r.run_name, k.source_id, k.device_id, k.kernel_type,
           k.kind IN ('kernel', 'memcpy', 'memset') AS is_activity,
           k.ts_ns AS start_ns, k.ts_ns + k.dur_ns AS end_ns
    FROM kernels AS k
    JOIN runs AS r ON r.run_id = k.run_id
    WHERE (k.kernel_type IN ('computation', 'communication', 'memory')
           OR k.kind IN ('kernel', 'memcpy', 'memset'))
      AND k.device_id IS NOT NULL AND k.ts_ns IS NOT NULL AND k.dur_ns >= 0
),
earlier AS (
    -- each activity's earlier end in each scope (intervals.sql)
    {{ earlier_ends('placed', ['run_id', 'run_name', 'source_id', 'device_id'], [
        ("comp_end_ns", "kernel_type = 'computation'"),
        ("comm_end_ns", "kernel_type = 'communication'"),
        ("memory_end_ns", "kernel_type = 'memory'"),
        ("activity_end_ns", "is_activity")]) }}
),
scoped AS (
    SELECT e.run_id, e.run_name, e.source_id, e.device_id, s.scope, e.end_ns,
           greatest(e.start_ns, CASE s.scope
               WHEN 'computation' THEN e.comp_end_ns
               WHEN 'communication' THEN e.comm_end_ns
               WHEN 'computation_communication' THEN greatest(e.comp_end_ns, e.comm_end_ns)
               WHEN 'all' THEN greatest(e.comp_end_ns, e.comm_end_ns, e.memory_end_ns)
               ELSE e.activity_end_ns END) AS start_ns
    FROM earlier AS e
    JOIN (VALUES ('computation', 'computation'),
                 ('communication', 'communication'),
                 ('computation', 'computation_communication'),
                 ('communication', 'computation_communication'),
                 ('computation', 'all'),
                 ('communication', 'all'),
                 ('memory', 'all')) AS s(kernel_type, scope)
      ON s.kernel_type = e.kernel_type
    UNION ALL
    SELECT run_id, run_name, source_id, device_id, 'activity' AS scope, end_ns,
           greatest(start_ns, activity_end_ns) AS start_ns
    FROM earlier
    WHERE is_activity
)
SELECT
    run_id,
    run_name,
    source_id,
    device_id,
    scope,
    start_ns,
    end_ns
FROM scoped
WHERE end_ns > start_ns
-- run_id: run; joins runs.run_id
-- run_name: the run folder's name (carried so that a filter on it reaches the scans)
-- source_id: input file within the run (one per rank)
-- device_id: GPU index as the trace numbers it
-- scope: computation, communication, computation_communication (both), all (computation, communication and memory) or activity (every kernel, copy and set)
-- start_ns: start of the piece, ns since the trace's epoch
-- end_ns: end of the piece, ns since the trace's epoch
