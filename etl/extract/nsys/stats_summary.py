"""`nsys stats` summary reports as CSV (cuda_gpu_kern_sum, cuda_api_sum,
cuda_gpu_mem_time_sum, nvtx_sum, ...): recognised, and skipped with what they are.

A summary holds totals per name (`Time (%),Total Time (ns),Instances,Avg (ns),...,Name`
for cuda_gpu_kern_sum), no timeline: no start of any kernel, so no busy time, window or
iteration can be computed from it. It is skipped with that reason and the file that has
the timeline: `nsys stats -o BASE` names its CSVs BASE_<report>.csv beside BASE.nsys-rep,
whose SQLite export BASE.sqlite (or the cuda_gpu_trace CSV) is ingested instead. A run
folder that holds nothing else is refused with that line.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, NoReturn

from etl.extract.registry import NothingToIngest

# the columns after Total Time (ns) that tell the reports apart (nsys 2022 and later)
REPORTS = (("Instances", "Name", "cuda_gpu_kern_sum: total GPU time per kernel name"),
           ("Num Calls", "Name", "cuda_api_sum: total time per CUDA API call"),
           ("Count", "Operation", "cuda_gpu_mem_time_sum: total time per memory operation"),
           ("Instances", "Range", "nvtx_sum: total time per NVTX range"))
_HEADER = re.compile(r"^(?:\ufeff)?Time ?\(%\),Total Time \(ns\),.*$", re.MULTILINE)


def describe(header: str) -> str:
    """Which summary a header line is."""
    columns = [c.strip() for c in header.split(",")]
    for third, named, what in REPORTS:
        if len(columns) > 2 and columns[2] == third and named in columns:
            return what
    return "an nsys stats summary report: totals per name"


def read(path: Path, *_: Any) -> NoReturn:
    """The trace-role reader: skip the file, saying what it is and where the timeline is."""
    text = path.read_bytes()[:65536].decode("utf-8", "replace")
    found = _HEADER.search(text)
    what = describe(found.group(0)) if found else "an nsys stats summary report"
    raise NothingToIngest(f"an nsys stats summary ({what}), not a timeline: it has no kernel "
                        "start, so no GPU utilization can be computed from it; "
                        f"{_timeline(path)}")


def _timeline(path: Path) -> str:
    """Where the timeline of the same profile is, from nsys stats' BASE_<report>.csv."""
    base = re.sub(r"_(?:cuda|nvtx|osrt|um|openacc|openmp|vulkan|dx\d+|opengl|mpi)_[a-z0-9_]+$",
                  "", path.stem)
    export = path.with_name(f"{base}.sqlite")
    if base != path.stem and export.exists():
        return f"its timeline is {export.name} beside it, which is ingested"
    report = f"{base}.nsys-rep" if base != path.stem else "REPORT.nsys-rep"
    return (f"ingest the timeline instead: nsys export --type sqlite {report} (or nsys stats "
            f"--report cuda_gpu_trace --format csv {report})")
