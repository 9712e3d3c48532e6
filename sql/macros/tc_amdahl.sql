{#- tc_amdahl.sql: Amdahl's law for tensor cores (tc_amdahl_v<N>), per run, rank and device
for the iteration `run_utilization` selects, over the kernels of each iteration
(`iteration_kernels`, _iteration_kernels_v1 unless a CTE of the view stands for it). -#}

{#- The speed-up bounds of an iteration whose tc_window_share p of time runs k times
faster: 1 / ((1 - p) + p / k), for k = 2, 10 and infinity. -#}
{% macro speedup_bounds() -%}
    1 / nullif((1 - tc_window_share) + tc_window_share / 2, 0) AS speedup_bound_k2_ratio,
    1 / nullif((1 - tc_window_share) + tc_window_share / 10, 0) AS speedup_bound_k10_ratio,
    1 / nullif(1 - tc_window_share, 0) AS speedup_bound_inf_ratio,
{%- endmacro %}

{#- The CTEs chosen, per_device and shares: basis 'ncu', for the devices whose kernels
matched an ncu export with the tensor-core issue counter (a matched kernel is a
tensor-core kernel when its tc_issue_util > 0, a non-tensor one when it is 0). -#}
{% macro ncu_basis(run_utilization, iteration_kernels='_iteration_kernels_v1') -%}
chosen AS (
    SELECT run_id, run_name, source_id, rank, device_id, iteration, window_ns,
           matched_time_share
    FROM {{ run_utilization }}
),
per_device AS (
    SELECT
        c.run_id, c.source_id, c.device_id,
        sum(ik.clipped_dur_ns) FILTER (WHERE u.tc_issue_util > 0) AS tc_ns,
        sum(ik.clipped_dur_ns) FILTER (WHERE u.tc_issue_util = 0) AS non_tc_ns,
        count(*) FILTER (WHERE u.tc_issue_util > 0) AS tc_kernels,
        count(*) FILTER (WHERE u.tc_issue_util = 0) AS non_tc_kernels
    FROM chosen AS c
    JOIN {{ iteration_kernels }} AS ik
      ON ik.run_id = c.run_id AND ik.source_id = c.source_id AND ik.device_id = c.device_id
     AND ik.iteration IS NOT DISTINCT FROM c.iteration
    JOIN ncu_kernel_utilization_v1 AS u
      ON u.run_id = ik.run_id AND u.ncu_source_id = ik.ncu_source_id AND u.ncu_id = ik.ncu_id
    WHERE u.tc_issue_util IS NOT NULL
    GROUP BY c.run_id, c.source_id, c.device_id
),
shares AS (
    SELECT
        c.*,
        'ncu' AS basis,
        p.tc_kernels,
        p.non_tc_kernels,
        coalesce(p.tc_ns, 0) AS tc_ns,
        coalesce(p.non_tc_ns, 0) AS non_tc_ns,
        coalesce(p.non_tc_ns, 0) / nullif(coalesce(p.tc_ns, 0) + coalesce(p.non_tc_ns, 0), 0)
            AS non_tc_time_share,
        least(1.0, coalesce(p.tc_ns, 0) / nullif(c.window_ns, 0)) AS tc_window_share
    FROM chosen AS c
    JOIN per_device AS p
      ON p.run_id = c.run_id AND p.source_id = c.source_id AND p.device_id = c.device_id
)
{%- endmacro %}

{#- The columns of the 'ncu' rows, from the CTE shares. -#}
{% macro ncu_columns() -%}
SELECT
    run_id,
    run_name,
    source_id,
    rank,
    device_id,
    iteration,
    basis,
    window_ns,
    tc_kernels,
    non_tc_kernels,
    tc_ns,
    non_tc_ns,
    non_tc_time_share,
    tc_window_share,
{{ speedup_bounds() }}
    matched_time_share
{%- endmacro %}

{#- The CTEs estimated_devices, name_counts and estimated: basis 'name_estimate', for every
other device of `run_utilization` (those without a row in `ncu_rows`), from the kernels'
name-based tc_estimate. -#}
{% macro name_estimate(run_utilization, ncu_rows,
                       iteration_kernels='_iteration_kernels_v1') -%}
estimated_devices AS (
    SELECT u.run_id, u.run_name, u.source_id, u.rank, u.device_id, u.iteration, u.window_ns,
           coalesce(u.ncu_reason, 'the matched ncu kernels have no tensor-core issue '
                    || 'counter') AS basis_note
    FROM {{ run_utilization }} AS u
    ANTI JOIN {{ ncu_rows }} AS a
      ON a.run_id = u.run_id AND a.source_id = u.source_id AND a.device_id = u.device_id
),
name_counts AS (
    SELECT
        c.run_id, c.run_name, c.source_id, c.rank, c.device_id, c.iteration, c.window_ns,
        c.basis_note,
        count(*) FILTER (WHERE k.tc_estimate) AS tc_kernels,
        count(*) FILTER (WHERE NOT coalesce(k.tc_estimate, false)) AS non_tc_kernels,
        coalesce(sum(ik.clipped_dur_ns) FILTER (WHERE k.tc_estimate), 0) AS tc_ns,
        coalesce(sum(ik.clipped_dur_ns) FILTER (WHERE NOT coalesce(k.tc_estimate, false)), 0)
            AS non_tc_ns
    FROM estimated_devices AS c
    JOIN {{ iteration_kernels }} AS ik
      ON ik.run_id = c.run_id AND ik.source_id = c.source_id AND ik.device_id = c.device_id
     AND ik.iteration IS NOT DISTINCT FROM c.iteration
    JOIN kernels AS k
      ON k.run_id = ik.run_id AND k.source_id = ik.source_id AND k.kernel_id = ik.kernel_id
    WHERE k.kernel_type IS NOT NULL
    GROUP BY ALL
),
estimated AS (
    SELECT
        *,
        non_tc_ns / nullif(tc_ns + non_tc_ns, 0) AS non_tc_time_share,
        least(1.0, tc_ns / nullif(window_ns, 0)) AS tc_window_share
    FROM name_counts
)
{%- endmacro %}

{#- The final SELECT: the rows of `ncu_rows`, then the estimated ones. -#}
{% macro both_bases(ncu_rows) -%}
SELECT
    run_id, run_name, source_id, rank, device_id, iteration, basis,
    CAST(NULL AS VARCHAR) AS basis_note,
    window_ns, tc_kernels, non_tc_kernels, tc_ns, non_tc_ns, non_tc_time_share,
    tc_window_share, speedup_bound_k2_ratio, speedup_bound_k10_ratio,
    speedup_bound_inf_ratio, matched_time_share
FROM {{ ncu_rows }}
UNION ALL
SELECT
    run_id,
    run_name,
    source_id,
    rank,
    device_id,
    iteration,
    'name_estimate' AS basis,
    basis_note,
    window_ns,
    tc_kernels,
    non_tc_kernels,
    tc_ns,
    non_tc_ns,
    non_tc_time_share,
    tc_window_share,
{{ speedup_bounds() }}
    CAST(NULL AS DOUBLE) AS matched_time_share
FROM estimated
{%- endmacro %}
