"""The critical path of each iteration window: what its end waited on, back to its start.

From the node that ends the window, follow the in-edge that set each node's time in the
replay (engine.Replay.binding) back to the window's start. Each step is a segment of the
source's time, of the kind its edge gives:
- host: a thread's CPU time (HOST edges: the gaps between calls, a call's own time);
- launch: from a launch call's start to its activity's start (the launch latency), or an
  activity whose launch the trace lacks (it starts at its measured time);
- queue: an activity waiting past its stream predecessor or an awaited stream's work;
- gpu: an activity running (a collective: its transfer after the last rank arrived);
- sync_wait: a host thread inside a blocking call past the work it awaited (the return
  latency), or in a synchronize whose awaited stream the trace does not name;
- comm_wait: a collective on this rank waiting for the last rank to arrive.
Across ranks the path stays on the window's rank: where a collective waited for another
rank, that wait is comm_wait and the path goes on from the collective's own start. The
segments tile the window: their durations add up to its length exactly (a segment is cut
at the window's start, and where clocks disagree a step that goes forward in time is cut
to nothing).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


from etl.replay.engine import Replay
from etl.replay.graph import (AWAIT, CALL_END, CALL_START, COMM, END, GPU, HOST, LAUNCH,
                              MARKER_END, MARKER_START, START, STREAM, WAIT, Graph)
from etl.replay.windows import Window

KINDS = ("host", "launch", "queue", "gpu", "sync_wait", "comm_wait")
_EDGE_KIND = {HOST: "host", LAUNCH: "launch", STREAM: "queue", WAIT: "queue", GPU: "gpu",
              AWAIT: "sync_wait", COMM: "gpu"}
_EDGE_KIND_LIST = [_EDGE_KIND[i] for i in range(len(_EDGE_KIND))]


@dataclass(frozen=True)
class Segment:
    kind: str
    start_ns: int
    dur_ns: int
    node: int      # the node the segment leads to (names it)


def walk(graph: Graph, result: Replay, window: Window) -> list[Segment]:
    """The window's segments, earliest first."""
    if window.end_node < 0:  # a window of one step marker's measured span, nothing in it
        return [Segment("host", window.start_ns, window.length_ns, -1)] if window.length_ns \
            else []
    g, r = _lists(graph), _replay_lists(result)
    time, binding = r["time"], r["binding"]
    out: list[Segment] = []
    node, first = window.end_node, window.start_ns
    # a window's end past its last node (the latest event of a trace without steps is one
    # the graph does not hold): host time
    cursor = _cut(out, "host", time[node], window.end_ns, first, -1)
    while cursor > first:
        edge = binding[node]
        if edge < 0:  # at its floor: the start of a thread, or an unlaunched activity
            out.append(Segment("launch" if g["kind"][node] == START else "host", first,
                               cursor - first, node))
            break
        src = g["src"][edge]
        if g["etype"][edge] == COMM and g["source"][src] != g["source"][node]:
            own = g["own_start"][node]  # the path stays on this rank
            cursor = _cut(out, "gpu", time[src], cursor, first, node)
            cursor = _cut(out, "comm_wait", time[own], cursor, first, node)
            node = own
            continue
        kind = _EDGE_KIND_LIST[g["etype"][edge]]
        if kind == "host" and node in graph.unlinked_ends:
            kind = "sync_wait"
        cursor = _cut(out, kind, time[src], cursor, first, node)
        node = src
    out.reverse()
    return out


def _lists(graph: Graph) -> dict[str, list[int]]:
    """The graph's arrays the walk reads, as Python lists (made once per graph)."""
    cached = getattr(graph, "_walk_lists", None)
    if cached is None:
        source = np.full(len(graph.base), -1, np.int64)
        gpu = graph.events.gpu
        acts = graph.activity_nodes
        if len(acts):
            source[acts[:, 0]] = gpu["source_id"]
            source[acts[:, 1]] = gpu["source_id"]
        own_start = np.full(len(graph.base), -1, np.int64)
        if len(acts):
            own_start[acts[:, 1]] = acts[:, 0]
        cached = {"src": graph.src.tolist(), "etype": graph.etype.tolist(),
                  "kind": graph.kind.tolist(), "source": source.tolist(),
                  "own_start": own_start.tolist()}
        graph._walk_lists = cached  # type: ignore[attr-defined]
    return cached


def _replay_lists(result: Replay) -> dict[str, list[int]]:
    cached = getattr(result, "_walk_lists", None)
    if cached is None:
        cached = {"time": result.time.tolist(), "binding": result.binding.tolist()}
        result._walk_lists = cached  # type: ignore[attr-defined]
    return cached


def _cut(out: list[Segment], kind: str, begin: int, cursor: int, first: int, node: int) -> int:
    """Add [max(begin, first), cursor] when not empty; the new cursor."""
    begin = max(begin, first)
    if begin < cursor:
        out.append(Segment(kind, begin, cursor - begin, node))
        return begin
    return cursor


def describe_all(graph: Graph, segments: list[Segment]) -> dict[str, list[Any]]:
    """name, layer and kernel_type of each segment (lists, in the segments' order): the
    activity for GPU-side segments (launch: the op that launched it, else the kernel); for
    host time the op or annotation of its thread holding most of it (else the call or step
    marker that ends it); for a sync_wait the call."""
    n = len(segments)
    names: list[Any] = [None] * n
    layers: list[Any] = [None] * n
    types: list[Any] = [None] * n
    if not n:
        return {"name": names, "layer": layers, "kernel_type": types}
    nodes = np.array([s.node for s in segments], np.int64)
    kinds = np.array([s.kind for s in segments], object)
    valid = nodes >= 0
    safe = np.where(valid, nodes, 0)
    on_gpu = valid & np.isin(graph.kind[safe], (START, END))
    _describe_gpu(graph, np.flatnonzero(on_gpu), safe, kinds, names, layers, types)
    host = np.flatnonzero(valid & ~on_gpu & (kinds == "host"))
    for i, name in zip(host.tolist(), _host_names(graph, safe[host])):
        names[i] = name
    _describe_calls(graph, np.flatnonzero(valid & ~on_gpu & (kinds != "host")), safe, names,
                    layers)
    return {"name": names, "layer": layers, "kernel_type": types}


def _describe_gpu(graph: Graph, rows: np.ndarray, nodes: np.ndarray, kinds: np.ndarray,
                  names: list[Any], layers: list[Any], types: list[Any]) -> None:
    gpu = graph.events.gpu
    refs = graph.ref[nodes[rows]]
    launch = kinds[rows] == "launch"
    op = gpu["op_name"][refs]
    chosen = np.where(launch & np.array([v is not None for v in op], bool), op, gpu["name"][refs])
    for i, name, layer, kind in zip(rows.tolist(), chosen.tolist(), gpu["layer"][refs].tolist(),
                                    gpu["kernel_type"][refs].tolist()):
        names[i], layers[i], types[i] = name, layer, kind


def _describe_calls(graph: Graph, rows: np.ndarray, nodes: np.ndarray, names: list[Any],
                    layers: list[Any]) -> None:
    events = graph.events
    for i in rows.tolist():
        node = int(nodes[i])
        point, ref = int(graph.point[node]), int(graph.ref[node])
        if point in (CALL_START, CALL_END):
            names[i] = events.calls["name"][ref]
            launched = graph.first_launched[ref]
            layers[i] = events.gpu["layer"][launched] if launched >= 0 else None
        elif point in (MARKER_START, MARKER_END):
            names[i] = f"step {events.markers['iteration'][ref]}"


def _host_names(graph: Graph, nodes: np.ndarray) -> list[str | None]:
    """Per host segment's end node: the scope holding most of the gap before it."""
    events = graph.events
    point, ref = graph.point[nodes], graph.ref[nodes]
    is_call = np.isin(point, (CALL_START, CALL_END))
    is_marker = np.isin(point, (MARKER_START, MARKER_END))
    threads = np.full(len(nodes), None, object)
    fallback = np.full(len(nodes), None, object)
    threads[is_call] = events.calls["thread_name"][ref[is_call]]
    fallback[is_call] = events.calls["name"][ref[is_call]]
    threads[is_marker] = events.markers["thread_name"][ref[is_marker]]
    fallback[is_marker] = [f"step {i}" for i in events.markers["iteration"][ref[is_marker]]]
    found = graph.scopes_holding(threads, graph.base[nodes - 1], graph.base[nodes])
    return [f if f is not None else b for f, b in zip(found, fallback.tolist())]


def describe(graph: Graph, segment: Segment) -> dict[str, Any]:
    """describe_all for one segment."""
    return {key: values[0] for key, values in describe_all(graph, [segment]).items()}
