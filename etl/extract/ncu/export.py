"""Nsight Compute (ncu) exports → Arrow tables: sniffing, units, kernel identity, merging.

Every ncu input ends up as one `NcuExport`: a `kernels` table (one row per profiled launch)
and a long `metrics` table (one row per launch and metric, value in a canonical unit, the
reported text and unit kept verbatim). The format readers live beside this module:
`ncu_csv` (details page, raw page; refuses the human-readable page) and `ncu_rep` (binary
report through NVIDIA's optional `ncu_report` package). Unit spellings are data
(`units.toml`), and so is which metric fills which kernel column (`[kernel_fields]` of
`metrics.toml`).
"""
from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from etl.core.errors import InputError, name_text
from etl.core.kernel_names import keys_of, mangled_base

if TYPE_CHECKING:
    import pyarrow as pa

UNITS_FILE = Path(__file__).with_name("units.toml")
CATALOG_FILE = Path(__file__).with_name("metrics.toml")
EXTRA_HINT = "pip install 'gpu-util-warehouse[ncu]'"
Anomaly = tuple[str, int | None, str]

KERNEL_COLUMNS = ("ncu_id", "kernel_name", "kernel_name_demangled", "kernel_name_mangled",
                  "kernel_base_name", "grid_x", "grid_y", "grid_z", "block_x", "block_y",
                  "block_z", "device", "device_name", "cc", "sm_count", "context_id",
                  "stream_id", "process_id", "process_name", "host_name", "duration_ns",
                  "kernel_time_text", "metric_count")
METRIC_COLUMNS = ("ncu_id", "metric_name", "section_name", "value", "unit",
                  "reported_value_text", "reported_unit")
RULE_COLUMNS = ("ncu_id", "rule_index", "section_name", "rule_name", "rule_type",
                "rule_description", "estimated_speedup_type", "estimated_speedup",
                "estimated_speedup_text")
# Value texts ncu prints for a metric it could not collect: NULL with an anomaly, not an error.
NOT_AVAILABLE = frozenset(("n/a", "(!) n/a", "N/A", "nan", "-nan", "inf", "-inf", "NaN"))


# ---- units ------------------------------------------------------------------------------

@cache
def unit_table() -> dict[str, Any]:
    with open(UNITS_FILE, "rb") as fh:
        return tomllib.load(fh)


@cache
def catalog() -> dict[str, Any]:
    with open(CATALOG_FILE, "rb") as fh:
        return tomllib.load(fh)


class UnknownUnit(ValueError):
    """A unit spelling missing from units.toml."""


@cache
def convert_unit(reported: str) -> tuple[str | None, Decimal]:
    """Reported unit → (canonical unit or None when dimensionless, factor to multiply by)."""
    table = unit_table()
    text = reported.strip()
    if text in table["units"]:
        entry = table["units"][text]
        return entry["unit"] or None, Decimal(entry["factor"])
    num, sep, den = text.partition("/")
    if sep and num in table["units"] and den in table["per"]:
        top, bottom = table["units"][num], table["per"][den]
        name = f"{top['unit'] or '1'}/{bottom['unit']}"
        return table["renamed"].get(name, name), Decimal(top["factor"]) * Decimal(bottom["factor"])
    raise UnknownUnit(f"unit {reported!r} is not in etl/extract/ncu/{UNITS_FILE.name}")


# ---- values -----------------------------------------------------------------------------

# --print-metric-instances values|details: the metric's value, then its instances in
# parentheses ("12 (FFMA: 8; IMAD: 4)", "0.75 (0.5; 1; 0.75)"): the value is the first number
_INSTANCES = re.compile(r"\s+\([^()]*\)$")
_NUMBER = re.compile(r"[+-]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d*)?(?:[eE][+-]?\d+)?|[+-]?\.\d+")


def parse_number(text: str) -> Decimal | None:
    """A number as ncu prints it ("5,318,969,728.00", "0.43", "1e+09"); None when not one."""
    stripped = text.strip()
    if not _NUMBER.fullmatch(stripped):
        return None
    try:
        return Decimal(stripped.replace(",", ""))
    except InvalidOperation:  # pragma: no cover - the pattern admits only valid decimals
        return None


def parse_int(text: str | None) -> int | None:
    """An integer identity field; None when empty; ValueError when not an integer."""
    if text is None or not text.strip():
        return None
    number = parse_number(text)
    if number is None or number != number.to_integral_value():
        raise ValueError(f"{text!r} is not an integer")
    return int(number)


_DIMS = re.compile(r"\(\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*\)")


def parse_dims(text: str | None) -> tuple[int, int, int] | None:
    """"(32, 32, 1)" → (32, 32, 1); None for anything else."""
    match = _DIMS.fullmatch(text.strip()) if text else None
    return (int(match[1]), int(match[2]), int(match[3])) if match else None


# ---- kernel names -----------------------------------------------------------------------

def name_forms(name: str | None) -> tuple[str | None, str | None, str | None]:
    """(demangled, mangled, base) derivable from one reported kernel name.

    The base is the matcher's (etl/core/kernel_names.py), so the stored base_name is the key the
    matching compares: from a mangled name ("_Z...") the Itanium source name of the
    function; from a demangled signature ("void ns::k<int>(float *)") the name without
    return type, scopes, template arguments and parameters; a bare identifier is its own
    base and its demangled form is unknown (ncu's function-only base, or extern "C").
    """
    if not name:
        return None, None, None
    if name.startswith("_Z"):
        return None, name, mangled_base(name)
    if any(ch in name for ch in "(<: "):
        return name, None, keys_of(name).base
    return None, None, name


# ---- accumulating rows ------------------------------------------------------------------

@dataclass
class MetricRows:
    """The long metrics table of one export, built row by row with unit conversion.

    A unit missing from units.toml never refuses the export: the value is kept as reported
    (unconverted) with the unit verbatim in `unit`, and one anomaly per unit says so. Text
    under a unit is kept as text (value NULL) unless a level needs the metric.
    """

    path: Path
    columns: dict[str, list[Any]] = field(
        default_factory=lambda: {c: [] for c in METRIC_COLUMNS})
    anomalies: list[Anomaly] = field(default_factory=list)
    unknown_units: dict[str, list[str]] = field(default_factory=dict)  # unit → metric names

    def add(self, ncu_id: int, name: str, section: str | None, text: str | None,
            reported_unit: str, place: str, typed_text: bool = False) -> None:
        """One metric row; `typed_text` when the source itself says the value is a string
        (.ncu-rep), so a non-number is kept as text even under a unit."""
        unit, factor = self.unit(reported_unit, name)
        value = None if typed_text else self.value(ncu_id, name, text, unit, factor, place)
        row = (ncu_id, name, section, value, unit, text, reported_unit)
        for column, item in zip(METRIC_COLUMNS, row):
            self.columns[column].append(item)

    def unit(self, reported: str, name: str) -> tuple[str | None, Decimal]:
        try:
            return convert_unit(reported)
        except UnknownUnit:
            self.unknown_units.setdefault(reported, []).append(name)
            return reported, Decimal(1)

    def value(self, ncu_id: int, name: str, text: str | None, unit: str | None,
              factor: Decimal, place: str) -> float | None:
        stripped = (text or "").strip()
        number = parse_number(stripped)
        if number is None and stripped.endswith(")"):
            number = parse_number(_INSTANCES.sub("", stripped))
        if number is not None:
            return float(number * factor)
        if stripped in NOT_AVAILABLE or (not stripped and unit is not None):
            self.anomalies.append(("ncu_metric_not_available", ncu_id,
                                   f"{name} = {text!r}: value NULL"))
            return None
        if unit is not None and name in catalog()["counters"]:
            raise InputError(self.path, f"{name} value {stripped[:60]!r} is not a number "
                             f"(unit {unit!r})", place,
                             "re-export the report; a counter the levels need must be numeric")
        if unit is not None:
            self.anomalies.append(("ncu_value_not_a_number", ncu_id, f"{name} = "
                                   f"{stripped[:60]!r} under unit {unit!r}: value NULL, "
                                   "text kept"))
        return None  # a text-valued metric (e.g. a cache configuration): text kept

    def finish(self) -> list[Anomaly]:
        """Anomalies of the whole export; refused when no metric can be interpreted."""
        rows = len(self.columns["ncu_id"])
        unknown = sum(len(names) for names in self.unknown_units.values())
        if rows and unknown == rows:
            units = ", ".join(repr(u) for u in sorted(self.unknown_units))
            raise InputError(self.path, f"none of its {rows} metric values has a unit "
                             f"etl/extract/ncu/{UNITS_FILE.name} knows ({units})", None,
                             "add the spellings there (canonical unit and factor)")
        return self.anomalies + [_unknown_unit(u, n) for u, n in self.unknown_units.items()]


def _unknown_unit(unit: str, names: list[str]) -> Anomaly:
    shown = list(dict.fromkeys(names))
    listed = ", ".join(shown[:5]) + (", ..." if len(shown) > 5 else "")
    return ("ncu_unknown_unit", None,
            f"unit {unit!r} is not in etl/extract/ncu/{UNITS_FILE.name}: {len(names)} metric "
            f"values kept as reported (unconverted, unit {unit!r}): {listed}; add the "
            "spelling there to convert them")


def is_known_unit(reported: str | None) -> bool:
    try:
        convert_unit(reported or "")
    except UnknownUnit:
        return False
    return True


@dataclass
class RuleRows:
    """The rule results of one export (ncu's guided analysis), numbered per kernel."""

    columns: dict[str, list[Any]] = field(
        default_factory=lambda: {c: [] for c in RULE_COLUMNS})
    anomalies: list[Anomaly] = field(default_factory=list)
    counts: dict[int, int] = field(default_factory=dict)  # rules so far, per kernel

    def add(self, ncu_id: int, section: str | None, name: str, kind: str | None,
            description: str | None, speedup_type: str | None,
            speedup_text: str | None) -> None:
        index = self.counts.get(ncu_id, 0)
        self.counts[ncu_id] = index + 1
        speedup = parse_number(speedup_text or "")
        if speedup is None and (speedup_text or "").strip():
            self.anomalies.append(("ncu_rule_speedup_not_a_number", ncu_id,
                                   f"rule {name}: estimated speedup {speedup_text!r} is not a "
                                   "number; NULL, text kept"))
        row = (ncu_id, index, section or None, name, kind or None, description or None,
               speedup_type or None, None if speedup is None else float(speedup), speedup_text)
        for column, item in zip(RULE_COLUMNS, row):
            self.columns[column].append(item)


@dataclass
class NcuExport:
    """One ncu export (several one-metric files of one session merge into one)."""

    paths: list[Path]
    format: str
    kernels: pa.Table
    metrics: pa.Table
    anomalies: list[Anomaly]
    path_rows: list[int] = field(default_factory=list)  # metric rows read, per path
    rules: pa.Table = field(default_factory=lambda: ncu_schema("ncu_rules").empty_table())


def ncu_schema(table: str) -> pa.Schema:
    """schemas/<table>.toml without the run_id / publish_id / ncu_source_id the loader adds."""
    from etl.core.schema import table_schema

    schema = table_schema(table).arrow()
    for column in ("ncu_source_id", "publish_id", "run_id"):
        schema = schema.remove(schema.get_field_index(column))
    return schema


def build_export(paths: list[Path], fmt: str, kernels: dict[int, dict[str, Any]],
                 metrics: MetricRows, anomalies: list[Anomaly],
                 rules: RuleRows | None = None) -> NcuExport:
    """Tables of one export; kernel columns the export's own columns left NULL are filled
    from metrics named in [kernel_fields]."""
    import pyarrow as pa

    rules = rules or RuleRows()
    more = metrics.finish() + rules.anomalies
    metric_table = pa.table(metrics.columns, schema=ncu_schema("ncu_metrics"))
    fill_kernels_from_metrics(kernels, metric_table)
    rows = [kernels[k] for k in sorted(kernels)]
    kernel_table = pa.table({c: [r.get(c) for r in rows] for c in KERNEL_COLUMNS},
                            schema=ncu_schema("ncu_kernels"))
    return NcuExport(paths, fmt, kernel_table, metric_table, anomalies + more,
                     [metric_table.num_rows] if len(paths) == 1 else [],
                     pa.table(rules.columns, schema=ncu_schema("ncu_rules")))


def fill_kernels_from_metrics(kernels: dict[int, dict[str, Any]], metrics: pa.Table) -> None:
    fields = catalog()["kernel_fields"]
    wanted = {m for names in fields.values() for m in names}
    found: dict[tuple[int, str], tuple[float | None, str | None]] = {}
    counts: dict[int, int] = {}
    cols = metrics.select(["ncu_id", "metric_name", "value", "reported_value_text",
                           "reported_unit"]).to_pydict()
    for ncu_id, name, value, text, unit in zip(*cols.values()):
        counts[ncu_id] = counts.get(ncu_id, 0) + 1
        if name in wanted:  # a value in a unit units.toml does not know is not converted
            found.setdefault((ncu_id, name), (value if is_known_unit(unit) else None, text))
    for ncu_id, row in kernels.items():
        row["metric_count"] = counts.get(ncu_id, 0)
        for column, names in fields.items():
            hit = next((found[(ncu_id, n)] for n in names if (ncu_id, n) in found), None)
            if hit is not None:
                _set_field(row, column, hit)
        _finish_kernel(row)


_TEXT_FIELDS = frozenset(("device", "device_name"))


def _set_field(row: dict[str, Any], column: str, hit: tuple[float | None, str | None]) -> None:
    """Fill a NULL kernel column from a metric (identity columns of the export win)."""
    value, text = hit
    if row.get(column) is not None:
        return
    if column in _TEXT_FIELDS:
        row[column] = text if value is None or text is None else _int_text(value, text)
    elif value is not None:
        row[column] = int(round(value))


def _int_text(value: float, text: str) -> str:
    return str(int(value)) if float(value).is_integer() else text


def _finish_kernel(row: dict[str, Any]) -> None:
    major, minor = row.pop("cc_major", None), row.pop("cc_minor", None)
    if row.get("cc") is None and major is not None and minor is not None:
        row["cc"] = f"{major}.{minor}"
    demangled, mangled, base = name_forms(row.get("kernel_name"))
    for column, derived in (("kernel_name_demangled", demangled),
                            ("kernel_name_mangled", mangled), ("kernel_base_name", base)):
        if row.get(column) is None:
            row[column] = derived


# ---- merging one-metric-per-file exports ------------------------------------------------

def merge_split_exports(exports: list[NcuExport]) -> list[NcuExport]:
    """Merge details exports that are one session split by metric.

    Candidates share format, process and host name and have disjoint metric names. They
    merge when their (ID, kernel name) sequences are identical; otherwise they stay apart
    with an anomaly saying where the sequences first differ.
    """
    out: list[NcuExport] = []
    for export in exports:
        partner = next((o for o in out if _siblings(o, export)), None)
        if partner is None:
            out.append(export)
            continue
        mismatch = _sequence_mismatch(partner, export)
        if mismatch is None:
            out[out.index(partner)] = _merge(partner, export)
        else:
            note = (f"not merged with {', '.join(p.name for p in partner.paths)}: {mismatch}; "
                    "one-metric files of different runs cannot be joined by ID")
            export.anomalies.append(("ncu_not_merged", None, note))
            out.append(export)
    return out


def _identity(export: NcuExport, column: str) -> set[Any]:
    return set(export.kernels.column(column).to_pylist())


def _siblings(a: NcuExport, b: NcuExport) -> bool:
    if a.format != "ncu_details_csv" or b.format != a.format:
        return False
    same_process = all(_identity(a, c) == _identity(b, c) for c in ("process_name", "host_name"))
    disjoint = not (set(a.metrics.column("metric_name").to_pylist())
                    & set(b.metrics.column("metric_name").to_pylist()))
    return same_process and disjoint


def _sequence_mismatch(a: NcuExport, b: NcuExport) -> str | None:
    left = a.kernels.select(["ncu_id", "kernel_name"]).to_pylist()
    right = b.kernels.select(["ncu_id", "kernel_name"]).to_pylist()
    if len(left) != len(right):
        return f"{len(left)} vs {len(right)} kernels"
    diff = [x["ncu_id"] for x, y in zip(left, right) if x != y]
    if diff:
        return f"kernel names differ at {len(diff)} of {len(left)} IDs (first: ID {diff[0]})"
    return None


def _merge(a: NcuExport, b: NcuExport) -> NcuExport:
    """Metrics concatenated; identity columns that disagree become NULL with an anomaly."""
    import pyarrow as pa

    anomalies = a.anomalies + b.anomalies
    left, right = a.kernels.to_pylist(), b.kernels.to_pylist()
    for column in KERNEL_COLUMNS[1:]:
        if column == "metric_count":
            continue
        differ = [x["ncu_id"] for x, y in zip(left, right) if x[column] != y[column]]
        for x, y in zip(left, right):
            x[column] = _agree(x[column], y[column])
        if differ:
            anomalies.append(("ncu_merge_conflict", None,
                              f"{column} differs between {name_text(a.paths[-1].name)} and "
                              f"{name_text(b.paths[0].name)} for {len(differ)} kernels (first ID "
                              f"{differ[0]}); set NULL where the files disagree"))
    for x, y in zip(left, right):
        x["metric_count"] += y["metric_count"]
    kernels = pa.Table.from_pylist(left, schema=a.kernels.schema)
    metrics = pa.concat_tables([a.metrics, b.metrics]).sort_by(
        [("ncu_id", "ascending")])
    return NcuExport(a.paths + b.paths, a.format, kernels, metrics, anomalies,
                     a.path_rows + b.path_rows, _merged_rules(a, b))


def _merged_rules(a: NcuExport, b: NcuExport) -> pa.Table:
    """Both files' rules, b's numbered after a's for each kernel."""
    import pyarrow as pa
    import pyarrow.compute as pc

    counts: dict[int, int] = {}
    for ncu_id in a.rules.column("ncu_id").to_pylist():
        counts[ncu_id] = counts.get(ncu_id, 0) + 1
    shift = pa.array([counts.get(i, 0) for i in b.rules.column("ncu_id").to_pylist()],
                     pa.int32())
    index = b.rules.schema.get_field_index("rule_index")
    moved = b.rules.set_column(index, "rule_index", pc.add(b.rules.column(index), shift)
                               ).cast(b.rules.schema)
    return pa.concat_tables([a.rules, moved]).sort_by(
        [("ncu_id", "ascending"), ("rule_index", "ascending")])


def _agree(x: Any, y: Any) -> Any:
    if x is None:
        return y
    return x if y is None or x == y else None
