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
    position: np.ndarray    # per node: its place in `nodes`

    def first_at_or_after(self, graph: Graph, ns: int) -> int:
        """The first place in the order from which every node is measured at or after ns."""
        later = np.flatnonzero(graph.base[self.nodes] < ns)
        return int(later[-1]) + 1 if len(later) else 0


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
    position = np.empty(n, np.int64)
    position[visit] = np.arange(n)
    return Order(visit, by_dst, starts, position)


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


class Replayer:
    """A graph replayed with one set of factors: whole, or a range of its order at a time
    (the nodes outside the range keep their measured times). The graph's arrays are turned
    into Python lists once, so that a range costs its own nodes and edges, not the graph's."""

    def __init__(self, graph: Graph, ordered: Order, factors: np.ndarray) -> None:
        self.graph, self.ordered = graph, ordered
        self.weight = graph.weights(factors)[ordered.edge_order].tolist()
        self.src = graph.src[ordered.edge_order].tolist()
        self.starts = ordered.starts.tolist()
        self.floor = graph.floor.tolist()
        self.order = ordered.nodes.tolist()
        self.base = graph.base.tolist()
        self.time = list(self.base)  # the range being replayed; measured elsewhere

    def run(self, first: int = 0, last: int | None = None) -> Replay:
        """Times of the nodes at places first..last of the order (all by default)."""
        last = len(self.order) - 1 if last is None else last
        nodes = self.order[first:last + 1]
        time, src, weight, starts, floor = (self.time, self.src, self.weight, self.starts,
                                            self.floor)
        bound: list[int] = []
        for v in nodes:
            best, edge = floor[v], -1
            for e in range(starts[v], starts[v + 1]):
                t = time[src[e]] + weight[e]
                if t > best:
                    best, edge = t, e
            time[v] = best
            bound.append(edge)
        result = self._result(nodes, bound)
        for v in nodes:  # back to measured for the next range
            time[v] = self.base[v]
        return result

    def _result(self, nodes: list[int], bound: list[int]) -> Replay:
        at = np.array(nodes, np.int64)
        times = self.graph.base.copy()
        times[at] = [self.time[v] for v in nodes]
        binding = np.full(len(times), -1, np.int64)
        edges = np.array(bound, np.int64)
        binding[at] = np.where(edges >= 0, self.ordered.edge_order[np.maximum(edges, 0)], -1)
        return Replay(times, binding)


def replay(graph: Graph, ordered: Order, factors: np.ndarray) -> Replay:
    """Every node's time with the durations scaled by `factors` (Graph.unit_factors()
    gives the measured ones)."""
    return Replayer(graph, ordered, factors).run()


def measured(graph: Graph, ordered: Order) -> Replay:
    """The replay with the measured durations without visiting the nodes: every node takes
    its measured time (the graph is built so), and the edge that binds it is the first of
    its in-edges (in the replay's order) whose source time + weight reaches it and passes
    its floor, as replay() would choose."""
    weight = graph.weights(graph.unit_factors())[ordered.edge_order]
    src = graph.src[ordered.edge_order]
    dst = graph.dst[ordered.edge_order]
    reach = graph.base[src] + weight
    binds = (reach == graph.base[dst]) & (reach > graph.floor[dst])
    first = np.full(len(graph.base), len(dst), np.int64)
    np.minimum.at(first, dst[binds], np.flatnonzero(binds))
    found = first < len(dst)
    binding = np.full(len(graph.base), -1, np.int64)
    binding[found] = ordered.edge_order[first[found]]
    return Replay(graph.base.copy(), binding)


def unreached(graph: Graph, result: Replay) -> np.ndarray:
    """Nodes the replay could not place (no floor and no in-edge): none in a built graph."""
    return np.flatnonzero(result.time == NONE)
