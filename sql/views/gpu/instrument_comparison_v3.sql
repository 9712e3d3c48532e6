{% from 'instrument_comparison.sql' import instruments, samples, monitor_values -%}
-- instrument_comparison: every instrument's view of the same GPU time, side by side.
-- Grain: one row per run, trace source, device and iteration window (gpu_utilization's
-- windows); a run with monitor samples but no trace gets one whole-run row per device.
-- For each monitor metric (nvidia-smi utilization.gpu; DCGM GRACT, SMACT, SMOCC, TENSO;
-- nsys GPU_METRICS SM active, SM issue, tensor active): the mean of the samples whose
-- ts_ns falls in the window, their count, the share of the window they cover, and a
-- reason when the value is NULL. trace_gpu_util is the trace's own busy share (nsys or
-- Kineto), and the ncu-based levels come from run_utilization (one iteration per source).
-- [paper §II, Table I] The levels being compared (GPU busy, SMSP active, issue slot,
-- tensor active) and the gap between them. [project] A sample belongs to the window its
-- ts_ns falls in; covered_share = least(1, samples x the instrument's median sample
-- interval in the run (over consecutive samples of one device) / window_ns); a sample without a device index is taken to be of
-- every device of the run; a window is placed on the wall clock by its source's clock as
-- the ingest states it (iterations.clock, utc_offset_ns: Kineto's baseTimeNanoseconds or
-- epoch ts, nsys on its session start), never by a rule of this view; a source whose clock
-- is unmapped has its monitor columns NULL with iterations.clock_reason.
-- v2: Kineto sources on the wall clock (v1 placed only nsys_sqlite windows); windows and
-- ncu levels from gpu_utilization_v3 and run_utilization_v2; window_start_utc_ns,
-- trace_clock and trace_clock_reason.
-- v3: a covered_share that cannot be computed is NULL with a reason (new columns
-- *_covered_reason): no sample of the instrument in the run, a window off the wall clock,
-- samples without a wall-clock time, a window of 0 ns, or fewer than two timed samples of
-- one device, which leave no sampling interval. v2 gave 1.0 in all but the first of these
-- (least(1.0, NULL) is 1.0 in DuckDB) and 0.0 off the wall clock, where no sample could
-- fall in. Windows from gpu_utilization_v4 (v3's rows).
WITH source_format AS (
    SELECT run_id, struct_extract(src, 'source_id') AS source_id,
           struct_extract(src, 'format') AS format
    FROM (SELECT run_id, unnest(sources) AS src FROM runs)
),
trace_clock AS (
    SELECT DISTINCT it.run_id, it.source_id, f.format, it.clock, it.utc_offset_ns,
           it.clock_reason
    FROM iterations AS it
    LEFT JOIN source_format AS f ON f.run_id = it.run_id AND f.source_id = it.source_id
),
{{ samples() }},
traced AS (
    SELECT
        g.run_id, g.run_name, g.source_id, g.device_id, g.iteration, g.window_start_ns,
        g.window_ns, g.window_start_ns + c.utc_offset_ns AS window_start_utc_ns, g.gpu_util,
        c.format, c.clock, c.clock_reason, c.utc_offset_ns IS NOT NULL AS on_wall_clock,
        false AS whole_run
    FROM gpu_utilization_v4 AS g
    LEFT JOIN trace_clock AS c ON c.run_id = g.run_id AND c.source_id = g.source_id
),
untraced AS (
    SELECT
        s.run_id, r.run_name, CAST(NULL AS INTEGER) AS source_id, s.device_index AS device_id,
        CAST(NULL AS BIGINT) AS iteration, min(s.ts_ns) AS window_start_ns,
        max(s.ts_ns) - min(s.ts_ns) AS window_ns, min(s.ts_ns) AS window_start_utc_ns,
        CAST(NULL AS DOUBLE) AS gpu_util, CAST(NULL AS VARCHAR) AS format,
        CAST(NULL AS VARCHAR) AS clock, CAST(NULL AS VARCHAR) AS clock_reason,
        true AS on_wall_clock, true AS whole_run
    FROM samples AS s
    JOIN runs AS r ON r.run_id = s.run_id
    WHERE s.run_id NOT IN (SELECT run_id FROM traced)
    GROUP BY s.run_id, r.run_name, s.device_index
),
{{ monitor_values('window_start_utc_ns') }}
SELECT
    w.run_id,
    w.run_name,
    w.source_id,
    w.format AS trace_format,
    w.device_id,
    w.iteration,
    w.window_start_ns,
    w.window_ns,
    w.on_wall_clock,
    w.window_start_utc_ns,
    w.clock AS trace_clock,
    w.clock_reason AS trace_clock_reason,
    w.gpu_util AS trace_gpu_util,
{%- for col, family, metric in instruments %}
    p.{{ col }}_mean AS {{ col }}_util,
    p.{{ col }}_n AS {{ col }}_samples,
    -- least(1.0, NULL) is 1.0 in DuckDB: every NULL case is ruled out before it
    CASE WHEN coalesce(a.{{ col }}_all, 0) > 0 AND w.on_wall_clock AND a.{{ col }}_timed > 0
              AND w.window_ns > 0 AND i.{{ col }}_interval_ns IS NOT NULL
         THEN least(1.0, p.{{ col }}_n * i.{{ col }}_interval_ns / w.window_ns)
         END AS {{ col }}_covered_share,
    CASE WHEN coalesce(a.{{ col }}_all, 0) = 0
             THEN 'no {{ family }} {{ metric }} samples in the run'
         WHEN NOT w.on_wall_clock THEN 'the window is not on the wall clock'
         WHEN a.{{ col }}_timed = 0 THEN 'the samples have no wall-clock time (gpu_samples.clock)'
         WHEN coalesce(w.window_ns, 0) = 0 THEN 'the window is 0 ns'
         WHEN i.{{ col }}_interval_ns IS NULL
             THEN 'fewer than two timed samples of one device in the run: no sampling interval'
         END AS {{ col }}_covered_reason,
    CASE WHEN p.{{ col }}_mean IS NOT NULL THEN NULL
         WHEN coalesce(a.{{ col }}_all, 0) = 0
             THEN 'no {{ family }} {{ metric }} samples in the run'
         WHEN NOT w.on_wall_clock
             THEN 'the window is not on the wall clock: ' || coalesce(w.clock_reason,
                  'the source was ingested before iterations.clock existed (ingest it again)')
         WHEN a.{{ col }}_timed = 0 AND NOT w.whole_run
             THEN 'the samples have no wall-clock time (gpu_samples.clock)'
         WHEN p.{{ col }}_n = 0 THEN 'no sample in the window'
         ELSE 'the samples in the window are N/A' END AS {{ col }}_reason,
{%- endfor %}
    u.iteration AS ncu_iteration,
    u.smsp_active_util AS ncu_smsp_active_util,
    u.issue_slot_util AS ncu_issue_slot_util,
    u.tc_active_util AS ncu_tc_active_util,
    CASE WHEN u.run_id IS NULL THEN 'no ncu export matched to this trace source'
         WHEN u.smsp_active_util IS NULL
             THEN coalesce(u.ncu_reason, 'the ncu export lacks these counters')
         END AS ncu_reason
FROM windows AS w
JOIN per_window AS p
  ON p.run_id = w.run_id AND p.source_id IS NOT DISTINCT FROM w.source_id
 AND p.device_id IS NOT DISTINCT FROM w.device_id
 AND p.iteration IS NOT DISTINCT FROM w.iteration
 AND p.window_start_ns IS NOT DISTINCT FROM w.window_start_ns
LEFT JOIN presence AS a ON a.run_id = w.run_id
LEFT JOIN intervals AS i ON i.run_id = w.run_id
LEFT JOIN run_utilization_v2 AS u
  ON u.run_id = w.run_id AND u.source_id = w.source_id AND u.device_id = w.device_id
-- run_id: run; joins runs.run_id
-- run_name: the run folder's name
-- source_id: trace source whose windows these are (runs.sources[].source_id); NULL for a whole-run row of a run without a trace
-- trace_format: format of that source (nsys_sqlite, kineto_json, ...); NULL for a whole-run row
-- device_id: GPU index as the trace (or, for a whole-run row, the monitor) numbers it
-- iteration: N of the step; NULL for a whole-trace window or a whole-run row
-- window_start_ns: start of the window, ns on the trace's clock (gpu_utilization.window_start_ns); for a whole-run row, the first sample's ts_ns
-- window_ns: length of the window, ns
-- on_wall_clock: whether the window could be placed on the wall clock (its source's iterations.utc_offset_ns is known), so that monitor samples can fall into it
-- window_start_utc_ns: start of the window in ns since 1970 UTC: window_start_ns + iterations.utc_offset_ns; NULL when not on_wall_clock
-- trace_clock: how the source's times map to UTC (iterations.clock: base_time, epoch, unmapped); NULL for a whole-run row
-- trace_clock_reason: why the source's clock is unmapped (iterations.clock_reason); NULL when mapped
-- trace_gpu_util: the trace's busy share of the window (gpu_utilization.gpu_util), 0..1; NULL for a whole-run row or an incomplete iteration
-- smi_gpu_util: mean nvidia-smi utilization.gpu (or dmon sm) of the window, 0..1
-- smi_gpu_samples: nvidia-smi samples in the window
-- smi_gpu_covered_share: share of the window the samples cover (samples x median sampling interval / window_ns, at most 1), 0..1; NULL when it cannot be computed
-- smi_gpu_covered_reason: why smi_gpu_covered_share is NULL; NULL when it has a value
-- smi_gpu_reason: why smi_gpu_util is NULL; NULL when it has a value
-- dcgm_gr_engine_active_util: mean DCGM GRACT (graphics engine active) of the window, 0..1
-- dcgm_gr_engine_active_samples: DCGM GRACT samples in the window
-- dcgm_gr_engine_active_covered_share: share of the window the samples cover (samples x median sampling interval / window_ns, at most 1), 0..1; NULL when it cannot be computed
-- dcgm_gr_engine_active_covered_reason: why dcgm_gr_engine_active_covered_share is NULL; NULL when it has a value
-- dcgm_gr_engine_active_reason: why dcgm_gr_engine_active_util is NULL
-- dcgm_sm_active_util: mean DCGM SMACT (SM active) of the window, 0..1
-- dcgm_sm_active_samples: DCGM SMACT samples in the window
-- dcgm_sm_active_covered_share: share of the window the samples cover (samples x median sampling interval / window_ns, at most 1), 0..1; NULL when it cannot be computed
-- dcgm_sm_active_covered_reason: why dcgm_sm_active_covered_share is NULL; NULL when it has a value
-- dcgm_sm_active_reason: why dcgm_sm_active_util is NULL
-- dcgm_sm_occupancy_util: mean DCGM SMOCC (SM occupancy) of the window, 0..1
-- dcgm_sm_occupancy_samples: DCGM SMOCC samples in the window
-- dcgm_sm_occupancy_covered_share: share of the window the samples cover (samples x median sampling interval / window_ns, at most 1), 0..1; NULL when it cannot be computed
-- dcgm_sm_occupancy_covered_reason: why dcgm_sm_occupancy_covered_share is NULL; NULL when it has a value
-- dcgm_sm_occupancy_reason: why dcgm_sm_occupancy_util is NULL
-- dcgm_tensor_active_util: mean DCGM TENSO (tensor pipe active) of the window, 0..1
-- dcgm_tensor_active_samples: DCGM TENSO samples in the window
-- dcgm_tensor_active_covered_share: share of the window the samples cover (samples x median sampling interval / window_ns, at most 1), 0..1; NULL when it cannot be computed
-- dcgm_tensor_active_covered_reason: why dcgm_tensor_active_covered_share is NULL; NULL when it has a value
-- dcgm_tensor_active_reason: why dcgm_tensor_active_util is NULL
-- nsys_sm_active_util: mean nsys GPU_METRICS SM Active of the window, 0..1
-- nsys_sm_active_samples: nsys SM Active samples in the window
-- nsys_sm_active_covered_share: share of the window the samples cover (samples x median sampling interval / window_ns, at most 1), 0..1; NULL when it cannot be computed
-- nsys_sm_active_covered_reason: why nsys_sm_active_covered_share is NULL; NULL when it has a value
-- nsys_sm_active_reason: why nsys_sm_active_util is NULL
-- nsys_sm_issue_util: mean nsys GPU_METRICS SM Issue of the window, 0..1
-- nsys_sm_issue_samples: nsys SM Issue samples in the window
-- nsys_sm_issue_covered_share: share of the window the samples cover (samples x median sampling interval / window_ns, at most 1), 0..1; NULL when it cannot be computed
-- nsys_sm_issue_covered_reason: why nsys_sm_issue_covered_share is NULL; NULL when it has a value
-- nsys_sm_issue_reason: why nsys_sm_issue_util is NULL
-- nsys_tensor_active_util: mean nsys GPU_METRICS Tensor Active of the window, 0..1
-- nsys_tensor_active_samples: nsys Tensor Active samples in the window
-- nsys_tensor_active_covered_share: share of the window the samples cover (samples x median sampling interval / window_ns, at most 1), 0..1; NULL when it cannot be computed
-- nsys_tensor_active_covered_reason: why nsys_tensor_active_covered_share is NULL; NULL when it has a value
-- nsys_tensor_active_reason: why nsys_tensor_active_util is NULL
-- ncu_iteration: the iteration run_utilization's ncu levels describe (one per source and device)
-- ncu_smsp_active_util: run_utilization.smsp_active_util (ncu, level 2), 0..1
-- ncu_issue_slot_util: run_utilization.issue_slot_util (ncu, level 3), 0..1
-- ncu_tc_active_util: run_utilization.tc_active_util (ncu, level 4), 0..1
-- ncu_reason: why the ncu columns are NULL; NULL when they have values
