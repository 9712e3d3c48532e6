"""Iteration windows of a replay, by gpu_utilization's rule (sql/views/gpu/_iteration_windows).

Per source, device that ran kernels, and iteration: K_i = the kernels whose launch call
starts in step i's host span [hs, he] (kernels.iteration; for a trace without steps, every
kernel with a launch call); raw window = [min(hs, first start in K_i), max(he, last end in
K_i)] on that device; its start is raised to the latest raw end of the earlier iterations
(ordered by measured hs, he, iteration). With the measured durations the replay gives the
view's windows back; with others, the window the same rule draws around the moved events.
A step marker the graph lacks (no host event) keeps its measured span; a trace without
steps keeps its start, and its end moves with the latest of the source's nodes.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from etl.replay.graph import Graph
from etl.replay.inputs import NONE

INFERRED = -2  # a step end the reader inferred from its last GPU activity


@dataclass(frozen=True)
class Window:
    source_id: int
    rank: int | None
    device_id: int
    iteration: int | None     # None for a trace without steps
    boundary: str
    start_ns: int
    end_ns: int
    end_node: int             # the node whose time is the window's end (-1: a constant)
    kernel_count: int

    @property
    def length_ns(self) -> int:
        return self.end_ns - self.start_ns


def windows(graph: Graph, time: np.ndarray, only: tuple[int, int] | None = None,
            iteration: int | None = None, one: bool = False) -> list[Window]:
    """Every iteration window of the run for node times `time` (`only` a (source, device):
    the windows of that one; `one`: only its `iteration`'s, whose start is then not raised
    to the earlier iterations' ends, as a replay from the measured start does not need)."""
    events = graph.events
    gpu, its = events.gpu, events.iterations
    marker_of = {(int(s), int(i)): m for m, (s, i) in enumerate(
        zip(events.markers["source_id"].tolist(), events.markers["iteration"].tolist()))}
    kernels = np.flatnonzero(gpu["kind"] == "kernel") if len(gpu) else np.array([], np.int64)
    out: list[Window] = []
    for source in sorted(set(its["source_id"].tolist())):
        if only is not None and source != only[0]:
            continue
        rows = np.flatnonzero(its["source_id"] == source)
        if one:
            rows = rows[its["iteration"][rows] == (NONE if iteration is None else iteration)]
        rows = rows[np.lexsort((its["iteration"][rows], its["end_ns"][rows],
                                its["start_ns"][rows]))]
        mine = kernels[gpu["source_id"][kernels] == source]
        for device in sorted(set(gpu["device_id"][mine].tolist())):
            if only is not None and device != only[1]:
                continue
            on_device = mine[gpu["device_id"][mine] == device]
            out += _device_windows(graph, time, rows, on_device, int(device), marker_of)
    return out


def _device_windows(graph: Graph, time: np.ndarray, rows: np.ndarray, kernels: np.ndarray,
                    device: int, marker_of: dict[tuple[int, int], int]) -> list[Window]:
    events = graph.events
    its, gpu = events.iterations, events.gpu
    acts = graph.activity_nodes
    out: list[Window] = []
    latest_end: int | None = None
    for r in rows.tolist():
        source, boundary = int(its["source_id"][r]), str(its["boundary"][r])
        iteration = int(its["iteration"][r]) if its["iteration"][r] != NONE else None
        hs, he, he_node = _host_span(graph, time, r, marker_of)
        if boundary == "whole_trace":
            members = kernels[gpu["launch_event_id"][kernels] != NONE]
        else:
            members = kernels[gpu["iteration"][kernels] == (iteration if iteration is not None
                                                            else NONE)]
        start, end, end_node = hs, he, he_node
        if len(members):
            ends = time[acts[members, 1]]
            last_at = int(np.argmax(ends))
            if he_node == INFERRED:  # the step ends with its last activity: moves with it
                end += int(ends[last_at]) - int(graph.base[acts[members, 1]].max())
            start = min(hs, int(time[acts[members, 0]].min()))
            if int(ends[last_at]) >= end:  # the GPU's end names it where both agree
                end, end_node = int(ends[last_at]), int(acts[members[last_at], 1])
        raw_end = end
        if latest_end is not None and latest_end > start:
            start = latest_end
        if start > end:
            end, end_node = start, -1
        latest_end = raw_end if latest_end is None else max(latest_end, raw_end)
        rank = int(its["rank"][r]) if its["rank"][r] != NONE else None
        out.append(Window(source, rank, device, iteration, boundary, start, end, end_node,
                          len(members)))
    return out


def _host_span(graph: Graph, time: np.ndarray, r: int, marker_of: dict[tuple[int, int], int]
               ) -> tuple[int, int, int]:
    """(hs, he, he's node) of iteration row r under the replay."""
    its = graph.events.iterations
    source = int(its["source_id"][r])
    hs, he = int(its["start_ns"][r]), int(its["end_ns"][r])
    if its["boundary"][r] == "whole_trace":
        nodes = graph.source_nodes.get(source)
        if nodes is None or not len(nodes):
            return hs, he, -1
        moved = int(time[nodes].max()) - int(graph.base[nodes].max())
        return hs, he + moved, int(nodes[np.argmax(time[nodes])])
    marker = marker_of.get((source, int(its["iteration"][r])))
    if marker is None:
        return hs, he, -1
    start_node, end_node = graph.marker_nodes[marker]
    if end_node < 0:
        return int(time[start_node]), he, INFERRED
    return int(time[start_node]), int(time[end_node]), int(end_node)


def span(graph: Graph, time: np.ndarray, source_id: int, start_ns: int, end_ns: int) -> Window:
    """A window of any span of one source (an annotation, a profiler range): it ends at the
    source's latest node at or before `end_ns` (a GPU end where one ties with a host
    point)."""
    nodes = graph.source_nodes.get(source_id, np.array([], np.int64))
    inside = nodes[(time[nodes] <= end_ns) & (time[nodes] >= start_ns)]
    if not len(inside):
        return Window(source_id, None, -1, None, "span", start_ns, start_ns, -1, 0)
    latest = time[inside].max()
    last = inside[time[inside] == latest]
    end_node = int(last[np.argmax(graph.kind[last])])  # END (2) before POINT (0)
    return Window(source_id, None, -1, None, "span", start_ns, int(latest), end_node, 0)
