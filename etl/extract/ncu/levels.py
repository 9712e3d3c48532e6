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

What the kernel's architecture and SM count are not needed for is computed without them:
an architecture without a catalog entry reads as its family's nearest entry ([families],
flagged unverified); an unknown one reads the architecture-independent lists ([any_arch]);
a per-SM form (x.avg × 4 × SMs) whose SM count is unknown still gives a level over another
per-SM form, the count cancelling (smsp__cycles_active.avg / smsp__cycles_elapsed.avg).
"""
from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cache
from typing import TYPE_CHECKING, Any

from etl.extract.ncu.export import UNITS_FILE, catalog, is_known_unit

if TYPE_CHECKING:
    import pyarrow as pa

SMSPS_PER_SM = 4  # every SM since Volta has four sub-partitions (paper §III)


@dataclass(frozen=True)
class ArchEntry:
    arch: str                        # the catalog entry read ("any": architecture-independent)
    gpus: str
    verified: bool
    lists: dict[str, tuple[str, ...]]
    caveats: dict[str, str]
    read_as: str | None = None       # the architecture it stands in for (no entry of its own)
    family: str | None = None
    unknown: str | None = None       # "any" only: what is unknown, said in every *_source
    others: dict[str, tuple[str, ...]] = field(default_factory=dict)  # "any": arch-dependent

    @property
    def note(self) -> str | None:
        """What every value computed from a stand-in entry carries in its *_source."""
        if self.unknown:
            return self.unknown
        return f"unverified: {self.read_as} read as {self.arch}" if self.read_as else None

    @property
    def label(self) -> str:
        if self.unknown:
            return "architecture-independent"
        return f"{self.arch} (read for {self.read_as})" if self.read_as else self.arch


@dataclass(frozen=True)
class Term:
    """One counter's reading of a quantity: a total over all SMSPs or, `per_sm`, that total
    divided by the SM count (a per-SM form whose SM count is not known)."""

    value: float
    source: str
    per_sm: bool = False


@dataclass(frozen=True)
class Resolved:
    """A quantity for one kernel: value with its source, or NULL with the reason; `per_sm`
    a per-SM reading, usable in a ratio with another per-SM reading (the SM count cancels)."""

    value: float | None
    source: str | None
    reason: str | None
    per_sm: Term | None = None


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


@cache
def any_arch_entry(arch: str | None = None) -> ArchEntry:
    """The architecture-independent reading ([any_arch]) for a kernel whose architecture is
    unknown (`arch` None) or in no family: counters read the same on every architecture;
    the caveats any architecture attaches to one are named with those architectures."""
    lists = {q: tuple(catalog()["any_arch"][q]) for q in quantity_order()}
    entries = [_own_entry(a) for a in arch_names()]
    others = {q: tuple(sorted({m for e in entries for m in e.lists[q]} - set(lists[q])))
              for q in quantity_order()}
    unknown = ("architecture unknown" if arch is None else
               f"{arch} has no catalog entry or family: architecture-independent counters")
    return ArchEntry("any", "any", False, lists, _caveats_by_arch(entries, lists), None,
                     None, unknown, others)


def _caveats_by_arch(entries: list[ArchEntry], lists: dict[str, tuple[str, ...]]
                     ) -> dict[str, str]:
    """{counter: "on sm_80, sm_86: includes HFMA2.MMA; on ..."} for the counters listed."""
    texts: dict[str, dict[str, list[str]]] = {}
    for entry in entries:
        for metric, text in entry.caveats.items():
            texts.setdefault(metric, {}).setdefault(text, []).append(entry.arch)
    wanted = {m for ms in lists.values() for m in ms}
    return {m: "; ".join(f"on {', '.join(archs)}: {text}" for text, archs in by_text.items())
            for m, by_text in texts.items() if m in wanted}


# ---- forms: reported value → total over all SMSPs ----------------------------------------

@dataclass
class _Context:
    sm_count: int | None
    quantities: dict[str, Resolved]

    def times_sms(self, value: float, before: str, after: str = "") -> Term:
        """value × the SM count; per SM (the count left symbolic) when it is not known."""
        if self.sm_count is None:
            return Term(value, f"{before} × SMs{after}", per_sm=True)
        return Term(value * self.sm_count, f"{before} × {self.sm_count} SMs{after}")

    def elapsed(self, metric: str) -> list[Term]:
        got = self.quantities.get("smsp_elapsed_cycles")
        terms = [] if got is None else [t for t in (
            Term(got.value, "") if got.value is not None else None, got.per_sm) if t]
        if not terms:
            raise Unavailable(f"{metric} needs smsp_elapsed_cycles, which is NULL")
        return terms


def _sum(v: float, m: str, c: _Context) -> list[Term]:
    return [Term(v, m)]


def _smsp_avg(v: float, m: str, c: _Context) -> list[Term]:
    return [c.times_sms(v * SMSPS_PER_SM, f"{m} × {SMSPS_PER_SM}")]


def _sm_avg(v: float, m: str, c: _Context) -> list[Term]:
    return [c.times_sms(v, m)]


def _sm_clock_sum(v: float, m: str, c: _Context) -> list[Term]:
    return [Term(v * SMSPS_PER_SM, f"{m} × {SMSPS_PER_SM}")]


def _sm_clock_avg(v: float, m: str, c: _Context) -> list[Term]:
    return [c.times_sms(v * SMSPS_PER_SM, m, f" × {SMSPS_PER_SM}")]


def _pct_of_elapsed(v: float, m: str, c: _Context) -> list[Term]:
    """A percent of peak over elapsed cycles: a total with a total elapsed, per SM with a
    per-SM one (then its ratio to elapsed cycles is the percent itself)."""
    return [Term(v / 100 * t.value, f"{m} ÷ 100 × smsp_elapsed_cycles", t.per_sm)
            for t in c.elapsed(m)]


FORMS: dict[str, Callable[[float, str, _Context], list[Term]]] = {
    "sum": _sum, "smsp_avg": _smsp_avg, "sm_avg": _sm_avg, "sm_clock_sum": _sm_clock_sum,
    "sm_clock_avg": _sm_clock_avg, "pct_of_elapsed": _pct_of_elapsed,
}


# ---- resolving one kernel ---------------------------------------------------------------

def resolve_quantities(values: dict[str, float | str], arch: str, sm_count: int | None
                       ) -> dict[str, Resolved]:
    """Every quantity of one kernel from its metric values (NULL values left out)."""
    return _resolve_all(arch_entry(arch), values, sm_count)


def _resolve_all(entry: ArchEntry, values: dict[str, float | str], sm_count: int | None
                 ) -> dict[str, Resolved]:
    context = _Context(sm_count, {})
    for quantity in quantity_order():
        context.quantities[quantity] = _resolve(entry, quantity, values, context)
    return context.quantities


def _resolve(entry: ArchEntry, quantity: str, values: dict[str, float | str],
             context: _Context) -> Resolved:
    """The first candidate that gives a total; without the SM count also the first that
    gives a per-SM reading. NULL with the first problem met, in order of preference."""
    candidates = entry.lists.get(quantity, ())
    problems: list[str] = []
    total = per_sm = None
    for metric in candidates:
        for term in _terms(metric, values.get(metric), context, problems):
            term = replace(term, source=_annotate(entry, metric, term.source))
            if term.per_sm:
                per_sm = per_sm or term
                problems.append(f"{metric} needs the SM count, which the export does not "
                                "give: set sm_count in run.toml (or put the run's trace "
                                "beside the export)")
            else:
                total = total or term
        if total is not None and (per_sm is not None or context.sm_count is not None):
            break
    if total is not None:
        return Resolved(total.value, total.source, None, per_sm)
    reason = problems[0] if problems else _absent(entry, quantity, candidates, values)
    return Resolved(None, None, reason, per_sm)


def _terms(metric: str, value: float | str | None, context: _Context,
           problems: list[str]) -> list[Term]:
    if value is None:
        return []
    if isinstance(value, str):  # present, but its unit cannot be read
        problems.append(value)
        return []
    try:
        return FORMS[catalog()["counters"][metric]["form"]](value, metric, context)
    except Unavailable as exc:
        problems.append(str(exc))
        return []


def _absent(entry: ArchEntry, quantity: str, candidates: tuple[str, ...],
            values: dict[str, float | str]) -> str:
    dependent = [m for m in entry.others.get(quantity, ()) if m in values]
    if dependent and entry.read_as is None and entry.unknown == "architecture unknown":
        return (f"{dependent[0]} reads differently by architecture and the export does not "
                "say its own: set compute_capability in run.toml (e.g. compute_capability = "
                '"7.0" for a V100)')
    if dependent:
        return (f"{dependent[0]} reads differently by architecture: {entry.unknown}; add its "
                "[arch.*] entry or family in etl/extract/ncu/metrics.toml")
    if not candidates:
        return f"no {quantity} counter catalogued for {entry.label}"
    return (f"none of the {len(candidates)} {entry.label} counters for {quantity} is in the "
            f"export (preferred: {candidates[0]})")


def _annotate(entry: ArchEntry, metric: str, source: str) -> str:
    notes = [entry.note] if entry.note else []
    if metric in entry.caveats:
        notes.append(entry.caveats[metric])
    if not entry.verified and not entry.note:
        notes.append(f"{entry.arch} catalog entry unverified")
    return source + "".join(f" [{n}]" for n in notes)


def levels_of(quantities: dict[str, Resolved]) -> dict[str, Resolved]:
    out = {}
    for level, spec in catalog()["levels"].items():
        num, den = quantities[spec["numerator"]], quantities[spec["denominator"]]
        ratio = _ratio(num, den)
        if ratio is None:
            name = _missing(spec, num, den)
            out[level] = Resolved(None, None, f"{name}: {quantities[name].reason}")
        elif ratio[1] == 0:
            out[level] = Resolved(None, None, f"{spec['denominator']} is 0")
        else:
            out[level] = Resolved(ratio[0] / ratio[1], ratio[2], None)
    return out


def _missing(spec: dict[str, str], num: Resolved, den: Resolved) -> str:
    """The quantity to blame: one with no reading at all first, else one without a total."""
    def nothing(got: Resolved) -> bool:
        return got.value is None and got.per_sm is None

    if nothing(num) or (not nothing(den) and num.value is None):
        return spec["numerator"]
    return spec["denominator"]


def _ratio(num: Resolved, den: Resolved) -> tuple[float, float, str] | None:
    """Two totals, else two per-SM readings (whose unknown SM count cancels)."""
    if num.value is not None and den.value is not None:
        return num.value, den.value, f"({num.source}) / ({den.source})"
    if num.per_sm is not None and den.per_sm is not None:
        return (num.per_sm.value, den.per_sm.value, f"({num.per_sm.source}) / "
                f"({den.per_sm.source}) [the SM count cancels]")
    return None


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
    name = _arch_or_none(kernel["cc"]) or (normalize_arch(arch) if arch else None)
    sms = kernel["sm_count"] if kernel["sm_count"] is not None else sm_count
    row: dict[str, Any] = {"ncu_id": kernel["ncu_id"], "arch": name, "sm_count": sms}
    quantities = _resolve_all(_entry_for(name), values, sms)
    results = {**quantities, **levels_of(quantities)}
    for key, got in results.items():
        row[key], row[f"{key}_source"], row[f"{key}_null_reason"] = (
            got.value, got.source, got.reason)
    return row


def _arch_or_none(cc: str | None) -> str | None:
    """The architecture of a compute capability; None for one that is not X.Y."""
    try:
        return arch_from_cc(cc)
    except ValueError:
        return None


def _entry_for(name: str | None) -> ArchEntry:
    """The catalog entry (or its family's stand-in); the architecture-independent reading
    when the architecture is unknown or in no family."""
    if name is None:
        return any_arch_entry()
    try:
        return arch_entry(name)
    except KeyError:
        return any_arch_entry(name)


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
    """The preferred counter of every quantity on `arch`, plus [profile].always, plus the
    roofline's FLOP and DRAM counters (roofline_counters)."""
    entry = arch_entry(arch)
    names = [entry.lists[q][0] for q in quantity_order()]
    names += catalog()["profile"]["always"]
    names += roofline_counters(entry.read_as or entry.arch)
    return list(dict.fromkeys(names))


def roofline_counters(arch: str) -> list[str]:
    """The counters of the [roofline] table ncu is asked for on `arch`: every vector FLOP
    counter, the tensor paths' where the architecture has them, the first DRAM set."""
    table = catalog()["roofline"]
    names = [c for counters in table["vector"].values() for c in counters]
    if normalize_arch(arch) not in table["no_tensor_paths"]:
        names += [c for counters in table["tensor"].values() for c in counters]
    return names + list(table["dram_bytes"][0])


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
