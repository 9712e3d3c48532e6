{% from 'stragglers.sql' import stragglers -%}
-- stragglers: each rank's iteration against the median rank of the same run and iteration.
-- Grain: one row per run, iteration and source (rank) and device that ran kernels.
-- A straggler computes longer than the others, who then wait for it in their collectives:
-- its computation_ns is above the median and its exposed communication (the wait) below.
-- straggler is true for the rank with the most computation of the iteration when that is
-- over 5% above the median rank's. Ranks are compared by ProfilerStep number.
-- [project] HTA leaves stragglers to the reader (it plots per-rank figures); the median
-- reference and the 5% rule are this project's. computation_ns and
-- exposed_communication_ns are comm_overlap's.
-- The cause, seen in the collectives (collectives_v1, collective_skew_v1):
-- collective_wait_ns is the rank's own wait for the last rank in its paired collectives;
-- made_others_wait_ns the other ranks' waits at the collectives this rank reached last;
-- waited_for_most is true for the rank of the iteration that made the others wait longest
-- (ties: the lowest source). Iterations are collective_skew's (the earliest of the ranks').
-- [project] The wait rule is TraceLens's (NcclAnalyser: wait = latest start - own start).
WITH by_computation AS (
    {{ stragglers('comm_overlap_v3') | indent(4) }}
),
own_waits AS (
    SELECT run_id, iteration, source_id, device_id, sum(wait_ns) AS collective_wait_ns
    FROM collectives_v1
    GROUP BY run_id, iteration, source_id, device_id
),
caused AS (
    SELECT run_id, iteration, last_source_id AS source_id,
           sum(waited_ns) AS made_others_wait_ns, count(*) AS last_arrival_count,
           row_number() OVER (PARTITION BY run_id, iteration
                              ORDER BY sum(waited_ns) DESC, last_source_id) AS wait_order
    FROM collective_skew_v1
    WHERE last_source_id IS NOT NULL
    GROUP BY run_id, iteration, last_source_id
)
SELECT
    b.run_id,
    b.run_name,
    b.iteration,
    b.source_id,
    b.rank,
    b.device_id,
    b.rank_count,
    b.window_ns,
    b.median_window_ns,
    b.window_vs_median_ratio,
    b.computation_ns,
    b.median_computation_ns,
    b.computation_vs_median_ratio,
    b.exposed_communication_ns,
    b.median_exposed_communication_ns,
    b.exposed_communication_vs_median_ns,
    b.straggler,
    o.collective_wait_ns,
    coalesce(w.made_others_wait_ns, CASE WHEN o.collective_wait_ns IS NOT NULL THEN 0 END)
        AS made_others_wait_ns,
    w.last_arrival_count,
    coalesce(w.wait_order = 1 AND w.made_others_wait_ns > 0, false) AS waited_for_most
FROM by_computation AS b
LEFT JOIN own_waits AS o
  ON o.run_id = b.run_id AND o.iteration IS NOT DISTINCT FROM b.iteration
 AND o.source_id = b.source_id AND o.device_id = b.device_id
LEFT JOIN caused AS w
  ON w.run_id = b.run_id AND w.iteration IS NOT DISTINCT FROM b.iteration
 AND w.source_id = b.source_id
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
-- collective_wait_ns: this rank's waits for the last rank in its paired collectives of the iteration, ns (collectives_v1.wait_ns summed); NULL when none of its collectives was paired
-- made_others_wait_ns: the other ranks' waits at the collectives this rank reached last, ns (collective_skew_v1.waited_ns summed); 0 when it was never last; NULL when none of its collectives was paired
-- last_arrival_count: collectives of the iteration this rank reached last; NULL when none
-- waited_for_most: true for the rank that made the others wait longest in this iteration (ties: the lowest source_id); false otherwise, also when no collective was paired
