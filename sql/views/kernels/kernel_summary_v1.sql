{% from 'kernel_summary.sql' import kernel_summary -%}
-- kernel_summary: where GPU time goes, by kernel name.
-- Grain: one row per run and kernel name (kind = kernel; all ranks and devices together).
-- [project] A breakdown of this project's, not a figure of the paper.
{{ kernel_summary(busy_share='busy_share_ratio') }}
-- run_id: run; joins runs.run_id
-- run_name: the run folder's name
-- kernel_name: kernel name as the trace writes it
-- kernel_count: kernels of that name with a usable duration
-- total_ns: sum of their durations, ns
-- mean_ns: mean duration, ns
-- min_ns: shortest duration, ns
-- max_ns: longest duration, ns
-- busy_share_ratio: total_ns / the run's kernel busy time (union of kernel intervals over all devices); can exceed 1 when kernels of this name overlap on several streams; NULL when that busy time is 0
