{% from 'intervals.sql' import earlier_ends -%}
-- _activity_pieces: private helper. Each GPU activity with where its piece of each scope
-- starts: the instants it adds to the union of its scope's intervals are
-- [<scope>_from_ns, end_ns] when that is not empty.
-- Grain: one row per run, source, device and GPU activity: a kernel, copy or set, or a
-- row of kernel_type computation, communication or memory (etl/extract/kernel_types.toml).
-- Sorted by start (then end) on each device, an activity adds to a scope the part of it
-- after the latest end of the scope's earlier activities; these pieces never overlap and
-- cover the scope's union, so lengths clipped to a window add up to the union's ns in it.
-- Scopes as _type_coverage_v1's: computation, communication, computation_communication
-- (either), all (any of the three types), and _busy_intervals_v1's: kernel (kind kernel),
-- activity (kind kernel, memcpy or memset); <scope>_from_ns is NULL for an activity
-- outside the scope. Activities without a device, a start or a non-negative duration cannot be
-- placed and are left out (flagged at ingest).
-- [project] _type_coverage_v1's sweep, one row per activity with a column per scope instead
-- of a row per scope: a fifth of the rows to join to the iteration windows.
WITH placed AS (
    SELECT k.run_id, r.run_name, k.source_id, k.device_id, k.kind, k.kernel_type,
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
        ("kernel_end_ns", "kind = 'kernel'"),
        ("activity_end_ns", "is_activity")]) }}
)
SELECT
    run_id,
    run_name,
    source_id,
    device_id,
    kind,
    kernel_type,
    start_ns,
    end_ns,
    CASE WHEN kernel_type = 'computation' THEN greatest(start_ns, comp_end_ns) END
        AS computation_from_ns,
    CASE WHEN kernel_type = 'communication' THEN greatest(start_ns, comm_end_ns) END
        AS communication_from_ns,
    CASE WHEN kernel_type IN ('computation', 'communication')
         THEN greatest(start_ns, comp_end_ns, comm_end_ns) END
        AS computation_communication_from_ns,
    CASE WHEN kernel_type IN ('computation', 'communication', 'memory')
         THEN greatest(start_ns, comp_end_ns, comm_end_ns, memory_end_ns) END AS all_from_ns,
    CASE WHEN kind = 'kernel' THEN greatest(start_ns, kernel_end_ns) END AS kernel_from_ns,
    CASE WHEN is_activity THEN greatest(start_ns, activity_end_ns) END AS activity_from_ns
FROM earlier
-- run_id: run; joins runs.run_id
-- run_name: the run folder's name (carried so that a filter on it reaches the scans)
-- source_id: input file within the run (one per rank)
-- device_id: GPU index as the trace numbers it
-- kind: kernel, memcpy, memset, or the kind of another row of a typed kernel_type
-- kernel_type: computation, communication, memory; another value (other) or NULL only for a kernel, copy or set outside the three
-- start_ns: start of the activity, ns since the trace's epoch
-- end_ns: end of the activity, ns since the trace's epoch
-- computation_from_ns: start of the activity's piece of the computation union (empty when not before end_ns); NULL unless a computation kernel
-- communication_from_ns: start of its piece of the communication union; NULL unless a communication kernel
-- computation_communication_from_ns: start of its piece of the union of both; NULL for memory activities
-- all_from_ns: start of its piece of the union of all three types; NULL outside them
-- kernel_from_ns: start of its piece of the union of kernels (gpu_utilization's busy time); NULL unless kind = 'kernel'
-- activity_from_ns: start of its piece of the union of kernels, copies and sets; NULL for other kinds
