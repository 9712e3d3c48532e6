"""Links within one trace source: launches, parents, operators, layers, iterations.

Pure functions over numpy arrays (no I/O). All links stay inside one source: ranks reuse
correlation ids and iteration numbers.

- launch: a GPU activity's launch is the runtime/driver call with the same correlation id
  (kernels of one CUDA-graph launch share it, so the link is many-to-one).
- parent: the innermost event on the same (pid, tid) whose span [start, end) contains this
  one's start.
  Events are ordered by (start, longer first); an event that starts inside another but ends
  after it is a partial overlap: it is flagged, and its parent is still the enclosing start.
- op: the outermost cpu_op among the launch's ancestors (aten::conv2d rather than the
  aten::cudnn_convolution it calls). Wrapper ops (torch.compile's `Torch-Compiled Region`,
  `CompiledFunction`, ...) yield to any other op among the ancestors, however deep: a
  compiled region's kernels take the op that launched them (a Triton kernel's own op), and
  the outermost wrapper only when no other op encloses the launch.
- layer: the innermost `nn.Module: X` python_function or record_function (user_annotation)
  scope among the ancestors, ProfilerStep markers excluded (Kineto also counts backward ops
  as layer scopes: their layer is their forward op's, resolved after linking).
- mark: the innermost event of a second kind of scope among the ancestors-or-self (Kineto:
  the backward ops and optimizer scopes that decide an event's pass).
- iteration: N of the ProfilerStep#N whose host span [hs, he] contains the event's start
  (the latest-starting such step); a GPU activity takes its launch's iteration.
- begin/end pair: an E closes the most recent open B of its (pid, tid), in event order;
  the pair is the complete event it describes (trace_tables.paired_events).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

NONE = -1  # index sentinel inside numpy arrays only; never reaches a table (→ NULL)
# added to the identity of a wrapper op inside the op arrays (identities are far below it),
# so that the op chosen among ancestors can tell wrappers apart without a lookup
_WRAPPER = 1 << 62


@dataclass
class HostLinks:
    parent: np.ndarray      # row index of parent host event or NONE
    op: np.ndarray          # row index of outermost enclosing cpu_op or NONE
    layer: np.ndarray       # row index of innermost layer scope or NONE
    overlaps: list[int]     # rows that start inside an event but end after it
    # row index of the innermost marked scope (self included) or NONE; empty when unmarked
    mark: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))


def link_launches(launch_corr: np.ndarray, launch_rows: np.ndarray, gpu_corr: np.ndarray,
                  gpu_has_corr: np.ndarray) -> tuple[np.ndarray, list[int]]:
    """Host row of each GPU activity's launch (NONE if none); rows of duplicate launches.

    `launch_corr` holds only launches that have a correlation id.
    """
    corr, rows = launch_corr, launch_rows
    order = np.argsort(corr, kind="stable")
    corr, rows = corr[order], rows[order]
    duplicates = rows[1:][corr[1:] == corr[:-1]].tolist()
    first = np.ones(len(corr), dtype=bool)
    first[1:] = corr[1:] != corr[:-1]
    corr, rows = corr[first], rows[first]
    pos = np.searchsorted(corr, gpu_corr)
    pos = np.minimum(pos, max(len(corr) - 1, 0))
    found = gpu_has_corr & (len(corr) > 0)
    if len(corr):
        found &= corr[pos] == gpu_corr
    return np.where(found, rows[pos] if len(corr) else NONE, NONE), duplicates


def link_host(thread: np.ndarray, start: np.ndarray, end: np.ndarray, timed: np.ndarray,
              is_op: np.ndarray, is_layer: np.ndarray, is_mark: np.ndarray | None = None,
              is_wrapper: np.ndarray | None = None) -> HostLinks:
    """Parent / outermost op / innermost layer / innermost mark of every host event, in
    memory.

    `timed` marks events with a usable start and non-negative duration; others get no links.
    Row indices serve as identities; link_sorted does the work.
    """
    n = len(start)
    valid = timed & (end >= start)
    order = np.lexsort((np.arange(n), -end, start, thread))
    order = order[valid[order]]
    marks = np.zeros(n, dtype=bool) if is_mark is None else is_mark
    chunk = SortedEvents(thread[order], start[order], end[order], order.astype(np.int64),
                         is_op[order], is_layer[order], marks[order],
                         None if is_wrapper is None else is_wrapper[order])
    found, _ = link_sorted(chunk, Carry.empty())
    parent, op, layer, mark = (np.full(n, NONE, dtype=np.int64) for _ in range(4))
    parent[order], op[order], layer[order] = found.parent, found.op, found.layer
    mark[order] = found.mark
    return HostLinks(parent, op, layer, order[found.overlap].tolist(), mark)


@dataclass
class SortedEvents:
    """Timed host events sorted by (thread, start, end descending, ident)."""

    thread: np.ndarray      # int64 code of (pid, tid)
    start: np.ndarray       # int64 ns
    end: np.ndarray
    ident: np.ndarray       # int64 identity reported in the links (event id or row)
    is_op: np.ndarray       # bool
    is_layer: np.ndarray    # bool
    is_mark: np.ndarray | None = None   # bool; None: no event is marked
    is_wrapper: np.ndarray | None = None   # bool: ops that yield to others; None: none


@dataclass
class Carry:
    """Events still open after the previous chunk: the last event's ancestor chain, root
    first, with their own outermost op, innermost layer and innermost mark (ancestors
    included)."""

    thread: np.ndarray
    start: np.ndarray
    end: np.ndarray
    ident: np.ndarray
    own_op: np.ndarray
    own_layer: np.ndarray
    own_mark: np.ndarray

    @classmethod
    def empty(cls) -> Carry:
        nothing = np.zeros(0, dtype=np.int64)
        return cls(nothing, nothing, nothing, nothing, nothing, nothing, nothing)


@dataclass
class SortedLinks:
    parent: np.ndarray      # ident of the parent or NONE, per event of the chunk
    op: np.ndarray          # ident of the outermost enclosing cpu_op or NONE
    layer: np.ndarray       # ident of the innermost enclosing layer scope or NONE
    overlap: np.ndarray     # bool: starts inside its parent but ends after it
    mark: np.ndarray        # ident of the innermost marked event, itself included, or NONE


def link_sorted(chunk: SortedEvents, carry: Carry, *, every_thread: bool = False
                ) -> tuple[SortedLinks, Carry]:
    """Links of one chunk of the sorted stream, given what is still open before it.

    The parent of event i is the nearest earlier event of its thread (in sort order) that
    ends after i starts. That is exactly the top of the classic stack sweep: an event is
    popped only when some later start reaches its end, so every event between the stack top
    and i ends at or before i's start. Computed for the whole chunk at once by binary
    descent over a sparse table of range maxima of `end` (O(n log n), no per-event Python);
    op and layer then follow by pointer doubling up the parent forest.

    `every_thread`: the stream is in start order and each chunk sorted by thread, so a
    thread comes again in later chunks; the carry then keeps the open events of every
    thread (by thread, each root first), not only those of the chunk's last event.
    """
    k = len(carry.ident)
    thread = np.concatenate([carry.thread, chunk.thread])
    start = np.concatenate([carry.start, chunk.start])
    end = np.concatenate([carry.end, chunk.end])
    ident = np.concatenate([carry.ident, chunk.ident])
    carried: np.ndarray | slice = slice(0, k)     # where the carry and the chunk are
    mine: np.ndarray | slice = slice(k, None)
    order = None
    if every_thread and k and bool((thread[1:] < thread[:-1]).any()):
        order = np.argsort(thread, kind="stable")   # each thread: its carry, then the chunk
        thread, start, end, ident = (a[order] for a in (thread, start, end, ident))
        where = np.empty(len(order), dtype=np.int64)
        where[order] = np.arange(len(order))
        carried, mine = where[:k], where[k:]
    parent = _nearest_open_before(thread, start, end)
    parent[carried] = _carried_parents(
        thread, np.arange(k) if isinstance(carried, slice) else carried)
    marked = np.zeros(len(chunk.ident), dtype=bool) if chunk.is_mark is None else chunk.is_mark
    owns = [np.concatenate([kept, np.where(flag, chunk.ident, NONE)]) for kept, flag in
            ((carry.own_op, chunk.is_op), (carry.own_layer, chunk.is_layer),
             (carry.own_mark, marked))]
    if chunk.is_wrapper is not None:
        owns[0][k:] += np.where(chunk.is_op & chunk.is_wrapper, _WRAPPER, 0)
    if order is not None:
        owns = [own[order] for own in owns]
    own_op, own_layer, own_mark = _inherit(parent, *owns)
    up_of_mine = parent[mine]
    has = up_of_mine != NONE
    up = np.where(has, up_of_mine, 0)
    links = SortedLinks(
        parent=np.where(has, ident[up], NONE),
        op=np.where(has, _unwrapped(own_op[up]), NONE),
        layer=np.where(has, own_layer[up], NONE),
        overlap=has & (end[mine] > end[up]),
        mark=own_mark[mine])
    lasts = _last_of_each_thread(thread) if every_thread else np.array([len(ident) - 1])
    chain = _chains(parent, lasts)
    return links, Carry(thread[chain], start[chain], end[chain], ident[chain], own_op[chain],
                        own_layer[chain], own_mark[chain])


def _unwrapped(op: np.ndarray) -> np.ndarray:
    """Op identities without the wrapper tag (NONE stays)."""
    return np.where(op >= _WRAPPER, op - _WRAPPER, op)


def _carried_parents(thread: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Parents of the carried events (at `at`, in order): each thread's carry is a chain,
    root first."""
    chained = np.zeros(len(at), dtype=bool)
    chained[1:] = (at[1:] == at[:-1] + 1) & (thread[at[1:]] == thread[at[:-1]])
    return np.where(chained, at - 1, NONE)


def _last_of_each_thread(thread: np.ndarray) -> np.ndarray:
    if len(thread) == 0:
        return np.zeros(0, dtype=np.int64)
    return np.flatnonzero(np.append(thread[1:] != thread[:-1], True))


def _nearest_open_before(thread: np.ndarray, start: np.ndarray, end: np.ndarray
                         ) -> np.ndarray:
    """Per position i, the largest j < i of the same thread with end[j] > start[i], or NONE.

    Greedy binary descent: from i, step back over blocks of 2^k positions whose maximum end
    is ≤ start[i], largest blocks first; the position before the last block stepped over is
    the answer if it is in the thread and ends after start[i].
    """
    n = len(start)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    positions = np.arange(n, dtype=np.int64)
    first = np.ones(n, dtype=bool)
    first[1:] = thread[1:] != thread[:-1]
    group = np.maximum.accumulate(np.where(first, positions, 0))
    levels = [end]  # levels[k][j] = max(end[j : j + 2^k])
    while (1 << len(levels)) <= n:
        half = 1 << (len(levels) - 1)
        levels.append(np.maximum(levels[-1][:-half], levels[-1][half:]))
    pos = positions.copy()
    for k in range(len(levels) - 1, -1, -1):
        candidate = pos - (1 << k)
        ok = candidate >= group
        ok &= levels[k][np.where(ok, candidate, 0)] <= start
        pos = np.where(ok, candidate, pos)
    before = pos - 1
    found = (before >= group) & (end[np.maximum(before, 0)] > start)
    return np.where(found, before, NONE)


def _inherit(parent: np.ndarray, own_op: np.ndarray, own_layer: np.ndarray,
             own_mark: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pointer doubling: outermost op, innermost layer and innermost mark over each event's
    ancestors-or-self.

    After round r, own_* covers the event and its 2^r - 1 nearest ancestors; a value found
    higher up wins for the op (outermost) unless it is a wrapper and the lower one is not
    (ids of wrappers carry _WRAPPER), a value found lower wins for layer and mark.
    """
    pointer = parent.copy()
    while (pointer != NONE).any():
        has = pointer != NONE
        up = np.where(has, pointer, 0)
        up_op, up_pointer = own_op[up], pointer[up]
        own_is_op = (own_op != NONE) & (own_op < _WRAPPER)
        wins = (up_op != NONE) & ((up_op < _WRAPPER) | ~own_is_op)
        own_op = np.where(has & wins, up_op, own_op)
        own_layer = np.where(has & (own_layer == NONE), own_layer[up], own_layer)
        own_mark = np.where(has & (own_mark == NONE), own_mark[up], own_mark)
        pointer = np.where(has, up_pointer, NONE)
    return own_op, own_layer, own_mark


def _chains(parent: np.ndarray, lasts: np.ndarray) -> np.ndarray:
    """Positions of the events in `lasts` (one per thread, in order) and their ancestors:
    each thread's stack after its last event, root first."""
    chain: list[int] = []
    for last in lasts.tolist():
        stack = []
        while last != NONE and last >= 0:
            stack.append(last)
            last = int(parent[last])
        chain.extend(reversed(stack))
    return np.array(chain, dtype=np.int64)


def assign_iterations(step_start: np.ndarray, step_end: np.ndarray, step_number: np.ndarray,
                      ts: np.ndarray, ts_valid: np.ndarray) -> np.ndarray:
    """Iteration number per timestamp (NONE outside every step): latest step starting ≤ ts."""
    if len(step_start) == 0:
        return np.full(len(ts), NONE, dtype=np.int64)
    order = np.argsort(step_start, kind="stable")
    starts, ends, numbers = step_start[order], step_end[order], step_number[order]
    pos = np.searchsorted(starts, ts, side="right") - 1
    safe = np.maximum(pos, 0)
    inside = (pos >= 0) & ts_valid & (ts <= ends[safe])
    return np.where(inside, numbers[safe], NONE)


# ---- begin/end pairs --------------------------------------------------------------

@dataclass
class OpenBegins:
    """B events still open after a chunk: the stack of the chunk's last thread (event ids,
    innermost last). Stacks of earlier threads are finished: their B's were never closed."""

    thread: int
    ids: list[int]

    @classmethod
    def empty(cls) -> OpenBegins:
        return cls(NONE, [])


@dataclass
class BeginEndPairs:
    begin: np.ndarray           # event id of a B
    end: np.ndarray             # event id of the E that closes it, NONE if none does
    unmatched_end: list[int]    # E events with no open B on their thread


def match_begin_end(thread: np.ndarray, event_id: np.ndarray, is_begin: np.ndarray,
                    still_open: OpenBegins) -> tuple[BeginEndPairs, OpenBegins]:
    """Pair the B and E events of one chunk sorted by (thread, event id), given the B's
    left open by the previous chunk: an E closes the most recent open B of its thread.

    A plain stack sweep: B/E events are rare (Kineto writes X), and the stack is the
    definition itself. Memory is the chunk plus the open B's of one thread.
    """
    begins: list[int] = []
    ends: list[int] = []
    unmatched: list[int] = []
    current, stack = still_open.thread, still_open.ids
    for code, ident, begin in zip(thread.tolist(), event_id.tolist(), is_begin.tolist()):
        if code != current:  # a new thread: what is left open on the last one never closes
            begins += stack
            ends += [NONE] * len(stack)
            current, stack = code, []
        if begin:
            stack.append(ident)
        elif stack:
            begins.append(stack.pop())
            ends.append(ident)
        else:
            unmatched.append(ident)
    pairs = BeginEndPairs(np.array(begins, dtype=np.int64), np.array(ends, dtype=np.int64),
                          unmatched)
    return pairs, OpenBegins(current, stack)


def never_closed(still_open: OpenBegins) -> BeginEndPairs:
    """The B's open at the end of the last chunk."""
    return BeginEndPairs(np.array(still_open.ids, dtype=np.int64),
                         np.full(len(still_open.ids), NONE, dtype=np.int64), [])
