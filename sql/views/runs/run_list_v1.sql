-- run_list: what a user looks for first about each run (what `etl runs` prints).
-- Grain: one row per run.
-- ranks counts the run's trace sources; iterations is the most any of its devices has;
-- gpu_util is run_summary's (its representative iteration), averaged over the run's
-- devices; ncu_coverage is run_utilization's matched_time_share, averaged the same way;
-- hint is, for a run without step markers, the step_pattern its no_step_markers anomaly
-- suggests (etl/load/step_hint.py writes it into the anomaly's detail).
-- [project]
WITH step_hints AS (
    SELECT run_id, coalesce(min(nullif(regexp_extract(
               detail, 'step_pattern = (''[^'']*''|"[^"]*")', 0), '')),
               'no step markers (see anomalies)') AS hint
    FROM anomalies WHERE kind = 'no_step_markers' GROUP BY run_id
)
SELECT
    r.run_id,
    r.run_name AS run,
    r.gpu,
    array_length(list_filter(r.sources, s -> s.role = 'trace')) AS ranks,
    max(s.iteration_count) AS iterations,
    r.kernel_count AS kernels,
    avg(s.gpu_util) AS gpu_util,
    min(h.hint) AS hint,
    avg(u.matched_time_share) AS ncu_coverage,
    strftime(r.ingested_at, '%Y-%m-%d %H:%M') AS ingested_at
FROM runs AS r
LEFT JOIN run_summary_v5 AS s ON s.run_id = r.run_id
LEFT JOIN run_utilization_v2 AS u
  ON u.run_id = r.run_id AND u.source_id = s.source_id AND u.device_id = s.device_id
LEFT JOIN step_hints AS h ON h.run_id = r.run_id
GROUP BY r.run_id, r.run_name, r.gpu, r.sources, r.kernel_count, r.ingested_at
-- run_id: run; joins runs.run_id
-- run: the run folder's name (runs.run_name)
-- gpu: the run's GPU model (runs.gpu); NULL when no source names it
-- ranks: trace sources of the run (one per rank, or per host)
-- iterations: the most iterations any device of the run has (run_summary_v5.iteration_count)
-- kernels: GPU activities of the run (runs.kernel_count)
-- gpu_util: run_summary_v5.gpu_util averaged over the run's devices; NULL without kernels
-- hint: for a run without step markers, the step_pattern to try (or where to look); NULL otherwise
-- ncu_coverage: run_utilization_v2.matched_time_share averaged over the run's devices: the share of kernel time an Nsight Compute export covers; NULL without one
-- ingested_at: when the run was ingested, UTC, to the minute
