-- stragglers: each rank's iteration against the median rank of the same run and iteration.
-- Grain: one row per run, iteration and source (rank) and device that ran kernels.
-- A straggler computes longer than the others, who then wait for it in their collectives:
-- its computation_ns is above the median and its exposed communication (the wait) below.
-- straggler is true for the rank with the most computation of the iteration when that is
-- over 5% above the median rank's. Ranks are compared by ProfilerStep number.
-- [project] HTA leaves stragglers to the reader (it plots per-rank figures); the median
-- reference and the 5% rule are this project's. computation_ns and
-- exposed_communication_ns are comm_overlap's.
-- v2: v1's rows, faster: reads comm_overlap_v2.
-- v3: v2's rows, faster: reads comm_overlap_v3.
WITH ranked AS (
    SELECT
        c.*,
        median(c.window_ns) OVER per_iteration AS median_window_ns,
        median(c.computation_ns) OVER per_iteration AS median_computation_ns,
        median(c.exposed_communication_ns) OVER per_iteration
            AS median_exposed_communication_ns,
        count(*) OVER per_iteration AS rank_count,
        row_number() OVER (PARTITION BY c.run_id, c.run_name, c.iteration
                           ORDER BY c.computation_ns DESC, c.source_id, c.device_id)
            AS computation_order
    FROM comm_overlap_v3 AS c
    WINDOW per_iteration AS (PARTITION BY c.run_id, c.run_name, c.iteration)
)
SELECT
    run_id,
    run_name,
    iteration,
    source_id,
    rank,
    device_id,
    rank_count,
    window_ns,
    median_window_ns,
    window_ns / nullif(median_window_ns, 0) AS window_vs_median_ratio,
    computation_ns,
    median_computation_ns,
    computation_ns / nullif(median_computation_ns, 0) AS computation_vs_median_ratio,
    exposed_communication_ns,
    median_exposed_communication_ns,
    exposed_communication_ns - median_exposed_communication_ns
        AS exposed_communication_vs_median_ns,
    rank_count > 1 AND computation_order = 1
        AND computation_ns > 1.05 * median_computation_ns AS straggler
FROM ranked
-- run_id: run; joins runs.run_id
-- run_name: the run folder's name
-- iteration: N of ProfilerStep#N, compared across ranks; NULL for traces without steps
-- source_id: input file within the run (one per rank)
-- rank: distributed rank; NULL when the trace has no distributedInfo
-- device_id: GPU index as the trace numbers it
-- rank_count: rows (rank and device) of this run and iteration
-- window_ns: this rank's iteration window, ns
-- median_window_ns: median window of the ranks of this iteration, ns
-- window_vs_median_ratio: window_ns / median_window_ns; NULL when the median is 0
-- computation_ns: ns of the window with a computation kernel running
-- median_computation_ns: median computation_ns of the ranks, ns
-- computation_vs_median_ratio: computation_ns / median_computation_ns; NULL when the median is 0
-- exposed_communication_ns: communication not hidden by computation, ns: the wait in collectives
-- median_exposed_communication_ns: median exposed_communication_ns of the ranks, ns
-- exposed_communication_vs_median_ns: exposed_communication_ns - its median, ns (negative: this rank waited less than the median, as a straggler does)
-- straggler: true for the rank with the most computation when it is over 5% above the median; false otherwise (also with a single rank)
