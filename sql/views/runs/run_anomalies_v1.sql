-- run_anomalies: the anomalies table read by run name, what `etl ingest` counts by kind.
-- Grain: one row per anomaly (a row of the anomalies table) of a current run.
-- [project] Housekeeping of this project's: every oddity kept rather than refused.
SELECT
    r.run_name,
    a.kind,
    a.source_id,
    a.ncu_source_id,
    a.event_id,
    a.ncu_id,
    a.detail,
    a.run_id
FROM anomalies AS a
JOIN runs AS r ON r.run_id = a.run_id
-- run_name: the run's name (etl runs lists them)
-- kind: short code of the oddity (schemas/anomalies.toml lists them)
-- source_id: trace or monitor source within the run (runs.sources[].source_id); NULL for run-level and ncu anomalies
-- ncu_source_id: Nsight Compute export within the run for ncu anomalies; NULL otherwise
-- event_id: the event the anomaly is about (host_events.event_id / kernels.kernel_id numbering); NULL when it is not about one event
-- ncu_id: the ncu kernel the anomaly is about; NULL otherwise
-- detail: what was found, in words, and what to do where something can be done
-- run_id: run; joins runs.run_id
