-- mfu: model FLOP utilization (MFU) per iteration window, from the flops PyTorch records.
-- Grain: one row per run, source, device that ran kernels, and iteration (the windows of
-- _iteration_windows_v3, the windows of gpu_utilization).
-- flops = the sum of host_events.flops of the iteration's events (host_events.iteration)
-- inside an outermost operator that launched kernels on the device (_flops_ops_v1).
-- achieved_flops_per_s = flops / the window's length (window_end_ns - window_start_ns).
-- mfu_util = achieved_flops_per_s / the device's dense peak for the run's precision:
-- the peak of gpu_peaks (etl/core/gpu_peaks.toml, a datasheet per GPU) for the device's name
-- (devices.name when the catalog knows it, else runs.gpu: run.toml gpu names the model when
-- the trace writes a generic name, as ROCm's "AMD Radeon Graphics"), at the precision
-- peak_precisions gives runs.precision
-- (fp32 → CUDA-core FP32, tf32 → TF32 tensor, amp/fp16 → FP16 tensor, bf16 → BF16 tensor).
-- [project] MFU as the LLM-training literature uses it (PaLM, appendix B), with PyTorch's
-- per-op flops in place of a model formula; not a figure of the paper.
-- v2: faster: reads _iteration_windows_v3 (v2's windows, joined to kernels by two
-- equi-joins instead of one OR) instead of _iteration_windows_v2; and a device name the
-- catalog does not know gives way to runs.gpu when the catalog knows that (v1: NULL).
WITH device_ops AS (
    SELECT DISTINCT run_id, source_id, device_id, op_event_id
    FROM kernels
    WHERE kind = 'kernel' AND op_event_id IS NOT NULL AND device_id IS NOT NULL
),
window_flops AS (
    SELECT f.run_id, f.source_id, d.device_id, f.iteration, sum(f.flops) AS flops
    FROM _flops_ops_v1 AS f
    JOIN device_ops AS d
      ON d.run_id = f.run_id AND d.source_id = f.source_id AND d.op_event_id = f.op_event_id
    GROUP BY f.run_id, f.source_id, d.device_id, f.iteration
),
sources_with_flops AS (
    SELECT DISTINCT run_id, source_id FROM host_events WHERE flops IS NOT NULL
),
windows AS (
    SELECT
        w.run_id, w.run_name, w.source_id, w.rank, w.device_id, w.iteration,
        w.window_start_ns, w.window_end_ns, w.complete,
        CASE WHEN lower(trim(dv.name)) IN (SELECT gpu_key FROM gpu_peaks) THEN dv.name
             WHEN lower(trim(r.gpu)) IN (SELECT gpu_key FROM gpu_peaks) THEN r.gpu
             ELSE coalesce(dv.name, r.gpu) END AS gpu_name,
        lower(trim(r.precision)) AS run_precision,
        CASE WHEN s.source_id IS NOT NULL THEN coalesce(wf.flops, 0) END AS flops
    FROM _iteration_windows_v3 AS w
    JOIN runs AS r ON r.run_id = w.run_id
    LEFT JOIN devices AS dv
      ON dv.run_id = w.run_id AND dv.source_id = w.source_id AND dv.device_id = w.device_id
    LEFT JOIN sources_with_flops AS s ON s.run_id = w.run_id AND s.source_id = w.source_id
    LEFT JOIN window_flops AS wf
      ON wf.run_id = w.run_id AND wf.source_id = w.source_id AND wf.device_id = w.device_id
     AND wf.iteration IS NOT DISTINCT FROM w.iteration
),
peaks AS (
    SELECT w.*, pp.peak_precision, gp.peak_flops_per_s,
           flops / nullif(window_end_ns - window_start_ns, 0) * 1e9 AS achieved_flops_per_s,
           EXISTS (SELECT 1 FROM gpu_peaks AS g
                   WHERE g.gpu_key = lower(trim(w.gpu_name))) AS gpu_known
    FROM windows AS w
    LEFT JOIN peak_precisions AS pp ON pp.run_precision = w.run_precision
    LEFT JOIN gpu_peaks AS gp
      ON gp.gpu_key = lower(trim(w.gpu_name)) AND gp.peak_precision = pp.peak_precision
)
SELECT
    run_id,
    run_name,
    source_id,
    rank,
    device_id,
    iteration,
    window_start_ns,
    window_end_ns,
    complete,
    flops,
    achieved_flops_per_s,
    gpu_name,
    run_precision,
    peak_precision,
    peak_flops_per_s,
    achieved_flops_per_s / nullif(peak_flops_per_s, 0) AS mfu_util,
    CASE
        WHEN flops IS NULL THEN 'no flops in the trace (profile with with_flops=True)'
        WHEN window_end_ns <= window_start_ns THEN 'empty iteration window'
        WHEN run_precision IS NULL THEN 'runs.precision not given (run.toml precision)'
        WHEN peak_precision IS NULL
            THEN 'precision ' || run_precision || ' not in etl/gpu_peaks.toml [precisions]'
        WHEN gpu_name IS NULL THEN 'GPU model unknown (no device name, no run.toml gpu)'
        WHEN NOT gpu_known THEN 'GPU ' || gpu_name || ' not in etl/gpu_peaks.toml'
        WHEN peak_flops_per_s IS NULL
            THEN 'no ' || peak_precision || ' peak for ' || gpu_name || ' in etl/gpu_peaks.toml'
    END AS mfu_reason
FROM peaks
-- run_id: run; joins runs.run_id
-- run_name: the run folder's name
-- source_id: trace source within the run
-- rank: distributed rank of the source; NULL when the trace does not say
-- device_id: GPU index as the trace numbers it
-- iteration: N of ProfilerStep#N; NULL for a trace without steps
-- window_start_ns: start of the iteration window (ns since the trace's epoch), as in gpu_utilization
-- window_end_ns: end of the iteration window (ns since the trace's epoch)
-- complete: false when a truncated source may not hold the iteration whole
-- flops: sum of host_events.flops of the iteration's events inside operators that launched kernels on the device, FLOP; 0 when none of them recorded flops; NULL when the trace recorded no flops at all
-- achieved_flops_per_s: flops / ((window_end_ns - window_start_ns) / 1e9), FLOP/s; NULL when flops is NULL or the window is empty
-- gpu_name: the device's name as the trace writes it (devices.name) when the catalog knows it, else runs.gpu when the catalog knows that, else whichever is given; NULL when neither says
-- run_precision: runs.precision lower-cased; NULL when run.toml does not say
-- peak_precision: the peak the run's precision is measured against (peak_precisions): fp64, fp32, tf32, fp16 or bf16
-- peak_flops_per_s: the device's dense peak at peak_precision (gpu_peaks), FLOP/s; NULL when the catalog has none
-- mfu_util: achieved_flops_per_s / peak_flops_per_s, 0..1; NULL with mfu_reason when either is unknown
-- mfu_reason: why mfu_util is NULL; NULL when it is known
