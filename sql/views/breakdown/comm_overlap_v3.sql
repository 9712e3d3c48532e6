-- comm_overlap: how much of each iteration's communication is hidden by computation on the
-- same device.
-- Grain: one row per run, source (rank), device that ran kernels, and iteration (the
-- windows of gpu_utilization).
-- communication_ns = |Comm ∩ W| and computation_ns = |Comp ∩ W|, unions of the
-- communication and computation kernel intervals clipped to the window W; overlapped_ns =
-- |Comm ∩ Comp ∩ W| = communication_ns + computation_ns - |(Comm ∪ Comp) ∩ W|.
-- [project] The ratio is HTA's (get_comm_comp_overlap: time during which communication
-- and computation kernels both run, over the communication time, both unions of
-- intervals), taken per iteration window instead of over the whole trace of a rank; the
-- kernel types are this project's rules (etl/extract/kernel_types.toml), which also count
-- symmetric-memory all-reduce kernels as communication.
SELECT
    run_id,
    run_name,
    source_id,
    rank,
    device_id,
    iteration,
    window_end_ns - window_start_ns AS window_ns,
    communication_ns,
    computation_ns,
    communication_ns + computation_ns - computation_communication_ns AS overlapped_ns,
    computation_communication_ns - computation_ns AS exposed_communication_ns,
    (communication_ns + computation_ns - computation_communication_ns)
        / nullif(communication_ns, 0) AS comm_overlap_share
FROM _window_coverage_v1
-- run_id: run; joins runs.run_id
-- run_name: the run folder's name
-- source_id: input file within the run (one per rank)
-- rank: distributed rank; NULL when the trace has no distributedInfo
-- device_id: GPU index as the trace numbers it
-- iteration: N of ProfilerStep#N; NULL for a trace without steps
-- window_ns: length of the iteration window (gpu_utilization's), ns
-- communication_ns: ns of the window during which a communication kernel ran (union)
-- computation_ns: ns of the window during which a computation kernel ran (union)
-- overlapped_ns: ns during which both ran
-- exposed_communication_ns: communication_ns - overlapped_ns, communication not hidden by computation (temporal_breakdown's communication_ns)
-- comm_overlap_share: overlapped_ns / communication_ns in 0..1 (HTA's comp_comm_overlap ratio); NULL without communication
