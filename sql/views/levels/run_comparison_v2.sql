-- run_comparison: runs side by side on every run_utilization column, one row per run, so
-- "AMP vs FP32", "eager vs compiled" or "A100 vs V100" is a WHERE or GROUP BY away.
-- Grain: one row per run. Ratios are averaged over the run's ranks and devices, throughput
-- is summed over ranks (samples per second of the whole job); *_vs_best compare with the
-- run of the same model that has the highest throughput.
-- [project] A side-by-side table of this project's (the paper compares such runs in its
-- figures).
-- Runs with traces only have a row (GPU level, window, throughput, dimensions) with the
-- ncu levels NULL and `ncu_reason` saying why.
WITH per_run AS (
    SELECT
        run_id, run_name, model, framework, exec_mode, precision, batch_size, gpu,
        count(*) AS devices,
        avg(gpu_util) AS gpu_util,
        avg(smsp_active_util) AS smsp_active_util,
        avg(issue_slot_util) AS issue_slot_util,
        avg(tc_active_util) AS tc_active_util,
        avg(tc_issue_util) AS tc_issue_util,
        avg(tc_inst_share) AS tc_inst_share,
        avg(tc_active_share) AS tc_active_share,
        avg(matched_time_share) AS matched_time_share,
        min(ncu_reason) AS ncu_reason,
        sum(throughput_samples_per_s) AS throughput_samples_per_s
    FROM run_utilization_v2
    GROUP BY run_id, run_name, model, framework, exec_mode, precision, batch_size, gpu
)
SELECT
    run_id,
    run_name,
    model,
    framework,
    exec_mode,
    precision,
    batch_size,
    gpu,
    devices,
    gpu_util,
    smsp_active_util,
    issue_slot_util,
    tc_active_util,
    tc_issue_util,
    tc_inst_share,
    tc_active_share,
    matched_time_share,
    ncu_reason,
    throughput_samples_per_s,
    throughput_samples_per_s / nullif(max(throughput_samples_per_s) OVER (PARTITION BY model), 0)
        AS throughput_vs_best_ratio
FROM per_run
-- run_id: run; joins runs.run_id
-- run_name: the run folder's name
-- model: run.toml model
-- framework: run.toml framework
-- exec_mode: run.toml exec_mode
-- precision: run.toml precision
-- batch_size: run.toml batch_size (per rank)
-- gpu: run.toml gpu, else the trace's device name
-- devices: rank/device rows of run_utilization averaged here
-- gpu_util: mean GPU utilization, 0..1
-- smsp_active_util: mean SMSP active utilization, 0..1
-- issue_slot_util: mean issue-slot utilization, 0..1
-- tc_active_util: mean tensor-core active utilization, 0..1
-- tc_issue_util: mean tensor-core issue-slot utilization, 0..1
-- tc_inst_share: mean tensor instructions / instructions issued, 0..1
-- tc_active_share: mean tensor-pipe active / SMSP active cycles, 0..1
-- matched_time_share: mean share of kernel time resting on matched kernels, 0..1
-- ncu_reason: why the ncu levels are NULL on some device of the run (the first reason in text order); NULL when every device has them
-- throughput_samples_per_s: samples per second summed over ranks; NULL without batch_size
-- throughput_vs_best_ratio: throughput / the best throughput among runs of the same model, 0..1; NULL when that best is 0 or unknown
