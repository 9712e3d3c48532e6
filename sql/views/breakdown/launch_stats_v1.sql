{% from 'launch_stats.sql' import with_launch_call -%}
-- launch_stats: kernel launches by kernel name: how long the CPU's launch call took, how
-- long the activity waited after it, how long it ran.
-- Grain: one row per run, source (rank) and activity name (kernels, copies and sets that
-- have a launch call).
-- For each activity with its launch call (kernels.launch_event_id): launch_ns = the call's
-- duration (HTA's cpu_duration); launch_delay_ns = activity start - call end, 0 when
-- negative (HTA's launch_delay); queue_delay_ns = activity start - call start (launch to
-- start). A short kernel runs for less time than its launch call took, launch_ns <= 50 µs
-- (HTA's "GPU events with a shorter duration than the corresponding CPU events"); a
-- launch outlier's call took over 50 µs (HTA's runtime_cutoff) and a delay outlier waited
-- over 100 µs (HTA's launch_delay_cutoff). Kernels of one CUDA-graph launch share its call.
-- [project] HTA's get_cuda_kernel_launch_stats, reimplemented and aggregated by name; HTA
-- gives one row per correlation id of the ranks asked for (rank 0 by default).
WITH launched AS (
    SELECT k.run_id, r.run_name, k.source_id, k.rank, k.name, k.kernel_type,
           k.dur_ns, h.dur_ns AS launch_ns,
           greatest(k.ts_ns - (h.ts_ns + h.dur_ns), 0) AS launch_delay_ns,
           k.ts_ns - h.ts_ns AS queue_delay_ns
{{ with_launch_call() }}
)
SELECT
    run_id,
    run_name,
    source_id,
    rank,
    name AS kernel_name,
    kernel_type,
    count(*) AS launch_count,
    avg(launch_ns) AS mean_launch_ns,
    max(launch_ns) AS max_launch_ns,
    avg(launch_delay_ns) AS mean_launch_delay_ns,
    quantile_disc(launch_delay_ns, 0.9) AS p90_launch_delay_ns,
    avg(queue_delay_ns) AS mean_queue_delay_ns,
    avg(dur_ns) AS mean_kernel_ns,
    count(*) FILTER (WHERE dur_ns < launch_ns AND launch_ns <= 50000) AS short_kernel_count,
    count(*) FILTER (WHERE dur_ns < launch_ns AND launch_ns <= 50000) / nullif(count(*), 0)
        AS short_kernel_share,
    count(*) FILTER (WHERE launch_ns > 50000) AS launch_outlier_count,
    count(*) FILTER (WHERE launch_delay_ns > 100000) AS delay_outlier_count
FROM launched
GROUP BY run_id, run_name, source_id, rank, name, kernel_type
-- run_id: run; joins runs.run_id
-- run_name: the run folder's name
-- source_id: input file within the run (one per rank)
-- rank: distributed rank; NULL when the trace has no distributedInfo
-- kernel_name: the activity's name (kernels.name)
-- kernel_type: computation, communication or memory
-- launch_count: activities of this name with a launch call
-- mean_launch_ns: mean duration of the launch call on the CPU, ns (HTA's cpu_duration)
-- max_launch_ns: longest launch call, ns
-- mean_launch_delay_ns: mean of max(0, start - end of the launch call), ns (HTA's launch_delay)
-- p90_launch_delay_ns: 90th percentile of the launch delay, ns (one of the values)
-- mean_queue_delay_ns: mean of start - start of the launch call, ns
-- mean_kernel_ns: mean duration on the GPU, ns
-- short_kernel_count: activities that ran shorter than their launch call took, launch call <= 50 µs (HTA's short kernels)
-- short_kernel_share: short_kernel_count / launch_count
-- launch_outlier_count: launch calls over 50 µs (HTA's runtime_cutoff)
-- delay_outlier_count: launch delays over 100 µs (HTA's launch_delay_cutoff)
