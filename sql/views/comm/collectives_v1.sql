-- collectives: what each collective carried and how its time splits into waiting and moving.
-- Grain: one row per collective instance per rank: each communication kernel (kernel_type
-- communication) of a trace source, with the collective op that launched it (collective_ops:
-- the record_param_comms op holding its launch call on the launching thread), 'wait' ops
-- left out (Work.wait() moves nothing).
-- collective normalises PyTorch's name (allreduce, allgather, reducescatter, broadcast,
-- reduce, alltoall, send, recv, barrier, gather, scatter; *_coalesced and the _base forms
-- map to their collective), else the kernel's name (NCCL's ncclKernel_AllReduce_...,
-- ncclDevKernel_AllGather_..., RCCL's, PyTorch symmetric memory's multimem_all_reduce_...:
-- all_reduce, all_gather, reduce_scatter, all_to_all, SendRecv (sendrecv), Broadcast, Reduce).
-- bytes = elements x dtype's size (c10's ScalarType sizes). nccl-tests' size S and bus
-- factor, doc/PERFORMANCE.md of github.com/NVIDIA/nccl-tests: allreduce S = input bytes,
-- busbw = algbw x 2(n-1)/n; allgather S = output bytes (all ranks' data), x (n-1)/n;
-- reducescatter S = input bytes (all ranks' data), x (n-1)/n; alltoall S = input bytes,
-- x (n-1)/n; broadcast, reduce, send, recv S = input bytes, x 1; n = group_size.
-- Pairing across the ranks of one run (pairing): by process group and seq (torch >= 2.12),
-- else by the order of the group's collectives of one kind on each rank (group_order), else,
-- without metadata, by the order of the kernels of one kind on the rank's n-th stream by
-- first use (stream_order). Ranks record on their own clocks: each source's clock is
-- aligned by the median difference of its collectives' ends from the instances' mean end
-- (a collective's transfer completes on every rank within microseconds). An instance whose
-- aligned ends still spread (end_spread_ns) more than max(100 us, 10% of its shortest
-- kernel) was paired wrongly (p2p ops without peer metadata, a rank that skipped a
-- collective): its wait stays NULL. Else wait_ns = the last rank's aligned start - this
-- rank's (clipped to the kernel), transfer_ns the rest;
-- algbw = S / transfer_ns (bytes per ns = GB/s).
-- [project] The views are this project's; the size and bus-bandwidth rules are nccl-tests'
-- and wait and transfer follow TraceLens's split (NcclAnalyser: wait = latest start - own).
WITH element_sizes AS (
    SELECT * FROM (VALUES
        ('Byte', 1), ('Char', 1), ('Bool', 1), ('Float8_e5m2', 1), ('Float8_e4m3fn', 1),
        ('Float8_e5m2fnuz', 1), ('Float8_e4m3fnuz', 1), ('Short', 2), ('Half', 2),
        ('BFloat16', 2), ('UInt16', 2), ('Int', 4), ('Float', 4), ('UInt32', 4), ('Long', 8),
        ('Double', 8), ('ComplexFloat', 8), ('UInt64', 8), ('ComplexDouble', 16))
        AS t(dtype, element_bytes)
),
kernels_launched AS (
    SELECT k.run_id, r.run_name, k.source_id, k.rank, k.device_id, k.stream_id, k.kernel_id,
           k.name AS kernel_name, k.ts_ns, k.dur_ns, k.iteration,
           h.pid, h.tid, h.ts_ns AS launch_ns
    FROM kernels AS k
    JOIN runs AS r ON r.run_id = k.run_id
    LEFT JOIN host_events AS h
      ON h.run_id = k.run_id AND h.source_id = k.source_id AND h.event_id = k.launch_event_id
    WHERE k.kernel_type = 'communication' AND k.kind = 'kernel' AND k.ts_ns IS NOT NULL
      AND k.dur_ns >= 0
),
ops AS (
    SELECT o.*, h.pid, h.tid
    FROM collective_ops AS o
    JOIN host_events AS h
      ON h.run_id = o.run_id AND h.source_id = o.source_id AND h.event_id = o.event_id
    WHERE coalesce(o.collective_name, '') <> 'wait'
),
with_op AS (
    SELECT k.*, o.event_id AS op_event_id, o.collective_name, o.dtype, o.in_msg_nelems,
           o.out_msg_nelems, o.group_size, o.process_group_name, o.seq
    FROM kernels_launched AS k
    LEFT JOIN ops AS o
      ON o.run_id = k.run_id AND o.source_id = k.source_id AND o.pid IS NOT DISTINCT FROM k.pid
     AND o.tid IS NOT DISTINCT FROM k.tid AND k.launch_ns >= o.ts_ns
     AND k.launch_ns <= o.ts_ns + o.dur_ns
    QUALIFY row_number() OVER (PARTITION BY k.run_id, k.source_id, k.kernel_id
                               ORDER BY o.ts_ns DESC NULLS LAST) = 1
),
named AS (
    SELECT w.*,
           CASE
               WHEN w.collective_name IS NOT NULL THEN
                   CASE
                       WHEN regexp_matches(w.collective_name, '^_?all_?reduce') THEN 'allreduce'
                       WHEN regexp_matches(w.collective_name, '^_?all_?gather') THEN 'allgather'
                       WHEN regexp_matches(w.collective_name, '^_?reduce_?scatter')
                           THEN 'reducescatter'
                       WHEN regexp_matches(w.collective_name, '^_?all_?to_?all') THEN 'alltoall'
                       WHEN regexp_matches(w.collective_name,
                                           '^(broadcast|reduce|send|recv|barrier|gather|scatter)')
                           THEN regexp_extract(w.collective_name,
                                               '^(broadcast|reduce|send|recv|barrier|gather|scatter)')
                       ELSE w.collective_name
                   END
               WHEN regexp_matches(w.kernel_name, '(?i)all_?reduce') THEN 'allreduce'
               WHEN regexp_matches(w.kernel_name, '(?i)all_?gather') THEN 'allgather'
               WHEN regexp_matches(w.kernel_name, '(?i)reduce_?scatter') THEN 'reducescatter'
               WHEN regexp_matches(w.kernel_name, '(?i)all_?to_?all') THEN 'alltoall'
               WHEN regexp_matches(w.kernel_name, '(?i)send_?recv') THEN 'sendrecv'
               WHEN regexp_matches(w.kernel_name, '(?i)broadcast') THEN 'broadcast'
               WHEN regexp_matches(w.kernel_name, '(?i)_reduce(_|[(]|$)') THEN 'reduce'
           END AS collective,
           w.in_msg_nelems * e.element_bytes AS bytes_in,
           w.out_msg_nelems * e.element_bytes AS bytes_out
    FROM with_op AS w
    LEFT JOIN element_sizes AS e ON e.dtype = w.dtype
),
streams AS (
    SELECT run_id, source_id, stream_id,
           dense_rank() OVER (PARTITION BY run_id, source_id ORDER BY min(ts_ns), stream_id)
               AS stream_ordinal
    FROM named
    GROUP BY run_id, source_id, stream_id
),
keyed AS (
    SELECT n.*,
           CASE WHEN n.seq IS NOT NULL THEN 'seq'
                WHEN n.process_group_name IS NOT NULL THEN 'group_order'
                ELSE 'stream_order' END AS pairing,
           CASE WHEN n.seq IS NOT NULL
                    THEN 'seq/' || n.process_group_name || '/' || n.seq
                WHEN n.process_group_name IS NOT NULL
                    THEN 'group/' || n.process_group_name || '/' || n.collective || '/'
                         || row_number() OVER (PARTITION BY n.run_id, n.source_id,
                                                  n.process_group_name, n.collective
                                               ORDER BY n.ts_ns, n.kernel_id)
                ELSE 'stream/' || s.stream_ordinal || '/' || n.collective || '/'
                     || row_number() OVER (PARTITION BY n.run_id, n.source_id, n.stream_id,
                                              n.collective ORDER BY n.ts_ns, n.kernel_id)
           END AS instance
    FROM named AS n
    JOIN streams AS s
      ON s.run_id = n.run_id AND s.source_id = n.source_id AND s.stream_id = n.stream_id
),
grouped AS (
    SELECT *,
           count(*) OVER instance_ranks AS rank_count,
           -- ends relative to the instance's first end: small numbers, exact in a double
           ts_ns + dur_ns - min(ts_ns + dur_ns) OVER instance_ranks AS end_after_first_ns
    FROM keyed
    WINDOW instance_ranks AS (PARTITION BY run_id, instance)
),
centred AS (
    SELECT *,
           end_after_first_ns - avg(end_after_first_ns) OVER (PARTITION BY run_id, instance)
               AS end_from_mean_ns
    FROM grouped
),
offsets AS (
    SELECT run_id, source_id, round(median(end_from_mean_ns))::BIGINT AS clock_offset_ns
    FROM centred
    WHERE rank_count > 1
    GROUP BY run_id, source_id
),
aligned AS (
    SELECT g.*, g.ts_ns - coalesce(o.clock_offset_ns, 0) AS aligned_start_ns,
           max(g.ts_ns - coalesce(o.clock_offset_ns, 0)) OVER (PARTITION BY g.run_id, g.instance)
               AS last_start_ns
    FROM centred AS g
    LEFT JOIN offsets AS o ON o.run_id = g.run_id AND o.source_id = g.source_id
),
agreed AS (
    SELECT *,
           max(aligned_start_ns + dur_ns) OVER instance_ranks
               - min(aligned_start_ns + dur_ns) OVER instance_ranks AS end_spread_ns,
           min(dur_ns) OVER instance_ranks AS shortest_ns
    FROM aligned
    WINDOW instance_ranks AS (PARTITION BY run_id, instance)
),
split AS (
    SELECT *,
           CASE WHEN rank_count > 1 AND end_spread_ns <= greatest(100000, 0.1 * shortest_ns)
                THEN least(dur_ns, greatest(0, last_start_ns - aligned_start_ns))
           END AS wait_ns,
           CASE collective
               WHEN 'allgather' THEN bytes_out
               ELSE bytes_in
           END AS size_bytes,
           CASE
               WHEN collective = 'allreduce'
                   THEN 2.0 * (group_size - 1) / nullif(group_size, 0)
               WHEN collective IN ('allgather', 'reducescatter', 'alltoall')
                   THEN 1.0 * (group_size - 1) / nullif(group_size, 0)
               WHEN collective IN ('broadcast', 'reduce', 'send', 'recv') THEN 1.0
           END AS bus_factor
    FROM agreed
)
SELECT
    run_id,
    run_name,
    source_id,
    rank,
    device_id,
    stream_id,
    iteration,
    kernel_id,
    kernel_name,
    collective,
    collective_name,
    process_group_name AS process_group,
    group_size,
    seq,
    instance,
    pairing,
    rank_count,
    end_spread_ns,
    dtype,
    bytes_in,
    bytes_out,
    ts_ns AS start_ns,
    aligned_start_ns,
    dur_ns AS duration_ns,
    wait_ns,
    dur_ns - wait_ns AS transfer_ns,
    size_bytes / nullif(dur_ns - wait_ns, 0) AS algbw_gb_per_s,
    size_bytes / nullif(dur_ns - wait_ns, 0) * bus_factor AS busbw_gb_per_s,
    size_bytes / nullif(dur_ns, 0) * bus_factor AS kernel_busbw_gb_per_s,
    CAST(NULL AS BOOLEAN) AS single_node
FROM split
-- run_id: run; joins runs.run_id
-- run_name: the run folder's name
-- source_id: trace source (one rank's file)
-- rank: distributed rank of the source; NULL when the trace does not say
-- device_id: GPU index of the kernel
-- stream_id: stream of the kernel
-- iteration: the kernel's iteration (launched in ProfilerStep#N); NULL outside steps
-- kernel_id: kernels.kernel_id of the communication kernel
-- kernel_name: the kernel's name (ncclKernel_..., ncclDevKernel_..., RCCL's)
-- collective: allreduce, allgather, reducescatter, alltoall, broadcast, reduce, send, recv, barrier, gather, scatter, or sendrecv for a kernel without metadata; NULL when neither the op nor the kernel's name says
-- collective_name: the name PyTorch recorded (collective_ops.collective_name); NULL without metadata
-- process_group: the process group's name; NULL without metadata
-- group_size: ranks in the process group; NULL without metadata
-- seq: the collective's sequence number in its group (torch >= 2.12); NULL otherwise
-- instance: the key that pairs this row with the same collective on the run's other ranks (see pairing)
-- pairing: seq (group and sequence number), group_order (the n-th collective of its kind in the group on each rank) or stream_order (the n-th kernel of its kind on the rank's n-th stream; no metadata)
-- rank_count: rows of the run with the same instance (ranks paired); 1: no other rank of this collective in the run
-- end_spread_ns: the latest aligned end of the instance's ranks - the earliest, ns; a pairing whose ends spread more than max(100 us, 10% of the shortest duration) is taken as wrong (wait_ns NULL): one collective's transfer ends together on every rank
-- dtype: element type as c10 names it; NULL without metadata
-- bytes_in: input bytes (elements x dtype's size); NULL without metadata or for a dtype of unknown size
-- bytes_out: output bytes
-- start_ns: the kernel's start on the source's clock (ns since the trace's epoch)
-- aligned_start_ns: start_ns moved onto the run's common clock (the source's clock offset, see the header, subtracted); equals start_ns when no other rank is paired
-- duration_ns: the kernel's duration, ns
-- wait_ns: of duration_ns, the wait for the last rank to arrive (clocks aligned); NULL when no other rank is paired
-- transfer_ns: duration_ns - wait_ns, the time moving data; NULL when wait_ns is
-- algbw_gb_per_s: nccl-tests' algorithm bandwidth, size (see the header) / transfer_ns, in GB/s; NULL without bytes or transfer time
-- busbw_gb_per_s: nccl-tests' bus bandwidth, algbw x the collective's bus factor, in GB/s
-- kernel_busbw_gb_per_s: the bus bandwidth over the whole kernel (wait included), size / duration_ns x the bus factor, in GB/s: what one rank's trace alone can say, a lower bound of busbw_gb_per_s; NULL without bytes
-- single_node: whether the collective stayed on one node; NULL: traces do not name their hosts
