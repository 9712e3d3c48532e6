"""`etl report`: the numbers in the page equal the views', sections without data say why,
the file is self-contained, and it renders in a real browser without errors or requests."""
from __future__ import annotations

import os
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tests.present.browser import open_page, require_browser
from tests.conftest import cli, kernel, launch, step, write_trace


class Tables(HTMLParser):
    """Every <table data-source=...> of the page as rows of {column: data-value}, and the
    text of every section."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[tuple[str, list[dict[str, str]]]] = []
        self.sections: dict[str, str] = {}
        self.figures: dict[str, str] = {}  # the text of every <figure id=...>
        self._section: str | None = None
        self._figure: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "section":
            self._section = a["id"]
            self.sections[self._section or ""] = ""
        elif tag == "table":
            self.tables.append((a["data-source"] or "", []))
        elif tag == "tr":
            self.tables[-1][1].append({}) if self.tables else None
        elif tag == "td":
            self.tables[-1][1][-1][a["data-column"] or ""] = a["data-value"] or ""
        elif tag == "svg" and self._section:
            self.sections[self._section] += "<svg>"
            if self._figure:
                self.figures[self._figure] += "<svg>"
        if tag == "figure":
            self._figure = a.get("id")
            if self._figure:
                self.figures[self._figure] = ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "figure":
            self._figure = None

    def handle_data(self, data: str) -> None:
        if self._section:
            self.sections[self._section] += data
        if self._figure:
            self.figures[self._figure] += data

    def rows(self, source: str) -> list[dict[str, str]]:
        return [r for s, rows in self.tables if s == source for r in rows if r]


def parse(path: Path) -> Tables:
    parser = Tables()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser


@pytest.fixture(scope="module")
def demo_report(demo_warehouse: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("demo_report") / "report.html"
    result = cli("report", "--warehouse", str(demo_warehouse), "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"wrote {out} (16 runs)"  # the demo's runs
    return out


def sql(warehouse: Path, query: str) -> list[tuple]:
    import etl

    con = etl.connect(warehouse)
    try:
        return con.execute(query).fetchall()
    finally:
        con.close()


def number(text: str) -> float | None:
    return None if text == "" else float(text)


def test_fig5_table_is_run_utilization(demo_warehouse: Path, demo_report: Path) -> None:
    page = parse(demo_report).rows("run_utilization")
    expected = sql(demo_warehouse, "SELECT run_name, gpu_util, issue_slot_util, tc_issue_util "
                   "FROM run_utilization WHERE ncu_reason IS NULL ORDER BY run_name")
    assert [(r["run_name"], number(r["gpu_util"]), number(r["issue_slot_util"]),
             number(r["tc_issue_util"])) for r in page] == expected
    assert [r[0] for r in expected] == ["resnet_amp_eager", "resnet_fp32_eager"]


def test_batch_scaling_figures_are_the_view(demo_warehouse: Path, demo_report: Path) -> None:
    page = parse(demo_report)
    # to 12 digits: DuckDB's parallel sums may add in another order in another query
    shown = {(r["framework"], r["exec_mode"], int(r["batch_size"]),
              float(f"{number(r['throughput_samples_per_s']):.12g}"))
             for r in page.rows("batch_scaling")}
    expected = {(*r[:3], float(f"{r[3]:.12g}")) for r in sql(
        demo_warehouse, "SELECT framework, exec_mode, batch_size, throughput_samples_per_s "
        "FROM batch_scaling")}
    assert shown == expected and len(expected) >= 8
    assert page.sections["batch-scaling"].count("<svg>") == 3


def test_per_iteration_and_cdf_tables_are_the_views(demo_warehouse: Path,
                                                    demo_report: Path) -> None:
    page = parse(demo_report)
    busy = [(int(r["iteration"]), int(r["busy_ns"]), int(r["idle_ns"]))
            for r in page.rows("gpu_utilization")]
    expected = sql(demo_warehouse, "SELECT iteration, busy_ns, window_ns - busy_ns FROM "
                   "gpu_utilization ORDER BY run_name, source_id, device_id, iteration")
    assert busy == expected and len(busy) > 20  # every run, rank, device and iteration
    cdf = [(r["run_name"], number(r["cumulative_time_share"])) for r in page.rows("tc_time_cdf")]
    assert cdf == sql(demo_warehouse, "SELECT run_name, cumulative_time_share FROM "
                      "tc_time_cdf ORDER BY run_name, tc_issue_util")
    top = [(r["kernel_name"], int(r["total_ns"])) for r in page.rows("kernel_summary")]
    first = sql(demo_warehouse, "SELECT min(run_name) FROM kernel_summary")[0][0]
    expected = sql(demo_warehouse, "SELECT kernel_name, total_ns FROM kernel_summary "
                   f"WHERE run_name = '{first}' ORDER BY total_ns DESC, kernel_name LIMIT 10")
    assert expected and top[:len(expected)] == expected


def test_amdahl_table_is_tc_amdahl_v2(demo_warehouse: Path, demo_report: Path) -> None:
    page = [(r["run_name"], r["basis"], number(r["speedup_bound_k10_ratio"]))
            for r in parse(demo_report).rows("tc_amdahl_v2")]
    expected = sql(demo_warehouse, "SELECT run_name, basis, speedup_bound_k10_ratio FROM "
                   "tc_amdahl_v2 ORDER BY run_name, rank, device_id")
    assert page == expected
    bases = {run: basis for run, basis, _ in page}
    assert bases["resnet_amp_eager"] == "ncu" and bases["resnet_amp_ddp"] == "name_estimate"


def figure_of(page: Tables, run: str, part: str) -> str:
    index = [r["run_name"] for r in page.rows("runs")].index(run) + 1
    return page.figures[f"run-{index}-{part}"]


def test_memory_figure_is_gpu_utilization_v5(demo_warehouse: Path, demo_report: Path) -> None:
    page = parse(demo_report)
    shown = [(int(r["iteration"]), int(r["peak_allocated_bytes"]), number(r["peak_memory_share"]))
             for r in page.rows("gpu_utilization_v5")]
    expected = sql(demo_warehouse, "SELECT iteration, peak_allocated_bytes, peak_memory_share "
                   "FROM gpu_utilization_v5 WHERE peak_allocated_bytes IS NOT NULL ORDER BY "
                   "run_name, source_id, device_id, window_start_ns")
    assert shown == expected and len(shown) == 32  # the eight TF runs, four steps each
    assert "<svg>" in figure_of(page, "tf_bert_xla_b8", "memory")
    pytorch = figure_of(page, "resnet_amp_eager", "memory")
    assert "<svg>" not in pytorch and "no memory events in this run" in pytorch


def test_overhead_tables_are_instrument_overhead(demo_warehouse: Path, demo_report: Path
                                                 ) -> None:
    """The demo's cnn_* experiment: the nvidia-smi-only run is the baseline, the PyTorch
    profiler's iteration is the slowest and its trace the most bytes per iteration."""
    shown = [(r["run_name"], r["instrument"], number(r["iteration_overhead_ratio"]),
              number(r["bytes_per_iteration"]))
             for r in parse(demo_report).rows("instrument_overhead_v1")]
    expected = sql(demo_warehouse, "SELECT run_name, instrument, iteration_overhead_ratio, "
                   "bytes_per_iteration FROM instrument_overhead_v1 ORDER BY experiment, "
                   "iteration_ns NULLS LAST, run_name, instrument")
    assert shown == expected
    cnn = {r[0]: r for r in expected if r[0].startswith("cnn_")}
    assert cnn["cnn_nvidia_smi"][2] == 1.0
    slowest = max(cnn.values(), key=lambda r: r[2])
    assert slowest[:2] == ("cnn_pytorch_profiler", "pytorch_profiler")
    assert slowest[3] == max(r[3] for r in cnn.values())


def test_instruments_figure_is_instrument_comparison(demo_warehouse: Path,
                                                     demo_report: Path) -> None:
    page = parse(demo_report)
    shown = [(int(r["iteration"]), number(r["smi_gpu_util"]), number(r["dcgm_tensor_active_util"]))
             for r in page.rows("instrument_comparison_v3")
             if "smi_gpu_util" in r and r["iteration"]]  # not cnn_nvidia_smi's whole-run row
    expected = sql(demo_warehouse, "SELECT iteration, smi_gpu_util, dcgm_tensor_active_util "
                   "FROM instrument_comparison_v3 WHERE run_name = 'resnet_amp_nsys' "
                   "ORDER BY window_start_ns")
    assert shown == expected and len(shown) == 5
    [(smi, tensor)] = sql(demo_warehouse, "SELECT avg(smi_gpu_util), avg(dcgm_tensor_active_util)"
                          " FROM instrument_comparison_v3 WHERE run_name = 'resnet_amp_nsys'")
    nsys = figure_of(page, "resnet_amp_nsys", "instruments")
    assert f"nvidia-smi util reads {smi:.1%} busy while DCGM TENSO has the tensor pipes " \
           f"active {tensor:.1%}" in nsys and tensor < 0.05 < 0.95 < smi  # the paper's gap
    assert "<svg>" in nsys and "Not shown: ncu: no ncu export in the run" in nsys
    tf = figure_of(page, "tf_bert_xla_b8", "instruments")
    assert "<svg>" not in tf
    assert "Not shown: nvidia-smi, DCGM, nsys: no samples in the run; ncu: no ncu" in tf


def test_violin_table_and_density_are_scipys(demo_warehouse: Path, demo_report: Path) -> None:
    from etl.present.report.sections import _violin

    values = [v for (v,) in sql(demo_warehouse, "SELECT issue_slot_util FROM "
                                "kernel_utilization WHERE run_name = 'resnet_amp_eager'")]
    violin = _violin("x", values)
    assert violin.maximum == max(values) and violin.mean == pytest.approx(
        sum(values) / len(values))
    # the density is a density: it integrates to about 1 over the values' range
    step_width = violin.grid[1] - violin.grid[0]
    assert 0.8 < sum(violin.density) * step_width < 1.05
    page = {r["run_name"]: r for r in parse(demo_report).rows("issue_slot_distribution")}
    assert number(page["resnet_amp_eager"]["max_util"]) == max(values)
    from scipy.stats import gaussian_kde  # the report's numpy KDE is scipy's estimate

    assert violin.density == pytest.approx(gaussian_kde(values)(violin.grid), rel=1e-12)


def test_sections_without_ncu_say_why(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    write_trace(runs / "plain" / "t.json", [step(1, 0, 100_000), launch(1, 1_000),
                                            kernel(1, 10_000, 40_000)])
    assert cli("ingest", str(runs), "--warehouse", str(tmp_path / "wh")).returncode == 0
    out = tmp_path / "r.html"
    assert cli("report", "--warehouse", str(tmp_path / "wh"), "-o", str(out)).returncode == 0
    sections = parse(out).sections
    for sid in ("fig5", "fig6", "fig7", "fig8"):
        assert "No data: no ncu export in these runs" in sections[sid], sid
        assert "<svg>" not in sections[sid], sid
    # Amdahl falls back on the kernel names ("k" is no tensor-core name: bound 1)
    assert parse(out).rows("tc_amdahl_v2") == [{
        "run_name": "plain", "source_id": "0", "rank": "", "device_id": "0", "iteration": "1",
        "basis": "name_estimate", "non_tc_time_share": "1.0", "speedup_bound_k2_ratio": "1.0",
        "speedup_bound_k10_ratio": "1.0", "speedup_bound_inf_ratio": "1.0",
        "basis_note": "no ncu export in the run"}]
    assert "marked '(names)'" in sections["amdahl"]
    assert "No data: no configuration of these runs has a batch size" in sections[
        "batch-scaling"]
    assert "no ncu export in this run" in sections["run-1"]


def test_report_refuses_unknown_runs(demo_warehouse: Path, tmp_path: Path) -> None:
    result = cli("report", "nope", "--warehouse", str(demo_warehouse), "-o",
                 str(tmp_path / "r.html"))
    assert result.returncode == 1
    assert result.stderr.startswith("error: no run named nope")
    chosen = cli("report", "--where", "precision = 'fp32' AND model = 'resnet50-synthetic'",
                 "--warehouse",
                 str(demo_warehouse), "-o", str(tmp_path / "r.html"))
    assert chosen.returncode == 0, chosen.stderr
    assert [r["run_name"] for r in parse(tmp_path / "r.html").rows("runs")] == [
        "resnet_fp32_eager"]


def test_report_is_self_contained(demo_report: Path) -> None:
    text = demo_report.read_text(encoding="utf-8")
    for forbidden in ("<script", "<link", "src=", "@import", "url("):
        assert forbidden not in text, forbidden
    stripped = text.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "http://" not in stripped and "https://" not in stripped


@pytest.mark.slow  # a browser
def test_report_in_headless_chromium(demo_report: Path, tmp_path: Path) -> None:
    require_browser()
    shots = tmp_path / "screenshots"
    shots.mkdir()
    with open_page(demo_report) as (page, log):
        charts = page.locator("svg.chart")
        assert charts.count() >= 12
        for i in range(charts.count()):
            box = charts.nth(i).bounding_box()
            assert box is not None and box["width"] > 100 and box["height"] > 100, i
        sections = page.locator("section")
        ids = [sections.nth(i).get_attribute("id") for i in range(sections.count())]
        for sid in ids:
            page.locator(f"section#{sid}").screenshot(path=str(shots / f"{sid}.png"))
        # the per-run memory and instrument figures of a run that has each
        # resnet_amp_nsys, tf_bert_eager_b16 (after the four cnn_* runs, by name)
        new = ["run-7-instruments", "run-9-memory"]
        for fid in new:
            assert page.locator(f"figure#{fid} svg.chart").count() == 1, fid
            page.locator(f"figure#{fid}").screenshot(path=str(shots / f"{fid}.png"))
    assert log.console_errors == []
    assert log.requests == [demo_report.resolve().as_uri()]
    assert ids[:8] == ["overview", "batch-scaling", "fig5", "fig6", "fig7", "fig8", "amdahl",
                       "overhead"]
    assert sorted(p.name for p in shots.iterdir()) == sorted(f"{s}.png" for s in ids + new)
    assert all(p.stat().st_size > 2000 for p in shots.iterdir())
    if os.environ.get("ETL_SCREENSHOT_DIR"):
        keep = Path(os.environ["ETL_SCREENSHOT_DIR"])
        keep.mkdir(parents=True, exist_ok=True)
        for p in shots.iterdir():
            shutil.copy(p, keep / p.name)


def _close(a: list[tuple], b: list[tuple]) -> bool:
    """Row lists equal, floats to 12 significant digits (DuckDB's parallel sums may add
    in another order in another plan)."""
    def key(row: tuple) -> tuple:
        return tuple(float(f"{v:.12g}") if isinstance(v, float) else v for v in row)
    return len(a) == len(b) and sorted(map(key, a), key=repr) == sorted(map(key, b), key=repr)


def test_shared_views_are_kept_for_every_run_only_and_hold_the_views_rows(
        demo_warehouse: Path) -> None:
    import etl
    from etl.present.report.data import SHARED_VIEWS, select_runs, share_views

    readers = ("tc_amdahl", "batch_scaling", "instrument_comparison", "run_utilization",
               "instrument_overhead", "gpu_utilization")
    plain = etl.connect(demo_warehouse)
    con = etl.connect(demo_warehouse)
    try:
        runs = select_runs(con, [], None)
        temporary = "SELECT count(*) FROM duckdb_tables() WHERE temporary"
        assert not share_views(con, runs[:2])
        assert con.execute(temporary).fetchall() == [(0,)]
        assert share_views(con, list(reversed(runs)))
        assert con.execute(temporary).fetchall() == [(len(SHARED_VIEWS),)]
        [(database,)] = con.execute("SELECT current_database()").fetchall()
        for view in SHARED_VIEWS:
            kept = f'FROM temp.main."{view}"'
            stored = f'FROM "{database}".main."{view}"'
            assert con.execute(f"{kept} EXCEPT ALL {stored}").fetchall() == [], view
            assert con.execute(f"{stored} EXCEPT ALL {kept}").fetchall() == [], view
        for reader in readers:  # the views above them read the kept rows: same answers
            query = f"SELECT * FROM {reader}"
            assert _close(con.execute(query).fetchall(), plain.execute(query).fetchall()), reader
    finally:
        con.close()
        plain.close()
