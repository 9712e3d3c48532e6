"""Table schemas kept as data in schemas/*.toml, turned into pyarrow schemas here."""
from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

from etl.core.resources import data_dir

if TYPE_CHECKING:
    import pyarrow as pa

SCHEMA_DIR = data_dir("schemas")
TABLES = ("runs", "devices", "iterations", "host_events", "kernels", "anomalies",
          "ncu_kernels", "ncu_metrics", "ncu_levels", "ncu_rules", "kernel_match",
          "gpu_samples", "memory_events", "syncs", "collective_ops")
# tables computed from a run's tables after its publish, on demand (etl critical-path,
# etl costs): one file per run publish under <warehouse>/derived/<publish_id>/, read with
# the run's publish
DERIVED_TABLES = ("critical_path_segments", "kernel_costs")
ALL_TABLES = TABLES + DERIVED_TABLES


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    nullable: bool
    description: str
    unit: str | None
    distinct: bool = False  # mostly distinct values (ids, start times): no dictionary


@dataclass(frozen=True)
class TableSchema:
    table: str
    grain: str
    description: str
    columns: tuple[Column, ...]

    def arrow(self) -> pa.Schema:
        import pyarrow as pa

        return pa.schema([pa.field(c.name, parse_type(c.type), c.nullable) for c in self.columns])

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    def dictionary_columns(self) -> list[str]:
        """Columns written with dictionary encoding: all but those marked `distinct`.
        Names, categories and small integers (devices, streams, iterations, durations in
        whole µs) repeat; on ids and start times a dictionary is built and then dropped,
        which cost host_events' write of a 1 GB trace 0.9 s (1.62 s against 0.72 s) and
        made the file twice as large."""
        # Parquet names a column by its leaf path: a list<T> column's values are at
        # name.list.element (the name alone would leave a list of names unencoded)
        return [f"{c.name}.list.element" if c.type.strip().startswith("list<") else c.name
                for c in self.columns if not c.distinct]


@cache
def table_schema(table: str) -> TableSchema:
    with open(SCHEMA_DIR / f"{table}.toml", "rb") as fh:
        doc = tomllib.load(fh)
    columns = tuple(_column(c) for c in doc["columns"])
    return TableSchema(doc["table"], doc["grain"], doc["description"], columns)


def _column(raw: dict[str, Any]) -> Column:
    return Column(raw["name"], raw["type"], bool(raw.get("nullable", True)),
                  raw["description"], raw.get("unit"), bool(raw.get("distinct", False)))


_SIMPLE = {
    "string": "string", "int32": "int32", "int64": "int64", "bool": "bool_",
    "float64": "float64", "double": "float64",
}


def parse_type(text: str) -> pa.DataType:
    """Parse the small type language of schemas/: int64, list<T>, struct<a: T, ...>."""
    import pyarrow as pa

    text = text.strip()
    if text in _SIMPLE:
        return getattr(pa, _SIMPLE[text])()
    if text.startswith("timestamp["):
        unit, _, tz = text[len("timestamp["):-1].partition(",")
        return pa.timestamp(unit.strip(), tz=tz.split("=")[1].strip() if tz else None)
    if text.startswith("list<") and text.endswith(">"):
        return pa.list_(parse_type(text[5:-1]))
    if text.startswith("struct<") and text.endswith(">"):
        fields = [f.split(":", 1) for f in _split_top(text[7:-1])]
        return pa.struct([pa.field(n.strip(), parse_type(t)) for n, t in fields])
    raise ValueError(f"schemas/: unknown column type {text!r}")


def _split_top(text: str) -> list[str]:
    """Split on commas that are not nested inside <...>."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += ch == "<"
        depth -= ch == ">"
        if ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p for p in parts if p.strip()]


def conform(table: str, data: pa.Table) -> pa.Table:
    """Cast to the declared schema, in declared column order; fail loudly on a mismatch."""
    schema = table_schema(table).arrow()
    missing = set(schema.names) - set(data.column_names)
    extra = set(data.column_names) - set(schema.names)
    if missing or extra:
        raise ValueError(f"{table}: columns differ from schemas/{table}.toml: "
                         f"missing {sorted(missing)}, unexpected {sorted(extra)}")
    return data.select(schema.names).cast(schema)
