-- kernel_summary: where GPU time goes, by kernel name.
-- Grain: one row per run and kernel name (kind = kernel; all ranks and devices together).
-- [project] A breakdown of this project's, not a figure of the paper.
-- v2: the same rows as v1; busy_share_ratio is busy_share (ratio names: levels *_util,
-- fractions of a whole *_share, comparisons *_ratio; sql/CHANGELOG.md 2026-11-25).
WITH run_busy AS (
    SELECT run_id, sum(end_ns - start_ns) AS busy_ns
    FROM _busy_intervals_v1
    WHERE scope = 'kernel'
    GROUP BY run_id
)
SELECT
    k.run_id,
    r.run_name,
    k.name AS kernel_name,
    count(*) AS kernel_count,
    sum(k.dur_ns) AS total_ns,
    avg(k.dur_ns) AS mean_ns,
    min(k.dur_ns) AS min_ns,
    max(k.dur_ns) AS max_ns,
    sum(k.dur_ns) / nullif(b.busy_ns, 0) AS busy_share
FROM kernels AS k
JOIN runs AS r ON r.run_id = k.run_id
LEFT JOIN run_busy AS b ON b.run_id = k.run_id
WHERE k.kind = 'kernel' AND k.dur_ns >= 0
GROUP BY k.run_id, r.run_name, k.name, b.busy_ns
-- run_id: run; joins runs.run_id
-- run_name: the run folder's name
-- kernel_name: kernel name as the trace writes it
-- kernel_count: kernels of that name with a usable duration
-- total_ns: sum of their durations, ns
-- mean_ns: mean duration, ns
-- min_ns: shortest duration, ns
-- max_ns: longest duration, ns
-- busy_share: total_ns / the run's kernel busy time (union of kernel intervals over all devices); can exceed 1 when kernels of this name overlap on several streams; NULL when that busy time is 0
