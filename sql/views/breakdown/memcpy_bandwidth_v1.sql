-- memcpy_bandwidth: bytes moved and achieved bandwidth of GPU copies and sets, by
-- direction.
-- Grain: one row per run, source (rank), device, iteration and memory_kind (HtoD, DtoH,
-- DtoD, PtoP, memset, unknown).
-- Bytes are the trace's (kernels.bytes: Kineto's args.bytes); GB/s = bytes / duration
-- (10^9 bytes per s), over the activities that give both. An activity belongs to the
-- iteration that launched it (kernels.iteration).
-- [project] HTA lists memory bandwidth as counters over time (from the trace's memory
-- bandwidth args); this view sums bytes and time per direction instead, so its GB/s is a
-- time-weighted mean: Σ bytes / Σ duration.
SELECT
    k.run_id,
    r.run_name,
    k.source_id,
    k.rank,
    k.device_id,
    k.iteration,
    k.memory_kind,
    count(*) AS activity_count,
    count(k.bytes) AS with_bytes_count,
    sum(k.dur_ns) AS time_ns,
    sum(k.bytes) AS total_bytes,
    sum(k.bytes) FILTER (WHERE k.dur_ns > 0)
        / nullif(sum(k.dur_ns) FILTER (WHERE k.bytes IS NOT NULL AND k.dur_ns > 0), 0)
        AS bandwidth_gb_per_s,
    max(k.bytes / nullif(k.dur_ns, 0)) AS max_bandwidth_gb_per_s
FROM kernels AS k
JOIN runs AS r ON r.run_id = k.run_id
WHERE k.kernel_type = 'memory' AND k.dur_ns >= 0
GROUP BY k.run_id, r.run_name, k.source_id, k.rank, k.device_id, k.iteration, k.memory_kind
-- run_id: run; joins runs.run_id
-- run_name: the run folder's name
-- source_id: input file within the run (one per rank)
-- rank: distributed rank; NULL when the trace has no distributedInfo
-- device_id: GPU index as the trace numbers it
-- iteration: N of the ProfilerStep#N that launched the activities; NULL: launched outside every step, or a trace without steps
-- memory_kind: HtoD, DtoH, DtoD, PtoP, memset, or unknown (kernels.memory_kind)
-- activity_count: copies or sets of this kind
-- with_bytes_count: those whose trace gives the bytes
-- time_ns: sum of their durations, ns
-- total_bytes: sum of the bytes moved or set, bytes; NULL when no activity gives them
-- bandwidth_gb_per_s: total bytes / total time of the activities that give bytes and last over 0 ns, in GB/s (10^9 bytes per s, as bytes per ns); NULL when there are none
-- max_bandwidth_gb_per_s: the highest bandwidth of one activity, GB/s
