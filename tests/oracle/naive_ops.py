"""Each kernel's op, read naively from the raw trace: the cpu_ops of the launch's thread
that enclose the launch's start (a stack sweep), outermost first; the outermost of them
that is not a torch.compile wrapper, else the outermost wrapper, else none. Step markers
(ProfilerStep#N, a cpu_op in older traces) are not ops. Written apart from etl/: its own
wrapper list, its own sweep (every complete event of the thread takes part in it)."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tests.oracle.fwdbwd_layers import _ancestors, _complete, _spans
from tests.oracle.naive_kineto import load_trace

WRAPPERS = ("CompiledFunction", "CompiledFunctionBackward",
            "autograd::engine::evaluate_function: CompiledFunctionBackward")
WRAPPER_PREFIXES = ("Torch-Compiled Region", "## Call CompiledFxGraph ")
STEP = re.compile(r"^ProfilerStep#\d+$")
LAUNCH_CATS = ("cuda_runtime", "cuda_driver")
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


def kernel_ops(path: str | Path) -> dict[int, tuple[str | None, str | None]]:
    """{index of a GPU activity in traceEvents: (its op name, the outermost enclosing op
    wrapper or not; None: no op)} for every activity whose correlation id has a launch call
    (the first one written)."""
    events = load_trace(path)["traceEvents"]
    spans = {i: s for i, s in _spans(events).items() if s[3] >= s[2]}
    ancestors = _ancestors(spans)
    launches: dict[Any, int] = {}
    for i, e in enumerate(events):
        if i in spans and e.get("cat") in LAUNCH_CATS and "correlation" in e.get("args", {}):
            launches.setdefault(e["args"]["correlation"], i)
    found: dict[int, tuple[str | None, str | None]] = {}
    for i, e in enumerate(events):
        if not (_complete(e) and e.get("cat") in GPU_CATS):
            continue
        launch = launches.get(e.get("args", {}).get("correlation"))
        if launch is not None:
            found[i] = _op([events[j] for j in ancestors[launch]])
    return found


def _op(enclosing: list[dict[str, Any]]) -> tuple[str | None, str | None]:
    ops = [str(e.get("name")) for e in enclosing
           if e.get("cat") in ("cpu_op", "Operator") and not STEP.match(str(e.get("name")))]
    plain = [name for name in ops if not _wrapper(name)]
    return (plain or ops or [None])[0], (ops or [None])[0]


def _wrapper(name: str) -> bool:
    return name in WRAPPERS or name.startswith(WRAPPER_PREFIXES)
