-- idle_breakdown: the idle time of each GPU stream, classified as host wait, kernel wait
-- or other.
-- Grain: one row per run, source (rank), device, stream, iteration and idle_category.
-- Idle interval: the gap before an activity (kernel, copy or set) on its stream, from the
-- latest end of the earlier activities of the stream to its start, when positive. The gap
-- is classified by the activity after it (HTA's rule):
--   host_wait   its launch call started after the gap began: the GPU waited for the CPU;
--   kernel_wait not host wait (launched in time, or no launch call is known), and the
--               gap is under 30 µs: the overhead between back-to-back kernels (HTA's
--               default consecutive_kernel_delay is 30 in the trace's unit, which HTA
--               keeps: µs for Kineto's JSON, though its docstring says ns; 30 µs gives
--               HTA's results on the corpus, tests/views/test_hta_agreement.py);
--   other       not host wait and a longer gap (e.g. waiting for an event of another
--               stream; a gap before an activity without a launch call is other only
--               from 30 µs on, as in HTA, whose comparison with a missing launch time is
--               false).
-- The gap belongs to the iteration that launched the activity after it (kernels.iteration).
-- [project] HTA's idle time breakdown (get_idle_time_breakdown), reimplemented: HTA takes
-- the previous activity's end where this view takes the latest end of all earlier ones
-- (the same on a stream whose activities do not overlap), counts negative gaps where this
-- view leaves them out, and works on one rank over the whole trace.
WITH activities AS (
    SELECT k.run_id, r.run_name, k.source_id, k.rank, k.device_id, k.stream_id, k.kernel_id,
           k.iteration, k.ts_ns, k.ts_ns + k.dur_ns AS end_ns, h.ts_ns AS launch_ns
    FROM kernels AS k
    JOIN runs AS r ON r.run_id = k.run_id
    LEFT JOIN host_events AS h
      ON h.run_id = k.run_id AND h.source_id = k.source_id AND h.event_id = k.launch_event_id
    WHERE k.kernel_type IN ('computation', 'communication', 'memory')
      AND k.device_id IS NOT NULL AND k.stream_id IS NOT NULL
      AND k.ts_ns IS NOT NULL AND k.dur_ns >= 0
),
gaps AS (
    SELECT *,
           max(end_ns) OVER (
               PARTITION BY run_id, run_name, source_id, device_id, stream_id
               ORDER BY ts_ns, kernel_id
               ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS previous_end_ns
    FROM activities
),
classified AS (
    SELECT run_id, run_name, source_id, rank, device_id, stream_id, iteration,
           ts_ns - previous_end_ns AS idle_ns,
           CASE WHEN launch_ns > previous_end_ns THEN 'host_wait'
                WHEN ts_ns - previous_end_ns < 30000 THEN 'kernel_wait'
                ELSE 'other' END AS idle_category
    FROM gaps
    WHERE ts_ns > previous_end_ns
)
SELECT
    run_id,
    run_name,
    source_id,
    rank,
    device_id,
    stream_id,
    iteration,
    idle_category,
    count(*) AS interval_count,
    sum(idle_ns) AS idle_ns,
    sum(idle_ns) / nullif(sum(sum(idle_ns)) OVER (
        PARTITION BY run_id, run_name, source_id, device_id, stream_id, iteration), 0)
        AS idle_share,
    median(idle_ns) AS median_interval_ns,
    max(idle_ns) AS max_interval_ns
FROM classified
GROUP BY run_id, run_name, source_id, rank, device_id, stream_id, iteration, idle_category
-- run_id: run; joins runs.run_id
-- run_name: the run folder's name
-- source_id: input file within the run (one per rank)
-- rank: distributed rank; NULL when the trace has no distributedInfo
-- device_id: GPU index as the trace numbers it
-- stream_id: stream (queue) of the activities
-- iteration: N of the ProfilerStep#N that launched the activity after the gap; NULL: launched outside every step, or a trace without steps
-- idle_category: host_wait, kernel_wait or other (see the view's comment)
-- interval_count: idle intervals of this category
-- idle_ns: their total length, ns
-- idle_share: idle_ns / all idle ns of this stream and iteration (HTA's idle_time_ratio)
-- median_interval_ns: median length of one interval, ns
-- max_interval_ns: longest interval, ns
