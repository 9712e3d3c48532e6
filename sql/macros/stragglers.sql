{#- stragglers.sql: each rank's iteration against the median rank (stragglers_v<N>), over the
comm_overlap version `comm_overlap` (a relation with run_id, run_name, iteration,
source_id, rank, device_id, window_ns, computation_ns, exposed_communication_ns). -#}
{% macro stragglers(comm_overlap) -%}
WITH ranked AS (
    SELECT
        c.*,
        median(c.window_ns) OVER per_iteration AS median_window_ns,
        median(c.computation_ns) OVER per_iteration AS median_computation_ns,
        median(c.exposed_communication_ns) OVER per_iteration
            AS median_exposed_communication_ns,
        count(*) OVER per_iteration AS rank_count,
        row_number() OVER (PARTITION BY c.run_id, c.run_name, c.iteration
                           ORDER BY c.computation_ns DESC, c.source_id, c.device_id)
            AS computation_order
    FROM {{ comm_overlap }} AS c
    WINDOW per_iteration AS (PARTITION BY c.run_id, c.run_name, c.iteration)
)
SELECT
    run_id,
    run_name,
    iteration,
    source_id,
    rank,
    device_id,
    rank_count,
    window_ns,
    median_window_ns,
    window_ns / nullif(median_window_ns, 0) AS window_vs_median_ratio,
    computation_ns,
    median_computation_ns,
    computation_ns / nullif(median_computation_ns, 0) AS computation_vs_median_ratio,
    exposed_communication_ns,
    median_exposed_communication_ns,
    exposed_communication_ns - median_exposed_communication_ns
        AS exposed_communication_vs_median_ns,
    rank_count > 1 AND computation_order = 1
        AND computation_ns > 1.05 * median_computation_ns AS straggler
FROM ranked
{%- endmacro %}
