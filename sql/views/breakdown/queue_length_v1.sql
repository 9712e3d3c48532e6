-- queue_length: the number of outstanding operations of each GPU stream over time, as a
-- step function.
-- Grain: one row per run, source (rank), device, stream and change (a launch call or the
-- start of an activity on the stream).
-- The length goes up by 1 when a launch call that enqueues an activity on the stream
-- starts, and down by 1 when that activity starts on the GPU (HTA's definition); only
-- activities with a known launch call count. At equal times the start is counted first.
-- Every kernel of a CUDA-graph launch counts +1 at the graph call (cudaGraphLaunch): its
-- kernels all carry that call's correlation, so a graph of N kernels raises the length by
-- N at once and each start lowers it by 1 (issue #33: 544 queued on one SGLang stream,
-- where HTA said 5).
-- [project] HTA's get_queue_length_time_series, reimplemented; the length holds from ts_ns
-- until the next row's ts_ns. Per run and rank, where HTA works on one rank. HTA 0.5
-- counts only the launch calls it names (cudaLaunchKernel, cuLaunchKernel, cudaMemcpyAsync,
-- cudaMemsetAsync, hip*, ...): graph launches and their kernels are in neither count.
WITH launched AS (
    SELECT k.run_id, r.run_name, k.source_id, k.rank, k.device_id, k.stream_id,
           k.kernel_id, k.iteration, k.ts_ns, h.ts_ns AS launch_ns
    FROM kernels AS k
    JOIN runs AS r ON r.run_id = k.run_id
    JOIN host_events AS h
      ON h.run_id = k.run_id AND h.source_id = k.source_id AND h.event_id = k.launch_event_id
    WHERE k.kernel_type IN ('computation', 'communication', 'memory')
      AND k.device_id IS NOT NULL AND k.stream_id IS NOT NULL
      AND k.ts_ns IS NOT NULL AND h.ts_ns IS NOT NULL
),
changes AS (
    SELECT run_id, run_name, source_id, rank, device_id, stream_id, kernel_id, iteration,
           launch_ns AS ts_ns, 1 AS step
    FROM launched
    UNION ALL
    SELECT run_id, run_name, source_id, rank, device_id, stream_id, kernel_id, iteration,
           ts_ns, -1 AS step
    FROM launched
)
SELECT
    run_id,
    run_name,
    source_id,
    rank,
    device_id,
    stream_id,
    ts_ns,
    CASE WHEN step = 1 THEN 'launch' ELSE 'start' END AS change,
    kernel_id,
    iteration,
    sum(step) OVER (
        PARTITION BY run_id, run_name, source_id, device_id, stream_id
        ORDER BY ts_ns, step, kernel_id
        ROWS UNBOUNDED PRECEDING) AS queue_length
FROM changes
-- run_id: run; joins runs.run_id
-- run_name: the run folder's name
-- source_id: input file within the run (one per rank)
-- rank: distributed rank; NULL when the trace has no distributedInfo
-- device_id: GPU index as the trace numbers it
-- stream_id: stream (queue) the activity runs on
-- ts_ns: time of the change, ns since the trace's epoch (the launch call's start, or the activity's start)
-- change: launch (+1) or start (-1)
-- kernel_id: the activity enqueued or started; joins kernels.kernel_id
-- iteration: N of the ProfilerStep#N that launched the activity; NULL outside every step
-- queue_length: operations launched on the stream and not yet started, after this change
