"""What a run would take on more GPUs, or with its GPUs on another link (issue #32).

Data parallel, weak scaling: every rank keeps its work (the same per-GPU batch), so the
computation of an iteration stays and its collectives change. A collective of size S
(nccl-tests' size, collectives_v1.size rules) over n ranks on a ring takes

    t = base + steps(n) x step latency + S x bus_factor(n) / (efficiency x link GB/s)

- bus_factor: nccl-tests' (allreduce 2(n-1)/n; allgather, reducescatter, alltoall
  (n-1)/n; broadcast, reduce, send, recv 1): the bytes each GPU moves per byte of S;
- steps and latencies: NCCL's ring model (src/graph/tuning.cc: base 8.4 us with the
  Simple protocol; 2(n-1) steps for an all-reduce, n-1 for the others; steps that cross
  nodes, 2(nodes-1) or nodes-1 of them, pay the network's step latency);
- the link: the slowest a ring crosses, per GPU and direction (etl/core/links.toml: the
  node's link, and the network's once the ranks span nodes);
- efficiency: the share of the link's bandwidth the run's own collectives reached
  (bytes moved over transfer time, summed over every collective with bytes: calibrated),
  else 0.72, NeuSight's share of the link (its predictor's link_bw = 0.72 x bandwidth).

A run with collectives is replayed (etl/replay/) with each communication kernel's
transfer scaled by t(target) / t(as measured), collectives over the whole world going
to the target's rank count and those of smaller groups (tensor or pipeline parallel)
keeping theirs. A run without collectives is one rank's work: the iteration gains what
DDP's gradient all-reduce would leave exposed, the gradients (grad_bytes) in buckets of
25 MiB (DDP's bucket_cap_mb default) all-reduced one after another, each once the
backward pass has produced it (the pass's kernels spread evenly), so only what outlasts
the backward pass adds to the iteration.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from etl.core.errors import EtlError
from etl.core.links import Link, link, typical_link

if TYPE_CHECKING:
    import duckdb

    from etl.analysis.forecast.run import Forecast
    from etl.replay import graph

BASE_LATENCY_NS = 8_400         # NCCL ring, Simple protocol (tuning.cc baseLatencies)
DEFAULT_EFFICIENCY = 0.72       # NeuSight's share of a link's bandwidth (predictor.py)
DDP_BUCKET_BYTES = 25 * 2**20   # torch DDP bucket_cap_mb = 25
ONE_STEP = ("send", "recv", "sendrecv")


class ScaleOutError(EtlError):
    """A scale-out forecast that cannot be answered as asked (one line, what to do)."""


def bus_factor(collective: str | None, n: int) -> float | None:
    """nccl-tests' bus bandwidth factor: bytes each GPU moves per byte of S."""
    if n < 1:
        return None
    if collective == "allreduce":
        return 2 * (n - 1) / n
    if collective in ("allgather", "reducescatter", "alltoall", "gather", "scatter"):
        return (n - 1) / n
    if collective in ("broadcast", "reduce", *ONE_STEP):
        return 1.0
    return None


def ring_steps(collective: str | None, n: int) -> int:
    if collective in ONE_STEP:
        return 1
    return 2 * (n - 1) if collective == "allreduce" else max(n - 1, 0)


@dataclass(frozen=True)
class Topology:
    """Where a collective runs: its ranks, how many share a machine, and the links."""
    ranks: int
    gpus_per_node: int
    node_link: Link
    network: Link | None = None

    @property
    def nodes(self) -> int:
        return math.ceil(self.ranks / self.gpus_per_node)

    def with_ranks(self, ranks: int) -> Topology:
        return Topology(ranks, self.gpus_per_node, self.node_link, self.network)

    def bottleneck_gbs(self) -> float:
        if self.nodes == 1 or self.network is None:
            return self.node_link.per_gpu_gbs
        return min(self.node_link.per_gpu_gbs, self.network.per_gpu_gbs)

    def latency_ns(self, collective: str | None) -> float:
        """NCCL's ring latency: base + intra-node steps x the node link's + inter-node
        steps x the network's."""
        steps = ring_steps(collective, self.ranks)
        if collective in ONE_STEP:
            inter = 1 if self.nodes > 1 else 0
        else:
            inter = 0 if self.nodes == 1 else (
                2 * (self.nodes - 1) if collective == "allreduce" else self.nodes - 1)
        network = self.network or self.node_link
        return BASE_LATENCY_NS + (steps - inter) * self.node_link.step_latency_us * 1000 \
            + inter * network.step_latency_us * 1000

    def describe(self) -> str:
        where = f"{self.ranks} GPUs on {self.node_link.key}"
        if self.nodes > 1:
            where += (f", {self.nodes} nodes of {self.gpus_per_node} over "
                      f"{self.network.key if self.network else self.node_link.key}")
        return where


@dataclass(frozen=True)
class CommModel:
    efficiency: float
    basis: str          # how efficiency was found, in words

    def time_ns(self, collective: str | None, size_bytes: float, topology: Topology
                ) -> float | None:
        factor = bus_factor(collective, topology.ranks)
        if factor is None or topology.ranks < 2:
            return None if factor is None else 0.0
        return topology.latency_ns(collective) + size_bytes * factor / (
            self.efficiency * topology.bottleneck_gbs())


def calibrate(rows: list[dict[str, Any]], topology: Topology) -> CommModel:
    """The efficiency the run's collectives reached on its link: bus bytes moved over the
    transfer time beyond the ring's latency, summed over the collectives with bytes (the
    large ones weigh most, as they do in an iteration). Rows: collective, group_size,
    size_bytes, transfer_ns (None when the ranks were not paired: duration_ns is used,
    wait included, so the efficiency is a lower bound)."""
    moved = spent = 0.0
    unpaired = used = 0
    for r in rows:
        n = r.get("group_size") or topology.ranks
        factor = bus_factor(r["collective"], n)
        if factor is None or not r.get("size_bytes") or n < 2:
            continue
        took = r["transfer_ns"] if r.get("transfer_ns") is not None else r["duration_ns"]
        unpaired += r.get("transfer_ns") is None
        beyond = took - topology.with_ranks(n).latency_ns(r["collective"])
        if beyond <= 0:
            continue
        moved += r["size_bytes"] * factor
        spent += beyond
        used += 1
    if not used:
        return CommModel(DEFAULT_EFFICIENCY, f"no collective with bytes to calibrate on: "
                         f"{DEFAULT_EFFICIENCY:.0%} of the link (NeuSight's share)")
    efficiency = moved / spent / topology.bottleneck_gbs()
    basis = (f"calibrated on {used} collectives: {moved / spent:.1f} GB/s of bus bandwidth, "
             f"{efficiency:.0%} of {topology.node_link.key}")
    if unpaired:
        basis += (f" ({unpaired} of them unpaired: their durations include waiting, so "
                  "this is a lower bound)")
    if efficiency > 1:
        basis += "; above the link's figure: the run's GPUs are on a faster link than said"
    return CommModel(efficiency, basis)


@dataclass
class ScaleOut:
    rows: list[dict[str, Any]]
    notes: list[str] = field(default_factory=list)


def exposed_allreduce_ns(grad_bytes: float, backward_ns: float, model: CommModel,
                         topology: Topology, bucket_bytes: int = DDP_BUCKET_BYTES) -> float:
    """What DDP's gradient all-reduce leaves exposed after the backward pass: buckets
    ready evenly through it, all-reduced one after another."""
    if topology.ranks < 2 or grad_bytes <= 0:
        return 0.0
    count = max(1, math.ceil(grad_bytes / bucket_bytes))
    sizes = np.full(count, float(bucket_bytes))
    sizes[-1] = grad_bytes - bucket_bytes * (count - 1)
    end = 0.0
    for i, size in enumerate(sizes):
        ready = backward_ns * (i + 1) / count
        end = max(end, ready) + (model.time_ns("allreduce", float(size), topology) or 0.0)
    return max(0.0, end - backward_ns)


def target_topology(ranks: int, gpus_per_node: int, link_key: str | None,
                    network_key: str | None, gpu_name: str | None) -> Topology:
    """The topology asked for; the node link defaults to the usual one of the GPU."""
    if ranks < 1 or gpus_per_node < 1:
        raise ScaleOutError("--ranks and --gpus-per-node take positive numbers")
    node = link(link_key) if link_key else typical_link(gpu_name)
    if node is None:
        raise ScaleOutError(f"no usual link known for {gpu_name or 'this run'}'s GPUs: "
                            "name one with --link (etl links lists them)")
    if node.scope != "node":
        raise ScaleOutError(f"--link {node.key} links machines: give it as --network, "
                            "and a link inside the machine as --link")
    network = link(network_key) if network_key else None
    if network is not None and network.scope != "network":
        raise ScaleOutError(f"--network {network.key} is a link inside a machine: give a "
                            "network (ib_*, roce_*) or none")
    if math.ceil(ranks / gpus_per_node) > 1 and network is None:
        raise ScaleOutError(f"{ranks} ranks at {gpus_per_node} per node span machines: "
                            "name their network with --network (e.g. ib_ndr)")
    return Topology(ranks, gpus_per_node, node, network)


def collectives_of(con: duckdb.DuckDBPyConnection, run_id: str) -> list[dict[str, Any]]:
    """The run's collectives of a known kind as collectives_v1 reads them, with
    nccl-tests' size."""
    cursor = con.execute(
        "SELECT source_id, kernel_id, collective, group_size, rank_count, duration_ns, "
        "transfer_ns, CASE collective WHEN 'allgather' THEN bytes_out ELSE bytes_in END "
        "AS size_bytes FROM collectives_v1 WHERE run_id = ? AND collective IS NOT NULL",
        [run_id])
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row)) for row in cursor.fetchall()]


def forecast_ranks(con: duckdb.DuckDBPyConnection, run_name: str, target: Topology,
                   grad_bytes: float | None = None, source_link: str | None = None
                   ) -> ScaleOut:
    """RUN's iterations on the target topology (see the module docstring)."""
    from etl.analysis.whatif import _run_id

    run_id = _run_id(con, run_name)
    comm = collectives_of(con, run_id)
    if comm:
        return _replayed(con, run_name, run_id, target, source_link, comm)
    if grad_bytes is None:
        raise _no_collectives(run_name)
    gpu_name, world = _run_gpu_and_ranks(con, run_id)
    notes = [f"target: {target.describe()}; the run: {world} rank(s) of "
             f"{gpu_name or 'unnamed GPU'}"]
    return _overlapped(con, run_name, run_id, grad_bytes, target, notes)


def _run_gpu_and_ranks(con: duckdb.DuckDBPyConnection, run_id: str) -> tuple[str | None, int]:
    gpu, ranks = con.execute(
        "SELECT any_value(r.gpu), count(DISTINCT coalesce(k.rank, k.source_id)) "
        "FROM runs AS r LEFT JOIN kernels AS k ON k.run_id = r.run_id WHERE r.run_id = ?",
        [run_id]).fetchone() or (None, 0)
    return gpu, int(ranks or 0)


def _no_collectives(run_name: str) -> ScaleOutError:
    return ScaleOutError(f"run {run_name!r} has no collectives to scale: give the size of "
                         "the gradients DDP would all-reduce with --grad-bytes (4 bytes x the "
                         "parameters in fp32)")


def comm_factors(con: duckdb.DuckDBPyConnection, run_id: str, built: graph.Graph,
                 target: Topology, comm: list[dict[str, Any]], source_link: str | None = None
                 ) -> tuple[np.ndarray, list[str]]:
    """Per GPU activity of the graph, the factor that takes it to the target topology: the
    model's time of its collective (`comm`: collectives_of's rows) there over its time as
    measured (1 for the rest), and what the factors rest on, in words."""
    gpu_name, world = _run_gpu_and_ranks(con, run_id)
    node = link(source_link) if source_link else (typical_link(gpu_name) or target.node_link)
    source = Topology(max(world, 1), target.gpus_per_node, node, target.network)
    notes = [f"target: {target.describe()}; the run: {world} rank(s) of "
             f"{gpu_name or 'unnamed GPU'} on {node.key}" + (
                 "" if source_link or typical_link(gpu_name) else
                 " (its link unknown: taken as the target's)")]
    factors = np.ones(built.activities, np.float64)
    if not comm:
        return factors, notes
    model = calibrate(comm, source)
    notes.append(f"collective bandwidth: {model.basis}")
    gpu = built.events.gpu
    index = {(int(s), int(k)): i for i, (s, k) in enumerate(
        zip(gpu["source_id"].tolist(), gpu["kernel_id"].tolist()))}
    kept = 0
    for r in comm:
        i = index.get((int(r["source_id"]), int(r["kernel_id"])))
        ratio = _ratio(model, r, source, target)
        if i is None or ratio is None:
            kept += 1
            continue
        factors[i] = ratio
    if kept:
        notes.append(f"{kept} collectives without a size or a known kind keep their time")
    if not any(r["transfer_ns"] is not None for r in comm):
        notes.append("no collective was paired across ranks: each kernel's whole time (its "
                     "wait for other ranks included) is scaled")
    return factors, notes


def _replayed(con: duckdb.DuckDBPyConnection, run_name: str, run_id: str,
              target: Topology, source_link: str | None, comm: list[dict[str, Any]]
              ) -> ScaleOut:
    from etl.analysis.whatif import _measured_windows, replay_window
    from etl.replay import engine, inputs, windows
    from etl.replay.graph import build

    built = build(inputs.read_run(con, run_id))
    ordered = engine.order(built)
    before = windows.windows(built, engine.measured(built, ordered).time)
    ratios, notes = comm_factors(con, run_id, built, target, comm, source_link)
    factors = built.unit_factors()
    factors[built.first_activity_slot:] = ratios
    replayer = engine.Replayer(built, ordered, factors)
    recorded = _measured_windows(con, run_id)
    rows = []
    for window in before:
        after, _ = replay_window(replayer, window)
        rows.append(_row(run_name, window.rank, window.device_id, window.iteration,
                         recorded.get((window.source_id, window.device_id, window.iteration)),
                         window.length_ns, after.length_ns, target, "replay"))
    return ScaleOut(rows, notes)


def _ratio(model: CommModel, row: dict[str, Any], source: Topology, target: Topology
           ) -> float | None:
    """A collective's time on the target over its time as measured, both by the model:
    the world's collectives go to the target's rank count, smaller groups keep theirs."""
    if not row.get("size_bytes"):
        return None
    n = int(row.get("group_size") or source.ranks)
    before = model.time_ns(row["collective"], row["size_bytes"], source.with_ranks(n))
    n_after = target.ranks if n >= source.ranks else n
    after = model.time_ns(row["collective"], row["size_bytes"], Topology(
        n_after, target.gpus_per_node, target.node_link, target.network))
    if not before or after is None:
        return None
    return after / before


WINDOWS_WITH_BACKWARD = """
SELECT g.source_id, g.rank, g.device_id, g.iteration, g.window_ns,
       (SELECT sum(k.dur_ns) FROM kernels AS k WHERE k.run_id = g.run_id
          AND k.source_id = g.source_id AND k.device_id = g.device_id
          AND k.iteration IS NOT DISTINCT FROM g.iteration AND k.pass = 'backward')
FROM gpu_utilization AS g WHERE g.run_id = ? ORDER BY g.source_id, g.device_id, g.iteration
"""


def _ddp_model(grad_bytes: float, notes: list[str]) -> CommModel:
    model = CommModel(DEFAULT_EFFICIENCY, f"{DEFAULT_EFFICIENCY:.0%} of the link "
                      "(NeuSight's share; the run has no collectives to calibrate on)")
    notes.append(f"collective bandwidth: {model.basis}; DDP's all-reduce of "
                 f"{grad_bytes / 1e9:.3g} GB of gradients in 25 MiB buckets, overlapping "
                 "the backward pass")
    return model


def _overlapped(con: duckdb.DuckDBPyConnection, run_name: str, run_id: str,
                grad_bytes: float, target: Topology, notes: list[str]) -> ScaleOut:
    model = _ddp_model(grad_bytes, notes)
    windows = con.execute(WINDOWS_WITH_BACKWARD, [run_id]).fetchall()
    rows = []
    without_backward = 0
    for _, rank, device, iteration, window_ns, backward_ns in windows:
        without_backward += backward_ns is None
        exposed = exposed_allreduce_ns(grad_bytes, float(backward_ns or 0), model, target)
        rows.append(_row(run_name, rank, device, iteration, window_ns, window_ns,
                         round(window_ns + exposed), target, "overlap_model"))
    if without_backward:
        notes.append(f"{without_backward} iteration(s) without backward kernels (no "
                     "autograd link in the trace): nothing hides their all-reduce")
    return ScaleOut(rows, notes)


def _row(run_name: str, rank: int | None, device_id: int, iteration: int | None,
         measured_ns: int | None, replayed_ns: int, forecast_ns: int, target: Topology,
         method: str) -> dict[str, Any]:
    return {"run_name": run_name, "rank": rank, "device_id": device_id,
            "iteration": iteration, "ranks": target.ranks, "link": target.node_link.key,
            "network": target.network.key if target.network else None,
            "measured_ns": measured_ns, "replayed_ns": replayed_ns, "forecast_ns": forecast_ns,
            "slowdown_ratio": forecast_ns / replayed_ns if replayed_ns else None,
            "method": method}


def forecast_gpu_ranks(con: duckdb.DuckDBPyConnection, run_name: str, gpu_name: str,
                       ranks: int, gpus_per_node: int = 8, link_key: str | None = None,
                       network_key: str | None = None, grad_bytes: float | None = None,
                       source_link: str | None = None, source_gpu: str | None = None,
                       host_factor: float = 1.0, fallback: dict[str, str] | None = None
                       ) -> Forecast:
    """`etl forecast RUN --gpu NAME --ranks N`: the one-GPU forecast on NAME (every GPU
    activity at its predicted time, etl/analysis/forecast/) with the collectives timed for
    N ranks of NAME (the node link defaults to NAME's usual one). A run with collectives
    is replayed with both factors on each activity; a one-GPU run adds DDP's exposed
    all-reduce of grad_bytes after its backward pass, the pass's time taken as measured x
    the window's predicted / measured time."""
    from etl.analysis.forecast import run as forecast_run
    from etl.core.gpus import resolve

    gpu = resolve(gpu_name, "--gpu")
    target = target_topology(ranks, gpus_per_node, link_key, network_key,
                             gpu.names[0] if gpu.names else gpu.key)
    prepared = forecast_run.prepare(con, run_name, source_gpu, fallback)
    collectives = collectives_of(con, prepared.run_id)
    if collectives:
        comm, notes = comm_factors(con, prepared.run_id, prepared.built, target, collectives,
                                   source_link)
        result = forecast_run.forecast_on(prepared, gpu, "iteration", host_factor, comm)
    elif grad_bytes is None:
        raise _no_collectives(run_name)
    else:
        notes = [f"target: {target.describe()}"]
        result = forecast_run.forecast_on(prepared, gpu, "iteration", host_factor)
        _add_exposed(con, prepared.run_id, result.rows, prepared.iteration_windows,
                     _ddp_model(grad_bytes, notes), grad_bytes, target)
    for row in result.rows:
        row["ranks"] = target.ranks
    # the forecast's "communication kernels keep their measured time": the factors above
    # retime them
    result.notes[:] = notes + [n for n in result.notes if "communication kernels" not in n]
    return result


def _add_exposed(con: duckdb.DuckDBPyConnection, run_id: str, rows: list[dict[str, Any]],
                 windows: list[Any], model: CommModel, grad_bytes: float, target: Topology
                 ) -> None:
    """Each forecast row (one per replayed window, in order) gains the all-reduce its
    predicted backward pass leaves exposed; the interval moves with it."""
    backward = {(s, d, i): b for s, _, d, i, _, b in
                con.execute(WINDOWS_WITH_BACKWARD, [run_id]).fetchall()}
    for row, window in zip(rows, windows):
        measured = row["measured_ns"]
        key = (window.source_id, window.device_id, window.iteration)
        scale = row["predicted_ns"] / measured if measured else 1.0
        exposed = round(exposed_allreduce_ns(grad_bytes, float(backward.get(key) or 0) * scale,
                                             model, target))
        for column in ("predicted_ns", "low_ns", "high_ns"):
            if row[column] is not None:
                row[column] += exposed
