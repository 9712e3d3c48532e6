{%- set ratios = ["smsp_active_util", "issue_slot_util", "tc_active_util", "tc_issue_util"] -%}
-- layer_utilization: per-layer distributions of the kernel ratios (the paper's Fig. 7).
-- Grain: one row per run, op_name, layer, layer_kind and pass (NULL groups: no enclosing
-- op / scope / pass).
-- Over the matched kernels of all iterations; means are weighted by trace duration, the
-- quantiles are over kernels (each kernel counts once), NULL ratios are left out.
-- [paper Fig. 7] Per-layer distributions. [project] The grouping (outermost op,
-- innermost scope, its kind, the pass), the backward kernels' layer (their forward op's),
-- the duration weighting and the p10/p50/p90 summary.
-- A layer's forward and backward kernels are separate rows (pass).
SELECT
    run_id,
    run_name,
    op_name,
    layer,
    layer_kind,
    pass,
    count(*) AS kernel_count,
    sum(dur_ns) AS gpu_time_ns,
{%- for x in ratios %}
    sum({{ x }} * dur_ns) / nullif(sum(dur_ns) FILTER (WHERE {{ x }} IS NOT NULL), 0)
        AS time_weighted_mean_{{ x }},
    quantile_cont({{ x }}, 0.1) AS p10_{{ x }},
    quantile_cont({{ x }}, 0.5) AS p50_{{ x }},
    quantile_cont({{ x }}, 0.9) AS p90_{{ x }}{{ "," if not loop.last }}
{%- endfor %}
FROM kernel_utilization_v2
GROUP BY run_id, run_name, op_name, layer, layer_kind, pass
-- run_id: run; joins runs.run_id
-- run_name: the run folder's name
-- op_name: outermost cpu_op enclosing the launches (e.g. aten::conv2d); NULL when none
-- layer: innermost nn.Module / record_function scope, for backward kernels their forward op's; NULL when none (kernel_utilization_v2.layer_status says why)
-- layer_kind: module, user_annotation, optimizer, communication (Kineto), name_scope (TF), nvtx (nsys); NULL when layer is NULL
-- pass: forward, backward or optimizer; NULL when unknown
-- kernel_count: matched kernels of this op, layer and pass
-- gpu_time_ns: their trace durations summed, ns
{%- for x in ratios %}
-- time_weighted_mean_{{ x }}: duration-weighted mean of {{ x }}, 0..1; NULL when those durations sum to 0
-- p10_{{ x }}: 10th percentile of {{ x }} over kernels, 0..1
-- p50_{{ x }}: median of {{ x }} over kernels, 0..1
-- p90_{{ x }}: 90th percentile of {{ x }} over kernels, 0..1
{%- endfor %}
