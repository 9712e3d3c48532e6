"""Nsight Compute binary reports (.ncu-rep) through NVIDIA's optional `ncu_report` package.

`ncu_report` (PyPI, proprietary licence) is an optional dependency, installed with the
`ncu` extra; without it a report is refused with the command that installs it, or the one
that exports the same data as a raw-page CSV. Every action (profiled launch) of every range
becomes one kernel; `ncu_id` is the action's index, counted across ranges in report order.

A report has no value text: `reported_value_text` holds the value the API returns, printed
exactly (integers in full, doubles as Python's shortest round-trip repr), and
`reported_unit` the API's unit ("ns", "hz", "byte/s", "" for dimensionless). Rule results
(rule_results_as_dicts) become ncu_rules rows, typed as the details page writes them.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from etl.core.errors import InputError
from etl.extract.ncu.export import (
    EXTRA_HINT,
    Anomaly,
    MetricRows,
    NcuExport,
    RuleRows,
    build_export,
)


# ncu_report answers Metric.unit() of derived metrics (derived__*_x2) from the first report
# its process loaded: read after another report, the same file gave 'inst' where alone it
# gives 'thread'. Each report is therefore read in a Python of its own.
_READ_ALONE = """
import pickle, sys
from pathlib import Path
from etl.extract.ncu.decode_rep import read_rep_here
try:
    done = ("ok", read_rep_here(Path(sys.argv[1])))
except Exception as exc:  # an InputError comes back whole; anything else as a bug
    done = ("error", exc)
with open(sys.argv[2], "wb") as fh:
    pickle.dump(done, fh)
"""


ISOLATE = True  # tests that edit ncu_report in their own process read it here instead


def read_rep(path: Path) -> NcuExport:
    """The report, read in a Python process of its own (see _READ_ALONE)."""
    if not ISOLATE:
        return read_rep_here(path)
    import os
    import pickle
    import subprocess
    import sys
    import tempfile

    with tempfile.TemporaryDirectory(prefix="etl-ncu-rep-") as scratch:
        out = Path(scratch) / "export.pickle"
        package_root = str(Path(__file__).resolve().parents[3])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            [package_root, *filter(None, [os.environ.get("PYTHONPATH")])])}
        subprocess.run([sys.executable, "-c", _READ_ALONE, str(path), str(out)], env=env,
                       check=True)
        with open(out, "rb") as fh:
            status, value = pickle.load(fh)
    if status == "error":
        raise value
    return value  # type: ignore[no-any-return]


def read_rep_here(path: Path) -> NcuExport:
    """The report, read in this process (its derived metrics' units depend on what this
    process read before: see _READ_ALONE)."""
    report = _load(path)
    kernels: dict[int, dict[str, Any]] = {}
    metrics = MetricRows(path)
    anomalies: list[Anomaly] = []
    ranges = report.num_ranges()
    if ranges > 1:
        anomalies.append(("ncu_multiple_ranges", None,
                          f"{ranges} ranges: ncu_id counts actions across all of them"))
    ncu_id, empty, rules = 0, {}, RuleRows()
    for range_index in range(ranges):
        profiled = report.range_by_idx(range_index)
        for action_index in range(profiled.num_actions()):
            action = profiled.action_by_idx(action_index)
            empty[ncu_id] = _read_action(path, action, ncu_id, kernels, metrics)
            _read_rules(action, ncu_id, rules)
            ncu_id += 1
    if not kernels:
        raise InputError(path, "the report holds no profiled kernel", None,
                         "the file is truncated or is not an Nsight Compute report; re-copy it "
                         "or re-profile")
    anomalies.extend(_valueless(empty))
    return build_export([path], "ncu_rep", kernels, metrics, anomalies, rules)


def _load(path: Path) -> Any:
    try:
        import ncu_report
    except ImportError:
        raise InputError(path, "reading a .ncu-rep needs NVIDIA's ncu_report package, which "
                         "is not installed", None,
                         f"{EXTRA_HINT}, or export CSV: ncu --import {path.name} --csv "
                         f"--page raw > {path.stem}.csv") from None
    try:
        return ncu_report.load_report(str(path))
    except Exception as exc:  # the SWIG layer raises assorted types for a damaged file
        raise InputError(path, f"ncu_report cannot load the report ({exc})", None,
                         "re-copy the .ncu-rep from where ncu wrote it") from None


def _read_action(path: Path, action: Any, ncu_id: int, kernels: dict[int, dict[str, Any]],
                 metrics: MetricRows) -> list[str]:
    """One profiled launch; returns the metrics that carry no value (skipped)."""
    names = list(action.metric_names())
    kernels[ncu_id] = _names(action, ncu_id)
    if not names and kernels[ncu_id]["kernel_base_name"] is None:
        raise InputError(path, "profiled launch without a name or metrics (the report is "
                         "truncated)", f"kernel ID {ncu_id}", "re-copy the .ncu-rep")
    empty = []
    for name in names:
        metric = action.metric_by_name(name)
        text = _value_text(metric)
        if text is None:
            empty.append(name)
            continue
        metrics.add(ncu_id, name, None, text, metric.unit(), f"kernel ID {ncu_id}, {name}",
                    typed_text=metric.kind() == metric.ValueKind_STRING)
    return empty


# ncu_report's MsgType and SpeedupType → what the details page's Rule Type / Estimated
# Speedup Type columns write (NONE → INF is inferred: the page writes INF for the
# informational messages the API types NONE).
MESSAGE_TYPES = {0: "INF", 1: "OK", 2: "OPT", 3: "WRN", 4: "ERR"}
SPEEDUP_TYPES = {1: "local", 2: "global"}


def _read_rules(action: Any, ncu_id: int, rules: RuleRows) -> None:
    """The action's rule results (ncu's guided analysis), in the report's order."""
    try:
        results = action.rule_results_as_dicts()
    except Exception as exc:  # an older ncu_report or report schema without rule results
        rules.anomalies.append(("ncu_rules_not_read", ncu_id,
                                f"rule results not read ({type(exc).__name__}: {exc})"))
        return
    for result in results:
        message = result.get("rule_message") or {}
        speedup = result.get("speedup_estimation") or {}
        kind = message.get("type")
        rules.add(ncu_id, result.get("section_identifier"),
                  result.get("rule_identifier") or result.get("name") or "",
                  MESSAGE_TYPES.get(kind, str(kind)) if kind is not None else None,
                  message.get("message"), SPEEDUP_TYPES.get(speedup.get("type", 0)),
                  repr(float(speedup["speedup"])) if "speedup" in speedup else None)


def _valueless(empty: dict[int, list[str]]) -> list[Anomaly]:
    """One anomaly per export: metrics listed without a value (e.g. nvlink__uuidDev0)."""
    names = sorted({n for per_kernel in empty.values() for n in per_kernel})
    if not names:
        return []
    kernels = sum(1 for per_kernel in empty.values() if per_kernel)
    return [("ncu_metric_without_value", None,
             f"{len(names)} metrics carry no value in {kernels} kernels and were skipped: "
             + ", ".join(names[:8]) + (" ..." if len(names) > 8 else ""))]


def _names(action: Any, ncu_id: int) -> dict[str, Any]:
    """Kernel name forms straight from the report (the CSV readers have to derive them)."""
    demangled = action.name(action.NameBase_DEMANGLED) or None
    function = action.name(action.NameBase_FUNCTION) or None
    return {"ncu_id": ncu_id, "kernel_name": demangled or function,
            "kernel_name_demangled": demangled,
            "kernel_name_mangled": action.name(action.NameBase_MANGLED) or None,
            "kernel_base_name": function}


def _value_text(metric: Any) -> str | None:
    if not metric.has_value():
        return None
    value = metric.value()
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    return None
