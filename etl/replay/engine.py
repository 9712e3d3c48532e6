"""The replay: every node's time for a set of durations, and the in-edge that bound it.

T(v) = max(floor(v), max over in-edges e = (u, v) of T(u) + w(e)). The graph is built so
that, with the measured durations, T(v) is the measured time of every node; with others it
is when that instant would have happened had only those durations changed and every
dependency the trace records been kept (etl/replay/graph.py says which).

The nodes are visited in a topological order found once per graph: the measured times
sorted, with nodes raised past their sources where the trace's clocks disagree (a kernel
timed a few ns before its launch call); a graph with a cycle is an error naming it. The
visit is one pass over the edges grouped by destination: linear in nodes + edges.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from etl.replay.graph import Graph
from etl.replay.inputs import NONE

MAX_REPAIR_ROUNDS = 64


class CycleError(ValueError):
    """The dependency graph has a cycle: the trace's links contradict each other."""


@dataclass
class Order:
    """A graph's nodes in topological order, and its in-edges grouped by destination."""

    nodes: np.ndarray       # node ids in visiting order
    edge_order: np.ndarray  # edges sorted by destination
    starts: np.ndarray      # per node: first position in edge_order (CSR)


@dataclass
class Replay:
    time: np.ndarray     # per node
    binding: np.ndarray  # per node: the in-edge that set its time (-1: its floor)


def order(graph: Graph) -> Order:
    """Nodes in an order where every edge's source comes before its destination."""
    n = len(graph.base)
    key = graph.base.copy()
    for _ in range(MAX_REPAIR_ROUNDS):
        visit = np.lexsort((np.arange(n), key))
        position = np.empty(n, np.int64)
        position[visit] = np.arange(n)
        late = np.flatnonzero(position[graph.src] >= position[graph.dst])
        if not len(late):
            break
        np.maximum.at(key, graph.dst[late], key[graph.src[late]] + 1)
    else:  # a long run of disagreeing clocks, or a cycle: Kahn's algorithm tells which
        visit = _kahn(graph)
    by_dst = np.argsort(graph.dst, kind="stable")
    starts = np.searchsorted(graph.dst[by_dst], np.arange(n + 1))
    return Order(visit, by_dst, starts)


def _kahn(graph: Graph) -> np.ndarray:
    """A topological order by Kahn's algorithm (sources first, by measured time); a
    CycleError naming a node on the cycle when there is none."""
    import heapq

    n = len(graph.base)
    indegree = np.bincount(graph.dst, minlength=n).tolist()
    by_src = np.argsort(graph.src, kind="stable")
    out_start = np.searchsorted(graph.src[by_src], np.arange(n + 1)).tolist()
    out_dst = graph.dst[by_src].tolist()
    base = graph.base.tolist()
    ready = [(base[v], v) for v in range(n) if indegree[v] == 0]
    heapq.heapify(ready)
    visit: list[int] = []
    while ready:
        _, v = heapq.heappop(ready)
        visit.append(v)
        for e in range(out_start[v], out_start[v + 1]):
            d = out_dst[e]
            indegree[d] -= 1
            if indegree[d] == 0:
                heapq.heappush(ready, (base[d], d))
    if len(visit) < n:
        stuck = next(v for v in range(n) if indegree[v] > 0)
        raise CycleError(f"the dependency graph has a cycle through node {stuck}: the "
                         "trace's launch, stream and synchronization links contradict "
                         "each other")
    return np.array(visit, np.int64)


def replay(graph: Graph, ordered: Order, factors: np.ndarray) -> Replay:
    """Every node's time with the durations scaled by `factors` (Graph.unit_factors()
    gives the measured ones)."""
    weight = graph.weights(factors)[ordered.edge_order].tolist()
    src = graph.src[ordered.edge_order].tolist()
    starts = ordered.starts.tolist()
    floor = graph.floor.tolist()
    time = [0] * len(floor)
    binding = [-1] * len(floor)
    for v in ordered.nodes.tolist():
        best, bound = floor[v], -1
        for e in range(starts[v], starts[v + 1]):
            t = time[src[e]] + weight[e]
            if t > best:
                best, bound = t, e
        time[v] = best
        binding[v] = bound
    edge_of = ordered.edge_order
    bound_edges = np.array(binding, np.int64)
    return Replay(np.array(time, np.int64),
                  np.where(bound_edges >= 0, edge_of[np.maximum(bound_edges, 0)], -1))


def unreached(graph: Graph, result: Replay) -> np.ndarray:
    """Nodes the replay could not place (no floor and no in-edge): none in a built graph."""
    return np.flatnonzero(result.time == NONE)
