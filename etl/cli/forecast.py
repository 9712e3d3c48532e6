"""`etl forecast` and `etl gpus`: a run's time on another GPU, and the catalog it reads."""
from __future__ import annotations

from pathlib import Path

import click

from etl.cli.commands import main, warehouse_option

BY = ("iteration", "op", "layer", "kernel", "kernel_type")
FORMATS = click.Choice(["table", "csv", "json"])


@main.command()
@click.argument("run")
@click.option("--gpu", "gpu_name", default=None, metavar="NAME",
              help="The target GPU: a catalog key or a name as traces write it (etl gpus).")
@click.option("--by", type=click.Choice(BY), default="iteration", show_default=True,
              help="One row per iteration window, or per op, layer, kernel or kernel type.")
@click.option("--source-gpu", default=None, metavar="NAME",
              help="The GPU the run was measured on, when the trace does not name it.")
@click.option("--host-factor", type=float, default=1.0, show_default=True,
              help="The target's CPU time over the source's (host time is kept unless told).")
@click.option("--fallback", "fallbacks", multiple=True, metavar="LACKING=STAND_IN",
              help="Forecast work in a precision the target lacks as another, e.g. "
                   "bf16=fp16 for a V100. Repeat for several.")
@click.option("--ranks", type=int, default=None, metavar="N",
              help="The run data parallel on N GPUs (the same per-GPU batch), its "
                   "collectives at that size: of its kind, or of --gpu's.")
@click.option("--link", "link_key", default=None, metavar="KEY",
              help="With --ranks: the link between the GPUs of a machine (etl links; "
                   "default: the usual one of the run's GPU).")
@click.option("--network", "network_key", default=None, metavar="KEY",
              help="With --ranks: the network between machines, once the ranks span more "
                   "than one (e.g. ib_ndr).")
@click.option("--gpus-per-node", type=int, default=None, metavar="N",
              help="With --ranks: GPUs per machine (default 8).")
@click.option("--grad-bytes", type=float, default=None, metavar="BYTES",
              help="With --ranks, for a run without collectives: the bytes of gradients "
                   "DDP all-reduces (4 x the parameters in fp32).")
@click.option("--source-link", default=None, metavar="KEY",
              help="With --ranks: the link the run was measured on, when not its GPU's usual "
                   "one.")
@warehouse_option
@click.option("--format", "fmt", type=FORMATS, default="table", show_default=True,
              help="csv and json: the rows alone.")
def forecast(run: str, gpu_name: str | None, by: str, source_gpu: str | None,
             host_factor: float, fallbacks: tuple[str, ...], ranks: int | None,
             link_key: str | None, network_key: str | None, gpus_per_node: int | None,
             grad_bytes: float | None, source_link: str | None, warehouse_dir: Path,
             fmt: str) -> None:
    """What RUN would take on another GPU (--gpu), on more GPUs (--ranks), or on more
    GPUs of another kind (both).

    --gpu: every GPU activity gets a predicted time on the target and the method that gave
    it (shape: its op's FLOPs and bytes from the input shapes; wave_scaled: its name and
    grid; bandwidth: copies and sets; ncu: its Nsight Compute counters; communication and
    host copies keep their time), and each iteration is replayed with them. low_ns and
    high_ns: a central 80% interval from the backtest's errors of the methods used,
    weighted by their share of the predicted time (docs/forecast.md).

    --ranks: each collective takes NCCL's ring time on the target's links, calibrated on
    the run's own collectives, and the run is replayed with them; a one-GPU run adds what
    DDP's all-reduce of --grad-bytes leaves exposed after its backward pass
    (etl/analysis/scale_out.py).

    Both: the --gpu forecast with the collectives timed for --ranks GPUs of that kind
    (its usual link unless --link), per iteration.

    \b
    Example:
      etl forecast resnet_amp_eager --gpu H100-SXM5-80GB
      etl forecast resnet_amp_eager --gpu L4 --by op --format csv
      etl forecast bert_bf16 --gpu V100-PCIE-32GB --fallback bf16=fp16
      etl forecast resnet_amp_ddp --ranks 8
      etl forecast resnet_amp_eager --ranks 16 --network ib_ndr --grad-bytes 102e6
      etl forecast resnet_amp_ddp --gpu H100-SXM5-80GB --ranks 8
    """
    from etl.cli import output
    from etl.core.errors import EtlError

    if gpu_name is None and ranks is None:
        raise EtlError("give the target as --gpu NAME (another GPU), --ranks N (more GPUs "
                       "of the run's kind), or both")
    if ranks is not None and gpu_name is None:
        gpu_only = [name for name, given in (
            ("--by", by != "iteration"), ("--source-gpu", source_gpu is not None),
            ("--host-factor", host_factor != 1.0), ("--fallback", bool(fallbacks))) if given]
        if gpu_only:
            raise EtlError(f"{', '.join(gpu_only)} go with --gpu")
        _scale_out(run, ranks, link_key, network_key, gpus_per_node, grad_bytes, source_link,
                   warehouse_dir, fmt)
        return
    ranks_only = [name for name, given in (
        ("--link", link_key), ("--network", network_key), ("--gpus-per-node", gpus_per_node),
        ("--grad-bytes", grad_bytes), ("--source-link", source_link)) if given is not None]
    if ranks_only and ranks is None:
        raise EtlError(f"{', '.join(ranks_only)} go with --ranks")
    from etl.api import forecast as run_forecast

    assert gpu_name is not None
    pairs = dict(_pair(f) for f in fallbacks)
    if not pairs and fallbacks:
        raise EtlError("--fallback takes LACKING=STAND_IN, e.g. bf16=fp16")
    result = run_forecast(run, gpu_name, by=by, warehouse=warehouse_dir,
                          source_gpu=source_gpu, host_factor=host_factor, fallback=pairs,
                          ranks=ranks, link=link_key, network=network_key,
                          gpus_per_node=8 if gpus_per_node is None else gpus_per_node,
                          grad_bytes=grad_bytes, source_link=source_link)
    if fmt != "table":
        output.print_rows(result.columns, [tuple(r.values()) for r in result.rows], fmt)
        return
    columns, rows = _compact(result.columns, result.rows)
    output.print_rows(columns, rows, fmt)
    for note in result.notes:
        click.echo(f"note: {note}")


SCALE_OUT_COLUMNS = ["run_name", "rank", "device_id", "iteration", "ranks", "link", "network",
                     "measured_ns", "replayed_ns", "forecast_ns", "slowdown_ratio", "method"]


def _scale_out(run: str, ranks: int, link_key: str | None, network_key: str | None,
               gpus_per_node: int | None, grad_bytes: float | None, source_link: str | None,
               warehouse_dir: Path, fmt: str) -> None:
    """`etl forecast RUN --ranks N`: etl.api.scale_out's rows, its notes after a table."""
    from etl.api import scale_out
    from etl.cli import output

    result = scale_out(run, ranks, warehouse_dir, link=link_key, network=network_key,
                       gpus_per_node=8 if gpus_per_node is None else gpus_per_node,
                       grad_bytes=grad_bytes, source_link=source_link)
    columns = SCALE_OUT_COLUMNS if fmt != "table" else SCALE_OUT_COLUMNS[1:]
    output.print_rows(columns, [tuple(r[c] for c in columns) for r in result.rows], fmt)
    if fmt == "table":
        for note in result.notes:
            click.echo(f"note: {note}")


def _compact(columns: list[str], rows: list[dict[str, object]]
             ) -> tuple[list[str], list[tuple[object, ...]]]:
    """The table's columns: the run's name left out (it was asked for), the method shares
    as one `methods` column, largest first (csv and json keep every column)."""
    kept = [c for c in columns if not c.endswith("_share") and c != "run_name"]
    out = []
    for row in rows:
        shares = sorted(((v, c.removesuffix("_share")) for c, v in row.items()
                         if c.endswith("_share") and isinstance(v, float) and v > 0.0005),
                        reverse=True)
        out.append((*(row[c] for c in kept),
                    ", ".join(f"{m} {v:.0%}" for v, m in shares) or None))
    return kept + ["methods"], out


def _pair(text: str) -> tuple[str, str]:
    from etl.core.errors import EtlError

    lacking, equals, stand_in = text.partition("=")
    if not equals or not lacking or not stand_in:
        raise EtlError(f"--fallback {text!r}: LACKING=STAND_IN, e.g. bf16=fp16")
    return lacking.strip().lower(), stand_in.strip().lower()


@main.command("costs")
@click.argument("runs", nargs=-1)
@warehouse_option
def costs_command(runs: tuple[str, ...], warehouse_dir: Path) -> None:
    """Compute the FLOPs and bytes of every kernel of RUNS (default: every run without
    them yet) and keep them: the views kernel_roofline, op_roofline, op_flops and mfu read
    them (`etl query` computes them when it reads one of those).

    A kernel's cost is its launching op's, from the op's input shapes (record_shapes=True)
    and types (etl/core/op_cost.py), shared by the op's kernels by duration.

    \b
    Example:
      etl costs
      etl query "SELECT op_name, bound, roofline_util FROM op_roofline ORDER BY gpu_time_ns DESC"
    """
    from etl.api import costs

    done = costs(list(runs) or None, warehouse_dir)
    missing = sorted(set(runs) - set(done.runs) - set(done.kept))
    if missing:
        raise click.ClickException(f"no run named {', '.join(missing)} (etl runs lists them)")
    click.echo(f"kernel costs computed for {len(done.runs)} run(s)"
               f"{f', kept from before for {len(done.kept)}' if done.kept else ''}")


@main.command()
@click.option("--format", "fmt", type=FORMATS, default="table", show_default=True)
def gpus(fmt: str) -> None:
    """The GPU catalog (etl/core/gpus.toml): every GPU a forecast reads, the names traces
    write for it, and its datasheet figures (dense peaks in TFLOP/s).

    \b
    Example:
      etl gpus
      etl gpus --format csv
    """
    from etl.cli import output
    from etl.core.gpus import gpus as catalog

    precisions = ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8")
    columns = ["key", "model", "names", "arch", "sm_count", "boost_clock_mhz", "memory_gb",
               "mem_bw_gbs", "l2_mb", *(f"{p}_tflops" for p in precisions), "source"]
    rows = [(g.key, g.model, "; ".join(g.names), g.arch, g.sm_count, g.boost_clock_mhz,
             g.memory_gb, g.mem_bw_gbs, g.l2_mb, *(g.peak_tflops.get(p) for p in precisions),
             g.source) for g in catalog()]
    if fmt == "table":  # what fits a terminal; csv and json have every column
        shown = ["key", "names", "sm_count", "memory_gb", "mem_bw_gbs", "fp32_tflops",
                 "bf16_tflops", "fp8_tflops"]
        rows = [tuple(r[columns.index(c)] for c in shown) for r in rows]
        columns = shown
    output.print_rows(columns, rows, fmt, limit=None)
