"""The obvious O(n) stack sweep over host events: the reference for etl/extract/link.py.

Events sorted by (thread, start, longer first, row); a stack per thread holds the open
spans [start, end). Written for clarity, not speed.
"""
from __future__ import annotations

NONE = -1


def sweep(thread: list[int], start: list[int], end: list[int], is_op: list[bool],
          is_layer: list[bool]) -> tuple[list[int], list[int], list[int], list[int]]:
    """(parent, op, layer, overlapping rows) by row; every event is taken as timed."""
    n = len(start)
    order = sorted(range(n), key=lambda r: (thread[r], start[r], -end[r], r))
    parent, op, layer = [NONE] * n, [NONE] * n, [NONE] * n
    overlaps: list[int] = []
    stack: list[tuple[int, int, int, int]] = []  # (end, row, own op, own layer)
    current = None
    for row in order:
        if thread[row] != current:
            current, stack = thread[row], []
        while stack and stack[-1][0] <= start[row]:
            stack.pop()
        top_op = top_layer = NONE
        if stack:
            top_end, top_row, top_op, top_layer = stack[-1]
            parent[row], op[row], layer[row] = top_row, top_op, top_layer
            if end[row] > top_end:
                overlaps.append(row)
        own_op = top_op if top_op != NONE else (row if is_op[row] else NONE)
        own_layer = row if is_layer[row] else top_layer
        stack.append((end[row], row, own_op, own_layer))
    return parent, op, layer, sorted(overlaps)
