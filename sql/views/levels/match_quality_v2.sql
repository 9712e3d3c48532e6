{% from 'match_quality.sql' import match_quality -%}
-- match_quality: how much of the trace the ncu export covers and how well it matched.
-- Grain: one row per run, trace source, device and ncu export.
-- The matched range is the span, in launch order, from the first to the last matched
-- kernel of that source and device; kernels outside it were not profiled by ncu.
-- [project] The coverage of the trace by an ncu export and the matcher's result; not in
-- the paper.
{{ match_quality(count_share='matched_count_share',
                  time_share='matched_time_share') }}
-- run_id: run; joins runs.run_id
-- source_id: trace file within the run
-- device_id: GPU index as the trace numbers it
-- ncu_source_id: the ncu export matched against
-- trace_kernels_in_range: trace kernels between the first and last matched one
-- ncu_kernels: kernels in the ncu export
-- matched: trace kernels matched to an ncu kernel
-- ambiguous: trace kernels with two equally good candidates (left unmatched)
-- trace_unmatched_in_range: trace kernels in the range that found no ncu kernel
-- ncu_unmatched: ncu kernels no trace kernel matched
-- matched_count_share: matched / trace_kernels_in_range, 0..1
-- matched_time_share: trace time of matched kernels / of all kernels in range, 0..1
