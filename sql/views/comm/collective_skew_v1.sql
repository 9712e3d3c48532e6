-- collective_skew: how far apart the ranks arrived at each collective, and who came last.
-- Grain: one row per run and collective instance (collectives_v1.instance) with at least
-- one rank (rank_count 1: nothing to compare). skew_ns = the last rank's aligned start -
-- the first's; last_rank is the rank the others waited for; waited_ns sums the other
-- ranks' wait for it.
-- [project] Over collectives_v1's pairing and clock alignment.
SELECT
    run_id,
    run_name,
    instance,
    min(iteration) AS iteration,
    any_value(collective) AS collective,
    any_value(process_group) AS process_group,
    any_value(seq) AS seq,
    any_value(pairing) AS pairing,
    count(*) AS rank_count,
    arg_max(rank, aligned_start_ns) FILTER (WHERE wait_ns IS NOT NULL) AS last_rank,
    arg_max(source_id, aligned_start_ns) FILTER (WHERE wait_ns IS NOT NULL) AS last_source_id,
    max(wait_ns) AS skew_ns,
    sum(wait_ns) AS waited_ns,
    min(transfer_ns) AS min_transfer_ns,
    max(end_spread_ns) AS end_spread_ns
FROM collectives_v1
GROUP BY run_id, run_name, instance
-- run_id: run; joins runs.run_id
-- run_name: the run folder's name
-- instance: the collective instance (collectives_v1.instance)
-- iteration: the earliest iteration of its ranks' kernels; NULL outside steps
-- collective: the normalised collective (collectives_v1.collective)
-- process_group: the process group's name; NULL without metadata
-- seq: the sequence number in the group (torch >= 2.12); NULL otherwise
-- pairing: how the ranks were paired (collectives_v1.pairing)
-- rank_count: ranks paired in this instance
-- last_rank: the rank that arrived last (the others waited for it); NULL with one rank
-- last_source_id: the source of last_rank
-- skew_ns: the first rank's wait for the last, ns (the longest wait_ns); NULL with one rank
-- waited_ns: the ranks' waits summed, ns; NULL with one rank
-- min_transfer_ns: the shortest transfer_ns of the ranks, ns; NULL when the pairing was not kept
-- end_spread_ns: how far apart the ranks' aligned ends lie, ns (collectives_v1.end_spread_ns); over the tolerance, the pairing is not kept and last_rank, skew_ns and waited_ns are NULL
