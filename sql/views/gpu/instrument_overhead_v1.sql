-- instrument_overhead: what each profiler or monitor costs a training job, from the
-- user's own runs: runs of one experiment that differ in their instruments, each run's
-- time per iteration against the experiment's least instrumented run, and the bytes each
-- instrument's files take per iteration and per second.
-- Grain: one row per run and instrument, for experiments of at least two runs whose
-- instrument sets differ. An instrument is the family of a run's input files
-- (runs.sources[].format): pytorch_profiler (kineto_json), tensorflow_profiler
-- (xplane_pb), nsys (nsys_*), ncu (ncu_*), nvidia_smi (nvidia_smi_*), dcgm (dcgm*).
-- [project] Experiment 2 of the talk in shared/seeds (time per epoch with and without
-- each tool; bytes written: nvidia-smi ~20 KB, DCGM ~85 KB, nsys ~40 MB, PyTorch ~1.4 GB
-- for a small CNN), as this project reads it:
-- - an experiment is the runs that share a `repeat:` tag (their first, by name), else the
--   runs with the same dimensions (model, framework, framework_version, exec_mode,
--   precision, batch_size, gpu; model set); other runs are left out;
-- - time per iteration is the trace's own (the mean over the run's devices of
--   run_summary_v5.median_window_ns), else run.toml's seconds_per_iteration (for runs
--   whose instruments record no iterations, such as monitor logs), else NULL;
-- - the baseline is the experiment's run with the fewest instruments, then the fewest
--   bytes, then the first by name;
-- - an instrument's span is from its earliest to its latest recorded instant (trace
--   sources: their iteration windows; monitors: their samples, on the wall clock or else
--   their own clock); bytes_per_iteration = bytes_per_s x the run's time per iteration.
WITH sources AS (
    SELECT run_id, struct_extract(src, 'source_id') AS source_id,
           struct_extract(src, 'format') AS format, struct_extract(src, 'bytes') AS bytes
    FROM (SELECT run_id, unnest(sources) AS src FROM runs)
),
instrumented AS (
    SELECT run_id, source_id, bytes,
           CASE WHEN format = 'kineto_json' THEN 'pytorch_profiler'
                WHEN format = 'xplane_pb' THEN 'tensorflow_profiler'
                WHEN format LIKE 'nsys%' THEN 'nsys'
                WHEN format LIKE 'ncu%' THEN 'ncu'
                WHEN format LIKE 'nvidia_smi%' THEN 'nvidia_smi'
                WHEN format LIKE 'dcgm%' THEN 'dcgm'
                ELSE format END AS instrument
    FROM sources
),
trace_spans AS (
    SELECT run_id, source_id, min(start_ns) AS start_ns, max(end_ns) AS end_ns
    FROM iterations
    GROUP BY run_id, source_id
),
sample_spans AS (
    SELECT run_id, source_id,
           CASE WHEN count(ts_ns) > 0 THEN min(ts_ns) ELSE min(clock_ts_ns) END AS start_ns,
           CASE WHEN count(ts_ns) > 0 THEN max(ts_ns) ELSE max(clock_ts_ns) END AS end_ns
    FROM gpu_samples
    GROUP BY run_id, source_id
),
per_instrument AS (
    SELECT i.run_id, i.instrument, count(*) AS files, sum(i.bytes) AS bytes,
           max(coalesce(t.end_ns, s.end_ns)) - min(coalesce(t.start_ns, s.start_ns)) AS span_ns
    FROM instrumented AS i
    LEFT JOIN trace_spans AS t ON t.run_id = i.run_id AND t.source_id = i.source_id
    LEFT JOIN sample_spans AS s ON s.run_id = i.run_id AND s.source_id = i.source_id
    GROUP BY i.run_id, i.instrument
),
traced AS (
    SELECT run_id, avg(median_window_ns) AS iteration_ns
    FROM run_summary_v5
    GROUP BY run_id
),
per_run AS (
    SELECT r.run_id, r.run_name,
           coalesce(list_min(list_filter(r.tags, x -> x LIKE 'repeat:%')),
                    CASE WHEN r.model IS NOT NULL THEN concat(r.model, ' / ', r.framework,
                         ' / ', r.framework_version, ' / ', r.exec_mode, ' / ', r.precision,
                         ' / ', r.batch_size, ' / ', r.gpu) END) AS experiment,
           -- not string_agg(DISTINCT ... ORDER BY ...): Spark 4's LISTAGG of that shape
           -- fails at run time (a ClassCastException in its planner)
           array_to_string(list_sort(list_distinct(list(p.instrument))), '+') AS instruments,
           count(DISTINCT p.instrument) AS instrument_count, sum(p.bytes) AS run_bytes,
           coalesce(t.iteration_ns, r.seconds_per_iteration * 1e9) AS iteration_ns,
           CASE WHEN t.iteration_ns IS NOT NULL THEN 'trace'
                WHEN r.seconds_per_iteration IS NOT NULL THEN 'run.toml' END
               AS iteration_source
    FROM runs AS r
    JOIN per_instrument AS p ON p.run_id = r.run_id
    LEFT JOIN traced AS t ON t.run_id = r.run_id
    GROUP BY r.run_id, r.run_name, r.tags, r.model, r.framework, r.framework_version,
             r.exec_mode, r.precision, r.batch_size, r.gpu, t.iteration_ns,
             r.seconds_per_iteration
),
instrument_sets AS (
    -- an aggregate, not count(DISTINCT ...) OVER: Spark has no distinct window functions
    SELECT experiment, count(DISTINCT instruments) AS instrument_sets
    FROM per_run
    WHERE experiment IS NOT NULL
    GROUP BY experiment
),
experiments AS (
    SELECT r.*,
           first_value(r.run_name) OVER w AS baseline_run,
           first_value(r.iteration_ns) OVER w AS baseline_iteration_ns,
           count(*) OVER (PARTITION BY r.experiment) AS experiment_runs,
           s.instrument_sets
    FROM per_run AS r
    JOIN instrument_sets AS s ON s.experiment = r.experiment
    WINDOW w AS (PARTITION BY r.experiment ORDER BY r.instrument_count, r.run_bytes, r.run_name
                 ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)
)
SELECT
    e.experiment,
    e.run_name,
    e.instruments,
    e.instrument_count,
    p.instrument,
    p.files,
    p.bytes,
    p.span_ns,
    p.bytes * 1e9 / nullif(p.span_ns, 0) AS bytes_per_s,
    p.bytes * e.iteration_ns / nullif(p.span_ns, 0) AS bytes_per_iteration,
    CASE WHEN p.span_ns IS NULL THEN 'no recorded instants in its files (ncu replays kernels '
              || 'one at a time)'
         WHEN p.span_ns = 0 THEN 'its files record a single instant'
         WHEN e.iteration_ns IS NULL THEN 'no time per iteration for the run' END
        AS bytes_reason,
    e.iteration_ns,
    e.iteration_source,
    e.baseline_run,
    e.baseline_iteration_ns,
    e.iteration_ns - e.baseline_iteration_ns AS iteration_overhead_ns,
    e.iteration_ns / nullif(e.baseline_iteration_ns, 0) AS iteration_overhead_ratio,
    CASE WHEN e.iteration_ns IS NULL THEN 'no time per iteration: no instrument of the run '
              || 'records iterations and its run.toml has no seconds_per_iteration'
         WHEN e.baseline_iteration_ns IS NULL THEN 'the baseline run ' || e.baseline_run
              || ' has no time per iteration (run.toml seconds_per_iteration)' END
        AS overhead_reason,
    e.experiment_runs,
    e.run_id
FROM experiments AS e
JOIN per_instrument AS p ON p.run_id = e.run_id
WHERE e.experiment_runs >= 2 AND e.instrument_sets >= 2
-- experiment: the runs' shared repeat: tag, else their dimensions joined by ' / ' (model / framework / framework_version / exec_mode / precision / batch_size / gpu; empty where unset)
-- run_name: the run (etl runs lists them)
-- instruments: the run's instruments joined by '+', sorted (e.g. nsys+nvidia_smi)
-- instrument_count: how many instruments the run has
-- instrument: this row's instrument: pytorch_profiler, tensorflow_profiler, nsys, ncu, nvidia_smi, dcgm (else the file format's name)
-- files: the run's input files of this instrument (runs.sources entries)
-- bytes: their size on disk, bytes
-- span_ns: what they record, from the earliest to the latest instant (trace sources: iteration windows; monitors: samples), ns; NULL for ncu exports
-- bytes_per_s: bytes / span, bytes per second of the job; NULL with bytes_reason
-- bytes_per_iteration: bytes_per_s x iteration_ns: what the instrument writes per training iteration, bytes; NULL with bytes_reason
-- bytes_reason: why bytes_per_s or bytes_per_iteration is NULL; NULL when both are known
-- iteration_ns: the run's time per iteration: the trace's (mean over devices of run_summary_v5.median_window_ns), else run.toml seconds_per_iteration x 1e9, ns
-- iteration_source: where iteration_ns comes from: trace or run.toml; NULL with overhead_reason
-- baseline_run: the experiment's least instrumented run (fewest instruments, then fewest bytes, then name)
-- baseline_iteration_ns: the baseline run's iteration_ns, ns
-- iteration_overhead_ns: iteration_ns - baseline_iteration_ns: what the run's instruments add to an iteration, ns (0 for the baseline)
-- iteration_overhead_ratio: iteration_ns / baseline_iteration_ns (1.0 for the baseline); NULL with overhead_reason
-- overhead_reason: why iteration_overhead_ns and iteration_overhead_ratio are NULL; NULL when they are known
-- experiment_runs: runs in the experiment
-- run_id: run; joins runs.run_id
