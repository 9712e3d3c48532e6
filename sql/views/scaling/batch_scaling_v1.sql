-- batch_scaling: throughput, memory and utilization against batch size, per configuration
-- (the paper's Figs. 1, 3 and 4).
-- Grain: one row per model, framework, exec_mode, precision, GPU and batch size (run.toml
-- dimensions; the GPU is the trace's device name, else run.toml gpu). Runs without a
-- batch_size are left out.
-- Each (run, source, device) contributes its representative iteration (run_summary_v3);
-- several of them in one configuration (ranks, GPUs, repeated runs) are averaged per GPU,
-- except peak_memory_share, their maximum. The ncu levels come from run_utilization_v1
-- (the iteration with the most matched kernels) and are NULL without an ncu export.
-- throughput_gain_ratio: throughput over that of the next smaller batch size of the same
-- configuration (1 means saturated: a larger batch buys nothing). eager_fp32_ratio:
-- throughput over that of the eager fp32 configuration of the same model, framework, GPU
-- and batch size (NULL when there is none; 1 for that configuration itself).
-- [paper §V, Figs. 1, 3, 4] Throughput, GPU utilization and memory against batch size,
-- eager against XLA/compiled and FP32 against AMP; saturation as the flattening of
-- throughput. [project] The per-GPU averaging and the two ratios are this project's.
WITH devices_summary AS (
    SELECT
        s.run_id, s.source_id, s.device_id, s.model, s.framework, s.exec_mode, s.precision,
        s.gpu, s.batch_size, s.throughput_samples_per_s, s.gpu_util, s.peak_memory_share,
        s.peak_allocated_bytes, u.smsp_active_util, u.issue_slot_util, u.tc_active_util
    FROM run_summary_v3 AS s
    LEFT JOIN run_utilization_v1 AS u
      ON u.run_id = s.run_id AND u.source_id = s.source_id AND u.device_id = s.device_id
    WHERE s.batch_size IS NOT NULL
),
configurations AS (
    SELECT
        model, framework, exec_mode, precision, gpu, batch_size,
        count(DISTINCT run_id) AS run_count,
        count(*) AS device_count,
        avg(throughput_samples_per_s) AS throughput_samples_per_s,
        avg(gpu_util) AS gpu_util,
        max(peak_memory_share) AS peak_memory_share,
        max(peak_allocated_bytes) AS peak_allocated_bytes,
        avg(smsp_active_util) AS smsp_active_util,
        avg(issue_slot_util) AS issue_slot_util,
        avg(tc_active_util) AS tc_active_util
    FROM devices_summary
    GROUP BY model, framework, exec_mode, precision, gpu, batch_size
),
with_smaller AS (
    SELECT *,
           lag(batch_size) OVER same_configuration AS smaller_batch_size,
           lag(throughput_samples_per_s) OVER same_configuration AS smaller_throughput
    FROM configurations
    WINDOW same_configuration AS (
        PARTITION BY model, framework, exec_mode, precision, gpu ORDER BY batch_size)
)
SELECT
    c.model,
    c.framework,
    c.exec_mode,
    c.precision,
    c.gpu,
    c.batch_size,
    c.run_count,
    c.device_count,
    c.throughput_samples_per_s,
    c.gpu_util,
    c.smsp_active_util,
    c.issue_slot_util,
    c.tc_active_util,
    c.peak_allocated_bytes,
    c.peak_memory_share,
    c.smaller_batch_size,
    c.throughput_samples_per_s / nullif(c.smaller_throughput, 0) AS throughput_gain_ratio,
    b.throughput_samples_per_s AS eager_fp32_throughput_samples_per_s,
    c.throughput_samples_per_s / nullif(b.throughput_samples_per_s, 0) AS eager_fp32_ratio
FROM with_smaller AS c
LEFT JOIN configurations AS b
  ON b.model IS NOT DISTINCT FROM c.model AND b.framework IS NOT DISTINCT FROM c.framework
 AND b.gpu IS NOT DISTINCT FROM c.gpu AND b.batch_size = c.batch_size
 AND lower(b.exec_mode) = 'eager' AND lower(b.precision) = 'fp32'
-- model: run.toml model
-- framework: run.toml framework (pytorch, tensorflow, jax, ...)
-- exec_mode: run.toml exec_mode (eager, xla, compile, jit, ...)
-- precision: run.toml precision (fp32, amp, ...)
-- gpu: the trace's device name, else run.toml gpu
-- batch_size: run.toml batch_size, samples per iteration per rank
-- run_count: runs of this configuration
-- device_count: (run, source, device) rows averaged
-- throughput_samples_per_s: mean per-GPU throughput of the representative iterations, samples/s (run_summary_v3)
-- gpu_util: mean GPU-level utilization (level 1), 0..1
-- smsp_active_util: mean level 2 (SM sub-partitions active) from run_utilization_v1, 0..1; NULL without ncu
-- issue_slot_util: mean level 3 (issue slots) from run_utilization_v1, 0..1; NULL without ncu
-- tc_active_util: mean level 4 (tensor pipes active) from run_utilization_v1, 0..1; NULL without ncu
-- peak_allocated_bytes: largest peak allocated bytes of the configuration's devices, bytes; NULL without memory events
-- peak_memory_share: largest peak allocated share of device memory, 0..1; NULL when unknown (run_summary.memory_status)
-- smaller_batch_size: the next smaller batch size of the same configuration; NULL for the smallest
-- throughput_gain_ratio: throughput / the smaller batch size's throughput; NULL for the smallest (the paper's saturation: near 1)
-- eager_fp32_throughput_samples_per_s: throughput of the eager fp32 configuration of the same model, framework, GPU and batch size; NULL when none
-- eager_fp32_ratio: throughput / eager_fp32_throughput_samples_per_s (speed-up of XLA/compile and AMP); NULL when there is no eager fp32 run
