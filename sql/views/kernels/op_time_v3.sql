-- op_time: GPU time by framework operator and layer.
-- Grain: one row per run, op_name, layer, layer_kind and pass (NULLs are groups of their
-- own: kernels with no enclosing cpu_op, no layer, or no known pass).
-- [project] A breakdown of this project's, not a figure of the paper.
-- A layer's forward and backward kernels are separate rows (pass); summed over
-- layer_kind and pass, the rows are op_time_v2's.
SELECT
    k.run_id,
    r.run_name,
    k.op_name,
    k.layer,
    k.layer_kind,
    k.pass,
    count(*) AS kernel_count,
    sum(k.dur_ns) AS gpu_time_ns,
    sum(k.dur_ns) / nullif(sum(sum(k.dur_ns)) OVER (PARTITION BY k.run_id), 0)
        AS gpu_time_share
FROM kernels AS k
JOIN runs AS r ON r.run_id = k.run_id
WHERE k.kind = 'kernel' AND k.dur_ns >= 0
GROUP BY k.run_id, r.run_name, k.op_name, k.layer, k.layer_kind, k.pass
-- run_id: run; joins runs.run_id
-- run_name: the run folder's name
-- op_name: outermost cpu_op enclosing the launch (e.g. aten::conv2d); NULL when none
-- layer: innermost nn.Module or record_function scope of the launch, for backward kernels their forward op's; NULL when none (kernels.layer_status says why)
-- layer_kind: module, user_annotation, optimizer, communication (Kineto), name_scope (TF), nvtx (nsys); NULL when layer is NULL
-- pass: forward, backward or optimizer; NULL when unknown
-- kernel_count: kernels launched under this op, layer and pass
-- gpu_time_ns: sum of their durations, ns
-- gpu_time_share: gpu_time_ns / the run's total kernel time, 0..1; NULL when that total is 0
