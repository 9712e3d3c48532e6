"""Naive, independent oracle: the layer of backward kernels by the trace's fwd-bwd flows.

Written from the Chrome-trace format and the PyTorch profiler's flow events only (never
from etl/, and never from "Sequence number"): the profiler links a forward op to the
backward op it derives from with a flow of category `fwdbwd`: a start event (ph s) at the
forward op's start on its thread, and a finish event (ph f) with the same id at the
backward op's start on the backward thread (the node's op, `XBackward0`; the autograd
engine wraps it in its parent `autograd::engine::evaluate_function: XBackward0`, which
derives from the same forward op). A kernel's launch is the runtime/driver call with its
correlation id; a backward kernel is one whose launch lies inside either; its layer is the
innermost layer scope enclosing that flow's forward op: an `nn.Module: X` python_function
or a user_annotation other than ProfilerStep#N.

Plain lists and loops, exact integer nanoseconds; only complete events (ph X) are read.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tests.oracle.naive_kineto import load_trace, to_ns

LAUNCH_CATS = ("cuda_runtime", "cuda_driver", "Runtime")
GPU_CATS = ("kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "Memset")
STEP = re.compile(r"^ProfilerStep#\d+$")


def backward_kernel_layers(path: str | Path) -> dict[int, str | None]:
    """{kernel index in traceEvents: layer of the forward op} for every kernel whose launch
    lies inside an op that a fwd-bwd flow finishes at (None: no scope encloses the forward
    op)."""
    events = load_trace(path)["traceEvents"]
    spans = _spans(events)
    ancestors = _ancestors(spans)
    # backward op index -> forward op index
    forward_of = _with_engine_wrappers(_flow_ends(events, spans), events, ancestors)
    launches = {e["args"]["correlation"]: i for i, e in enumerate(events)
                if _complete(e) and e.get("cat") in LAUNCH_CATS
                and "correlation" in e.get("args", {})}
    found: dict[int, str | None] = {}
    for i, e in enumerate(events):
        if not (_complete(e) and e.get("cat") in GPU_CATS):
            continue
        launch = launches.get(e.get("args", {}).get("correlation"))
        backward = None if launch is None else _innermost(
            ancestors, launch, lambda j: j in forward_of)
        if backward is not None:
            scope = _innermost(ancestors, forward_of[backward],
                               lambda j: _is_scope(events[j]))
            found[i] = None if scope is None else events[scope]["name"]
    return found


def _complete(e: Any) -> bool:
    return isinstance(e, dict) and e.get("ph") == "X" and "ts" in e and "dur" in e


def _spans(events: list[Any]) -> dict[int, tuple[Any, Any, int, int]]:
    """index -> (pid, tid, start ns, end ns) of every complete host or GPU event."""
    return {i: (e.get("pid"), e.get("tid"), to_ns(e["ts"]), to_ns(e["ts"]) + to_ns(e["dur"]))
            for i, e in enumerate(events) if _complete(e)}


def _flow_ends(events: list[Any], spans: dict[int, tuple[Any, Any, int, int]]
               ) -> dict[int, int]:
    """Backward op -> forward op: the cpu_ops starting where a flow's f and s are."""
    starts = {(s[0], s[1], s[2]): i for i, s in spans.items()
              if events[i].get("cat") == "cpu_op"}
    begin = {e["id"]: e for e in events if isinstance(e, dict)
             and e.get("cat") == "fwdbwd" and e.get("ph") == "s"}
    linked = {}
    for e in events:
        if isinstance(e, dict) and e.get("cat") == "fwdbwd" and e.get("ph") == "f":
            s = begin.get(e["id"])
            backward = starts.get((e["pid"], e["tid"], to_ns(e["ts"])))
            forward = None if s is None else starts.get((s["pid"], s["tid"], to_ns(s["ts"])))
            if backward is not None and forward is not None:
                linked[backward] = forward
    return linked


def _with_engine_wrappers(forward_of: dict[int, int], events: list[Any],
                          ancestors: dict[int, list[int]]) -> dict[int, int]:
    """Each flow-finished op's direct parent named evaluate_function: <its name> too."""
    wrapped = dict(forward_of)
    for backward, forward in forward_of.items():
        parent = ancestors[backward][-1] if ancestors[backward] else None
        name = "autograd::engine::evaluate_function: " + str(events[backward]["name"])
        if parent is not None and events[parent]["name"] == name:
            wrapped[parent] = forward
    return wrapped


def _ancestors(spans: dict[int, tuple[Any, Any, int, int]]) -> dict[int, list[int]]:
    """index -> the events of its thread enclosing its start, outermost first: a stack
    sweep of each thread's events by (start, longer first)."""
    order = sorted(spans, key=lambda i: (str(spans[i][0]), str(spans[i][1]), spans[i][2],
                                         -spans[i][3], i))
    found: dict[int, list[int]] = {}
    stack: list[int] = []
    for i in order:
        pid, tid, start, _ = spans[i]
        while stack and (spans[stack[-1]][:2] != (pid, tid) or spans[stack[-1]][3] <= start):
            stack.pop()
        found[i] = list(stack)
        stack.append(i)
    return found


def _innermost(ancestors: dict[int, list[int]], at: int, wanted: Any) -> int | None:
    """The innermost wanted event enclosing `at`'s start (itself excluded)."""
    return next((j for j in reversed(ancestors[at]) if wanted(j)), None)


def _is_scope(e: dict[str, Any]) -> bool:
    name = e.get("name") or ""
    if e.get("cat") == "python_function":
        return name.startswith("nn.Module: ")
    return e.get("cat") == "user_annotation" and bool(name) and not STEP.match(name)
