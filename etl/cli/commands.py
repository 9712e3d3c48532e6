"""The commands of `etl`: each a thin layer over one library call."""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from etl.core.errors import EtlError, counted, one_line

if TYPE_CHECKING:
    from etl.warehouse.compact import CompactResult
    from etl.warehouse.store import Warehouse

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
            if (ctx.obj or {}).get("debug"):
                raise
            line = exc.line() if hasattr(exc, "line") else str(exc)
            click.echo(f"error: {one_line(line)}", err=True)
            detail = getattr(exc, "detail", "")  # DuckDB's own hints and position, whole
            if detail:
                click.echo(detail, err=True)
            sys.exit(1)


def _tolerant_output() -> None:
    """Never fail on printing: under a non-UTF-8 locale (LANG=C without UTF-8 mode, a
    latin-1 terminal) a character the terminal cannot encode is written as `\\u...`
    instead of raising UnicodeEncodeError halfway through a report."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)  # absent on replaced streams
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")


def output_file(path: Path) -> Path:
    """An -o file, checked before any work: its folder must exist (a report or an export
    takes seconds, and would else end in a traceback when it writes)."""
    folder = path.parent
    if not folder.is_dir():
        what = "is not a folder" if folder.exists() else "does not exist"
        raise EtlError(f"-o {path}: the folder {folder} {what}; create it (mkdir -p "
                       f"{folder}) or write elsewhere")
    return path


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """The package version, the extractors' version (code and field maps: a change
    re-ingests unchanged runs) and the version of every view."""
    if not value or ctx.resilient_parsing:
        return
    from etl import __version__
    from etl.load.ingest import extractor_version
    from etl.core.sql_files import discover, stable_names

    click.echo(f"etl {__version__}")
    click.echo(f"extractors {extractor_version()}")
    latest = stable_names(discover())
    click.echo("views " + ", ".join(latest[s] for s in sorted(latest) if not s.startswith("_")))
    ctx.exit()


def _set_debug(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value:  # the group's callback made the shared obj before the subcommand's parsing
        ctx.ensure_object(dict)["debug"] = True


def _debug_option() -> click.Option:
    return click.Option(["--debug"], is_flag=True, expose_value=False, callback=_set_debug,
                        help="Show tracebacks instead of one-line errors.")


@click.group(cls=Cli)
@click.option("--debug", is_flag=True, help="Show tracebacks instead of one-line errors.")
@click.option("--version", is_flag=True, expose_value=False, is_eager=True,
              callback=_print_version, help="Print the versions of etl, its extractors and "
              "its views, and exit.")
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
                type=click.Path(exists=True, path_type=Path))
@warehouse_option
@click.option("--salvage", is_flag=True,
              help="Keep the complete events of truncated traces (the run is marked "
                   "truncated) instead of refusing the run.")
@click.option("--jobs", "-j", type=click.IntRange(1, 64), default=None,
              show_default="min(2, CPUs)", help="Run folders extracted in parallel.")
@click.option("--prefix", is_flag=True, help="Name each run by its path from the given "
              "folder's parent (hta/trace_diff/control) instead of its folder name.")
@click.option("--name", "run_name", default=None, help="The run's name (one run folder only).")
@click.option("--replace", is_flag=True, help="Let a run replace the warehouse's run of the "
              "same name that was ingested from another folder.")
@click.option("--strict", is_flag=True,
              help="Refuse a run when one of its counters exports (ncu) cannot be read, "
                   "instead of ingesting its traces without it and reporting the export.")
@click.option("--engine", type=click.Choice(["local", "spark"]), default="local",
              show_default=True, help="spark: extract the run folders as Spark tasks (one "
              "per run folder; the warehouse must be on storage every executor sees); this "
              "process publishes them.")
@click.option("--master", default="local[2]", show_default=True,
              help="With --engine spark: the Spark master (local[N], spark://HOST:PORT, yarn).")
@click.pass_context
def ingest(ctx: click.Context, paths: tuple[Path, ...], warehouse_dir: Path, salvage: bool,
           jobs: int | None, prefix: bool, run_name: str | None, replace: bool, strict: bool,
           engine: str, master: str) -> None:
    """Ingest run folders (or folders of run folders, or single trace files) into the
    warehouse.

    A run folder directly holds profiler files (or run.toml); its sub-folders belong to
    it. A folder whose profiler files are only in sub-folders is a parent, and each
    sub-folder is a run. A file given by itself is a run of that file, named after it
    without the profiler's suffixes (rank0.pt.trace.json.gz: rank0). A run's name is its
    folder's name (see --prefix, --name);
    ingesting it again replaces that run, and is a no-op when its files are unchanged. A
    name already taken by a run from another folder is refused unless --replace.

    \b
    Example:
      etl ingest runs/ --warehouse warehouse/
      etl ingest rank0.pt.trace.json.gz
      etl ingest corpus/hta --prefix
      etl ingest /shared/runs --warehouse /shared/warehouse --engine spark --master yarn
    """
    import warnings

    from etl.api import ingest as ingest_runs
    from etl.cli import output as report

    with report.progress() as advance, warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        results = ingest_runs(paths, warehouse_dir, prefix=prefix, name=run_name,
                              engine=engine, master=master, on_done=advance,
                              on_start=advance.start,  # type: ignore[attr-defined]
                              debug=ctx.obj["debug"], salvage=salvage, jobs=jobs,
                              replace=replace, strict=strict)
    for warning in warned:
        click.echo(f"warning: {warning.message}", err=True)
    report.summary(results)
    if results.compaction is not None:
        _report_compaction(results.compaction)
    if any(r.status == "refused" for r in results):
        sys.exit(1)


def _report_compaction(result: CompactResult) -> None:
    if result.busy:
        click.echo("another compaction is running; nothing done")
    elif not result.segments:
        click.echo("nothing to compact")
    else:
        click.echo(f"compacted {counted(result.runs, 'run')} into "
                   f"{counted(len(result.segments), 'segment')}")


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
    from etl.warehouse.compact import compact
    from etl.warehouse.store import Warehouse

    _report_compaction(compact(Warehouse.at(warehouse_dir).existing()))


@main.command()
@click.argument("sql")
@warehouse_option
@click.option("--format", "fmt", type=click.Choice(["table", "line", "csv", "json", "parquet"]),
              default=None, show_default="table; with -o, from its suffix",
              help="Output format (line: one column per line, as DuckDB's .mode line; json: "
              "an array of objects; parquet: with -o only).")
@click.option("--limit", type=click.IntRange(0), default=40, show_default=True,
              help="Rows shown in table output (csv and json print every row).")
@click.option("--all", "all_rows", is_flag=True, help="Show every row in table output.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the result to this file: .parquet, .csv or .json (or say --format).")
@click.option("--engine", type=click.Choice(["duckdb", "spark"]), default="duckdb",
              show_default=True, help="spark: run the SQL (Spark SQL) in a SparkSession "
              "with every table, and the views the SQL names (with the views they read), "
              "registered (etl.spark.register_warehouse).")
@click.option("--master", default="local[2]", show_default=True,
              help="With --engine spark: the Spark master (local[N], spark://HOST:PORT, yarn).")
def query(sql: str, warehouse_dir: Path, fmt: str | None, limit: int, all_rows: bool,
          output: Path | None, engine: str, master: str) -> None:
    """Run SQL on the warehouse (tables and views).

    Table output shows the first rows and how many there are, with the columns that fit
    the terminal (the others are named below it; a view's meaningful columns first); line
    output shows each row's columns one per line; csv and json print everything. With -o
    the format is the file's suffix.

    \b
    Example:
      etl query "SELECT run_name, iteration, gpu_util FROM gpu_utilization" --format csv
      etl query "SELECT * FROM run_summary" --format line
      etl query "SELECT * FROM kernels" -o kernels.parquet
      etl query "SELECT run_name, gpu_util FROM run_summary" --engine spark
    """
    from etl.cli import output as report
    from etl.views.query import export_query, run_query

    if output is not None:
        fmt = _file_format(output_file(output), fmt)
    fmt = fmt or "table"
    if engine == "spark":
        if output is not None or fmt == "parquet":
            raise EtlError("--engine spark prints its result (table, csv, json); to write "
                           "files, use register_warehouse in a Spark job (README)")
        columns, rows = _spark_rows(warehouse_dir, sql, master)
        report.print_rows(columns, rows, fmt, None if all_rows else limit)
        return

    from etl.cli.analyses import compute_paths_named_in

    compute_paths_named_in(sql, warehouse_dir)
    if output is not None:
        written = export_query(warehouse_dir, sql, output, fmt)
        click.echo(f"wrote {written:,} rows to {output}")
        return
    if fmt == "parquet":
        raise EtlError("--format parquet writes a file: add -o FILE")
    columns, rows = run_query(warehouse_dir, sql)
    if fmt in ("table", "line"):  # a display rule: csv and json keep the view's order
        from etl.cli.plain_table import meaningful_first

        order = meaningful_first(sql, columns)
        columns, rows = [columns[i] for i in order], [tuple(r[i] for i in order) for r in rows]
    report.print_rows(columns, rows, fmt, None if all_rows else limit)
    _collect_garbage(warehouse_dir)


FILE_FORMATS = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv", ".json": "json"}


def _file_format(output: Path, fmt: str | None) -> str:
    """-o's format: --format when given (parquet, csv, json), else the file's suffix."""
    if fmt in ("table", "line"):
        raise EtlError(f"-o writes parquet, csv or json, not {fmt}: drop --format {fmt} (the "
                       "suffix says which) or print without -o")
    found = fmt or FILE_FORMATS.get(output.suffix.lower())
    if found is None:
        raise EtlError(f"-o {output}: no format for the suffix {output.suffix!r}; name the "
                       "file .parquet, .csv or .json, or add --format parquet (or csv, json)")
    return found


def _spark_rows(warehouse_dir: Path, sql: str, master: str
                ) -> tuple[list[str], list[tuple[Any, ...]]]:
    from etl.spark import local_session, register_warehouse
    from etl.spark.session import rows, tables_named_in
    from etl.warehouse.store import Warehouse

    warehouse = Warehouse.at(warehouse_dir).existing()
    if not sql.strip():
        raise EtlError('no SQL given; for example: etl query "SELECT run_name FROM runs" '
                       "--engine spark")
    shared = _running_session()
    spark = local_session(master, "etl query")
    spark.sparkContext.setLogLevel("ERROR")
    try:
        with warehouse.reader_lease():
            # only the views the query names, and what they read: all take minutes
            register_warehouse(spark, warehouse.root, tables_named_in(sql))
            return rows(spark, sql)
    finally:
        if not shared:
            spark.stop()


def _running_session() -> bool:
    """Whether this process runs a Spark context already (etl called from a Spark job, or
    a notebook's session): local_session then returns that session, which is left running.
    Asked before local_session, because getOrCreate writes its app name into the running
    session's configuration."""
    from pyspark import SparkContext

    return getattr(SparkContext, "_active_spark_context", None) is not None


def _collect_garbage(warehouse_dir: Path) -> None:
    """Housekeeping after the answer: superseded folders past their grace would else stay
    listed, and slow every query, until the next ingest."""
    from etl.warehouse.store import Warehouse

    Warehouse.at(warehouse_dir).collect_garbage()


# What a user looks for first (the view run_list); everything else is one `etl query` away.
RUNS_SQL = """
SELECT run, gpu, ranks, iterations, kernels, gpu_util, hint, ncu_coverage, ingested_at
FROM run_list ORDER BY run
"""


@main.command()
@warehouse_option
def runs(warehouse_dir: Path) -> None:
    """List the ingested runs: GPU, ranks, iterations, kernels, gpu_util of run_summary's
    iteration (mean over ranks), a hint where the run has no step markers (the step_pattern
    its anomaly no_step_markers suggests), ncu coverage (share of kernel time matched),
    ingest time.

    \b
    Example:
      etl runs --warehouse warehouse/
    """
    from etl.cli import output as report
    from etl.views.query import run_query

    columns, rows = run_query(warehouse_dir, RUNS_SQL)
    report.print_rows(columns, rows, "table")


@main.command(name="rm")
@click.argument("names", nargs=-1, required=True)
@warehouse_option
def rm_command(names: tuple[str, ...], warehouse_dir: Path) -> None:
    """Remove runs from the warehouse, all at once (queries already running keep them).

    \b
    Example:
      etl rm resnet_amp_eager --warehouse warehouse/
    """
    from etl.warehouse.manage import remove_runs

    published = remove_runs(_existing(warehouse_dir), list(names))
    published.wait_until_visible()
    click.echo(f"removed {counted(len(names), 'run')}: {', '.join(names)}")


@main.command(name="mv")
@click.argument("old")
@click.argument("new")
@warehouse_option
def mv_command(old: str, new: str, warehouse_dir: Path) -> None:
    """Rename a run (one publish: the new name appears as the old one vanishes).

    \b
    Example:
      etl mv control hta/trace_diff/control --warehouse warehouse/
    """
    from etl.warehouse.manage import rename_run

    rename_run(_existing(warehouse_dir), old, new).wait_until_visible()
    click.echo(f"renamed {old} to {new}")


def _existing(warehouse_dir: Path) -> Warehouse:
    from etl.warehouse.store import Warehouse

    warehouse = Warehouse.at(warehouse_dir).existing()
    warehouse.init()  # schema files of columns added since it was made
    return warehouse


@main.command()
@click.argument("dest", type=click.Path(path_type=Path))
def demo(dest: Path) -> None:
    """Write a small synthetic runs folder (no GPU needed).

    \b
    Example:
      etl demo demo-runs && etl ingest demo-runs
    """
    from etl.demo.runs import write_demo

    try:
        written = write_demo(dest)
    except FileExistsError:
        raise EtlError(f"{dest}: exists and is not empty; choose a new folder") from None
    for folder in written:
        click.echo(f"wrote {folder}")


@main.command()
@warehouse_option
@click.option("--dialect", type=click.Choice(["duckdb", "spark", "trino"]), default=None,
              help="Print every view's SELECT in this SQL dialect instead (transpiled from "
              "sql/views/; spark and duckdb are tested by running them, trino is not).")
def views(warehouse_dir: Path, dialect: str | None) -> None:
    """Check the views in warehouse.duckdb and write them again if their files changed or
    a shell dropped or replaced one (`etl ingest` and `etl query` do it too).

    \b
    Example:
      etl views --warehouse warehouse/
      etl views --dialect spark > views.sql
    """
    if dialect is not None:
        from etl.views.dialects import view_statements
        from etl.views.catalog import checked_views

        for name, select in view_statements(checked_views(), dialect):
            click.echo(f"-- {name}\nCREATE OR REPLACE VIEW {name} AS\n{select};\n")
        return
    from etl.views.database import ensure_views
    from etl.warehouse.store import Warehouse

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
    """Print the ncu --metrics list for the four levels and the roofline (FLOPs per
    precision, DRAM bytes: what kernel_roofline and etl forecast read), and command lines to
    profile one iteration.

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
    click.echo(f"# metrics collecting all four levels and the roofline's FLOPs and DRAM bytes on "
               f"{name}:")
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
@click.option("--record", is_flag=True,
              help="Record the fingerprints of new views (and of changed views that "
                   "sql/CHANGELOG.md does not name yet) in sql/fingerprints.toml.")
@click.option("--rebase", is_flag=True,
              help="With --record: take every fingerprint again, after an upgrade of sqlglot "
                   "alone (refused under the sqlglot that took them).")
@click.option("--same-rows", "same_rows", multiple=True, metavar="VIEW",
              help="Record that the released VIEW, edited, returns the rows it returned as "
                   "--base renders it: its released SQL goes to sql/rewrites.toml, which "
                   "tests/views/test_rewrites.py runs beside it (repeatable).")
@click.option("--base", default="HEAD", show_default=True,
              help="With --same-rows: the git revision that holds the views as released.")
def lint_sql(record: bool, rebase: bool, same_rows: tuple[str, ...], base: str) -> None:
    """Check the views: one documented SELECT each, known dependencies read by pinned _vN
    names, guarded divisions, and released views unchanged since their fingerprint (or
    rewritten with the same rows, recorded in sql/rewrites.toml).

    \b
    Example:
      etl lint-sql
      etl lint-sql --record    # after adding sql/views/<area>/<name>_v<N>.sql
      etl lint-sql --same-rows run_utilization_v2   # edited, rows unchanged
    """
    from etl.views import fingerprints as view_fingerprints
    from etl.views import rewrites
    from etl.core.sql_files import discover
    from etl.views.catalog import lint

    if rebase and not record:
        raise click.UsageError("--rebase goes with --record")
    views = discover()
    if record:
        for name in view_fingerprints.record(views, rebase=rebase):
            click.echo(f"recorded {name}")
    if same_rows:
        for rewrite in rewrites.record(views, rewrites.views_at(base), list(same_rows)):
            click.echo(f"recorded the rewrite of {rewrite.view} (released SQL kept in "
                       f"{view_fingerprints.REWRITES.name}); run tests/views/test_rewrites.py")
    problems = lint(views) + view_fingerprints.check(views) + rewrites.check(views)
    for line in problems:
        click.echo(line, err=True)
    if problems:
        sys.exit(1)
    click.echo(f"{len(views)} views keep the house rules and match their fingerprints")


@main.command()
@click.argument("run_names", nargs=-1, metavar="[RUN]...")
@warehouse_option
@click.option("--where", default=None, help="SQL condition on the runs table choosing the runs "
              "(instead of names), e.g. \"model = 'resnet50'\".")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path),
              default=Path("report.html"), show_default=True, help="HTML file to write.")
@click.option("--forecast", default=None, metavar="GPU,GPU",
              help="Catalog GPUs to forecast every run on (etl gpus lists them): a table.")
def report(run_names: tuple[str, ...], warehouse_dir: Path, where: str | None,
           output: Path, forecast: str | None) -> None:
    """Write one self-contained HTML report: the paper's figures (Fig. 5-8) over the runs,
    then busy/idle, kernels, ops, match coverage and anomalies of each run.

    Charts are inline SVG with their numbers in a table under each; the file needs no
    network and opens from file://. All runs by default.

    \b
    Example:
      etl report -o report.html
      etl report resnet_amp_eager resnet_fp32_eager -o amp-vs-fp32.html
      etl report --where "precision = 'amp'" -o amp.html
      etl report --forecast H100-SXM5-80GB,L4 -o report.html
    """
    from etl.present.report import write_report

    output_file(output)
    gpus = [g for g in (forecast or "").split(",") if g.strip()]
    shown = write_report(warehouse_dir, output, run_names, where, gpus)
    click.echo(f"wrote {output} ({counted(len(shown), 'run')})")


SLOWER_EXIT = 3  # compare --fail-above: B slower (1 is an error, 2 a usage error)


@main.command()
@click.argument("side_a", metavar="A")
@click.argument("side_b", metavar="B")
@warehouse_option
@click.option("--by", type=click.Choice(["op", "layer", "kernel", "kernel_type"]), default="op",
              show_default=True, help="What the GPU-time changes are grouped by.")
@click.option("--top", type=click.IntRange(1), default=20, show_default=True,
              help="Groups shown, by size of the change in GPU time per iteration.")
@click.option("--format", "fmt", type=click.Choice(["table", "csv", "json"]), default="table",
              show_default=True, help="Output format (csv and json: every column, full "
              "precision, one row per quantity with its part).")
@click.option("--fail-above", "fail_above", type=click.FloatRange(0), default=None,
              metavar="PCT", help=f"Exit with code {SLOWER_EXIT} when B's mean iteration time "
              "is slower than A's by more than PCT percent, the whole 95% interval of the "
              "difference above it (for CI; too few samples for an interval: says so, exit 0).")
def compare(side_a: str, side_b: str, warehouse_dir: Path, by: str, top: int, fmt: str,
            fail_above: float | None) -> None:
    """Compare two runs, or two groups of repeated runs: window, busy, gpu_util,
    throughput and the four levels side by side, then the ops (layers, kernels) whose GPU
    time changed most.

    A and B are each a run name, run names joined by commas (a1,a2,a3), or
    repeat:<group>, the runs whose run.toml has tags = ["repeat:<group>"].

    Two single runs: each steady iteration (run_summary's selected one and later, every
    rank) is a sample. A side with several runs: each run is one sample, the mean of its
    steady iterations (iterations of one run are not independent repeats). Then means,
    B - A, B / A, a 95% interval of B - A and Welch's t-test; `within noise` when
    p >= 0.05, `one sample` when a side has fewer than two samples.

    \b
    Example:
      etl compare resnet_fp32_eager resnet_amp_eager
      etl compare resnet_fp32_eager resnet_amp_eager --by kernel --format csv
      etl compare repeat:fp32 repeat:amp
      etl compare fp32_a,fp32_b,fp32_c amp_a,amp_b,amp_c
      etl compare repeat:main repeat:branch --fail-above 5    # exit 3: 5% slower, surely
    """
    from etl.cli import output as report
    from etl.present.compare import COLUMNS, compare as compare_runs

    rows = compare_runs(warehouse_dir, side_a, side_b, by, top)
    if fmt != "table":
        report.print_rows(COLUMNS, [tuple(r[c] for c in COLUMNS) for r in rows], fmt)
    else:
        _compare_tables(rows, side_a, side_b, by, top)
    if fail_above is not None:
        _fail_if_slower(rows, fail_above)


def _fail_if_slower(rows: list[dict[str, Any]], percent: float) -> None:
    from etl.present.compare import gate

    judged = gate(rows, percent)
    click.echo(judged.line, err=True)
    if judged.slower:
        sys.exit(SLOWER_EXIT)


def _compare_tables(rows: list[dict[str, Any]], side_a: str, side_b: str, by: str,
                    top: int) -> None:
    from etl.cli import output as report

    shown = ["metric", "unit", "n_a", "n_b", "mean_a", "mean_b", "ratio", "diff_ci_low",
             "diff_ci_high", "p_value", "verdict"]
    samples = rows[0]["samples"] if rows else "iterations"
    click.echo(f"A = {side_a}, B = {side_b}; samples are {samples}; ratio = B / A; "
               "95% interval of B - A")
    for part, title in (("summary", "runs"), (by, f"top {top} {by}s by change in GPU time")):
        click.echo(f"\n{title}:")
        picked = [tuple(_short_number(r[c]) for c in shown) for r in rows if r["part"] == part]
        report.print_rows(shown, picked, "table")


def _short_number(value: Any) -> Any:
    return float(f"{value:.4g}") if isinstance(value, float) else value


@main.command("export-trace")
@click.argument("run")
@warehouse_option
@click.option("--iteration", type=int, default=None,
              help="Only this iteration's host events, GPU activities and counter.")
@click.option("--source", type=int, default=None,
              help="Only this trace source (rank's file); by default all of them.")
@click.option("-o", "--output", default="trace.json", show_default=True,
              help="A .json file to write, or a folder (an existing one, or a name ending "
              "in /) to write as a run folder: one rankR.pt.trace.json per rank "
              "(sourceN.pt.trace.json when the trace names no rank) and the run's run.toml.")
def export_trace(run: str, warehouse_dir: Path, iteration: int | None, source: int | None,
                 output: str) -> None:
    """Write a run's timeline as Chrome trace JSON (open it in Perfetto UI or
    chrome://tracing): host events and GPU activities as in the source, each matched
    kernel's ncu levels in its args, and a gpu_util counter per iteration.

    Into a file, a run of several ranks is one trace to look at, with a process per rank's
    host and per rank's GPU ("rank 1 GPU 0"); a run of one rank (or --source N) is its file
    as the profiler wrote it. Into a folder (-o DIR/), each rank is its own Kineto file
    beside the run's run.toml: `etl ingest DIR` reads it back as a run named DIR with the
    same ranks, kernels, gpu_utilization and dimensions (the folder must hold nothing else;
    a TensorFlow run's kernels come back without their op and layer).

    \b
    Example:
      etl export-trace resnet_amp_eager -o amp.json
      etl export-trace resnet_amp_ddp -o ddp.json          # all ranks, one timeline
      etl export-trace resnet_amp_ddp -o ddp_copy/ && etl ingest ddp_copy/
      etl export-trace resnet_amp_ddp --source 1 --iteration 3 -o rank1-step3.json
    """
    from etl.present.export_trace import export_folder, export_trace as export

    if output.endswith(("/", os.sep)) or Path(output).is_dir():
        for path, count in export_folder(warehouse_dir, run, Path(output), iteration,
                                         source).items():
            click.echo(f"wrote {path} ({count} events)")
        return
    count = export(warehouse_dir, run, output_file(Path(output)), iteration, source)
    click.echo(f"wrote {output} ({count} events)")


def accept_debug_after_commands() -> None:
    """--debug is accepted after the subcommand too (`etl ingest runs/ --debug`)."""
    for command in main.commands.values():
        command.params.append(_debug_option())
