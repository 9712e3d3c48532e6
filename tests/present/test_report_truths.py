"""The report says what a run has: an ncu export without a trace is not "no ncu export",
and a source without a rank is not rank "None"."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import INPUTS, cli, corpus_path


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("truths")
    ncu = root / "runs" / "ncu"
    ncu.mkdir(parents=True)
    (ncu / "pi.ncu-rep").symlink_to(corpus_path("ncu", "rtx3080_monte-carlo-pi_profile.ncu-rep"))
    xla = root / "runs" / "xla" / "plugins" / "profile" / "s"
    xla.mkdir(parents=True)
    (xla / "h.xplane.pb").write_bytes(
        (INPUTS / "xplane" / "xla_two_gpus_three_steps.xplane.pb").read_bytes())
    done = cli("ingest", str(root / "runs"), "--warehouse", str(root / "wh"))
    assert done.returncode == 0, done.stderr
    return root / "wh"


def connect(warehouse: Path):  # type: ignore[no-untyped-def]
    import etl

    return etl.connect(warehouse)


def test_an_ncu_only_run_shows_its_kernels_levels(warehouse: Path) -> None:
    from etl.present.report import sections

    con = connect(warehouse)
    try:
        figures = sections.per_run(con, sections.RunTables.read(con, ["ncu"]), "ncu",
                                   0).figures
        truth = con.execute("SELECT u.ncu_id, u.smsp_active_util, u.issue_slot_util FROM "
                            "ncu_kernel_utilization AS u ORDER BY u.duration_ns DESC").fetchall()
        fig5 = sections.fig5(con, ["ncu", "xla"])
    finally:
        con.close()
    notes = " ".join(f.note for f in figures)
    assert "no ncu export" not in notes
    [levels] = [f for f in figures if f.table.source == "ncu_kernel_utilization"]
    assert "has 2 kernel(s) and no trace kernel to match them to" in levels.note
    columns = levels.table.columns
    got = [(r[columns.index("ncu_id")], r[columns.index("smsp_active_util")],
            r[columns.index("issue_slot_util")]) for r in levels.table.rows]
    assert got == truth and len(got) == 2 and got[0][2] is not None  # issue slot: levels
    assert fig5.empty.startswith("no trace kernel of these runs was matched")
    assert "ncu exports in: ncu" in fig5.empty


def test_a_run_without_a_rank_is_labelled_by_its_devices(warehouse: Path) -> None:
    from etl.present.report import sections

    con = connect(warehouse)
    try:
        [busy] = [f for f in sections.per_run(
            con, sections.RunTables.read(con, ["xla"]), "xla", 1).figures
                  if f.table.source == "gpu_utilization"]
        labels = sections._iteration_labels(
            [dict(zip(busy.table.columns, r)) for r in busy.table.rows])
    finally:
        con.close()
    assert labels == [f"d{d} it {i}" for d in (0, 1) for i in range(3)]
    assert "rNone" not in busy.chart and "d1 it 2" in busy.chart
