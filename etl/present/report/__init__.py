"""`etl report`: one self-contained HTML file with the paper's figures and a section per run.

The page is rendered from jinja2 templates in `templates/`; its charts are inline SVG
(etl/present/report/svg.py) and its style is inline, so it opens from a file:// URL on an
offline machine: no scripts, no fonts, no network requests. Every chart has the table of
the numbers it was drawn from under it; a section without data says why.

    from etl.present.report import write_report
    write_report("warehouse", Path("report.html"), runs=["resnet_amp_eager"])
"""
from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import duckdb

    from etl.present.report.sections import Section


def build_sections(con: duckdb.DuckDBPyConnection, runs: list[str],
                   forecast: Sequence[str] = ()) -> list[Section]:
    from etl.present.report import forecast as f
    from etl.present.report import sections as s

    paper = [s.overview(con, runs), s.batch_scaling(con, runs), s.fig5(con, runs),
             s.fig6(con, runs), s.fig7(con, runs), s.fig8(con, runs), s.amdahl(con, runs),
             s.overhead(con, runs)]
    more = [f.roofline_section(con, runs)]
    if forecast:
        more.insert(0, f.forecast_section(con, runs, forecast))
    tables = s.RunTables.read(con, runs)
    return paper + more + [s.per_run(con, tables, run, i) for i, run in enumerate(runs, 1)]


def render(con: duckdb.DuckDBPyConnection, runs: list[str], warehouse: str,
           forecast: Sequence[str] = ()) -> str:
    import jinja2

    from etl import __version__
    from etl.present.report.sections import fmt

    env = jinja2.Environment(loader=jinja2.PackageLoader("etl.present.report", "templates"),
                             autoescape=True, undefined=jinja2.StrictUndefined,
                             trim_blocks=True, lstrip_blocks=True)
    env.filters["fmt"] = fmt
    env.filters["raw"] = _raw
    env.filters["svg"] = jinja2.utils.markupsafe.Markup
    template = env.get_template("report.html.j2")
    return template.render(sections=build_sections(con, runs, forecast), runs=runs,
                           warehouse=warehouse, version=__version__)


def _raw(value: object) -> str:
    """The exact value for data-value: repr of floats round-trips, NULL is empty."""
    return "" if value is None else repr(value) if isinstance(value, float) else str(value)


def write_report(warehouse: str | os.PathLike[str], out: Path, runs: Sequence[str] = (),
                 where: str | None = None, forecast: Sequence[str] = ()) -> list[str]:
    """Write the report of the chosen runs (all by default) to `out`; the runs shown.
    `forecast`: catalog GPUs to forecast every run on (a table)."""
    from etl.analysis import costs as kernel_costs
    from etl.analysis.critical_path import missing
    from etl.api import connect, costs, critical_path
    from etl.core.errors import EtlError
    from etl.present.report.data import select_runs, share_views
    from etl.warehouse.store import Warehouse

    con = connect(warehouse)
    try:
        chosen = select_runs(con, list(runs), where)
        store = Warehouse.at(os.fspath(warehouse))
        no_path = missing(con, store, chosen)
        no_costs = missing(con, store, chosen, kernel_costs.TABLE)
        computed = [*(critical_path(no_path, warehouse).runs if no_path else []),
                    *(costs(no_costs, warehouse).runs if no_costs else [])]
        if computed:  # derived tables computed now: read again
            con.close()
            con = connect(warehouse)
        if not chosen:
            raise EtlError("no runs to report on" + (f" (--where {where!r} matched none)"
                                                     if where else "; ingest some first"))
        share_views(con, chosen)
        html = render(con, chosen, Path(os.fspath(warehouse)).name, forecast)
    finally:
        con.close()
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(html, encoding="utf-8")
    tmp.replace(out)
    return chosen
