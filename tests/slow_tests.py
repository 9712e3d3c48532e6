"""The tests `make check` leaves to `make test`, besides those marked where they are.

`make check` is the quick answer while working (issue #29's budget: 150 CPU s of tests on
two cores); `make test`, which CI runs, runs everything. A test is slow when it needs
Spark or the browser (marked in place), reads a warehouse of the whole corpus or of the
demo (conftest.SHARED_WAREHOUSES, found by fixture, or conftest.shared for a parameter),
starts etl or Python as processes of their own at some cost (PROCESSES; a 0.1 s import
check stays quick), or costs about 0.7 CPU s or more by itself (COSTLY: whole view
catalogs built or swept, loops of ingests, compactions, fuzzing, the larger corpus
traces). The figures are CPU seconds per entry as measured over `make check` on
2026-11-29 (the process and its children, setup included). An entry is a file (all its
tests), a test function (all its parameters) or one parameter's node id;
tests/test_tiers.py fails on an entry that names no test.
"""
from __future__ import annotations

PROCESSES = (
    "tests/cli/test_cli.py::test_duckdb_shell_sees_views_from_any_directory",  # 0.3
    "tests/cli/test_cli.py::test_the_command_line_as_a_process_of_its_own",  # 1.4
    # 0.9
    "tests/conformance/test_formats.py::test_mutated_inputs_raise_only_project_errors[ncu_rep]",
    # 0.4
    "tests/conformance/test_formats.py::test_sample_ingests_with_schema_types[ncu_rep-corpus-ncu/rtx3070_speedy_scan_profile.ncu-rep]",
    "tests/extract/ncu/test_rep.py::test_units_do_not_depend_on_the_report_read_before",  # 1.8
    "tests/extract/test_worker_pool.py::test_workers_keep_freed_pages_a_while",  # 0.3
    "tests/load/test_hostile.py::test_gzip_bomb_beyond_a_configured_ratio_is_refused",  # 1.0
    "tests/load/test_hostile.py::test_gzip_bomb_beyond_the_default_cap_is_refused",  # 3.3
    "tests/load/test_hostile.py::test_gzip_bomb_is_refused_before_it_is_in_memory",  # 0.9
    "tests/load/test_hostile.py::test_non_utf8_names_do_not_crash",  # 1.4
    # 0.7
    "tests/load/test_undecodable_names.py::test_a_broken_trace_in_a_non_utf8_folder_is_refused_in_one_line",
    # 0.5
    "tests/load/test_undecodable_names.py::test_a_non_utf8_folder_given_as_the_argument_is_named_in_the_error",
    # 0.7
    "tests/load/test_undecodable_names.py::test_files_whose_names_read_the_same_are_refused",
    "tests/load/test_undecodable_names.py::test_ingest_under_an_ascii_locale",  # 0.7
    "tests/load/test_undecodable_names.py::test_listing_under_an_ascii_locale",  # 0.9
    # 1.4
    "tests/load/test_undecodable_names.py::test_run_folder_names_are_stored_escaped_and_stay_distinct",
    "tests/load/test_undecodable_names.py::test_run_names_are_shown_as_text_not_markup",  # 0.7
    "tests/load/test_undecodable_names.py::test_trace_file_names_are_stored_escaped",  # 0.9
    "tests/test_api.py::test_a_plain_script_ingests_with_worker_processes",  # 2.0
    "tests/test_package.py::test_wheel_holds_code_and_data",  # 2.3
    "tests/test_package.py::test_wheel_runs_outside_the_checkout",  # 4.9
    "tests/test_readme.py::test_the_python_example_runs_as_a_plain_script",  # 3.4
    "tests/views/test_relocate.py::test_a_copy_reads_its_own_files_only",  # 3.1
    "tests/views/test_relocate.py::test_a_moved_warehouse_works_where_it_lands",  # 2.1
    # 0.8
    "tests/views/test_relocate.py::test_attached_or_with_another_temp_directory_it_asks_for_its_folder",
    "tests/warehouse/test_concurrent.py::test_writers_of_different_runs",  # 3.3
    "tests/warehouse/test_concurrent.py::test_writers_of_overlapping_run_sets",  # 8.7
    "tests/warehouse/test_concurrent.py::test_writers_of_the_same_run",  # 3.2
    # 1.5
    "tests/warehouse/test_upgrade.py::test_only_tables_whose_publishes_differ_are_read_by_name",
)

COSTLY = (
    # 0.7
    "tests/analysis/test_forecast.py::test_a_precision_the_target_lacks_is_refused_unless_a_fallback_is_stated",
    # 4.1
    "tests/analysis/test_forecast.py::test_the_report_has_the_forecast_table_and_the_roofline",
    "tests/cli/test_cli.py::test_demo_ingest_and_query",  # 4.5
    "tests/cli/test_cli.py::test_parallel_jobs_give_the_same_warehouse",  # 2.0
    "tests/cli/test_cli.py::test_reingest_is_noop_and_change_replaces",  # 2.1
    "tests/cli/test_cli.py::test_seconds_per_iteration_is_kept_and_checked",  # 0.8
    "tests/cli/test_cli.py::test_unreadable_trace_refuses_only_its_run",  # 4.1
    # 1.0
    "tests/cli/test_flags.py::test_progress_is_a_line_per_run_on_stdout_when_not_a_terminal",
    # 5.8
    "tests/core/test_kernel_names.py::test_base_agrees_with_bracket_deletion_on_every_corpus_name",
    # 4.6
    "tests/core/test_kernel_names.py::test_ncu_styles_of_every_corpus_name_meet_the_trace_keys",
    "tests/extract/kineto/test_begin_end.py::test_begin_and_end_slices_apart",  # 2.8
    "tests/extract/kineto/test_begin_end.py::test_oddities_in_the_pipeline",  # 1.0
    # 8.0
    "tests/extract/kineto/test_compiled_ops.py::test_real_compiled_traces_agree_with_a_naive_walk",
    "tests/extract/kineto/test_fuzz.py::test_event_list_edits",  # 1.0
    "tests/extract/kineto/test_fuzz.py::test_field_type_changes",  # 1.0
    "tests/extract/kineto/test_fuzz.py::test_random_trace_documents",  # 1.3
    "tests/extract/kineto/test_fuzz.py::test_slicing_is_invisible",  # 1.7
    "tests/extract/kineto/test_fuzz.py::test_wide_integer_arguments",  # 0.8
    "tests/extract/kineto/test_layers.py::test_backward_layers_equal_the_fwdbwd_flows",  # 2.2
    # 1.5
    "tests/extract/kineto/test_pipeline.py::test_partitioned_kernel_join_gives_the_same_tables",
    "tests/extract/kineto/test_pipeline.py::test_worker_processes_give_the_same_tables",  # 3.8
    # 2.1
    "tests/extract/kineto/test_pipeline.py::test_workers_reading_a_plain_file_give_the_same_tables",
    # 0.8
    "tests/extract/kineto/test_pipeline.py::test_workers_reading_odd_bytes_give_the_same_tables",
    # 2.2
    "tests/extract/kineto/test_stream_oracle.py::test_streaming_equals_naive_reading[hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz]",
    # 1.3
    "tests/extract/kineto/test_truncated.py::test_complete_iterations_of_a_cut_trace_measure_as_in_the_whole",
    "tests/extract/kineto/test_truncated.py::test_cost_of_a_truncated_trace_grows_linearly",  # 4.1
    "tests/extract/kineto/test_truncated.py::test_real_traces_cut_at_three_quarters",  # 2.5
    # 1.2
    "tests/extract/kineto/test_trusted_cuts.py::test_a_bad_slice_among_many_gives_the_checked_error",
    # 1.0
    "tests/extract/kineto/test_trusted_cuts.py::test_a_cut_inside_an_event_means_reading_again[2]",
    # 0.7
    "tests/extract/kineto/test_trusted_cuts.py::test_many_slices_numbered_across_workers",
    # 1.4
    "tests/extract/kineto/test_trusted_cuts.py::test_slices_cut_unchecked_give_the_checked_tables[2]",
    "tests/extract/test_progress.py::test_a_corpus_trace_reports_progress",  # 1.1
    "tests/load/test_broken.py::test_no_odd_input_breaks_a_view",  # 10.0
    "tests/load/test_hostile.py::test_hostile_run_names_are_data",  # 1.4
    "tests/load/test_hostile.py::test_warehouse_path_does_not_glob_its_neighbours",  # 3.1
    # 0.9
    "tests/load/test_ncu_ingest.py::test_csv_of_ncu_error_text_beside_a_trace_is_a_refused_export",
    "tests/load/test_ncu_ingest.py::test_old_details_export_without_cc_or_trace",  # 1.2
    "tests/load/test_ncu_ingest.py::test_one_metric_files_merge_into_one_export",  # 1.8
    "tests/load/test_run_gpu.py::test_monitor_ncu_and_jax_runs_name_their_gpu",  # 2.0
    "tests/load/test_step_hint.py::test_an_export_without_steps_names_its_step_pattern",  # 1.0
    "tests/load/test_step_hint.py::test_the_report_shows_the_hint",  # 0.8
    "tests/match/test_align.py::test_corpus_cuda_graph_kernels_are_matched_one_by_one",  # 2.0
    # 1.0
    "tests/match/test_placement.py::test_without_a_hint_the_export_goes_to_run_summarys_step",
    "tests/present/test_compare.py::test_repeats_pool_one_value_per_run",  # 2.0
    # 2.6
    "tests/present/test_compare.py::test_run_lists_equal_tags_and_single_runs_use_iterations",
    # 0.7
    "tests/present/test_export_categories.py::test_a_jax_run_comes_back_without_new_anomalies",
    "tests/present/test_export_categories.py::test_an_nsys_run_keeps_its_copies_and_sets",  # 0.9
    "tests/present/test_html_report.py::test_sections_without_ncu_say_why",  # 0.9
    "tests/present/test_report_truths.py::test_an_ncu_only_run_shows_its_kernels_levels",  # 2.1
    "tests/replay/test_hta_critical_path.py::test_the_synchronizations_htas_tests_assert",  # 0.8
    "tests/spark/test_dialects.py::test_every_view_is_written_in_the_executed_dialects",  # 3.2
    "tests/test_api.py::test_a_connection_keeps_its_snapshot_and_files",  # 0.7
    "tests/views/test_cases.py::test_a_wrong_row_fails_the_case",  # 0.7
    # 22.7
    "tests/views/test_catalog.py::test_views_broken_from_a_writable_shell_are_written_again",
    "tests/views/test_flops_mfu.py::test_op_and_kernel_args_are_kept",  # 1.6
    "tests/views/test_flops_mfu.py::test_op_flops_by_hand",  # 0.8
    "tests/views/test_hta_agreement.py::test_the_steps_hta_keeps",  # 1.2
    # 0.8
    "tests/views/test_instrument_comparison.py::test_monitor_means_per_step_match_a_naive_reading",
    "tests/views/test_instrument_coverage.py::test_coverage_by_hand_and_null_with_reason",  # 2.0
    "tests/views/test_levels_rollup.py::test_every_profiled_kernel_matches_its_position",  # 1.6
    "tests/views/test_levels_rollup.py::test_figure_views_are_consistent",  # 0.7
    "tests/views/test_levels_rollup.py::test_run_utilization_equals_the_formula",  # 0.9
    "tests/views/test_lint.py::test_shipped_views_match_their_fingerprints",  # 0.9
    "tests/views/test_macros.py::test_spans_and_pieces_agree_with_a_naive_merge",  # 2.1
    "tests/views/test_monitor_windows.py::test_samples_fall_in_kineto_windows",  # 1.5
    "tests/views/test_rewrites.py::test_each_rewritten_view_has_rows_to_compare",  # 1.2
    # 5.9
    "tests/views/test_rewrites.py::test_rewrites_keep_the_rows_of_every_view_that_reads_them",
    "tests/views/test_rewrites.py::test_the_released_sql_as_kept_returns_the_views_rows",  # 4.9
    # 2.0
    "tests/views/test_tc_amdahl.py::test_tc_amdahl_by_hand[names-name_estimate-30000-40000-tc_amdahl_v2]",
    # 2.3
    "tests/views/test_tc_amdahl.py::test_tc_amdahl_by_hand[names-name_estimate-30000-40000-tc_amdahl_v3]",
    "tests/views/test_template.py",  # 10.0: every test of the file builds views from scratch
    "tests/views/test_tiny_trace.py::test_written_as_begin_end_pairs",  # 0.7
    "tests/views/test_values.py::test_edge_cases_reach_the_views",  # 3.8
    "tests/warehouse/test_compact.py::test_a_republished_run_replaces_its_segment_copy",  # 3.2
    # 1.9
    "tests/warehouse/test_compact.py::test_a_run_republished_during_compaction_keeps_its_new_publish",
    "tests/warehouse/test_compact.py::test_an_older_schema_is_read_into_the_current_one",  # 0.7
    "tests/warehouse/test_compact.py::test_compaction_copies_every_value",  # 3.0
    "tests/warehouse/test_compact.py::test_etl_compact_and_ingest_compact",  # 1.5
    "tests/warehouse/test_compact.py::test_sparse_segments_are_rewritten_and_collected",  # 3.5
    "tests/warehouse/test_concurrent.py::test_one_command_with_many_runs",  # 6.8
    "tests/warehouse/test_concurrent.py::test_reingest_is_idempotent_in_every_table",  # 5.0
    "tests/warehouse/test_manage.py::test_a_removed_name_can_be_ingested_again",  # 1.3
    "tests/warehouse/test_manage.py::test_mv_renames_with_every_row",  # 1.6
    "tests/warehouse/test_manage.py::test_rm_removes_runs_and_their_rows",  # 1.5
    # 3.7
    "tests/warehouse/test_upgrade.py::test_schema_files_of_new_tables_and_columns_are_written",
)
