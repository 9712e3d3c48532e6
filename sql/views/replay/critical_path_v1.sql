-- critical_path: what each iteration's end waited on, back to its start.
-- Grain: one row per run, source, device, iteration and segment of the path (seq order).
-- The run's dependency graph (host calls in thread order, launches, stream order, the
-- synchronizations the trace records, collectives across ranks) replayed with the measured
-- durations, walked back from the end of gpu_utilization's window along the edge that set
-- each instant (etl/replay/). The segments tile the window: their dur_ns add up to
-- window_ns. Kept by etl critical-path (critical_path_segments); this view names the runs.
-- [project] The replay and the walk are this project's; the paper has no critical path.
SELECT
    c.run_id,
    r.run_name,
    c.source_id,
    c.rank,
    c.device_id,
    c.iteration,
    c.seq,
    c.segment_kind,
    c.name,
    c.layer,
    c.kernel_type,
    c.start_ns,
    c.dur_ns
FROM critical_path_segments AS c
JOIN runs AS r ON r.run_id = c.run_id
-- run_id: run; joins runs.run_id
-- run_name: the run folder's name
-- source_id: trace source (rank's file) whose window this is
-- rank: distributed rank (NULL when the trace does not say)
-- device_id: GPU index of the window (gpu_utilization's grain)
-- iteration: N of the step; NULL for a trace without steps (one window for the whole trace)
-- seq: order of the segment in the path, 0 first (earliest)
-- segment_kind: host, launch, queue, gpu, sync_wait or comm_wait (schemas/critical_path_segments.toml)
-- name: the kernel (gpu, queue, comm_wait), the op that launched it (launch), the op around the call (host), the call (sync_wait)
-- layer: the layer of the activity the segment belongs to (kernels.layer); NULL for other host time
-- kernel_type: kernels.kernel_type of the activity; NULL for host segments
-- start_ns: start of the segment (ns since the trace's epoch)
-- dur_ns: length of the segment in ns
