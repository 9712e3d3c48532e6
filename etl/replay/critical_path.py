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


from etl.replay.engine import Replay
from etl.replay.graph import (AWAIT, CALL_END, CALL_START, COMM, END, GPU, HOST, LAUNCH,
                              MARKER_END, MARKER_START, START, STREAM, WAIT, Graph)
from etl.replay.windows import Window

KINDS = ("host", "launch", "queue", "gpu", "sync_wait", "comm_wait")
_EDGE_KIND = {HOST: "host", LAUNCH: "launch", STREAM: "queue", WAIT: "queue", GPU: "gpu",
              AWAIT: "sync_wait", COMM: "gpu"}


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
    out: list[Segment] = []
    cursor, node = window.end_ns, window.end_node
    time, binding = result.time, result.binding
    # a window's end past its last node (the latest event of a trace without steps is one
    # the graph does not hold): host time
    cursor = _cut(out, "host", int(time[node]), cursor, window, -1)
    while cursor > window.start_ns:
        edge = int(binding[node])
        if edge < 0:  # at its floor: the start of a thread, or an unlaunched activity
            kind = "launch" if graph.kind[node] == START else "host"
            out.append(Segment(kind, window.start_ns, cursor - window.start_ns, node))
            break
        src = int(graph.src[edge])
        if graph.etype[edge] == COMM and _other_rank(graph, src, node):
            own = int(graph.activity_nodes[graph.ref[node], 0])
            cursor = _cut(out, "gpu", time[src], cursor, window, node)
            cursor = _cut(out, "comm_wait", time[own], cursor, window, node)
            node = own
            continue
        kind = _kind(graph, edge, node)
        cursor = _cut(out, kind, int(time[src]), cursor, window, node)
        node = src
    out.reverse()
    return out


def _other_rank(graph: Graph, src: int, node: int) -> bool:
    """A COMM edge from another source's start."""
    gpu = graph.events.gpu
    return bool(gpu["source_id"][graph.ref[src]] != gpu["source_id"][graph.ref[node]])


def _kind(graph: Graph, edge: int, node: int) -> str:
    kind = _EDGE_KIND[int(graph.etype[edge])]
    if kind == "host" and graph.point[node] == CALL_END and _unlinked_wait(graph, node):
        return "sync_wait"
    return kind


def _unlinked_wait(graph: Graph, node: int) -> bool:
    """The end of a synchronize whose awaited work the trace does not name."""
    return int(graph.ref[node]) in graph.unlinked_calls


def _cut(out: list[Segment], kind: str, begin: int, cursor: int, window: Window,
         node: int) -> int:
    """Add [max(begin, window start), cursor] when not empty; the new cursor."""
    begin = max(int(begin), window.start_ns)
    if begin < cursor:
        out.append(Segment(kind, begin, cursor - begin, node))
        return begin
    return cursor


def describe(graph: Graph, segment: Segment) -> dict[str, Any]:
    """name, layer and kernel_type of the segment: the activity for GPU-side segments; for
    host ones the op that launched the call's work, else the call or the step marker."""
    node = segment.node
    if node < 0:
        return {"name": None, "layer": None, "kernel_type": None}
    events = graph.events
    ref = int(graph.ref[node])
    if graph.kind[node] in (START, END):
        gpu = events.gpu
        name = gpu["op_name"][ref] if segment.kind == "launch" and gpu["op_name"][ref] \
            else gpu["name"][ref]
        return {"name": name, "layer": gpu["layer"][ref], "kernel_type": gpu["kernel_type"][ref]}
    point = int(graph.point[node])
    if point in (CALL_START, CALL_END):
        calls = events.calls
        launched = graph.launched_by.get(ref)
        layer = events.gpu["layer"][launched] if launched is not None else None
        if segment.kind == "host" and calls["op_name"][ref]:
            return {"name": calls["op_name"][ref], "layer": layer, "kernel_type": None}
        return {"name": calls["name"][ref], "layer": layer, "kernel_type": None}
    if point in (MARKER_START, MARKER_END):
        return {"name": f"step {events.markers['iteration'][ref]}", "layer": None,
                "kernel_type": None}
    return {"name": None, "layer": None, "kernel_type": None}
