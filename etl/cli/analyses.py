"""`etl whatif`: the replay's answers on the command line."""
from __future__ import annotations

from pathlib import Path

import click

from etl.cli.commands import main, warehouse_option


@main.command()
@click.argument("run")
@click.option("--scale", "scales", multiple=True, metavar="SELECTOR:FACTOR",
              help="Scale durations: all, host, kernel_type=TYPE, kernel=REGEX, op=REGEX, "
                   "layer=REGEX or rank=N, then the factor after the last colon (0 removes "
                   "the time, 0.5 halves it). Repeat to combine; factors multiply.")
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
