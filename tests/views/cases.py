"""Views tested as data: input rows per table, expected rows per view, no ingest.

A case file `tests/views/cases/<name>.toml` holds `[[case]]` entries (the shape of SQLMesh's
`examples/sushi/tests/*.yaml` and of Perfetto's diff tests):

    [[case]]
    name = "two kernels overlap: busy is their union"
    view = "gpu_utilization"            # a stable name (its newest version) or a _vN name
    defaults = { run_id = "r", publish_id = "p", source_id = 0 }   # for absent columns
    [case.given]
    iterations = '''
    iteration, start_ns, end_ns, boundary,     complete
    1,         0,        100000, ProfilerStep, true
    '''
    [case.expect]
    rows = '''
    iteration, window_ns, busy_ns, gpu_util
    1,         100000,    45000,   0.45
    '''

A file's own `[given]` tables and `defaults` serve each of its cases (a case's own `given`
replaces a table of them, its `defaults` add to them). Input tables are CSV text (a header
of column names, cells typed by `schemas/<table>.toml` through Arrow's casts) or, for list
and struct columns, TOML arrays of inline tables. A column a table's rows leave out takes
the case's `defaults` value when the case has one, else NULL; a table the case does not
give is empty. An empty cell is NULL (in expected rows, so is `NULL`).

The expected rows name the columns compared (`SELECT <those> FROM <view>`, optionally
`where = "..."`) and are compared as a multiset, whatever the order: an int cell must
equal, a float cell matches to 1e-12 relative (`a/b` writes a ratio worked by hand), a
bool cell is true or false, a string is compared as written.

The runner lays the given rows out as tables of an in-memory DuckDB, creates the GPU
catalog's relations (etl.core.gpu_peaks) and the views the case's view reads, in
creation order (etl.core.sql_files.needed_by), and runs the SELECT: milliseconds a case.
"""
from __future__ import annotations

import csv
import io
import math
import tomllib
from dataclasses import dataclass, field
from decimal import Decimal
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

    from etl.core.sql_files import View

CASES_DIR = Path(__file__).parent / "cases"
REL_TOLERANCE = 1e-12


@dataclass(frozen=True)
class Case:
    file: str
    name: str
    view: str
    given: dict[str, Any]
    expect: str | list[dict[str, Any]]
    defaults: dict[str, Any] = field(default_factory=dict)
    where: str | None = None

    @property
    def id(self) -> str:
        return f"{self.file}: {self.name}"


def load_cases(folder: Path = CASES_DIR) -> list[Case]:
    """Every case of every file in `folder`, in file order."""
    cases = []
    for path in sorted(folder.glob("*.toml")):
        with open(path, "rb") as fh:
            doc = tomllib.load(fh)
        unknown = set(doc) - {"case", "given", "defaults"}
        if unknown:
            raise ValueError(f"{path}: unknown keys {sorted(unknown)}")
        for raw in doc.get("case", []):
            unknown = set(raw) - {"name", "view", "given", "expect", "defaults"}
            if unknown:
                raise ValueError(f"{path}: case {raw.get('name')!r}: unknown keys {unknown}")
            expect = raw["expect"]
            given = {**doc.get("given", {}), **raw.get("given", {})}
            defaults = {**doc.get("defaults", {}), **raw.get("defaults", {})}
            cases.append(Case(path.stem, raw["name"], raw["view"], given, expect["rows"],
                              defaults, expect.get("where")))
    return cases


# ---- the inputs -----------------------------------------------------------------------------

def _csv_rows(text: str) -> tuple[list[str], list[list[str | None]]]:
    """Header and cells of a CSV text block; cells stripped, an empty cell None."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    reader = csv.reader(io.StringIO("\n".join(lines)), skipinitialspace=True)
    header, *body = [[cell.strip() for cell in row] for row in reader]
    for row in body:
        if len(row) != len(header):
            raise ValueError(f"row {row} has {len(row)} cells for {len(header)} columns")
    return header, [[cell if cell != "" else None for cell in row] for row in body]


def input_table(table: str, given: str | list[dict[str, Any]], defaults: dict[str, Any]
                ) -> pa.Table:
    """The given rows as an Arrow table of `table`'s declared schema (every column)."""
    import pyarrow as pa

    from etl.core.schema import table_schema

    schema = table_schema(table).arrow()
    if isinstance(given, str):
        header, cells = _csv_rows(given)
        unknown = set(header) - set(schema.names)
        if unknown:
            raise ValueError(f"{table}: no columns {sorted(unknown)} in schemas/{table}.toml")
        columns = {name: pa.array([row[i] for row in cells], pa.string())
                   .cast(schema.field(name).type) for i, name in enumerate(header)}
        count = len(cells)
    else:
        unknown = {k for row in given for k in row} - set(schema.names)
        if unknown:
            raise ValueError(f"{table}: no columns {sorted(unknown)} in schemas/{table}.toml")
        count = len(given)
        columns = {name: pa.array([row.get(name) for row in given], schema.field(name).type)
                   for name in {k for row in given for k in row}}
    arrays = []
    for f in schema:
        if f.name in columns:
            arrays.append(columns[f.name])
        elif f.name in defaults:
            arrays.append(pa.array([defaults[f.name]] * count, f.type))
        else:
            arrays.append(pa.nulls(count, f.type))
    # NOT NULL is the extractors' promise, checked by the conformance suite; a case may
    # leave out what its view does not read
    return pa.Table.from_arrays(arrays, schema=pa.schema([f.with_nullable(True) for f in schema]))


# ---- the database ---------------------------------------------------------------------------

@cache
def _views() -> tuple[View, ...]:
    from etl.views.catalog import checked_views

    return tuple(checked_views())


def database(case: Case) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB holding the case's tables, the catalog relations and the views
    its view needs (and the view itself under the name the case uses)."""
    import duckdb

    from etl.core.gpu_peaks import relation_selects
    from etl.core.schema import ALL_TABLES
    from etl.core.sql_files import needed_by, stable_names

    unknown = set(case.given) - set(ALL_TABLES)
    if unknown:
        raise ValueError(f"{case.id}: no tables {sorted(unknown)}")
    con = duckdb.connect()
    for table in ALL_TABLES:  # the derived tables (kernel_costs, ...) too
        con.register("given", input_table(table, case.given.get(table, []), case.defaults))
        con.execute(f"CREATE TABLE {table} AS SELECT * FROM given")
        con.unregister("given")
    for name, select in relation_selects().items():
        con.execute(f"CREATE VIEW {name} AS {select}")
    views = list(_views())
    needed = needed_by(case.view, views)
    if not needed:
        raise ValueError(f"{case.id}: no view named {case.view!r}")
    for view in needed:
        con.execute(f"CREATE VIEW {view.name} AS\n{view.select}")
    target = stable_names(views).get(case.view, case.view)
    if target != case.view:
        con.execute(f"CREATE VIEW {case.view} AS SELECT * FROM {target}")
    return con


# ---- the comparison -------------------------------------------------------------------------

def _expected_cell(cell: str | None, actual: Any) -> Any:
    """A CSV cell read as the type of the value it is compared with."""
    if cell is None or cell == "NULL":
        return None
    if isinstance(actual, bool):
        if cell not in ("true", "false"):
            raise ValueError(f"{cell!r}: a bool cell is true or false")
        return cell == "true"
    if isinstance(actual, int):
        return int(cell)
    if isinstance(actual, float):
        numerator, slash, denominator = cell.partition("/")
        return float(numerator) / float(denominator) if slash else float(cell)
    return cell


def _same(expected: Any, actual: Any) -> bool:
    if expected is None or actual is None:
        return expected is None and actual is None
    if isinstance(expected, bool) or isinstance(actual, bool):
        return type(expected) is type(actual) and expected == actual
    if isinstance(actual, float) and isinstance(expected, int | float):
        return math.isclose(expected, actual, rel_tol=REL_TOLERANCE, abs_tol=0.0)
    return bool(type(expected) is type(actual) and expected == actual)


def _plain(value: Any) -> Any:
    """DuckDB's DECIMAL results as floats: a case writes numbers, not their SQL types."""
    return float(value) if isinstance(value, Decimal) else value


def _matches(expected: dict[str, Any], actual: dict[str, Any]) -> bool:
    return all(_same(expected[c], actual[c]) for c in expected)


def run_case(case: Case) -> list[str]:
    """What differs between the view's rows and the expected ones (empty: the case holds)."""
    if isinstance(case.expect, str):
        columns, cells = _csv_rows(case.expect)
    else:
        columns = list(dict.fromkeys(k for row in case.expect for k in row))
        cells = [[row.get(c) for c in columns] for row in case.expect]
    con = database(case)
    try:
        quoted = ", ".join(f'"{c}"' for c in columns)
        where = f" WHERE {case.where}" if case.where else ""
        result = con.execute(f"SELECT {quoted} FROM {case.view}{where}")
        actual = [dict(zip(columns, map(_plain, row))) for row in result.fetchall()]
    finally:
        con.close()
    if len(actual) != len(cells):
        return [f"{len(actual)} rows, expected {len(cells)}: {actual}"]
    unmatched = list(actual)
    problems = []
    for row in cells:
        found = None
        for candidate in unmatched:
            expected = {c: (_expected_cell(v, candidate[c]) if isinstance(case.expect, str)
                            else v) for c, v in zip(columns, row)}
            if _matches(expected, candidate):
                found = candidate
                break
        if found is None:
            problems.append(f"no row matches {dict(zip(columns, row))}")
        else:
            unmatched.remove(found)
    if problems:
        problems.append(f"the view's rows: {actual}")
    return problems
