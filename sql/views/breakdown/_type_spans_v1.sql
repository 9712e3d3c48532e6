{% from 'intervals.sql' import merge_overlapping -%}
-- _type_spans: private helper. GPU activity intervals merged, per kernel type and their
-- unions, into disjoint spans.
-- Grain: one row per run, source, device, scope and maximal span.
-- scope 'computation' and 'communication' merge the activities of that kernel_type;
-- 'computation_communication' merges both; 'all' merges computation, communication and
-- memory (the same set as _busy_intervals' 'activity' scope). kernel_type comes from
-- kernels (etl/extract/kernel_types.toml). Activities without a device, a start or a
-- non-negative duration cannot be placed and are left out (flagged at ingest).
-- [project] Unions of typed intervals, so that overlapping streams count once; the nested
-- scopes let temporal_breakdown and comm_overlap take differences of lengths
-- (|A ∩ B| = |A| + |B| - |A ∪ B|) instead of intersecting spans.
WITH typed AS (
    SELECT k.run_id, r.run_name, k.source_id, k.device_id, k.kernel_type,
           k.ts_ns AS start_ns, k.ts_ns + k.dur_ns AS end_ns
    FROM kernels AS k
    JOIN runs AS r ON r.run_id = k.run_id
    WHERE k.kernel_type IN ('computation', 'communication', 'memory')
      AND k.device_id IS NOT NULL AND k.ts_ns IS NOT NULL AND k.dur_ns >= 0
),
scoped AS (
    SELECT t.run_id, t.run_name, t.source_id, t.device_id, s.scope, t.start_ns, t.end_ns
    FROM typed AS t
    JOIN (VALUES ('computation', 'computation'),
                 ('communication', 'communication'),
                 ('computation', 'computation_communication'),
                 ('communication', 'computation_communication'),
                 ('computation', 'all'),
                 ('communication', 'all'),
                 ('memory', 'all')) AS s(kernel_type, scope)
      ON s.kernel_type = t.kernel_type
),
{{ merge_overlapping('scoped', ['run_id', 'run_name', 'source_id', 'device_id', 'scope']) }}
-- run_id: run; joins runs.run_id
-- run_name: the run folder's name (carried so that a filter on it reaches the scans)
-- source_id: input file within the run (one per rank)
-- device_id: GPU index as the trace numbers it
-- scope: computation, communication, computation_communication (both) or all (computation, communication and memory)
-- start_ns: start of the span, ns since the trace's epoch
-- end_ns: end of the span, ns since the trace's epoch
