"""A run's dependency graph: time points and the edges that bound them.

Nodes are instants: on each host thread the start and end of every top-level runtime or
driver call (a call inside another call is part of it), the start and end of each step
marker, and the thread's first and last instant; on the GPU the start and end of every
activity (kernel, copy, set). A node's time is the latest of its in-edges' source time +
weight, and never before its floor (a max-plus system): a replay with other durations
moves every instant that depends on them, and with the measured ones gives them back.

Edges, from what the trace records (`etype`):
- HOST: a thread's consecutive points, weighted by the measured gap (CPU time: the host
  factor scales it);
- LAUNCH: a call's start → the start of the activity it launched (every kernel of a graph
  launch has the launch call); STREAM: the previous activity's end on the same stream →
  the start (a stream runs its activities in order); WAIT: the end of the work a
  cudaStreamWaitEvent awaits → the start of the waiting stream's next activity, where a
  synchronization record (syncs) names the event's stream. The three carry the activity's
  measured delay past the latest of them, unscaled (launch latency, scheduling gaps);
- GPU: an activity's start → its end, its duration (scaled by the activity's factor);
- AWAIT: the end of the work a blocking call waits for → the call's end, weighted by the
  measured return latency. A call that waited has no CPU time of its own (its HOST edge
  weighs 0); one that did not keeps its length. Awaited: every stream of the source for a
  device synchronize, the named stream for a stream synchronize, the work before the event
  record for an event synchronize (both only where a synchronization record names them),
  the call's own activity for a synchronous copy (by name, or a copy call that returned only
  after its copy had ended: CUDA copies from pageable memory synchronously, Async or not);
- COMM: each rank's start of a collective → the end of the same collective on every rank
  of the run: it ends once the last rank has arrived, plus its transfer (the measured end
  after the last arrival, scaled by the activity's factor). The pairing across ranks and
  the alignment of the ranks' clocks are the view collectives_v1's (by process group and
  sequence number, else by order; clocks aligned by the collectives' ends), and only the
  instances it kept (their ranks' ends agree) are linked; the others keep their measured
  lengths.

Where the trace lacks a link, no edge is invented: the node keeps its measured delay or
length, and `Graph.unlinked` counts what could not be linked (a stream synchronize without
a synchronization record does not say which stream it waited for).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from etl.replay.inputs import NONE, Columns, RunEvents, role_of

HOST, LAUNCH, STREAM, WAIT, GPU, AWAIT, COMM = range(7)  # edge types
POINT, START, END = range(3)                             # node kinds
# what a host point is (Graph.ref says which call or marker)
THREAD_START, CALL_START, CALL_END, MARKER_START, MARKER_END, THREAD_END = range(6)
# factor slots: FIXED never scales; then one per source for its host time; then one per
# GPU activity (Graph.host_slot, Graph.activity_slot)
FIXED = 0
MAX_SCOPE_LOOKBACK = 256  # scopes looked back at to name a host gap


@dataclass
class Graph:
    base: np.ndarray        # measured time of each node
    floor: np.ndarray       # earliest time a node may take (NONE: none)
    kind: np.ndarray        # POINT, START, END
    point: np.ndarray       # POINT: THREAD_START ... THREAD_END; else -1
    ref: np.ndarray         # call / marker / activity index; -1 for thread ends
    src: np.ndarray         # edges
    dst: np.ndarray
    const: np.ndarray       # weight = const + scaled * factor[slot]
    scaled: np.ndarray
    slot: np.ndarray
    etype: np.ndarray
    events: RunEvents
    top: np.ndarray             # per call: its top-level call
    marker_nodes: np.ndarray    # per marker: start and end node
    activity_nodes: np.ndarray  # per activity: start and end node
    source_nodes: dict[int, np.ndarray]  # per source: its nodes
    first_launched: np.ndarray           # per call: the first activity its top-level call
                                         # (or a call in it) launched; -1 for none
    unlinked_ends: set[int]              # end nodes of blocking calls whose awaited work
                                         # the trace does not name
    host_slot: dict[int, int]            # source id → the factor slot of its host time
    unlinked: Counter[str] = field(default_factory=Counter)

    @property
    def activities(self) -> int:
        return len(self.activity_nodes)

    @property
    def first_activity_slot(self) -> int:
        return 1 + len(self.host_slot)

    def unit_factors(self) -> np.ndarray:
        """Factors that replay the measured durations: one per slot (FIXED, each source's
        host time, each activity)."""
        return np.ones(self.first_activity_slot + self.activities, dtype=np.float64)

    def scopes_holding(self, threads: np.ndarray, starts: np.ndarray, ends: np.ndarray
                       ) -> list[str | None]:
        """Per [start, end] of a thread, the scope (op, annotation) that holds most of it,
        the outermost of those that hold as much (an op rather than its callees); None
        where no scope overlaps it. The scopes looked at are the MAX_SCOPE_LOOKBACK that
        start last before `end`."""
        scopes = self.events.scopes
        out: list[str | None] = [None] * len(threads)
        rows = _ranges(scopes["thread_name"]) if len(scopes) else {}
        for thread in set(threads.tolist()):
            mine = np.flatnonzero(threads == thread)
            lo, hi = rows.get(thread, (0, 0))
            if hi == lo:
                continue
            begin, finish = scopes["ts_ns"][lo:hi], scopes["end_ns"][lo:hi]
            stop = np.searchsorted(begin, ends[mine], side="left")
            best = np.zeros(len(mine), np.int64)
            pick = np.full(len(mine), -1, np.int64)
            for back in range(min(MAX_SCOPE_LOOKBACK, hi - lo), 0, -1):  # outermost first
                at = stop - back
                ok = at >= 0
                at = np.maximum(at, 0)
                overlap = np.minimum(finish[at], ends[mine]) - np.maximum(begin[at], starts[mine])
                better = ok & (overlap > best)
                best[better], pick[better] = overlap[better], at[better]
            for i, j in zip(mine.tolist(), pick.tolist()):
                if j >= 0:
                    out[i] = str(scopes["name"][lo + j])
        return out

    def weights(self, factors: np.ndarray) -> np.ndarray:
        scaled = np.rint(self.scaled * factors[self.slot]).astype(np.int64)
        return self.const + scaled


def build(events: RunEvents) -> Graph:
    """The run's graph (see the module docstring)."""
    nodes, edges = _Nodes(), _Edges()
    unlinked: Counter[str] = Counter()
    calls, gpu = events.calls, events.gpu
    host_slot = {s: 1 + i for i, s in enumerate(sorted(set(events.threads["source_id"].tolist())
                                                       | set(gpu["source_id"].tolist())))}
    first_activity = 1 + len(host_slot)
    top = _top_level(calls)
    host = _host_points(nodes, events, top)
    acts = _activity_nodes(nodes, gpu)
    index = _Index(events, top)
    floor = np.full(nodes.count, NONE, dtype=np.int64)
    floor[host.firsts] = nodes.base()[host.firsts]
    floor[acts[index.launch < 0, 0]] = gpu["ts_ns"][index.launch < 0]
    _start_edges(edges, _start_sources(index, host, acts, events, unlinked), gpu, acts,
                 nodes.base(), floor)
    _duration_edges(edges, gpu, acts, first_activity, unlinked)
    own = _Own(index)
    unlinked_calls = _host_edges(edges, host, index, events, acts, own, host_slot, unlinked)
    src, dst, const, scaled, slot, etype = edges.arrays()
    return Graph(nodes.base(), floor, nodes.cat("kind", np.int8), nodes.cat("point", np.int8),
                 nodes.cat("ref", np.int64), src, dst, const, scaled, slot, etype, events, top,
                 host.markers, acts, _by_source(nodes, events, host, acts),
                 own.first_of_calls(len(calls)), {int(host.call_end[c]) for c in unlinked_calls},
                 host_slot, unlinked)


class _Nodes:
    def __init__(self) -> None:
        self.parts: dict[str, list[np.ndarray]] = {"base": [], "kind": [], "point": [],
                                                   "ref": []}
        self.count = 0

    def add(self, base: np.ndarray, kind: int, point: np.ndarray | int, ref: np.ndarray
            ) -> np.ndarray:
        n = len(base)
        self.parts["base"].append(np.asarray(base, np.int64))
        self.parts["kind"].append(np.full(n, kind, np.int8))
        self.parts["point"].append(np.broadcast_to(np.asarray(point, np.int8), n).copy())
        self.parts["ref"].append(np.asarray(ref, np.int64))
        ids = np.arange(self.count, self.count + n, dtype=np.int64)
        self.count += n
        return ids

    def cat(self, name: str, dtype: type) -> np.ndarray:
        parts = self.parts[name]
        return np.concatenate(parts) if parts else np.array([], dtype=dtype)

    def base(self) -> np.ndarray:
        return self.cat("base", np.int64)


class _Edges:
    NAMES = ("src", "dst", "const", "scaled", "slot", "etype")

    def __init__(self) -> None:
        self.parts: dict[str, list[np.ndarray]] = {k: [] for k in self.NAMES}

    def add(self, src: np.ndarray, dst: np.ndarray, const: np.ndarray | int,
            scaled: np.ndarray | int, slot: np.ndarray | int, etype: np.ndarray | int) -> None:
        n = len(src)
        for key, value in zip(self.NAMES, (src, dst, const, scaled, slot, etype)):
            dtype = np.int8 if key == "etype" else np.int64
            self.parts[key].append(np.broadcast_to(np.asarray(value, dtype), n).copy())

    def arrays(self) -> list[np.ndarray]:
        return [np.concatenate(p) if p else np.array([], np.int8 if k == "etype" else np.int64)
                for k, p in self.parts.items()]


def _top_level(calls: Columns) -> np.ndarray:
    """Per call, its top-level call on its thread (itself when top-level). Calls arrive
    sorted by thread, start, longer first: a call starting before the latest end of the
    earlier calls of its thread lies inside one of them."""
    n = len(calls)
    top = np.arange(n, dtype=np.int64)
    if not n:
        return top
    thread = calls["thread_name"]
    bounds = np.flatnonzero(thread[1:] != thread[:-1]) + 1
    for lo, hi in zip(np.r_[0, bounds], np.r_[bounds, n]):
        reach = np.maximum.accumulate(calls["end_ns"][lo:hi])
        nested = np.r_[False, calls["ts_ns"][lo + 1:hi] < reach[:-1]]
        heads = np.flatnonzero(~nested)
        top[lo:hi] = lo + heads[np.searchsorted(heads, np.arange(hi - lo), side="right") - 1]
    return top


@dataclass
class _HostPoints:
    call_start: np.ndarray     # per call: its top-level call's start node
    call_end: np.ndarray       # ... and end node
    markers: np.ndarray        # per marker: start and end node
    firsts: np.ndarray         # each thread's first node
    chain_src: np.ndarray      # consecutive points of every thread
    chain_dst: np.ndarray
    chain_gap: np.ndarray
    chain_source: np.ndarray   # the source of each chain edge's thread
    thread_of: dict[str, tuple[int, int]]  # thread name → first and last node


def _host_points(nodes: _Nodes, events: RunEvents, top: np.ndarray) -> _HostPoints:
    calls, markers, threads = events.calls, events.markers, events.threads
    call_start = np.full(len(calls), -1, np.int64)
    call_end = np.full(len(calls), -1, np.int64)
    marker_nodes = np.full((len(markers), 2), -1, np.int64)
    is_top = top == np.arange(len(calls))
    chains: list[tuple[np.ndarray, np.ndarray, int]] = []
    thread_of: dict[str, tuple[int, int]] = {}
    call_rows = _ranges(calls["thread_name"])
    marker_rows = _ranges(markers["thread_name"])
    for t in range(len(threads)):
        name = threads["thread_name"][t]
        lo, hi = call_rows.get(name, (0, 0))
        mine = lo + np.flatnonzero(is_top[lo:hi])
        mlo, mhi = marker_rows.get(name, (0, 0))
        times, point, ref = _thread_points(calls, markers, mine, np.arange(mlo, mhi),
                                           int(threads["start_ns"][t]),
                                           int(threads["end_ns"][t]))
        ids = nodes.add(times, POINT, point, ref)
        call_start[ref[point == CALL_START]] = ids[point == CALL_START]
        call_end[ref[point == CALL_END]] = ids[point == CALL_END]
        marker_nodes[ref[point == MARKER_START], 0] = ids[point == MARKER_START]
        marker_nodes[ref[point == MARKER_END], 1] = ids[point == MARKER_END]
        thread_of[name] = (int(ids[0]), int(ids[-1]))
        chains.append((ids, times, int(threads["source_id"][t])))
    src = np.concatenate([c[0][:-1] for c in chains]) if chains else np.array([], np.int64)
    dst = np.concatenate([c[0][1:] for c in chains]) if chains else np.array([], np.int64)
    gap = np.concatenate([np.diff(c[1]) for c in chains]) if chains else np.array([], np.int64)
    source = (np.concatenate([np.full(len(c[0]) - 1, c[2]) for c in chains]) if chains
              else np.array([], np.int64))
    firsts = np.array([c[0][0] for c in chains], np.int64)
    return _HostPoints(call_start[top], call_end[top], marker_nodes, firsts, src, dst, gap,
                       source, thread_of)


def _ranges(names: np.ndarray) -> dict[str, tuple[int, int]]:
    """Row ranges of each value in a column sorted by it."""
    if not len(names):
        return {}
    bounds = np.flatnonzero(names[1:] != names[:-1]) + 1
    starts, stops = np.r_[0, bounds], np.r_[bounds, len(names)]
    return {names[a]: (int(a), int(b)) for a, b in zip(starts, stops)}


def _thread_points(calls: Columns, markers: Columns, mine: np.ndarray, marks: np.ndarray,
                   first: int, last: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A thread's points in order: (times, point kinds, call or marker index). Top-level
    calls never overlap; a marker's start goes just before the first call that starts at or
    after it, its end just after the last call that ends at or before it, so that instants
    that are equal keep the nesting the spans have."""
    starts, ends = calls["ts_ns"][mine], calls["end_ns"][mine]
    n, m = len(mine), len(marks)
    order_key = np.empty(2 * n + 2 * m, np.float64)
    order_key[0:2 * n:2] = 2.0 * np.arange(n)
    order_key[1:2 * n:2] = 2.0 * np.arange(n) + 1
    first_in = np.searchsorted(starts, markers["start_ns"][marks], side="left")
    last_in = np.searchsorted(ends, markers["end_ns"][marks], side="right") - 1
    order_key[2 * n:2 * n + m] = 2.0 * first_in - 0.5
    order_key[2 * n + m:] = np.maximum(2.0 * last_in + 1.5, 2.0 * first_in - 0.25)
    times = np.concatenate([np.ravel(np.column_stack([starts, ends])),
                            markers["start_ns"][marks], markers["end_ns"][marks]])
    point = np.concatenate([np.tile([CALL_START, CALL_END], n),
                            np.full(m, MARKER_START), np.full(m, MARKER_END)])
    ref = np.concatenate([np.repeat(mine, 2), marks, marks])
    # an end the reader inferred (an NVTX range never popped ends with its step's last GPU
    # activity) is no instant of the thread: windows.py moves it with that activity
    keep = np.r_[np.ones(2 * n + m, bool), markers["end_inferred"][marks] == 0]
    order = np.flatnonzero(keep)[np.lexsort((point[keep] == MARKER_END, order_key[keep]))]
    return (np.r_[first, times[order], last].astype(np.int64),
            np.r_[THREAD_START, point[order], THREAD_END].astype(np.int8),
            np.r_[-1, ref[order], -1].astype(np.int64))


def _activity_nodes(nodes: _Nodes, gpu: Columns) -> np.ndarray:
    rows = np.arange(len(gpu))
    starts = nodes.add(gpu["ts_ns"], START, -1, rows)
    ends = nodes.add(gpu["end_ns"], END, -1, rows)
    return np.stack([starts, ends], axis=1) if len(gpu) else np.zeros((0, 2), np.int64)


def _key(source: np.ndarray, value: np.ndarray) -> np.ndarray:
    """One int64 per (source, id): sources are few, ids below 2^48 (NONE stays apart)."""
    return np.where(value == NONE, NONE, (source.astype(np.int64) << 48) + value)


def _lookup(keys: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """Per wanted key, the index of the first equal key (-1 when none)."""
    order = np.argsort(keys, kind="stable")
    at = np.searchsorted(keys[order], wanted, side="left")
    at = np.minimum(at, max(len(keys) - 1, 0))
    found = np.full(len(wanted), -1, np.int64)
    if len(keys):
        hit = (keys[order][at] == wanted) & (wanted != NONE)
        found[hit] = order[at[hit]]
    return found


class _Index:
    """Lookups the edges need: each activity's launch call and launch time, calls by
    correlation id, syncs by correlation id, activities by stream in launch order."""

    def __init__(self, events: RunEvents, top: np.ndarray) -> None:
        calls, gpu = events.calls, events.gpu
        self.events, self.top = events, top
        self.launch = _lookup(_key(calls["source_id"], calls["event_id"]),
                              _key(gpu["source_id"], gpu["launch_event_id"]))
        self.launch_ts = gpu["ts_ns"].copy() if len(gpu) else np.array([], np.int64)
        launched = self.launch >= 0
        self.launch_ts[launched] = calls["ts_ns"][self.launch[launched]]
        correlation = _key(calls["source_id"], calls["correlation_id"])
        self.correlation_order = np.argsort(correlation, kind="stable")
        self.correlation_sorted = correlation[self.correlation_order]
        self.syncs_by_correlation: dict[tuple[int, int], list[int]] = {}
        syncs = events.syncs
        for i, key in enumerate(zip(syncs["source_id"].tolist(),
                                    syncs["correlation_id"].tolist()) if len(syncs) else []):
            self.syncs_by_correlation.setdefault(key, []).append(i)
        self.streams = self._streams(gpu)

    def _streams(self, gpu: Columns) -> dict[tuple[int, int, int], tuple[np.ndarray, np.ndarray]]:
        """Per (source, device, stream): its activities in launch order, and their launch
        times."""
        placed = np.flatnonzero(gpu["stream_id"] != NONE) if len(gpu) else np.array([], int)
        key = np.stack([gpu["source_id"][placed], gpu["device_id"][placed],
                        gpu["stream_id"][placed]], axis=1) if len(placed) else np.zeros((0, 3))
        order = np.lexsort((placed, self.launch_ts[placed], key[:, 2], key[:, 1], key[:, 0]))
        rows, key = placed[order], key[order]
        bounds = np.flatnonzero(np.any(key[1:] != key[:-1], axis=1)) + 1
        return {(int(key[lo][0]), int(key[lo][1]), int(key[lo][2])):
                (rows[lo:hi], self.launch_ts[rows[lo:hi]])
                for lo, hi in zip(np.r_[0, bounds], np.r_[bounds, len(rows)]) if hi > lo}

    def call(self, source: int, correlation: int, inside: int | None = None) -> int | None:
        """The call of `source` with this correlation id (the one whose span holds `inside`
        when several carry it)."""
        if correlation == NONE:
            return None
        key = _key(np.array([source]), np.array([correlation]))[0]
        lo = int(np.searchsorted(self.correlation_sorted, key, side="left"))
        hi = int(np.searchsorted(self.correlation_sorted, key, side="right"))
        found = self.correlation_order[lo:hi].tolist()
        if inside is not None and len(found) > 1:
            calls = self.events.calls
            holding = [c for c in found if calls["ts_ns"][c] <= inside <= calls["end_ns"][c]]
            found = holding or found
        return found[0] if found else None

    def sync(self, source: int, correlation: int, start: int) -> int | None:
        found = [s for s in self.syncs_by_correlation.get((source, correlation), [])
                 if self.events.syncs["ts_ns"][s] >= start]
        return found[0] if found else None

    def last_before(self, key: tuple[int, int, int], at: int) -> int | None:
        """The stream's last activity launched before `at` (the stream runs in order, so
        it ends last)."""
        if key not in self.streams:
            return None
        rows, times = self.streams[key]
        i = int(np.searchsorted(times, at, side="left")) - 1
        return int(rows[i]) if i >= 0 else None

    def first_after(self, key: tuple[int, int, int], at: int) -> int | None:
        if key not in self.streams:
            return None
        rows, times = self.streams[key]
        i = int(np.searchsorted(times, at, side="right"))
        return int(rows[i]) if i < len(rows) else None


@dataclass
class _Sources:
    src: list[np.ndarray] = field(default_factory=list)   # source node
    act: list[np.ndarray] = field(default_factory=list)   # activity whose start it bounds
    etype: list[int] = field(default_factory=list)

    def add(self, src: np.ndarray | list[int], act: np.ndarray | list[int], etype: int) -> None:
        self.src.append(np.asarray(src, np.int64))
        self.act.append(np.asarray(act, np.int64))
        self.etype.append(etype)


def _start_sources(index: _Index, host: _HostPoints, acts: np.ndarray, events: RunEvents,
                   unlinked: Counter[str]) -> _Sources:
    """What each activity's start waits for: its launch, its stream predecessor, and the
    work a cudaStreamWaitEvent before its launch awaits."""
    found = _Sources()  # on a tie the first wins: GPU-side waits before the launch
    for rows, _ in index.streams.values():
        found.add(acts[rows[:-1], 1], rows[1:], STREAM)
    syncs = events.syncs
    waits: list[int] = (np.flatnonzero(syncs["kind"] == "stream_wait_event").tolist()
                        if len(syncs) else [])
    for w in waits:
        pair = _stream_wait(index, w)
        if pair is None:
            unlinked["stream_wait_event"] += 1
        elif pair[0] is not None and pair[1] is not None:
            found.add([acts[pair[0], 1]], [pair[1]], WAIT)
    launched = np.flatnonzero(index.launch >= 0)
    found.add(host.call_start[index.launch[launched]], launched, LAUNCH)
    return found


def _stream_wait(index: _Index, w: int) -> tuple[int | None, int | None] | None:
    """(awaited activity, waiting activity) of a stream-wait record; None when the record
    does not name what it waits for."""
    syncs = index.events.syncs
    source, device = int(syncs["source_id"][w]), int(syncs["device_id"][w])
    waiting, recorded = int(syncs["stream_id"][w]), int(syncs["wait_stream_id"][w])
    record = index.call(source, int(syncs["wait_record_correlation_id"][w]))
    call = index.call(source, int(syncs["correlation_id"][w]), int(syncs["ts_ns"][w]))
    if NONE in (waiting, recorded) or record is None or call is None:
        return None
    calls = index.events.calls
    return (index.last_before((source, device, recorded), int(calls["ts_ns"][record])),
            index.first_after((source, device, waiting), int(calls["ts_ns"][call])))


def _start_edges(edges: _Edges, found: _Sources, gpu: Columns, acts: np.ndarray,
                 base: np.ndarray, floor: np.ndarray) -> None:
    """Edges into each start, all carrying the start's measured delay past the latest of
    its sources and its floor: the replay gives back the measured start."""
    if not found.src:
        return
    src = np.concatenate(found.src)
    act = np.concatenate(found.act)
    etype = np.concatenate([np.full(len(s), e, np.int8) for s, e in zip(found.src, found.etype)])
    latest = floor[acts[:, 0]].copy()
    np.maximum.at(latest, act, base[src])
    delay = gpu["ts_ns"] - latest
    edges.add(src, acts[act, 0], delay[act], 0, FIXED, etype)


def _duration_edges(edges: _Edges, gpu: Columns, acts: np.ndarray, first_slot: int,
                    unlinked: Counter[str]) -> None:
    """GPU edges (start → end: the scaled duration), and COMM edges for collectives paired
    across the run's sources, on clocks aligned by the collectives' ends."""
    paired = np.zeros(len(gpu), dtype=bool)
    offset = np.asarray(gpu["clock_shift_ns"], np.int64) if len(gpu) else np.zeros(0, np.int64)
    for members in _collectives(gpu, unlinked):
        aligned = gpu["ts_ns"][members] + offset[members]
        last = int(aligned.max())
        for k in members.tolist():
            transfer = int(gpu["end_ns"][k] + offset[k]) - last
            # in k's clock; a transfer the clocks make negative stays a constant, so that
            # a smaller factor never lengthens anything
            edges.add(acts[members, 0], np.full(len(members), acts[k, 1]),
                      offset[members] - offset[k] + min(transfer, 0), max(transfer, 0),
                      first_slot + k, COMM)
        paired[members] = True
    alone = np.flatnonzero(~paired)
    edges.add(acts[alone, 0], acts[alone, 1], 0, gpu["end_ns"][alone] - gpu["ts_ns"][alone],
              first_slot + alone, GPU)


def _collectives(gpu: Columns, unlinked: Counter[str]) -> list[np.ndarray]:
    """Groups of one collective across the run's sources: collectives_v1's instances."""
    if not len(gpu):
        return []
    comm = (gpu["kernel_type"] == "communication") & (gpu["kind"] == "kernel")
    instances = gpu["collective_instance"]
    kept = np.array([i is not None for i in instances], dtype=bool) & comm
    if len(set(gpu["source_id"][comm].tolist())) > 1:  # one rank: nothing to pair with
        unlinked["collective_unpaired"] += int((comm & ~kept).sum())
    members: dict[str, list[int]] = {}
    for k in np.flatnonzero(kept).tolist():
        members.setdefault(str(instances[k]), []).append(k)
    return [np.array(m, np.int64) for m in members.values() if len(m) > 1]


def _host_edges(edges: _Edges, host: _HostPoints, index: _Index, events: RunEvents,
                acts: np.ndarray, own: _Own, host_slot: dict[int, int],
                unlinked: Counter[str]) -> set[int]:
    """HOST edges of every thread, and AWAIT edges into the end of each blocking call whose
    awaited work the trace names; returns the blocking calls it does not name."""
    gap = host.chain_gap.copy()
    into = np.full(int(host.chain_dst.max()) + 1 if len(host.chain_dst) else 0, -1, np.int64)
    into[host.chain_dst] = np.arange(len(host.chain_dst))
    calls = events.calls
    roles = _roles(calls)
    _observed_blocking_copies(roles, own, events)
    not_named: set[int] = set()
    for c in np.flatnonzero((index.top == np.arange(len(calls))) & (roles != "")).tolist():
        awaited = _awaited(c, str(roles[c]), index, own, unlinked)
        if awaited is None:
            if roles[c] in ("stream_sync", "event_sync"):
                not_named.add(c)
            continue
        if not len(awaited):
            continue
        end_node = int(host.call_end[c])
        latest = int(events.gpu["end_ns"][awaited].max())
        waited = latest > int(calls["ts_ns"][c])
        if waited:  # no CPU time of its own; what follows the awaited end is latency
            gap[into[end_node]] = 0
        latency = int(calls["end_ns"][c]) - latest if waited else 0
        edges.add(acts[awaited, 1], np.full(len(awaited), end_node), latency, 0, FIXED, AWAIT)
    slots = np.zeros(max(host_slot, default=-1) + 1, np.int64)
    for source, slot in host_slot.items():
        slots[source] = slot
    # a gap the clocks make negative (a marker timed across a call) stays a constant
    edges.add(host.chain_src, host.chain_dst, np.minimum(gap, 0), np.maximum(gap, 0),
              slots[host.chain_source] if len(host.chain_source) else 0, HOST)
    return not_named


def _roles(calls: Columns) -> np.ndarray:
    """Each call's role in calls.toml ('' for none), by its distinct names."""
    if not len(calls):
        return np.array([], object)
    index, names = calls.coded("name")
    return np.array([role_of(str(n)) or "" for n in names], object)[index]


class _Own:
    """The activities each top-level call launched (itself or through a call inside it)."""

    def __init__(self, index: _Index) -> None:
        launched = np.flatnonzero(index.launch >= 0)
        owner = index.top[index.launch[launched]]
        order = np.lexsort((launched, owner))
        self.owner, self.activity = owner[order], launched[order]

    def of(self, call: int) -> np.ndarray:
        lo = int(np.searchsorted(self.owner, call, side="left"))
        hi = int(np.searchsorted(self.owner, call, side="right"))
        return self.activity[lo:hi]

    def first_of_calls(self, calls: int) -> np.ndarray:
        """Per call index, the first activity its owner launched (-1 for none)."""
        first = np.full(calls, -1, np.int64)
        starts = np.r_[True, self.owner[1:] != self.owner[:-1]] if len(self.owner) else []
        first[self.owner[starts]] = self.activity[starts]
        return first


def _observed_blocking_copies(roles: np.ndarray, own: _Own, events: RunEvents) -> None:
    """A copy call that returned only after its own copy ended waited for it: CUDA runs a
    copy from pageable host memory synchronously, cudaMemcpyAsync included, and the trace
    does not say which memory it was, but the call's end does."""
    gpu, calls = events.gpu, events.calls
    if not len(own.owner):
        return
    copy = np.isin(gpu["kind"][own.activity], ("memcpy", "memset"))
    calls_of = np.unique(own.owner)
    all_copies = np.ones(len(roles), bool)
    np.logical_and.at(all_copies, own.owner, copy)
    last_end = np.full(len(roles), NONE, np.int64)
    np.maximum.at(last_end, own.owner, gpu["end_ns"][own.activity])
    blocking = calls_of[(roles[calls_of] == "") & all_copies[calls_of]
                        & (calls["end_ns"][calls_of] >= last_end[calls_of])]
    roles[blocking] = "blocking_copy"


def _awaited(c: int, role: str, index: _Index, own: _Own,
             unlinked: Counter[str]) -> np.ndarray | None:
    """The activities a top-level blocking call waits for; None when nothing names them."""
    calls, syncs = index.events.calls, index.events.syncs
    source, start = int(calls["source_id"][c]), int(calls["ts_ns"][c])
    if role == "stream_wait":
        return None
    if role == "blocking_copy":
        return own.of(c)
    if role == "device_sync":
        found = [index.last_before(key, start) for key in index.streams if key[0] == source]
        return np.array([k for k in found if k is not None], np.int64)
    record = index.sync(source, int(calls["correlation_id"][c]), start)
    stream_column = "stream_id" if role == "stream_sync" else "wait_stream_id"
    if record is None or syncs[stream_column][record] == NONE:
        unlinked[role] += 1
        return None
    device, stream = int(syncs["device_id"][record]), int(syncs[stream_column][record])
    until = start
    if role == "event_sync":
        rec = index.call(source, int(syncs["wait_record_correlation_id"][record]))
        if rec is None:
            unlinked[role] += 1
            return None
        until = int(calls["ts_ns"][rec])
    last = index.last_before((source, device, stream), until)
    return np.array([last] if last is not None else [], np.int64)


def _by_source(nodes: _Nodes, events: RunEvents, host: _HostPoints, acts: np.ndarray
               ) -> dict[int, np.ndarray]:
    """Each source's nodes (its threads' points and its activities)."""
    out: dict[int, list[np.ndarray]] = {}
    threads = events.threads
    for t in range(len(threads)):
        first, last = host.thread_of[threads["thread_name"][t]]
        out.setdefault(int(threads["source_id"][t]), []).append(np.arange(first, last + 1))
    gpu = events.gpu
    for source in set(gpu["source_id"].tolist()) if len(gpu) else set():
        rows = np.flatnonzero(gpu["source_id"] == source)
        out.setdefault(source, []).append(np.ravel(acts[rows]))
    return {s: np.concatenate(parts) for s, parts in out.items()}
