"""The command line: a thin layer over the library. Only this module knows about terminals."""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from etl.errors import EtlError, one_line

if TYPE_CHECKING:
    from etl.compact import CompactResult
    from etl.warehouse import Warehouse

DEFAULT_WAREHOUSE = "./warehouse"
warehouse_option = click.option(
    "--warehouse", "warehouse_dir", type=click.Path(file_okay=False, path_type=Path),
    default=lambda: os.environ.get("ETL_WAREHOUSE", DEFAULT_WAREHOUSE), show_default=
    "$ETL_WAREHOUSE or ./warehouse", help="Warehouse folder.")


class Cli(click.Group):
    """Turns the project's own errors into one line and exit code 1 (tracebacks: --debug)."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        _tolerant_output()
        return super().main(*args, **kwargs)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except EtlError as exc:
            if ctx.params.get("debug"):
                raise
            line = exc.line() if hasattr(exc, "line") else str(exc)
            click.echo(f"error: {one_line(line)}", err=True)
            sys.exit(1)


def _tolerant_output() -> None:
    """Never fail on printing: under a non-UTF-8 locale (LANG=C without UTF-8 mode, a
    latin-1 terminal) a character the terminal cannot encode is written as `\\u...`
    instead of raising UnicodeEncodeError halfway through a report."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)  # absent on replaced streams
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")


@click.group(cls=Cli)
@click.option("--debug", is_flag=True, help="Show tracebacks instead of one-line errors.")
@click.pass_context
def main(ctx: click.Context, debug: bool) -> None:
    """GPU utilization warehouse: ingest profiler outputs, query utilization with SQL.

    \b
    Example:
      etl demo runs/ && etl ingest runs/
      etl query "SELECT run_name, gpu_util FROM run_summary"
    """
    ctx.obj = {"debug": debug}


@main.command()
@click.argument("paths", nargs=-1, required=True,
                type=click.Path(exists=True, file_okay=False, path_type=Path))
@warehouse_option
@click.option("--salvage", is_flag=True,
              help="Keep the complete events of truncated traces (the run is marked "
                   "truncated) instead of refusing the run.")
@click.option("--jobs", "-j", type=click.IntRange(1, 64), default=lambda: min(2, os.cpu_count()
              or 1), show_default="min(2, CPUs)", help="Run folders extracted in parallel.")
@click.option("--strict", is_flag=True,
              help="Refuse a run when one of its counters exports (ncu) cannot be read, "
                   "instead of ingesting its traces without it and reporting the export.")
@click.pass_context
def ingest(ctx: click.Context, paths: tuple[Path, ...], warehouse_dir: Path, salvage: bool,
           jobs: int, strict: bool) -> None:
    """Ingest run folders (or folders of run folders) into the warehouse.

    \b
    Example:
      etl ingest runs/ --warehouse warehouse/
    A run folder's name is its run name; ingesting it again replaces that run, and is a
    no-op when its files are unchanged.
    """
    from etl import report
    from etl.ingest import Options, ingest_all
    from etl.runfolder import find_run_folders
    from etl.views import ensure_views
    from etl.warehouse import Warehouse

    warehouse = Warehouse.at(warehouse_dir)
    folders = find_run_folders(list(paths))
    with report.progress(len(folders)) as advance:
        options = Options(debug=ctx.obj["debug"], salvage=salvage, jobs=jobs, strict=strict)
        results = ingest_all(folders, warehouse, options, on_done=advance)
    if not ensure_views(warehouse):
        click.echo(f"warning: {warehouse.database} is open in another process; views were "
                   "not refreshed (new runs are visible anyway). Run `etl views` later.",
                   err=True)
    report.summary(results)
    _compact_if_needed(warehouse)
    if any(r.status == "refused" for r in results):
        sys.exit(1)


def _compact_if_needed(warehouse: Warehouse) -> None:
    from etl.compact import compact, needs_compaction

    if warehouse.exists() and needs_compaction(warehouse):
        _report_compaction(compact(warehouse))


def _report_compaction(result: CompactResult) -> None:
    if result.busy:
        click.echo("another compaction is running; nothing done")
    elif not result.segments:
        click.echo("nothing to compact")
    else:
        click.echo(f"compacted {result.runs} runs into {len(result.segments)} segment(s)")


@main.command(name="compact")
@warehouse_option
def compact_command(warehouse_dir: Path) -> None:
    """Rewrite runs into multi-run segments, so that queries open fewer files.

    `etl ingest` does it by itself once many runs sit in folders of their own. Values are
    copied, never recomputed; readers keep working meanwhile.

    \b
    Example:
      etl compact --warehouse warehouse/
    """
    from etl.compact import compact
    from etl.errors import WarehouseError
    from etl.warehouse import Warehouse

    warehouse = Warehouse.at(warehouse_dir)
    if not warehouse.exists():
        raise WarehouseError(f"{warehouse.root}: no warehouse here")
    _report_compaction(compact(warehouse))


@main.command()
@click.argument("sql")
@warehouse_option
@click.option("--format", "fmt", type=click.Choice(["table", "csv", "json"]), default="table",
              show_default=True, help="Output format (json: an array of objects).")
def query(sql: str, warehouse_dir: Path, fmt: str) -> None:
    """Run SQL on the warehouse (tables and views).

    \b
    Example:
      etl query "SELECT run_name, iteration, gpu_util FROM gpu_utilization" --format csv
    """
    from etl import report
    from etl.query import run_query

    columns, rows = run_query(warehouse_dir, sql)
    report.print_rows(columns, rows, fmt)
    _collect_garbage(warehouse_dir)


def _collect_garbage(warehouse_dir: Path) -> None:
    """Housekeeping after the answer: superseded folders past their grace would else stay
    listed, and slow every query, until the next ingest."""
    from etl.warehouse import Warehouse

    Warehouse.at(warehouse_dir).collect_garbage()


@main.command()
@warehouse_option
def runs(warehouse_dir: Path) -> None:
    """List the ingested runs.

    \b
    Example:
      etl runs --warehouse warehouse/
    """
    from etl import report
    from etl.query import run_query

    columns, rows = run_query(warehouse_dir, (
        "SELECT run_name, run_id, len(sources) AS sources, model, exec_mode, precision, "
        "batch_size, gpu, event_count, anomaly_count, ingested_at FROM runs ORDER BY run_name"))
    report.print_rows(columns, rows, "table")


@main.command()
@click.argument("dest", type=click.Path(path_type=Path))
def demo(dest: Path) -> None:
    """Write a small synthetic runs folder (no GPU needed).

    \b
    Example:
      etl demo demo-runs && etl ingest demo-runs
    """
    from etl.demo import write_demo

    try:
        written = write_demo(dest)
    except FileExistsError:
        raise EtlError(f"{dest}: exists and is not empty; choose a new folder") from None
    for folder in written:
        click.echo(f"wrote {folder}")


@main.command()
@warehouse_option
def views(warehouse_dir: Path) -> None:
    """(Re)create the warehouse's views in warehouse.duckdb.

    \b
    Example:
      etl views --warehouse warehouse/
    """
    from etl.views import ensure_views
    from etl.warehouse import Warehouse

    warehouse = Warehouse.at(warehouse_dir)
    warehouse.init()
    if not ensure_views(warehouse):
        raise EtlError(f"{warehouse.database}: open in another process (a DuckDB shell?); "
                       "close it and retry")
    click.echo(f"views up to date in {warehouse.database}")


def _arch_help() -> str:
    """The --arch help from the metric catalog, so that a new catalog entry is listed."""
    from etl.extract.ncu.levels import arch_names

    return (f"GPU architecture: {', '.join(arch_names())} (or a compute capability such as "
            "8.0); a newer member of a known family (sm_120) gets its nearest entry, "
            "unverified.")


class _CatalogHelp(click.Option):
    """An option whose help is read from the catalog only when help is shown (a TOML read
    that `etl --help` and every other command should not pay)."""

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        self.help = _arch_help()
        return super().get_help_record(ctx)


@main.command("ncu-metrics")
@click.option("--arch", required=True, cls=_CatalogHelp, help="GPU architecture.")
@click.option("--kernels-per-iteration", type=click.IntRange(1), default=None,
              help="Kernels one training iteration launches (from a trace: kernel_count in "
                   "gpu_utilization).")
@click.option("--warmup-iterations", type=click.IntRange(0), default=None,
              help="Iterations to skip before the profiled one.")
@click.option("--program", default="python train.py", show_default=True,
              help="The command that runs the training job.")
def ncu_metrics(arch: str, kernels_per_iteration: int | None, warmup_iterations: int | None,
                program: str) -> None:
    """Print the ncu --metrics list for the four levels, and command lines to profile one
    iteration.

    \b
    Example:
      etl ncu-metrics --arch sm_80 --kernels-per-iteration 870 --warmup-iterations 2
    """
    from etl.extract.ncu.levels import (
        arch_entry,
        ncu_metric_list,
        normalize_arch,
        profile_commands,
    )

    try:
        name = normalize_arch(arch)
        entry = arch_entry(name)
        commands = profile_commands(name, kernels_per_iteration, warmup_iterations, program)
    except (KeyError, ValueError) as exc:
        raise EtlError(f"--arch {arch}: {exc.args[0] if exc.args else exc}") from None
    if entry.read_as:
        click.echo(f"# {name} has no catalog entry: these are the counters of {entry.arch}, the "
                   f"nearest known architecture of its family ({entry.family}); unverified on "
                   f"{name}")
    click.echo(f"# metrics collecting all four levels on {name}:")
    click.echo(",".join(ncu_metric_list(name)))
    click.echo("# profile the steps bracketed by cudaProfilerStart/Stop "
               "(torch.cuda.profiler.start()/stop()):")
    click.echo(commands[0])
    if len(commands) > 1:
        click.echo(f"# profile iteration {warmup_iterations} by launch count:")
        click.echo(commands[1])
    click.echo("# then export for ingest: ncu --import REPORT.ncu-rep --csv --page raw > "
               "REPORT.csv (or put the .ncu-rep in the run folder)")


@main.command()
def formats() -> None:
    """List the input formats a run folder may hold: what each reads, which tables it
    fills, how its files are recognised.

    \b
    Example:
      etl formats
    """
    from etl.extract.registry import formats as registered

    for fmt in registered():
        click.echo(f"{fmt.name}  ({fmt.role}, etl/extract/{fmt.family}/)")
        click.echo(f"  reads:      {fmt.reads}")
        click.echo(f"  recognised: {fmt.recognised_by}")
        click.echo(f"  fills:      {', '.join(fmt.fills) if fmt.fills else '(nothing)'}")
        if fmt.refused:
            click.echo(f"  refused:    {fmt.refused}")


@main.command("lint-sql")
def lint_sql() -> None:
    """Check that every view is one documented SELECT with known dependencies.

    \b
    Example:
      etl lint-sql
    """
    from etl.views import discover, lint

    problems = lint(discover())
    for line in problems:
        click.echo(line, err=True)
    if problems:
        sys.exit(1)
    click.echo("all views documented")


if __name__ == "__main__":
    main()
