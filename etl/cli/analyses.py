"""`etl whatif` and `etl critical-path`: the replay's answers on the command line."""
from __future__ import annotations

import re
from pathlib import Path

import click

from etl.cli.commands import main, warehouse_option

NAMES_THE_PATH = re.compile(r"(?i)\bcritical_path")


@main.command("critical-path")
@click.argument("runs", nargs=-1)
@warehouse_option
def critical_path(runs: tuple[str, ...], warehouse_dir: Path) -> None:
    """Compute the critical path of RUNS (default: every run without one yet) and keep it:
    the views critical_path and critical_path_summary read it.

    Each iteration's end is followed back to its start along what bound it in the replay
    of the run's dependency graph. `etl query` and `etl report` compute it for the runs
    they read when it is missing; the DuckDB shell shows the runs computed so far.

    \b
    Example:
      etl critical-path
      etl query "SELECT segment_kind, sum(path_share) FROM critical_path_summary
                 WHERE run_name = 'resnet_amp_eager' AND iteration = 3 GROUP BY ALL"
    """
    from etl.api import critical_path as compute

    done = compute(list(runs) or None, warehouse_dir)
    missing = sorted(set(runs) - set(done.runs) - set(done.kept))
    if missing:
        raise click.ClickException(f"no run named {', '.join(missing)} (etl runs lists them)")
    click.echo(f"critical path computed for {_count(done.runs, 'run')}"
               f"{f', kept from before for {len(done.kept)}' if done.kept else ''}")
    for note in done.notes():
        click.echo(f"note: {note}")


def compute_paths_named_in(sql: str, warehouse_dir: Path) -> None:
    """Before a query that reads the critical path or the kernels' costs: compute them
    where they are missing."""
    from etl.analysis.costs import READERS

    if READERS.search(sql):
        from etl.api import costs

        costed = costs(None, warehouse_dir)
        if costed.runs:
            click.echo(f"computed the kernel costs of {_count(costed.runs, 'run')} (kept for "
                       "later queries: etl costs)", err=True)
    if not NAMES_THE_PATH.search(sql):
        return
    from etl.api import critical_path as compute

    done = compute(None, warehouse_dir)
    if done.runs:
        click.echo(f"computed the critical path of {_count(done.runs, 'run')} (kept for "
                   "later queries: etl critical-path)", err=True)


def _count(items: list[str], noun: str) -> str:
    return f"{len(items)} {noun}{'' if len(items) == 1 else 's'}"


@main.command()
@click.argument("run")
@click.option("--scale", "scales", multiple=True, metavar="SELECTOR:FACTOR",
              help="Scale durations: all, host, kernel_type=TYPE, kernel=REGEX, op=REGEX, "
                   "layer=REGEX or rank=N (several joined by commas select what all "
                   "select: rank=3,kernel_type=computation), then the factor after the last "
                   "colon (0 removes the time, 0.5 halves it). Repeat to combine; factors "
                   "multiply.")
@warehouse_option
@click.option("--format", "fmt", type=click.Choice(["table", "csv", "json"]), default="table",
              show_default=True, help="csv and json: the per-iteration rows alone.")
def whatif(run: str, scales: tuple[str, ...], warehouse_dir: Path, fmt: str) -> None:
    """What a change would buy: RUN's iterations replayed with durations scaled.

    The run's dependency graph (host calls in thread order, launches, streams, the
    synchronizations the trace records, collectives across ranks) is replayed with the
    measured durations and with the scaled ones. One row per device and iteration:
    measured_ns (gpu_utilization's window), replayed_ns (the measured durations replayed:
    equal where the model holds), whatif_ns, speedup_ratio = replayed / what-if. The
    table then shows the what-if's critical path by kind and name.

    \b
    Example:
      etl whatif resnet_amp_eager --scale all:0.5            # GPU work 2x faster
      etl whatif resnet_amp_eager --scale host:0             # no host overhead
      etl whatif resnet_amp_ddp --scale kernel_type=communication:0
      etl whatif resnet_amp_eager --scale 'op=aten::conv.*:0.8' --format csv
    """
    from etl.api import whatif as run_whatif
    from etl.cli import output

    result = run_whatif(run, list(scales), warehouse_dir)
    columns = list(result.rows[0])
    output.print_rows(columns, [tuple(r[c] for c in columns) for r in result.rows], fmt)
    if fmt != "table":
        return
    for note in result.notes():
        click.echo(f"note: {note}")
    click.echo("\ncritical path of the what-if (all windows), by kind and name:")
    shown = result.path[:15]
    output.print_rows(["segment_kind", "name", "dur_ns", "path_share"],
                      [(p["segment_kind"], p["name"], p["dur_ns"], round(p["path_share"], 4))
                       for p in shown], "table")


@main.command()
def links() -> None:
    """The link catalog (etl/core/links.toml): what `etl forecast --link/--network` take.

    One row per link: its key, family, scope (node: GPUs of one machine; network: between
    machines, one NIC port per GPU), the GB/s one GPU sends in one direction, NCCL's ring
    step latency on it, and the source of the figure.

    \b
    Example:
      etl links
    """
    from etl.cli import output
    from etl.core.links import links as catalog

    rows = [(lk.key, lk.family, lk.scope, lk.per_gpu_gbs, lk.step_latency_us, lk.confidence,
             lk.source) for lk in catalog().values()]
    output.print_rows(["link", "family", "scope", "per_gpu_gbs", "step_latency_us",
                       "confidence", "source"], rows, "table")
