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
  aten::cudnn_convolution it calls).
- layer: the innermost `nn.Module: X` python_function or record_function (user_annotation)
  scope among the ancestors, ProfilerStep markers excluded.
- iteration: N of the ProfilerStep#N whose host span [hs, he] contains the event's start
  (the latest-starting such step); a GPU activity takes its launch's iteration.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

NONE = -1  # index sentinel inside numpy arrays only; never reaches a table (→ NULL)


@dataclass
class HostLinks:
    parent: np.ndarray      # row index of parent host event or NONE
    op: np.ndarray          # row index of outermost enclosing cpu_op or NONE
    layer: np.ndarray       # row index of innermost layer scope or NONE
    overlaps: list[int]     # rows that start inside an event but end after it


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
              is_op: np.ndarray, is_layer: np.ndarray) -> HostLinks:
    """Parent / outermost op / innermost layer of every host event, thread by thread.

    `timed` marks events with a usable start and non-negative duration; others get no links.
    """
    n = len(start)
    parent = np.full(n, NONE, dtype=np.int64)
    op = np.full(n, NONE, dtype=np.int64)
    layer = np.full(n, NONE, dtype=np.int64)
    valid = timed & (end >= start)
    order = np.lexsort((np.arange(n), -end, start, thread))
    order = order[valid[order]]
    overlaps = _stack_pass(order.tolist(), thread.tolist(), start.tolist(), end.tolist(),
                           is_op.tolist(), is_layer.tolist(), parent, op, layer)
    return HostLinks(parent, op, layer, overlaps)


def _stack_pass(order: list[int], thread: list[Any], start: list[int], end: list[int],
                is_op: list[bool], is_layer: list[bool], parent: np.ndarray,
                op: np.ndarray, layer: np.ndarray) -> list[int]:
    """One ordered sweep with a stack per thread: O(n), the only per-event Python loop."""
    parents, ops, layers = [NONE] * len(start), [NONE] * len(start), [NONE] * len(start)
    overlaps: list[int] = []
    # stack entries: (end, row, outermost op in chain incl. row, innermost layer incl. row)
    stack: list[tuple[int, int, int, int]] = []
    current = None
    for row in order:
        if thread[row] != current:
            current, stack = thread[row], []
        s = start[row]
        while stack and stack[-1][0] <= s:  # spans are half-open: [start, end)
            stack.pop()
        top_op = top_layer = NONE
        if stack:
            top_end, top_row, top_op, top_layer = stack[-1]
            parents[row], ops[row], layers[row] = top_row, top_op, top_layer
            if end[row] > top_end:
                overlaps.append(row)
        own_op = top_op if top_op != NONE else (row if is_op[row] else NONE)
        own_layer = row if is_layer[row] else top_layer
        stack.append((end[row], row, own_op, own_layer))
    parent[:] = parents
    op[:] = ops
    layer[:] = layers
    return overlaps


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
