"""ncu CSV exports: corpus files against a naive reading, synthetic raw pages, broken inputs."""
from __future__ import annotations

import csv
import math
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from etl.core.errors import InputError
from etl.extract.ncu.export import (
    NcuExport,
    UnknownUnit,
    convert_unit,
    name_forms,
    ncu_schema,
    parse_number,
    unit_table,
)
from etl.extract.ncu import looks_like_ncu
from etl.extract.ncu.read import read_ncu
from etl.core.schema import conform

from tests.conftest import INPUTS, corpus_path

DATA = INPUTS / "ncu"

CORPUS_CSV = [
    "a100_details_cmdline-metrics_gardenia_gemm.csv",
    "a100_details_cmdline-metrics_gardenia_sgemm.csv",
    "a100_details_cmdline-metrics_gardenia_share_tile.csv",
    "v100_details_old-format_pytorch1.5_deepcam_O2_fw__sm__cycles_elapsed.avg.txt",
    "v100_details_old-format_pytorch1.5_deepcam_O2_fw__sm__inst_executed_pipe_tensor.sum.txt",
    "v100_details_old-format_tf1.15_deeplab_fp16_fw_amp__sm__cycles_elapsed.avg.txt",
    "v100_details_old-format_tf1.15_deeplab_fp16_fw_amp__sm__inst_executed_pipe_tensor.sum.txt",
]
FIXTURES = ["raw_page_2023_a100.csv", "raw_page_2020_v100.csv", "details_2024_rules_gh200.csv",
            "details_unknown_unit.csv", "raw_page_unknown_unit.csv",
            "details_2025_rules_rtx5090.csv"]


def corpus_file(name: str) -> Path:
    return corpus_path("ncu", name)  # fails instead of skipping when CI=true


def only(exports: list[NcuExport]) -> NcuExport:
    assert len(exports) == 1
    return exports[0]


# ---- the oracle: a naive reading with csv + Decimal, sharing no code with etl/ -----------

# Written from ncu's unit spellings, independently of etl/extract/ncu/units.toml.
ORACLE_FACTORS = {
    "byte": 1, "cycle": 1, "inst": 1, "cycle/second": 1, "nsecond": 1, "usecond": 1000,
    "msecond": 10**6, "Mbyte": 10**6, "Kbyte": 1000, "cycle/nsecond": 10**9, "Ghz": 10**9,
    "Gbyte/second": 10**9, "%": 1, "SM": 1, "": 1,
    "hz": 1, "ns": 1, "Gbyte/s": 10**9,
    "fortnight": 1, "jiffy": 1,  # units ncu never prints: kept as reported, unconverted
}


def naive_read(path: Path) -> tuple[dict[int, str], dict[tuple[Any, ...], tuple[Any, ...]]]:
    """({ID: kernel name}, {(ID, section, metric): (Decimal value or None, text, unit)});
    section None on a raw page."""
    lines = path.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith('"ID","Process ID"'))
    rows = list(csv.reader(lines[start:]))
    header = rows[0]
    if "Metric Value" in header:
        return _naive_details(header, rows[1:])
    return _naive_raw(header, rows[1], rows[2:])


def _number(text: str, unit: str) -> Decimal | None:
    try:
        return Decimal(text.replace(",", "")) * ORACLE_FACTORS[unit]
    except ArithmeticError:
        return None  # text values (and n/a) are not numbers


def _naive_details(header: list[str], rows: list[list[str]]) -> tuple[dict, dict]:
    col = {name: i for i, name in enumerate(header)}
    kernels, metrics = {}, {}
    for row in rows:
        kernels[int(row[col["ID"]])] = row[col["Kernel Name"]]
        name, unit, text = (row[col[c]] for c in ("Metric Name", "Metric Unit", "Metric Value"))
        section = row[col["Section Name"]] if "Section Name" in col else None
        if name:
            metrics[(int(row[col["ID"]]), section or None, name)] = (_number(text, unit), text,
                                                                     unit)
    return kernels, metrics


def _naive_raw(header: list[str], units: list[str], rows: list[list[str]]) -> tuple[dict, dict]:
    first_metric = header.index("CC") + 1 if "CC" in header else header.index("Stream") + 1
    kernels, metrics = {}, {}
    for row in rows:
        kernels[int(row[0])] = row[4]
        for i in range(first_metric, len(header)):
            if row[i] != "":
                metrics[(int(row[0]), None, header[i])] = (_number(row[i], units[i]), row[i],
                                                           units[i])
    return kernels, metrics


def assert_matches_oracle(export: NcuExport, path: Path) -> None:
    kernels, expected = naive_read(path)
    assert dict(zip(*export.kernels.select(["ncu_id", "kernel_name"]).to_pydict().values())) \
        == kernels
    got = {(r["ncu_id"], r["section_name"], r["metric_name"]): r
           for r in export.metrics.to_pylist()}
    assert len(got) == export.metrics.num_rows
    assert set(got) == set(expected)
    for key, (value, text, unit) in expected.items():
        row = got[key]
        assert (row["reported_value_text"], row["reported_unit"]) == (text, unit)
        if value is None:
            assert row["value"] is None, key
        else:
            assert math.isclose(row["value"], float(value), rel_tol=1e-9), key


@pytest.mark.parametrize("name", CORPUS_CSV)
def test_corpus_csv_agrees_with_naive_reading(name: str) -> None:
    path = corpus_file(name)
    assert_matches_oracle(only(read_ncu([path])), path)


def test_corpus_csv_list_is_complete() -> None:
    """Every CSV-like corpus file is in CORPUS_CSV, so none escapes the oracle test."""
    folder = corpus_file("SOURCES.md").parent
    csv_like = sorted(p.name for p in folder.iterdir()
                      if p.is_file() and '\n"ID","Process ID"' in "\n" + p.read_text("latin-1"))
    assert csv_like == sorted(CORPUS_CSV)


@pytest.mark.parametrize("name", FIXTURES)
def test_fixture_agrees_with_naive_reading(name: str) -> None:
    assert_matches_oracle(only(read_ncu([DATA / name])), DATA / name)


# ---- what each corpus CSV yields ---------------------------------------------------------

@pytest.mark.parametrize(("name", "kernels", "metrics"), [
    (CORPUS_CSV[0], 3, 45), (CORPUS_CSV[2], 3, 45), (CORPUS_CSV[3], 644, 644),
    (CORPUS_CSV[5], 559, 559)])
def test_corpus_counts_and_identity(name: str, kernels: int, metrics: int) -> None:
    export = only(read_ncu([corpus_file(name)]))
    assert (export.kernels.num_rows, export.metrics.num_rows) == (kernels, metrics)
    first = export.kernels.to_pylist()[0]
    if name.startswith("a100"):
        assert (first["cc"], first["device"], first["grid_x"], first["grid_y"], first["block_x"],
                first["kernel_base_name"]) == ("8.0", "0", 640, 1280, 32, "randomInit")
        assert first["kernel_time_text"] is None
    else:
        assert first["cc"] is None and first["grid_x"] is None
        assert first["kernel_time_text"].startswith("2020-Jun-09 ")


def test_profiler_error_lines_become_anomalies() -> None:
    export = only(read_ncu([corpus_file(CORPUS_CSV[2])]))
    errors = [a for a in export.anomalies if a[0] == "ncu_profiler_error"]
    assert len(errors) == 2 and 'Failed to profile "gemm_shared_tile"' in errors[0][2]


def test_thousands_separators_exact() -> None:
    export = only(read_ncu([corpus_file(CORPUS_CSV[0])]))
    row = next(r for r in export.metrics.to_pylist()
               if (r["ncu_id"], r["metric_name"]) == (0, "l1tex__t_bytes.sum"))
    assert row["value"] == 16_764_800_860_160.0
    assert row["reported_value_text"] == "16,764,800,860,160.00"


def test_v100_pytorch_pair_merges_into_one_export() -> None:
    paths = [corpus_file(CORPUS_CSV[3]), corpus_file(CORPUS_CSV[4])]
    export = only(read_ncu(paths))
    assert export.paths == sorted(paths)
    assert (export.kernels.num_rows, export.metrics.num_rows) == (644, 1288)
    assert set(export.metrics.column("metric_name").to_pylist()) == {
        "sm__cycles_elapsed.avg", "sm__inst_executed_pipe_tensor.sum"}
    kernel = export.kernels.to_pylist()[1]
    # the two files are separate runs (PIDs 81232 and 1076): disagreeing identity is NULL
    assert kernel["process_id"] is None and kernel["process_name"] == "python3.7"
    assert kernel["metric_count"] == 2
    conflicts = {a[2].split()[0] for a in export.anomalies if a[0] == "ncu_merge_conflict"}
    assert conflicts == {"process_id", "kernel_time_text"}


def test_v100_tensorflow_pair_is_not_merged() -> None:
    paths = [corpus_file(CORPUS_CSV[5]), corpus_file(CORPUS_CSV[6])]
    exports = read_ncu(paths)
    assert len(exports) == 2
    note = [a for e in exports for a in e.anomalies if a[0] == "ncu_not_merged"]
    assert len(note) == 1 and "differ at 18 of 559 IDs (first: ID 1)" in note[0][2]


# ---- synthetic raw pages and the newest details header -------------------------------------

def metric(export: NcuExport, ncu_id: int, name: str) -> dict[str, Any]:
    return next(r for r in export.metrics.to_pylist()
                if (r["ncu_id"], r["metric_name"]) == (ncu_id, name))


def test_raw_page_units_and_values() -> None:
    export = only(read_ncu([DATA / "raw_page_2023_a100.csv"]))
    assert export.format == "ncu_raw_csv"
    assert metric(export, 0, "dram__bytes.sum")["value"] == 12_580_000.0
    assert (metric(export, 0, "gpu__time_duration.sum")["value"],
            metric(export, 0, "gpu__time_duration.sum")["unit"]) == (1_234_500.0, "ns")
    rate = metric(export, 0, "smsp__cycles_elapsed.avg.per_second")
    assert (rate["value"], rate["unit"], rate["reported_unit"]) == (1.41e9, "hz", "cycle/nsecond")
    text = metric(export, 1, "launch__func_cache_config")
    assert (text["value"], text["unit"], text["reported_value_text"]) == (
        None, None, "CachePreferShared")
    assert metric(export, 1, "smsp__pipe_tensor_cycles_active.sum")["value"] is None
    assert ("ncu_metric_not_available", 1,
            "smsp__pipe_tensor_cycles_active.sum = 'n/a': value NULL") in export.anomalies
    names_of_2 = {r["metric_name"] for r in export.metrics.to_pylist() if r["ncu_id"] == 2}
    assert "dram__bytes.sum" not in names_of_2 and len(names_of_2) == 11


def test_raw_page_kernel_identity() -> None:
    kernels = only(read_ncu([DATA / "raw_page_2023_a100.csv"])).kernels.to_pylist()
    assert [(k["grid_x"], k["grid_y"], k["grid_z"]) for k in kernels] == [
        (1024, 1, 1), (8, 16, 2), (4, 1, 1)]
    assert [k["duration_ns"] for k in kernels] == [1_234_500, 17_000, 2_250]
    assert {(k["sm_count"], k["device_name"], k["cc"]) for k in kernels} == {
        (108, "NVIDIA A100-SXM4-80GB", "8.0")}
    assert (kernels[2]["kernel_name_mangled"], kernels[2]["kernel_base_name"],
            kernels[2]["kernel_name_demangled"], kernels[2]["stream_id"]) == (
        "_Z6kernelPfi", "kernel", None, 13)


def test_old_raw_page_keeps_kernel_time() -> None:
    kernels = only(read_ncu([DATA / "raw_page_2020_v100.csv"])).kernels.to_pylist()
    assert [k["kernel_time_text"] for k in kernels] == ["2020-Jun-09 21:39:00"] * 2
    assert [k["duration_ns"] for k in kernels] == [40_960, 4_096]
    assert kernels[1]["kernel_base_name"] == "BiasNHWCKernel"
    assert kernels[0]["sm_count"] is None


def test_details_with_rule_columns() -> None:
    export = only(read_ncu([DATA / "details_2024_rules_gh200.csv"]))
    assert export.rules.num_rows == 3  # the rule rows, whose metric fields are empty
    assert export.metrics.num_rows == 10
    kernels = export.kernels.to_pylist()
    assert [k["duration_ns"] for k in kernels] == [623_870, 1_020_000]
    assert [k["sm_count"] for k in kernels] == [132, 132]
    assert kernels[0]["kernel_base_name"] == "vectorized_elementwise_kernel"
    assert metric(export, 0, "Memory Throughput")["value"] == 3_368.85e9
    assert metric(export, 0, "Shared Memory Configuration Size")["value"] == 32_770.0
    assert metric(export, 0, "Duration")["section_name"] == "GPU Speed Of Light Throughput"


@pytest.mark.parametrize(("name", "unit"), [("details_unknown_unit.csv", "fortnight"),
                                           ("raw_page_unknown_unit.csv", "jiffy")])
def test_unknown_unit_is_kept_and_not_converted(name: str, unit: str) -> None:
    """gpu__time_duration.sum in a unit units.toml lacks: the row keeps the number as
    reported with the unit verbatim, and duration_ns stays NULL rather than a wrong number."""
    export = only(read_ncu([DATA / name]))
    duration = metric(export, 0, "gpu__time_duration.sum")
    assert (duration["unit"], duration["reported_unit"]) == (unit, unit)
    assert duration["value"] == float(duration["reported_value_text"])
    assert metric(export, 0, "smsp__cycles_elapsed.sum")["value"] == 1000.0
    assert export.kernels.column("duration_ns").to_pylist() == [None]
    [note] = [a for a in export.anomalies if a[0] == "ncu_unknown_unit"]
    assert note[2].startswith(f"unit {unit!r} is not in etl/extract/ncu/units.toml: 1 metric "
                              "values kept as reported")


def test_details_2025_metric_rows_of_16_fields_and_rule_rows_of_20() -> None:
    """ncu 2025 ends a metric row after Metric Value with a trailing comma (16 fields under
    a 20-field header); its rule rows fill all 20."""
    export = only(read_ncu([DATA / "details_2025_rules_rtx5090.csv"]))
    kernels = export.kernels.to_pylist()
    assert [(k["cc"], k["sm_count"], k["duration_ns"]) for k in kernels] == [
        ("12.0", 170, 41_216), ("12.0", 170, 2_048)]
    assert kernels[0]["kernel_base_name"] == "Kernel2"
    assert metric(export, 0, "smsp__inst_issued.sum")["value"] == 1_700_000.0
    assert metric(export, 0, "Function Cache Configuration")["reported_value_text"] \
        == "CachePreferNone"
    assert not [a for a in export.anomalies if a[0] in ("ncu_rule_rows_skipped",
                                                        "ncu_unknown_column")]


def test_details_metric_is_keyed_by_section_too() -> None:
    """'Memory Throughput' of GPU Speed Of Light Throughput (%) and of Memory Workload
    Analysis (Gbyte/s) are two metrics; the same name twice in one section is a duplicate."""
    export = only(read_ncu([DATA / "details_2025_rules_rtx5090.csv"]))
    both = sorted((r["section_name"], r["value"], r["unit"]) for r in export.metrics.to_pylist()
                  if (r["ncu_id"], r["metric_name"]) == (0, "Memory Throughput"))
    assert both == [("GPU Speed Of Light Throughput", 61.25, "percent"),
                    ("Memory Workload Analysis", 1_096_330_000_000.0, "byte/s")]
    assert not [a for a in export.anomalies if a[0] == "ncu_duplicate_metric"]
    assert export.kernels.column("metric_count").to_pylist() == [13, 6]


def test_same_metric_twice_in_one_section_is_a_duplicate(tmp_path: Path) -> None:
    lines = (DATA / "details_2025_rules_rtx5090.csv").read_text().splitlines()
    mem = next(line for line in lines if '"Mem Busy"' in line)
    path = tmp_path / "twice.csv"
    path.write_text("\n".join(lines + [mem.replace('"44.12"', '"45.00"')]) + "\n")
    export = only(read_ncu([path]))
    assert [a[:2] for a in export.anomalies if a[0] == "ncu_duplicate_metric"] == [
        ("ncu_duplicate_metric", 0)]
    assert [r["value"] for r in export.metrics.to_pylist() if r["metric_name"] == "Mem Busy"] \
        == [44.12]


def test_details_2025_rules_are_read() -> None:
    rules = only(read_ncu([DATA / "details_2025_rules_rtx5090.csv"])).rules.to_pylist()
    assert [(r["ncu_id"], r["rule_index"], r["section_name"], r["rule_name"], r["rule_type"],
             r["estimated_speedup_type"], r["estimated_speedup"]) for r in rules] == [
        (0, 0, "SpeedOfLight", "SOLBottleneck", "INF", None, None),
        (0, 1, "LaunchStats", "LaunchConfiguration", "OPT", "global", 50.0),
        (0, 2, "MemoryWorkloadAnalysis_Tables", "SharedMemoryConflicts", "OPT", "local", 12.75),
        (0, 3, "MemoryWorkloadAnalysis_Tables", "SharedMemoryConflicts", "OPT", "local", 3.9),
        (1, 0, "SpeedOfLight", "SOLBottleneck", "OPT", "global", None)]
    assert rules[1]["rule_description"] == (
        'A wave of thread blocks is split: 1 full wave and a partial wave of 170 blocks, '
        '"tail effect" up to 50.0% of the runtime.')
    assert [r["estimated_speedup_text"] for r in rules] == ["", "50", "12.75", "3.9", ""]


def test_details_2024_rules_are_read_too() -> None:
    export = only(read_ncu([DATA / "details_2024_rules_gh200.csv"]))
    assert [(r["ncu_id"], r["rule_name"], r["estimated_speedup"])
            for r in export.rules.to_pylist()] == [
        (0, "SOLBottleneck", 38.2), (0, "LaunchConfiguration", 16.03), (1, "SOLBottleneck", 50.0)]


@pytest.mark.parametrize(("fields", "problem"), [
    (14, "row has 14 fields, the header has 20"),
    (17, "row has 17 fields, the header has 20")])
def test_details_2025_short_rows_other_than_a_metric_row_are_refused(
        tmp_path: Path, fields: int, problem: str) -> None:
    lines = (DATA / "details_2025_rules_rtx5090.csv").read_text().splitlines()
    rule = next(i for i, line in enumerate(lines) if '"LaunchConfiguration"' in line)
    cut = next(csv.reader([lines[rule]]))[:fields]
    lines[rule] = ",".join('"' + f.replace('"', '""') + '"' for f in cut)
    path = tmp_path / "cut.csv"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError) as info:
        read_ncu([path])
    assert info.value.place == f"line {rule + 1}" and problem in info.value.problem


# ---- conformance -------------------------------------------------------------------------

def all_exports() -> list[NcuExport]:
    corpus = [corpus_file(n) for n in CORPUS_CSV]
    return read_ncu(corpus) + [only(read_ncu([DATA / n])) for n in FIXTURES]


def test_tables_match_schemas_and_keys_are_unique() -> None:
    import pyarrow as pa

    canonical = {e["unit"] for e in unit_table()["units"].values() if e["unit"]}
    for export in all_exports():
        assert export.kernels.schema.equals(ncu_schema("ncu_kernels"))
        assert export.metrics.schema.equals(ncu_schema("ncu_metrics"))
        for table, name in ((export.kernels, "ncu_kernels"), (export.metrics, "ncu_metrics")):
            n = table.num_rows
            conform(name, table.append_column("run_id", pa.array(["r"] * n))
                    .append_column("publish_id", pa.array(["p"] * n))
                    .append_column("ncu_source_id", pa.array([0] * n, pa.int32())))
        ids = export.kernels.column("ncu_id").to_pylist()
        assert len(ids) == len(set(ids)) and None not in ids
        keys = list(zip(*export.metrics.select(["ncu_id", "section_name", "metric_name"])
                        .to_pydict().values()))
        assert len(keys) == len(set(keys))
        units = set(export.metrics.column("unit").to_pylist()) - {None, "fortnight", "jiffy"}
        assert all(u in canonical or "/" in u for u in units), units


# ---- sniffing ----------------------------------------------------------------------------

@pytest.mark.parametrize(("name", "kind"), [
    (CORPUS_CSV[0], "ncu_details_csv"), (CORPUS_CSV[3], "ncu_details_csv"),
    ("gh200_cs599k_silu-pytorch_details-page.txt", "ncu_text"),
    ("a100_mistic_ilpProf.ncu-rep", "ncu_rep"),
    ("query-metrics_medav_torchbench-ncu_all_metrics.txt", None), ("SOURCES.md", None)])
def test_sniff_corpus(name: str, kind: str | None) -> None:
    assert looks_like_ncu(corpus_file(name).read_bytes()[:65536]) == kind


@pytest.mark.parametrize(("name", "kind"), [
    ("raw_page_2023_a100.csv", "ncu_raw_csv"), ("raw_page_2020_v100.csv", "ncu_raw_csv"),
    ("details_2024_rules_gh200.csv", "ncu_details_csv"),
    ("broken/ncu_details_csv-no-metric-columns.csv", "ncu_details_csv"),
    ("broken/ncu_raw_csv-no-metric-columns.csv", "ncu_raw_csv"),
    ("broken/ncu_text-page.txt", "ncu_text"), ("broken/ncu_rep-empty.ncu-rep", "ncu_rep")])
def test_sniff_fixtures(name: str, kind: str) -> None:
    assert looks_like_ncu((DATA / name).read_bytes()) == kind


@pytest.mark.parametrize("head", [b'{"traceEvents": []}', b"ID,Process ID\n1,2\n", b"",
                                  b"==PROF== Connected to process 1\n"])
def test_sniff_rejects_other_files(head: bytes) -> None:
    assert looks_like_ncu(head) is None


# ---- broken inputs -----------------------------------------------------------------------

BROKEN = {
    "ncu_details_csv-truncated.csv": ("line 5", "last row has 8 fields, the header has 15: "
                                      "the file is truncated"),
    "ncu_details_csv-unterminated-quote.csv": ("line 3", "malformed CSV"),
    "ncu_details_csv-no-metric-columns.csv": ("line 1 (header)", "header has no metric columns"),
    "ncu_details_csv-not-a-number.csv": ("line 3", "value 'four hundred' is not a number"),
    "ncu_details_csv-id-not-a-number.csv": ("line 3", "ID 'zero' is not a number"),
    "ncu_raw_csv-no-units-row.csv": ("line 2", "raw page without its units row"),
    "ncu_raw_csv-no-metric-columns.csv": ("line 1 (header)", "header has no metric columns"),
    "ncu_text-page.txt": ("line 6", "ncu --import ncu_text-page.ncu-rep --csv --page raw > "
                          "ncu_text-page.csv"),
}


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_broken_input_is_refused_with_place(name: str) -> None:
    place, fragment = BROKEN[name]
    with pytest.raises(InputError) as info:
        read_ncu([DATA / "broken" / name])
    assert info.value.place == place
    assert fragment in info.value.line()
    assert info.value.remedy


def test_corpus_text_page_gives_the_export_command() -> None:
    with pytest.raises(InputError) as info:
        read_ncu([corpus_file("gh200_cs599k_silu-pytorch_details-page.txt")])
    assert ("ncu --import gh200_cs599k_silu-pytorch_details-page.ncu-rep --csv --page raw > "
            "gh200_cs599k_silu-pytorch_details-page.csv") in info.value.line()


def test_non_ncu_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text('{"lr": 0.1}')
    with pytest.raises(InputError, match="not an Nsight Compute export"):
        read_ncu([path])


def test_header_only_export_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "empty.csv"
    header = (DATA / "broken" / "ncu_details_csv-not-a-number.csv").read_text().splitlines()[0]
    path.write_text("==ERROR== The application returned an error code (1).\n" + header + "\n")
    with pytest.raises(InputError, match="no kernel rows after the header"):
        read_ncu([path])


# ---- units, numbers, names ---------------------------------------------------------------

@pytest.mark.parametrize(("reported", "unit", "factor"), [
    ("usecond", "ns", 1000), ("msecond", "ns", 10**6), ("second", "ns", 10**9),
    ("nsecond", "ns", 1), ("Kbyte", "byte", 1000), ("Gbyte", "byte", 10**9),
    ("Gbyte/second", "byte/s", 10**9), ("byte/s", "byte/s", 1),
    ("cycle/nsecond", "hz", 10**9), ("cycle/second", "hz", 1), ("Ghz", "hz", 10**9),
    ("%", "percent", 1), ("", None, 1), ("(!)", None, 1), ("inst/cycle", "inst/cycle", 1),
    ("Kbyte/block", "byte/block", 1000), ("register/thread", "register/thread", 1),
    ("warp", "warp", 1), ("sectors", "sector", 1)])
def test_unit_table(reported: str, unit: str | None, factor: int) -> None:
    assert convert_unit(reported) == (unit, Decimal(factor))


@pytest.mark.parametrize("reported", ["fortnight", "Kcycle", "byte/fortnight", "usec"])
def test_unknown_units_raise(reported: str) -> None:
    with pytest.raises(UnknownUnit):
        convert_unit(reported)


@pytest.mark.parametrize(("text", "number"), [
    ("5,318,969,728.00", Decimal("5318969728.00")), ("0.00", Decimal(0)), ("1e+09", Decimal(10**9)),
    ("-3.5", Decimal("-3.5")), (".5", Decimal("0.5")), ("1,2", None), ("12,34.5", None),
    ("(32, 32, 1)", None), ("n/a", None), ("", None), ("CachePreferNone", None)])
def test_parse_number(text: str, number: Decimal | None) -> None:
    assert parse_number(text) == number


@pytest.mark.parametrize(("name", "forms"), [
    ("void randomInit<float>(T1 *, int, int, unsigned int)",
     ("void randomInit<float>(T1 *, int, int, unsigned int)", None, "randomInit")),
    ("_Z6kernelPfi", (None, "_Z6kernelPfi", "kernel")),
    ("_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEEEEviT0_",
     (None, "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEEEEviT0_",
      "vectorized_elementwise_kernel")),
    ("volta_fp16_s884cudnn_fp16_256x64_ldg8_relu_f2f_exp_interior_nhwc_tn_v1",
     (None, None, "volta_fp16_s884cudnn_fp16_256x64_ldg8_relu_f2f_exp_interior_nhwc_tn_v1")),
    ("void (anonymous namespace)::softmax_warp_forward<float, float, 10>(float*, int)",
     ("void (anonymous namespace)::softmax_warp_forward<float, float, 10>(float*, int)", None,
      "softmax_warp_forward")),
    ("void f<(int)4>(int) const", ("void f<(int)4>(int) const", None, "f")),
    ("void at::native::<unnamed>::k<float, {lambda(float)#1}>(int)",
     ("void at::native::<unnamed>::k<float, {lambda(float)#1}>(int)", None, "k")),
    (None, (None, None, None))])
def test_name_forms(name: str | None, forms: tuple[str | None, ...]) -> None:
    assert name_forms(name) == forms


# ---- ncu's console output without an export -----------------------------------------------

def test_sniff_ncu_error_text_but_not_other_csv() -> None:
    assert looks_like_ncu((DATA / "console_err_nvgpuctrperm.csv").read_bytes()) == "ncu_console"
    assert looks_like_ncu((DATA / "broken" / "ncu_console-no-kernels-profiled.csv")
                          .read_bytes()) == "ncu_console"
    smi = (b"timestamp, name, utilization.gpu [%], memory.used [MiB]\n"
           b"2024/05/01 10:00:00.000, NVIDIA A100-SXM4-80GB, 97 %, 40536 MiB\n")
    assert looks_like_ncu(smi) is None
    log = b"==PROF== Connected to process 1 (/usr/bin/python3)\nstep 0\n"
    assert looks_like_ncu(log) is None  # ncu's notices with no error: not claimed
    export = (DATA / "details_2025_rules_rtx5090.csv").read_bytes()
    assert looks_like_ncu(b"==ERROR== one kernel failed\n" + export) == "ncu_details_csv"


def test_no_kernels_profiled_csv_is_refused_with_ncu_warnings() -> None:
    with pytest.raises(InputError) as info:
        read_ncu([DATA / "broken" / "ncu_console-no-kernels-profiled.csv"])
    assert info.value.place == "line 4"
    assert info.value.problem == (
        "ncu wrote no export, only its warnings: ==WARNING== No kernels were profiled. | "
        "==WARNING== Profiling kernels launched by child processes requires the "
        "--target-processes all option.")


_NVTX = ('"thread Domain:Push/Pop_Range:PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg",'
         '"Id:Domain:Start/Stop_Range:PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg"')


def test_range_results_keep_their_totals_and_say_so(tmp_path: Path) -> None:
    # ncu 2025.3 --replay-mode app-range --nvtx, details page: Stream "n/a", no launch
    # shape, kernel name "range" (the layout of a public capture's fixture)
    head = ('"ID","Process ID","Process Name","Host Name",' + _NVTX + ',"Kernel Name",'
            '"Context","Stream","Device","CC","Section Name","Metric Name","Metric Unit",'
            '"Metric Value"\n')
    row = ('"0","4242","python","h","","0:<default domain>:step","range","1","n/a","0",'
           '"10.0","Command line profiler metrics",')
    path = tmp_path / "range.csv"
    path.write_text(head + row + '"gpu__time_duration.avg","ns","123480704"\n'
                    + row + '"sm__throughput.avg.pct_of_peak_sustained_elapsed","%","0.14"\n')
    export = only(read_ncu([path]))
    [kernel] = export.kernels.to_pylist()
    assert (kernel["kernel_name"], kernel["stream_id"], kernel["duration_ns"]) == (
        "range", None, 123480704)
    kinds = [a[0] for a in export.anomalies]
    assert "ncu_range_result" in kinds and kinds.count("ncu_unknown_column") == 2


def test_metric_instances_keep_the_value_and_nvtx_columns_are_not_metrics(
        tmp_path: Path) -> None:
    # --page raw --print-metric-instances values --nvtx: "12 (FFMA: 8; IMAD: 4)" is the
    # value 12 and its instances
    path = tmp_path / "raw.csv"
    path.write_text(
        '"ID","Process ID","Process Name","Host Name",' + _NVTX + ',"Kernel Name","Context",'
        '"Stream","Block Size","Grid Size","Device","CC","gpu__time_duration.sum",'
        '"sass__inst_executed_per_opcode","TPC.TriageCompute.sm__cycles_active.avg"\n'
        '"","","","","","","","","","","","","","ns","inst",""\n'
        '"0","4242","python","h","<default domain>:ProfilerStep#3","","k","1","7",'
        '"(256, 1, 1)","(80, 1, 1)","0","9.0","2,000","12 (FFMA: 8; IMAD: 4)",'
        '"0.75 (0.5; 1; 0.75)"\n')
    export = only(read_ncu([path]))
    values = {r["metric_name"]: r["value"] for r in export.metrics.to_pylist()}
    assert values == {"gpu__time_duration.sum": 2000.0, "sass__inst_executed_per_opcode": 12.0,
                      "TPC.TriageCompute.sm__cycles_active.avg": 0.75}
    assert [a[0] for a in export.anomalies].count("ncu_unknown_column") == 2


def test_print_summary_output_is_refused_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "summary.csv"
    path.write_text('"Process ID","Process Name","Host Name","Kernel Name","Block Size",'
                    '"Grid Size","Device","CC","Invocations","Section Name","Metric Name",'
                    '"Metric Unit","Minimum","Maximum","Average"\n'
                    '"1","bench","h","saxpy","(256, 1, 1)","(4096, 1, 1)","0","9.0","14",'
                    '"Command line profiler metrics","gpu__time_duration.sum","nsecond",'
                    '"3,104.00","3,520.00","3,260.57"\n')
    assert looks_like_ncu(path.read_bytes()) == "ncu_summary_csv"
    with pytest.raises(InputError, match="--print-summary output") as caught:
        read_ncu([path])
    assert "--page raw" in str(caught.value) and "\n" not in str(caught.value)
