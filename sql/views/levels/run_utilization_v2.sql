{%- set levels = ["smsp_active_util", "issue_slot_util", "tc_active_util", "tc_issue_util"] -%}
{%- set shares = ["tc_inst_share", "tc_active_share"] -%}
-- run_utilization: the paper's Fig. 5 row: utilization at four levels for one iteration.
-- Grain: one row per run, source (rank) and device that ran kernels (run_summary's rows).
-- The iteration is the one with the most matched kernels (ties: run_summary's selected
-- iteration, then the earliest); a device without matched kernels (a run without an ncu
-- export, or whose export matched nothing on it) keeps run_summary's selected iteration,
-- its GPU level and throughput, with the three ncu levels NULL and `ncu_reason` saying why. For a level X with per-kernel ratio x_k and duration d_k
-- clipped to the window, over the matched kernels of K_i whose x_k is known:
--   X_util = gpu_util * sum(x_k * d_k) / sum(d_k)
-- the time-weighted mean of the kernels' ratios scaled by the busy share of the window; it
-- keeps the order GPU >= SMSP active >= issue slot since each kernel's ratios do. The two
-- tensor-core shares are time-weighted means, not scaled (they are bounds, not levels).
-- A mean over kernels whose clipped durations sum to 0 is NULL, and so is its level.
-- matched_time_share = sum(d_k, matched) / sum(d_k, all of K_i): how much it rests on.
-- [paper Fig. 5] The four levels of one iteration, with Table I's definitions. [project]
-- The iteration (the one with the most matched kernels) and the roll-up of kernel ratios
-- below are this project's.
-- v2: a row for every device run_summary has, ncu levels or not (v1 had rows only where
-- kernels matched an ncu export, so runs with traces only vanished); `ncu_reason`; reads
-- gpu_utilization_v2 and run_summary_v2 (incomplete iterations have no gpu_util).
WITH per_iteration AS (
    SELECT
        ik.run_id, ik.source_id, ik.device_id, ik.iteration,
        count(ik.ncu_id) AS matched_kernels,
        count(*) AS kernels,
        sum(ik.clipped_dur_ns) FILTER (WHERE ik.ncu_id IS NOT NULL) AS matched_ns,
        sum(ik.clipped_dur_ns) AS kernel_ns,
{%- for x in levels + shares %}
        sum(u.{{ x }} * ik.clipped_dur_ns)
            / nullif(sum(ik.clipped_dur_ns) FILTER (WHERE u.{{ x }} IS NOT NULL), 0)
            AS mean_{{ x }},
{%- endfor %}
        count(*) FILTER (WHERE u.smsp_active_util IS NULL AND ik.ncu_id IS NOT NULL)
            AS matched_without_counters
    FROM _iteration_kernels_v1 AS ik
    LEFT JOIN ncu_kernel_utilization_v1 AS u
      ON u.run_id = ik.run_id AND u.ncu_source_id = ik.ncu_source_id AND u.ncu_id = ik.ncu_id
    GROUP BY ik.run_id, ik.source_id, ik.device_id, ik.iteration
),
chosen AS (
    SELECT p.*
    FROM per_iteration AS p
    LEFT JOIN run_summary_v2 AS s
      ON s.run_id = p.run_id AND s.source_id = p.source_id AND s.device_id = p.device_id
    WHERE p.matched_kernels > 0
    QUALIFY row_number() OVER (
        PARTITION BY p.run_id, p.source_id, p.device_id
        ORDER BY p.matched_kernels DESC,
                 (p.iteration IS NOT DISTINCT FROM s.selected_iteration) DESC,
                 p.iteration) = 1
),
exports AS (
    SELECT run_id, count(*) AS ncu_kernels
    FROM ncu_kernels
    GROUP BY run_id
),
rows AS (
    SELECT s.run_id, s.source_id, s.device_id,
           CASE WHEN c.run_id IS NULL THEN s.selected_iteration ELSE c.iteration END
               AS iteration,
           c.run_id IS NOT NULL AS has_levels,
           CASE WHEN c.run_id IS NOT NULL THEN NULL
                WHEN e.run_id IS NULL THEN 'no ncu export in the run'
                ELSE 'no kernel of this device matched the ncu export' END AS ncu_reason
    FROM run_summary_v2 AS s
    LEFT JOIN chosen AS c
      ON c.run_id = s.run_id AND c.source_id = s.source_id AND c.device_id = s.device_id
    LEFT JOIN exports AS e ON e.run_id = s.run_id
)
SELECT
    g.run_id,
    g.run_name,
    g.source_id,
    g.rank,
    g.device_id,
    g.iteration,
    g.window_ns,
    g.gpu_util,
{%- for x in levels %}
    g.gpu_util * c.mean_{{ x }} AS {{ x }},
{%- endfor %}
{%- for x in shares %}
    c.mean_{{ x }} AS {{ x }},
{%- endfor %}
    x.ncu_reason,
    coalesce(c.matched_kernels, 0) AS matched_kernels,
    coalesce(c.kernels, g.kernel_count) AS kernels,
    c.matched_ns / nullif(c.kernel_ns, 0) AS matched_time_share,
    CASE WHEN g.window_ns > 0 THEN r.batch_size * 1e9 / g.window_ns END
        AS throughput_samples_per_s,
    r.model,
    r.framework,
    r.exec_mode,
    r.precision,
    r.batch_size,
    r.gpu
FROM rows AS x
JOIN gpu_utilization_v2 AS g
  ON g.run_id = x.run_id AND g.source_id = x.source_id AND g.device_id = x.device_id
 AND g.iteration IS NOT DISTINCT FROM x.iteration
LEFT JOIN chosen AS c
  ON c.run_id = x.run_id AND c.source_id = x.source_id AND c.device_id = x.device_id
JOIN runs AS r ON r.run_id = x.run_id
-- run_id: run; joins runs.run_id
-- run_name: the run folder's name
-- source_id: trace file within the run
-- rank: distributed rank; NULL without distributedInfo
-- device_id: GPU index as the trace numbers it
-- iteration: the iteration with the most matched kernels, else run_summary's selected one; NULL for a trace without steps
-- window_ns: its window (the paper's total execution time), ns
-- gpu_util: busy_ns / window_ns, 0..1 (level 1: GPU)
-- smsp_active_util: gpu_util x time-weighted mean SMSP active ratio, 0..1 (level 2); NULL see ncu_reason
-- issue_slot_util: gpu_util x time-weighted mean issue-slot ratio, 0..1 (level 3); NULL see ncu_reason
-- tc_active_util: gpu_util x time-weighted mean tensor-pipe active ratio, 0..1 (level 4); NULL see ncu_reason
-- tc_issue_util: gpu_util x time-weighted mean tensor-instruction issue ratio, 0..1 (level 4); NULL see ncu_reason
-- tc_inst_share: time-weighted mean of tensor instructions / instructions issued (bound 1)
-- tc_active_share: time-weighted mean of tensor-pipe active / SMSP active cycles (bound 2)
-- ncu_reason: why the three ncu levels are NULL (no ncu export in the run; no kernel of this device matched it); NULL when they are computed
-- matched_kernels: kernels of the iteration matched to an ncu kernel (0 without)
-- kernels: kernels of the iteration on this device (|K_i|)
-- matched_time_share: clipped kernel time of matched kernels / of all kernels of K_i, 0..1; NULL when that time is 0
-- throughput_samples_per_s: batch_size * 1e9 / window_ns; NULL without batch_size
-- model: run.toml model
-- framework: run.toml framework
-- exec_mode: run.toml exec_mode
-- precision: run.toml precision
-- batch_size: run.toml batch_size (per rank)
-- gpu: run.toml gpu, else the trace's device name
