"""The Nsight Compute metric catalog (etl/extract/ncu/metrics.toml) and per-kernel levels.

The catalog says, per architecture, which counters give each quantity of the multi-level
method (Delestrac et al., DATE 2024, Table I) in order of preference, and the form of each
(a total, a per-SMSP average, a percent of peak over elapsed cycles, ...). `kernel_levels`
turns one export's metrics into totals over all SMSPs and then into the six levels:

    smsp_active_util = smsp_active_cycles   / smsp_elapsed_cycles
    issue_slot_util  = smsp_issue_cycles    / smsp_elapsed_cycles
    tc_active_util   = tensor_active_cycles / smsp_elapsed_cycles
    tc_issue_util    = tensor_instructions  / smsp_elapsed_cycles
    tc_inst_share    = tensor_instructions  / instructions_issued
    tc_active_share  = tensor_active_cycles / smsp_active_cycles

Each value comes with a `*_source` naming the counters and conversions used, and is NULL
with a `*_null_reason` when a counter is absent or cannot be converted (never 0 for absent;
a present zero counter gives 0). `ncu_metric_list` and `profile_commands` give the ncu
command lines that collect the preferred counters.
"""
from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cache
from typing import TYPE_CHECKING, Any

from etl.extract.ncu.common import UNITS_FILE, catalog, is_known_unit

if TYPE_CHECKING:
    import pyarrow as pa

SMSPS_PER_SM = 4  # every SM since Volta has four sub-partitions (paper §III)


@dataclass(frozen=True)
class ArchEntry:
    arch: str                        # the catalog entry read
    gpus: str
    verified: bool
    lists: dict[str, tuple[str, ...]]
    caveats: dict[str, str]
    read_as: str | None = None       # the architecture it stands in for (no entry of its own)
    family: str | None = None

    @property
    def note(self) -> str | None:
        """What every value computed from a stand-in entry carries in its *_source."""
        return f"unverified: {self.read_as} read as {self.arch}" if self.read_as else None

    @property
    def label(self) -> str:
        return f"{self.arch} (read for {self.read_as})" if self.read_as else self.arch


@dataclass(frozen=True)
class Resolved:
    """A quantity for one kernel: value with its source, or NULL with the reason."""

    value: float | None
    source: str | None
    reason: str | None


class Unavailable(Exception):
    """A counter is present but its form needs something the kernel lacks."""


# ---- the catalog ------------------------------------------------------------------------

def quantity_order() -> list[str]:
    return list(catalog()["quantity_order"])


def level_names() -> list[str]:
    return list(catalog()["levels"])


def arch_names() -> list[str]:
    return list(catalog()["arch"])


def normalize_arch(arch: str) -> str:
    """"sm_80", "80", "8.0", "sm80" → "sm_80"."""
    text = arch.strip().lower()
    match = re.fullmatch(r"(\d+)\.(\d)", text)
    if match:
        return f"sm_{match[1]}{match[2]}"
    match = re.fullmatch(r"(?:sm_?)?(\d{2,3})", text)
    if not match:
        raise ValueError(f"architecture {arch!r}: expected sm_XY, XY or X.Y")
    return f"sm_{match[1]}"


@cache
def arch_entry(arch: str) -> ArchEntry:
    """Preference lists of `arch`, with `like` inheritance resolved; an architecture without
    an entry gets the nearest known one of its family ([families]), marked `read_as`."""
    name = normalize_arch(arch)
    table = catalog()["arch"]
    if name in table:
        return _own_entry(name)
    family, nearest = _nearest_of_family(name)
    if nearest is None:
        raise KeyError(f"no catalog entry for {name}, and no [families] list in "
                       f"etl/extract/ncu/metrics.toml names it (known: {', '.join(table)}); "
                       f"add [arch.{name}], or {name} to its generation's family")
    return replace(_own_entry(nearest), read_as=name, family=family)


def _arch_number(name: str) -> int:
    return int(name.removeprefix("sm_"))


def _nearest_of_family(name: str) -> tuple[str | None, str | None]:
    """(family, the known member nearest `name`: highest not above it, else lowest above)."""
    for family, members in catalog()["families"].items():
        if name in members:
            known = sorted((m for m in members if m in catalog()["arch"]), key=_arch_number)
            below = [m for m in known if _arch_number(m) <= _arch_number(name)]
            return family, (below[-1] if below else known[0] if known else None)
    return None, None


@cache
def _own_entry(name: str) -> ArchEntry:
    raw = catalog()["arch"][name]
    base = arch_entry(raw["like"]) if "like" in raw else None
    lists = dict(base.lists) if base else {}
    lists.update({q: tuple(raw[q]) for q in quantity_order() if q in raw})
    caveats = {**(base.caveats if base else {}), **raw.get("caveats", {})}
    return ArchEntry(name, raw["gpus"], bool(raw["verified"]), lists, caveats)


def arch_from_cc(cc: str | None) -> str | None:
    return normalize_arch(cc) if cc else None


# ---- forms: reported value → total over all SMSPs ----------------------------------------

@dataclass
class _Context:
    sm_count: int | None
    quantities: dict[str, Resolved]

    def sms(self, metric: str) -> int:
        if self.sm_count is None:
            raise Unavailable(f"{metric} needs the SM count: the export has none and none "
                              "was passed (sm_count)")
        return self.sm_count

    def quantity(self, name: str, metric: str) -> float:
        got = self.quantities.get(name)
        if got is None or got.value is None:
            raise Unavailable(f"{metric} needs {name}, which is NULL")
        return got.value


def _sum(v: float, m: str, c: _Context) -> tuple[float, str]:
    return v, m


def _smsp_avg(v: float, m: str, c: _Context) -> tuple[float, str]:
    return v * SMSPS_PER_SM * c.sms(m), f"{m} × {SMSPS_PER_SM} × {c.sms(m)} SMs"


def _sm_avg(v: float, m: str, c: _Context) -> tuple[float, str]:
    return v * c.sms(m), f"{m} × {c.sms(m)} SMs"


def _sm_clock_sum(v: float, m: str, c: _Context) -> tuple[float, str]:
    return v * SMSPS_PER_SM, f"{m} × {SMSPS_PER_SM}"


def _sm_clock_avg(v: float, m: str, c: _Context) -> tuple[float, str]:
    return v * c.sms(m) * SMSPS_PER_SM, f"{m} × {c.sms(m)} SMs × {SMSPS_PER_SM}"


def _pct_of_elapsed(v: float, m: str, c: _Context) -> tuple[float, str]:
    return v / 100 * c.quantity("smsp_elapsed_cycles", m), f"{m} ÷ 100 × smsp_elapsed_cycles"


FORMS: dict[str, Callable[[float, str, _Context], tuple[float, str]]] = {
    "sum": _sum, "smsp_avg": _smsp_avg, "sm_avg": _sm_avg, "sm_clock_sum": _sm_clock_sum,
    "sm_clock_avg": _sm_clock_avg, "pct_of_elapsed": _pct_of_elapsed,
}


# ---- resolving one kernel ---------------------------------------------------------------

def resolve_quantities(values: dict[str, float | str], arch: str, sm_count: int | None
                       ) -> dict[str, Resolved]:
    """Every quantity of one kernel from its metric values (NULL values left out)."""
    entry = arch_entry(arch)
    context = _Context(sm_count, {})
    for quantity in quantity_order():
        context.quantities[quantity] = _resolve(entry, quantity, values, context)
    return context.quantities


def _resolve(entry: ArchEntry, quantity: str, values: dict[str, float | str],
             context: _Context) -> Resolved:
    candidates = entry.lists.get(quantity, ())
    blocked: list[str] = []
    for metric in candidates:
        value = values.get(metric)
        if value is None:
            continue
        if isinstance(value, str):  # present, but its unit cannot be read
            blocked.append(value)
            continue
        try:
            total, source = FORMS[catalog()["counters"][metric]["form"]](value, metric, context)
        except Unavailable as exc:
            blocked.append(str(exc))
            continue
        return Resolved(total, _annotate(entry, metric, source), None)
    if blocked:
        return Resolved(None, None, blocked[0])
    return Resolved(None, None, f"none of the {len(candidates)} {entry.label} counters for "
                    f"{quantity} is in the export (preferred: {candidates[0]})"
                    if candidates else f"no {quantity} counter catalogued for {entry.label}")


def _annotate(entry: ArchEntry, metric: str, source: str) -> str:
    notes = [entry.caveats[metric]] if metric in entry.caveats else []
    if entry.note:
        notes.append(entry.note)
    elif not entry.verified:
        notes.append(f"{entry.arch} catalog entry unverified")
    return source + "".join(f" [{n}]" for n in notes)


def levels_of(quantities: dict[str, Resolved]) -> dict[str, Resolved]:
    out = {}
    for level, spec in catalog()["levels"].items():
        num, den = quantities[spec["numerator"]], quantities[spec["denominator"]]
        if num.value is None or den.value is None:
            missing = spec["numerator"] if num.value is None else spec["denominator"]
            reason = (num if num.value is None else den).reason
            out[level] = Resolved(None, None, f"{missing}: {reason}")
        elif den.value == 0:
            out[level] = Resolved(None, None, f"{spec['denominator']} is 0")
        else:
            out[level] = Resolved(num.value / den.value, f"({num.source}) / ({den.source})",
                                  None)
    return out


# ---- tables -----------------------------------------------------------------------------

def kernel_levels(metrics: pa.Table, kernels: pa.Table, arch: str | None,
                  sm_count: int | None) -> pa.Table:
    """One row per kernel of ONE export: quantities and levels with sources / NULL reasons.

    The architecture comes from the kernel's `cc` (the file is the authority), else `arch`;
    the SM count from the kernel's `sm_count`, else `sm_count` (e.g. run devices or
    run.toml). Columns: ncu_id, arch, sm_count, then for every quantity and level X:
    X (float64), X_source, X_null_reason.
    """
    import pyarrow as pa

    ids = kernels.column("ncu_id").to_pylist()
    if len(set(ids)) != len(ids):
        raise ValueError("kernel_levels: ncu_id repeats; pass one export at a time")
    values = _values_by_kernel(metrics)
    rows = [_kernel_row(k, values.get(k["ncu_id"], {}), arch, sm_count)
            for k in kernels.select(["ncu_id", "cc", "sm_count"]).to_pylist()]
    return pa.Table.from_pylist(rows, schema=levels_schema())


def _values_by_kernel(metrics: pa.Table) -> dict[int, dict[str, float | str]]:
    """{ncu_id: {catalogued metric: value, or why its value cannot be used}}; NULL values
    are absent, not zero."""
    import pyarrow as pa
    import pyarrow.compute as pc

    wanted = pa.array(sorted(catalog()["counters"]), pa.string())
    cols = metrics.filter(pc.is_in(metrics.column("metric_name"), value_set=wanted))
    out: dict[int, dict[str, float | str]] = {}
    for ncu_id, name, value, unit in zip(*cols.select(
            ["ncu_id", "metric_name", "value", "reported_unit"]).to_pydict().values()):
        if value is not None:
            out.setdefault(ncu_id, {}).setdefault(name, value if is_known_unit(unit) else (
                f"{name} has unit {unit!r}, which etl/extract/ncu/{UNITS_FILE.name} does not "
                "know (its value is kept unconverted in ncu_metrics)"))
    return out


def _kernel_row(kernel: dict[str, Any], values: dict[str, float | str], arch: str | None,
                sm_count: int | None) -> dict[str, Any]:
    name = arch_from_cc(kernel["cc"]) or (normalize_arch(arch) if arch else None)
    sms = kernel["sm_count"] if kernel["sm_count"] is not None else sm_count
    row: dict[str, Any] = {"ncu_id": kernel["ncu_id"], "arch": name, "sm_count": sms}
    entry = _entry_or_none(name)
    if name is None:
        results = _all_null("architecture unknown: the export has no CC and no arch was passed")
    elif entry is None:
        results = _all_null(f"no catalog entry for {name}, and no [families] list names it")
    else:
        quantities = resolve_quantities(values, name, sms)
        results = {**quantities, **levels_of(quantities)}
    for key, got in results.items():
        row[key], row[f"{key}_source"], row[f"{key}_null_reason"] = (
            got.value, got.source, got.reason)
    return row


def _entry_or_none(name: str | None) -> ArchEntry | None:
    try:
        return arch_entry(name) if name else None
    except KeyError:
        return None


def _all_null(reason: str) -> dict[str, Resolved]:
    return {k: Resolved(None, None, reason) for k in quantity_order() + level_names()}


@cache
def levels_schema() -> pa.Schema:
    import pyarrow as pa

    fields = [pa.field("ncu_id", pa.int64(), False), pa.field("arch", pa.string()),
              pa.field("sm_count", pa.int32())]
    for key in quantity_order() + level_names():
        fields += [pa.field(key, pa.float64()), pa.field(f"{key}_source", pa.string()),
                   pa.field(f"{key}_null_reason", pa.string())]
    return pa.schema(fields)


# ---- profiling command lines ------------------------------------------------------------

def ncu_metric_list(arch: str) -> list[str]:
    """The preferred counter of every quantity on `arch`, plus [profile].always."""
    entry = arch_entry(arch)
    names = [entry.lists[q][0] for q in quantity_order()]
    names += catalog()["profile"]["always"]
    return list(dict.fromkeys(names))


def profile_commands(arch: str, kernels_per_iteration: int | None = None,
                     warmup_iterations: int | None = None,
                     program: str = "python train.py") -> list[str]:
    """ncu command lines that profile one training iteration with the catalog's counters.

    The first is for a program that brackets one step with cudaProfilerStart/Stop
    (torch.cuda.profiler.start()/stop()); the second, given the kernels of one iteration
    and the warm-up iterations to skip, selects that iteration by launch count. Export a
    report to CSV with `ncu --import <report>.ncu-rep --csv --page raw > <report>.csv`.
    """
    name = normalize_arch(arch)
    base = ["ncu", "--metrics", ",".join(ncu_metric_list(name)), "--target-processes", "all"]
    commands = [shlex.join([*base, "--profile-from-start", "off", "-o",
                            f"ncu_{name}_profiler_range"]) + " " + program]
    if (kernels_per_iteration is None) != (warmup_iterations is None):
        raise ValueError("profile_commands: give both kernels_per_iteration and "
                         "warmup_iterations, or neither")
    if kernels_per_iteration is not None and warmup_iterations is not None:
        if kernels_per_iteration <= 0 or warmup_iterations < 0:
            raise ValueError("profile_commands: kernels_per_iteration must be > 0 and "
                             "warmup_iterations >= 0")
        skip = kernels_per_iteration * warmup_iterations
        commands.append(shlex.join([*base, "--launch-skip", str(skip), "--launch-count",
                                    str(kernels_per_iteration), "-o",
                                    f"ncu_{name}_iteration_{warmup_iterations}"]) + " " + program)
    return commands
