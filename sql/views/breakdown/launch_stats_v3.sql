{% from 'launch_stats.sql' import launched, graphed, call_stats, kernel_stats, stats_joined -%}
-- launch_stats: kernel launches by kernel name: how long the CPU's launch call took, how
-- long the activity waited after it, how long it ran; kernels of CUDA-graph launches apart.
-- Grain: one row per run, source (rank), activity name and graph_launch (kernels, copies
-- and sets that have a launch call).
-- For each activity with its launch call (kernels.launch_event_id): launch_ns = the call's
-- duration (HTA's cpu_duration); launch_delay_ns = activity start - call end, 0 when
-- negative (HTA's launch_delay); queue_delay_ns = activity start - call start (launch to
-- start). A short kernel runs for less time than its launch call took, launch_ns <= 50 µs
-- (HTA's "GPU events with a shorter duration than the corresponding CPU events"); a
-- launch outlier's call took over 50 µs (HTA's runtime_cutoff) and a delay outlier waited
-- over 100 µs (HTA's launch_delay_cutoff).
-- A graph launch is a launch call that enqueued more than one activity, or whose name says
-- so (cudaGraphLaunch, cuGraphLaunch, hipGraphLaunch): the replay of a CUDA graph, whose
-- kernels all carry the one call's correlation. Its kernels are rows of their own
-- (graph_launch true): the call's duration is the whole graph's launch, so launch_ns
-- statistics count each call once, and the per-kernel comparisons with the call
-- (short_kernel_count, short_kernel_share, launch_outlier_count) are NULL, with
-- graph_note saying why. A graph's delays are those of its first activity (earliest start,
-- then lowest kernel_id): the later ones start after the activities before them in the
-- graph, not after a wait for the call, so their delays are not counted (delay_count says
-- how many are); a row whose activities never start a graph has NULL delays.
-- [project] HTA's get_cuda_kernel_launch_stats, reimplemented and aggregated by name; HTA
-- gives one row per correlation id of the ranks asked for (rank 0 by default), and HTA
-- 0.5 leaves graph launches out (cudaGraphLaunch is not among its launch calls).
WITH {{ launched(first_of_call=true) }},
{{ graphed('graphed') }},
typed AS (
    -- delays counted: every activity outside graphs, the first one of each graph launch
    SELECT *,
           CASE WHEN NOT graph_launch OR first_of_call THEN launch_delay_ns END
               AS counted_delay_ns,
           CASE WHEN NOT graph_launch OR first_of_call THEN queue_delay_ns END
               AS counted_queue_ns
    FROM graphed
),
{{ call_stats() }},
{{ kernel_stats('counted_delay_ns', 'counted_queue_ns', delay_count=true) }}
SELECT
    k.run_id,
    k.run_name,
    k.source_id,
    k.rank,
    k.name AS kernel_name,
    k.kernel_type,
    k.graph_launch,
    k.launch_count,
    c.launch_call_count,
    k.delay_count,
    c.mean_launch_ns,
    c.max_launch_ns,
    k.mean_launch_delay_ns,
    k.p90_launch_delay_ns,
    k.mean_queue_delay_ns,
    k.mean_kernel_ns,
    CASE WHEN NOT k.graph_launch THEN k.short_kernel_count END AS short_kernel_count,
    CASE WHEN NOT k.graph_launch THEN k.short_kernel_count / nullif(k.launch_count, 0) END
        AS short_kernel_share,
    CASE WHEN NOT k.graph_launch THEN c.call_outlier_count END AS launch_outlier_count,
    CASE WHEN k.delay_count > 0 THEN k.delay_outlier_count END AS delay_outlier_count,
    CASE WHEN k.graph_launch
         THEN 'graph kernels: one launch call enqueues the whole graph, so a kernel is not '
              || 'compared with it (short kernels, launch outliers), and delays are those of '
              || 'the first activity of each graph launch (delay_count)' END AS graph_note
{{ stats_joined() }}
-- run_id: run; joins runs.run_id
-- run_name: the run folder's name
-- source_id: input file within the run (one per rank)
-- rank: distributed rank; NULL when the trace has no distributedInfo
-- kernel_name: the activity's name (kernels.name)
-- kernel_type: computation, communication or memory
-- graph_launch: true for activities launched by a graph launch (a call that enqueued several activities, or named *GraphLaunch): a CUDA graph's replay
-- launch_count: activities of this name with a launch call
-- launch_call_count: distinct launch calls that launched them (equal to launch_count outside graphs)
-- delay_count: activities whose delays are counted: launch_count outside graphs; for graph kernels, the graph launches whose first activity (earliest start) is of this name, possibly 0
-- mean_launch_ns: mean duration of those launch calls on the CPU, ns, each call once (HTA's cpu_duration)
-- max_launch_ns: longest of those launch calls, ns
-- mean_launch_delay_ns: mean of max(0, start - end of the launch call), ns (HTA's launch_delay), over the delay_count activities; NULL when delay_count is 0
-- p90_launch_delay_ns: 90th percentile of the launch delay, ns (one of the values), over the same activities; NULL when delay_count is 0
-- mean_queue_delay_ns: mean of start - start of the launch call, ns, over the same activities; NULL when delay_count is 0
-- mean_kernel_ns: mean duration on the GPU, ns
-- short_kernel_count: activities that ran shorter than their launch call took, launch call <= 50 µs (HTA's short kernels); NULL for graph kernels (graph_note)
-- short_kernel_share: short_kernel_count / launch_count; NULL for graph kernels
-- launch_outlier_count: launch calls over 50 µs (HTA's runtime_cutoff), each call once; NULL for graph kernels
-- delay_outlier_count: counted launch delays over 100 µs (HTA's launch_delay_cutoff); NULL when delay_count is 0
-- graph_note: why the per-kernel comparisons are NULL and which delays count for graph kernels; NULL otherwise
