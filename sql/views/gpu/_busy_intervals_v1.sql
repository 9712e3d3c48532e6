{% from 'intervals.sql' import merge_overlapping -%}
-- _busy_intervals: private helper. GPU activity intervals merged into disjoint busy spans.
-- Grain: one row per run, source, device, scope and maximal busy span.
-- scope 'kernel' merges kind = kernel only (the paper's GPU utilization); scope 'activity'
-- also merges memcpy and memset (Table I's "all the GPU events"). Activities without a
-- device, a start or a non-negative duration cannot be placed and are left out (they are
-- flagged in anomalies at ingest).
-- [paper] GPU busy time, the time the device runs kernels (level 1). [project] It is
-- measured as the union of the kernel intervals, so overlapping streams count once; the
-- 'activity' scope is this project's reading of Table I's "all the GPU events".
WITH intervals AS (
    SELECT k.run_id, r.run_name, k.source_id, k.device_id, 'kernel' AS scope,
           k.ts_ns AS start_ns, k.ts_ns + k.dur_ns AS end_ns
    FROM kernels AS k
    JOIN runs AS r ON r.run_id = k.run_id
    WHERE k.kind = 'kernel' AND k.device_id IS NOT NULL AND k.ts_ns IS NOT NULL
      AND k.dur_ns >= 0
    UNION ALL
    SELECT k.run_id, r.run_name, k.source_id, k.device_id, 'activity' AS scope,
           k.ts_ns AS start_ns, k.ts_ns + k.dur_ns AS end_ns
    FROM kernels AS k
    JOIN runs AS r ON r.run_id = k.run_id
    WHERE k.kind IN ('kernel', 'memcpy', 'memset') AND k.device_id IS NOT NULL
      AND k.ts_ns IS NOT NULL AND k.dur_ns >= 0
),
{{ merge_overlapping('intervals', ['run_id', 'run_name', 'source_id', 'device_id', 'scope']) }}
-- run_id: run; joins runs.run_id
-- run_name: the run folder's name (carried so that a filter on it reaches the scans)
-- source_id: input file within the run
-- device_id: GPU index as the trace numbers it
-- scope: kernel (kernels only) or activity (kernels, memcpy and memset)
-- start_ns: start of the busy span, ns since the trace's epoch
-- end_ns: end of the busy span, ns since the trace's epoch
