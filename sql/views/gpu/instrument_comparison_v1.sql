{% from 'instrument_comparison.sql' import samples, monitor_values, monitor_columns,
                                            ncu_levels -%}
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
-- interval in the run / window_ns); a sample without a device index is taken to be of
-- every device of the run; windows are on the wall clock only for nsys_sqlite sources
-- (session start + offset), the only trace clock mapped so far, else the monitor columns
-- are NULL with that reason.
WITH trace_clock AS (
    SELECT run_id, struct_extract(src, 'source_id') AS source_id,
           struct_extract(src, 'format') AS format
    FROM (SELECT run_id, unnest(sources) AS src FROM runs)
),
{{ samples() }},
traced AS (
    SELECT
        g.run_id, g.run_name, g.source_id, g.device_id, g.iteration, g.window_start_ns,
        g.window_ns, g.gpu_util, c.format, coalesce(c.format = 'nsys_sqlite', false)
            AS on_wall_clock, false AS whole_run
    FROM gpu_utilization_v1 AS g
    LEFT JOIN trace_clock AS c ON c.run_id = g.run_id AND c.source_id = g.source_id
),
untraced AS (
    SELECT
        s.run_id, r.run_name, CAST(NULL AS INTEGER) AS source_id, s.device_index AS device_id,
        CAST(NULL AS BIGINT) AS iteration, min(s.ts_ns) AS window_start_ns,
        max(s.ts_ns) - min(s.ts_ns) AS window_ns, CAST(NULL AS DOUBLE) AS gpu_util,
        CAST(NULL AS VARCHAR) AS format, true AS on_wall_clock, true AS whole_run
    FROM samples AS s
    JOIN runs AS r ON r.run_id = s.run_id
    WHERE s.run_id NOT IN (SELECT run_id FROM traced)
    GROUP BY s.run_id, r.run_name, s.device_index
),
{{ monitor_values('window_start_ns') }}
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
    w.gpu_util AS trace_gpu_util,
{{ monitor_columns(off_clock_reason="'the window is not on the wall clock (' || coalesce(w.format, 'unknown')
                  || ' source)'") }}
{{ ncu_levels('run_utilization_v1', no_counters_reason="'the ncu export lacks these counters'") }}
-- run_id: run; joins runs.run_id
-- run_name: the run folder's name
-- source_id: trace source whose windows these are (runs.sources[].source_id); NULL for a whole-run row of a run without a trace
-- trace_format: format of that source (nsys_sqlite, kineto_json, ...); NULL for a whole-run row
-- device_id: GPU index as the trace (or, for a whole-run row, the monitor) numbers it
-- iteration: N of the step; NULL for a whole-trace window or a whole-run row
-- window_start_ns: start of the window, ns on the trace's clock (since 1970 UTC when on_wall_clock)
-- window_ns: length of the window, ns
-- on_wall_clock: whether window_start_ns is wall-clock UTC, so that monitor samples can fall into it
-- trace_gpu_util: the trace's busy share of the window (gpu_utilization.gpu_util), 0..1; NULL for a whole-run row
-- smi_gpu_util: mean nvidia-smi utilization.gpu (or dmon sm) of the window, 0..1
-- smi_gpu_samples: nvidia-smi samples in the window
-- smi_gpu_covered_share: share of the window the samples cover, 0..1
-- smi_gpu_reason: why smi_gpu_util is NULL; NULL when it has a value
-- dcgm_gr_engine_active_util: mean DCGM GRACT (graphics engine active) of the window, 0..1
-- dcgm_gr_engine_active_samples: DCGM GRACT samples in the window
-- dcgm_gr_engine_active_covered_share: share of the window the samples cover, 0..1
-- dcgm_gr_engine_active_reason: why dcgm_gr_engine_active_util is NULL
-- dcgm_sm_active_util: mean DCGM SMACT (SM active) of the window, 0..1
-- dcgm_sm_active_samples: DCGM SMACT samples in the window
-- dcgm_sm_active_covered_share: share of the window the samples cover, 0..1
-- dcgm_sm_active_reason: why dcgm_sm_active_util is NULL
-- dcgm_sm_occupancy_util: mean DCGM SMOCC (SM occupancy) of the window, 0..1
-- dcgm_sm_occupancy_samples: DCGM SMOCC samples in the window
-- dcgm_sm_occupancy_covered_share: share of the window the samples cover, 0..1
-- dcgm_sm_occupancy_reason: why dcgm_sm_occupancy_util is NULL
-- dcgm_tensor_active_util: mean DCGM TENSO (tensor pipe active) of the window, 0..1
-- dcgm_tensor_active_samples: DCGM TENSO samples in the window
-- dcgm_tensor_active_covered_share: share of the window the samples cover, 0..1
-- dcgm_tensor_active_reason: why dcgm_tensor_active_util is NULL
-- nsys_sm_active_util: mean nsys GPU_METRICS SM Active of the window, 0..1
-- nsys_sm_active_samples: nsys SM Active samples in the window
-- nsys_sm_active_covered_share: share of the window the samples cover, 0..1
-- nsys_sm_active_reason: why nsys_sm_active_util is NULL
-- nsys_sm_issue_util: mean nsys GPU_METRICS SM Issue of the window, 0..1
-- nsys_sm_issue_samples: nsys SM Issue samples in the window
-- nsys_sm_issue_covered_share: share of the window the samples cover, 0..1
-- nsys_sm_issue_reason: why nsys_sm_issue_util is NULL
-- nsys_tensor_active_util: mean nsys GPU_METRICS Tensor Active of the window, 0..1
-- nsys_tensor_active_samples: nsys Tensor Active samples in the window
-- nsys_tensor_active_covered_share: share of the window the samples cover, 0..1
-- nsys_tensor_active_reason: why nsys_tensor_active_util is NULL
-- ncu_iteration: the iteration run_utilization's ncu levels describe (one per source and device)
-- ncu_smsp_active_util: run_utilization.smsp_active_util (ncu, level 2), 0..1
-- ncu_issue_slot_util: run_utilization.issue_slot_util (ncu, level 3), 0..1
-- ncu_tc_active_util: run_utilization.tc_active_util (ncu, level 4), 0..1
-- ncu_reason: why the ncu columns are NULL; NULL when they have values
