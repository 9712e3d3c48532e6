{% from 'kernel_breakdown.sql' import kernel_breakdown -%}
-- kernel_breakdown: GPU time by kernel type (computation, communication, memory), with the
-- top kernels of each type.
-- Grain: one row per run, source (rank), device, iteration and kernel_type.
-- An activity belongs to the iteration whose ProfilerStep launched it (kernels.iteration,
-- K_i of gpu_utilization); iteration NULL holds the activities launched outside every step
-- (and every activity of a trace without steps). time_ns sums durations (not a union:
-- activities overlapping on several streams add up), as HTA's per-kernel table does.
-- [project] Not HTA's percentages: HTA 0.5's get_gpu_kernel_breakdown (memory kernels
-- included by default) merges each type's intervals into a union and splits a rank's
-- whole trace into disjoint pieces, one per type and one per overlap of types
-- ("COMPUTATION overlapping COMMUNICATION"), each a share of their total, the union of
-- all activity. This view shares summed durations out of their sum over the types, per
-- iteration (kernel_time_share), and against the iteration's union-based busy time
-- (busy_share); the union-based split is temporal_breakdown's (computation first) and
-- comm_overlap's. Its top kernels are HTA's without its "others" grouping. Kernel types and tc_estimate: etl/extract/kernel_types.toml (tc_estimate_time_share
-- is the TensorBoard profiler's "kernel time using tensor cores", an estimate from names).
{% call kernel_breakdown() -%}
    SELECT run_id, run_name, source_id, device_id, iteration, activity_busy_ns
    FROM gpu_utilization_v1
{%- endcall %}
-- run_id: run; joins runs.run_id
-- run_name: the run folder's name
-- source_id: input file within the run (one per rank)
-- rank: distributed rank; NULL when the trace has no distributedInfo
-- device_id: GPU index as the trace numbers it; NULL for activities without a device
-- iteration: N of the ProfilerStep#N that launched the activities; NULL: launched outside every step, or a trace without steps
-- kernel_type: computation, communication or memory (kernels.kernel_type)
-- kernel_count: activities of this type
-- time_ns: sum of their durations, ns (overlapping activities add up)
-- kernel_time_share: time_ns / the time_ns of all types of this rank, device and iteration (sums of durations; HTA's percentages are of interval unions, see the comment above)
-- busy_share: time_ns / gpu_utilization's activity_busy_ns of the iteration (union of all GPU activity); above 1 when activities of the type overlap; NULL without a window (launched outside every step) or when that busy time is 0
-- tc_estimate_time_share: computation only: the share of time_ns in kernels whose name says tensor cores (tc_estimate); NULL for other types
-- top_kernels: the 5 names of the type with the most time: list of {name, kernel_count, time_ns}, most time first
