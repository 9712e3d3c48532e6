-- ncu_kernel_utilization: the paper's Table I ratios for every Nsight Compute kernel.
-- Grain: one row per run, ncu export and ncu kernel.
-- The ratios come from ncu_levels, computed at ingest with the metric catalog
-- (etl/extract/ncu_metrics.toml): per architecture, the counters that give each quantity in
-- order of preference. A ratio whose counters are absent is NULL with the reason; a counter
-- that is present and zero gives 0.
-- [paper Table I] The six ratios, as Table I and §IV define them (tc_inst_share and
-- tc_active_share are §IV's two bounds on tensor-core use). [project] The
-- per-architecture counter catalog, and NULL with a reason for a ratio whose counters
-- are absent.
SELECT
    k.run_id,
    k.ncu_source_id,
    k.ncu_id,
    k.kernel_name,
    k.kernel_base_name,
    k.duration_ns,
    l.arch,
    l.sm_count,
    l.smsp_active_util,
    l.smsp_active_util_source,
    l.smsp_active_util_null_reason AS smsp_active_util_reason,
    l.issue_slot_util,
    l.issue_slot_util_source,
    l.issue_slot_util_null_reason AS issue_slot_util_reason,
    l.tc_active_util,
    l.tc_active_util_source,
    l.tc_active_util_null_reason AS tc_active_util_reason,
    l.tc_issue_util,
    l.tc_issue_util_source,
    l.tc_issue_util_null_reason AS tc_issue_util_reason,
    l.tc_inst_share,
    l.tc_inst_share_source,
    l.tc_inst_share_null_reason AS tc_inst_share_reason,
    l.tc_active_share,
    l.tc_active_share_source,
    l.tc_active_share_null_reason AS tc_active_share_reason
FROM ncu_kernels AS k
JOIN ncu_levels AS l
  ON l.run_id = k.run_id AND l.ncu_source_id = k.ncu_source_id AND l.ncu_id = k.ncu_id
-- run_id: run; joins runs.run_id
-- ncu_source_id: Nsight Compute export within the run (runs.ncu_sources)
-- ncu_id: 0-based launch index within the export (the CSV's ID, the report's action index)
-- kernel_name: kernel name as the export reports it
-- kernel_base_name: function name without namespace, template arguments or parameters
-- duration_ns: gpu__time_duration of the kernel under ncu (clocks locked, caches flushed), ns
-- arch: architecture whose counters were used (sm_80, ...)
-- sm_count: SMs used to total sm__ counters (4 SMSPs per SM)
-- smsp_active_util: SMSP active cycles / SMSP elapsed cycles, 0..1 (Table I SMSP active utilization); NULL when its counters are absent
-- smsp_active_util_source: counters (and conversion) that gave smsp_active_util
-- smsp_active_util_reason: why smsp_active_util is NULL; NULL when it has a value
-- issue_slot_util: SMSP issue cycles / SMSP elapsed cycles, 0..1 (Table I SMSP issue slot utilization); NULL when its counters are absent
-- issue_slot_util_source: counters (and conversion) that gave issue_slot_util
-- issue_slot_util_reason: why issue_slot_util is NULL; NULL when it has a value
-- tc_active_util: tensor-pipe active cycles / SMSP elapsed cycles, 0..1 (Table I TC active utilization); NULL when its counters are absent
-- tc_active_util_source: counters (and conversion) that gave tc_active_util
-- tc_active_util_reason: why tc_active_util is NULL; NULL when it has a value
-- tc_issue_util: tensor instructions / SMSP elapsed cycles, 0..1 (Table I TC issue slot utilization); NULL when its counters are absent
-- tc_issue_util_source: counters (and conversion) that gave tc_issue_util
-- tc_issue_util_reason: why tc_issue_util is NULL; NULL when it has a value
-- tc_inst_share: tensor instructions / instructions issued, 0..1 (§IV bound 1 on tensor-core use); NULL when its counters are absent
-- tc_inst_share_source: counters (and conversion) that gave tc_inst_share
-- tc_inst_share_reason: why tc_inst_share is NULL; NULL when it has a value
-- tc_active_share: tensor-pipe active cycles / SMSP active cycles, 0..1 (§IV bound 2 on tensor-core use); NULL when its counters are absent
-- tc_active_share_source: counters (and conversion) that gave tc_active_share
-- tc_active_share_reason: why tc_active_share is NULL; NULL when it has a value
