-- kernel_utilization: the hardware levels of every matched trace kernel, with its framework
-- context (operator, layer, iteration) from the trace and its counters from Nsight Compute.
-- Grain: one row per run, trace kernel and ncu export it matched.
-- [project] A kernel's ratios joined to its framework context through the matcher
-- (etl/match/).
-- v2: the rows and columns of v1, plus layer_kind, pass and layer_status (kernels; backward
-- kernels carry their forward op's layer; sql/CHANGELOG.md 2026-11-25, issue #18).
SELECT
    k.run_id,
    r.run_name,
    k.source_id,
    k.rank,
    k.device_id,
    k.kernel_id,
    m.ncu_source_id,
    m.ncu_id,
    m.score,
    k.name,
    k.op_name,
    k.layer,
    k.iteration,
    k.dur_ns,
    u.duration_ns AS ncu_duration_ns,
    u.smsp_active_util,
    u.issue_slot_util,
    u.tc_active_util,
    u.tc_issue_util,
    u.tc_inst_share,
    u.tc_active_share,
    k.layer_kind,
    k.pass,
    k.layer_status
FROM kernel_match AS m
JOIN kernels AS k
  ON k.run_id = m.run_id AND k.source_id = m.source_id AND k.kernel_id = m.kernel_id
JOIN ncu_kernel_utilization_v1 AS u
  ON u.run_id = m.run_id AND u.ncu_source_id = m.ncu_source_id AND u.ncu_id = m.ncu_id
JOIN runs AS r ON r.run_id = m.run_id
WHERE m.match_status = 'matched'
-- run_id: run; joins runs.run_id
-- run_name: the run folder's name
-- source_id: trace file within the run
-- rank: distributed rank; NULL without distributedInfo
-- device_id: GPU index as the trace numbers it
-- kernel_id: trace kernel; joins kernels.kernel_id within source_id
-- ncu_source_id: ncu export of the match
-- ncu_id: matched ncu kernel; joins ncu_kernel_utilization
-- score: match confidence, 0..1
-- name: kernel name as the trace writes it
-- op_name: outermost cpu_op enclosing the launch; NULL when none
-- layer: innermost nn.Module / record_function scope of the launch, for a backward kernel its forward op's (kernels.layer); NULL when none
-- iteration: N of the ProfilerStep that launched it; NULL outside steps
-- dur_ns: duration in the trace, ns
-- ncu_duration_ns: duration under Nsight Compute (clocks locked, caches flushed), ns
-- smsp_active_util: SMSP active / SMSP elapsed cycles, 0..1; NULL when not measured
-- issue_slot_util: SMSP issue / SMSP elapsed cycles, 0..1; NULL when not measured
-- tc_active_util: tensor-pipe active / SMSP elapsed cycles, 0..1; NULL when not measured
-- tc_issue_util: tensor instructions / SMSP elapsed cycles, 0..1; NULL when not measured
-- tc_inst_share: tensor instructions / instructions issued, 0..1; NULL when not measured
-- tc_active_share: tensor-pipe active / SMSP active cycles, 0..1; NULL when not measured
-- layer_kind: module, user_annotation, optimizer, communication (Kineto), name_scope (TF), nvtx (nsys); NULL when layer is NULL
-- pass: forward, backward or optimizer pass that launched the kernel; NULL when unknown
-- layer_status: how layer was found or why it is NULL (kernels.layer_status)
