"""`etl rm` and `etl mv`: removing and renaming runs, each as one publish.

A removal publishes a *tombstone*: a `runs` row of the removed name with `removed = true`
and a higher publish sequence, in a folder of its own (zero rows in every other table).
The views keep each name's latest publish and then drop removed ones, so the run vanishes
for every query that starts after the publish and stays whole for those before; its old
folder is superseded and collected after the grace period, like a replaced run's.

A rename copies the run's rows under a new publish id into one folder that also holds the
old name's tombstone: one rename of that folder makes the run appear under its new name
and vanish under the old one at the same moment.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from etl.core.errors import WarehouseError

if TYPE_CHECKING:
    import pyarrow as pa

    from etl.warehouse.store import Publication, Warehouse


@dataclass(frozen=True)
class Current:
    """A run's current publish: its full `runs` row and the folder holding its rows."""

    row: dict[str, Any]
    folder: str


def current_runs(warehouse: Warehouse) -> dict[str, Current]:
    """Live runs by name (tombstones left out)."""
    table = warehouse.read_runs(None)
    return {r["run_name"]: Current({k: v for k, v in r.items() if k != "folder"}, r["folder"])
            for r in table.to_pylist() if not r.get("removed")}


def remove_runs(warehouse: Warehouse, names: list[str]) -> Publication:
    """Publish tombstones for `names` (all of them, or none: every name must be a run)."""
    live = current_runs(warehouse)
    _require(live, names)
    staged = warehouse.new_stage(f"rm-{uuid.uuid4().hex[:12]}")
    _empty_tables(staged)
    rows = [_tombstone(live[n].row) for n in names]
    return warehouse.publish_rows(staged, _runs_table(rows), staged.name.split(".")[0])


def rename_run(warehouse: Warehouse, old: str, new: str) -> Publication:
    """Publish `old`'s rows under the name `new` and a tombstone of `old`, in one folder."""
    live = current_runs(warehouse)
    _require(live, [old])
    if new in live:
        raise WarehouseError(f"etl mv: a run named '{new}' exists; remove it first "
                             f"(etl rm '{new}') or choose another name")
    source = live[old]
    publish_id = f"{source.row['run_id']}-{uuid.uuid4().hex[:12]}"
    staged = warehouse.new_stage(publish_id)
    _copy_tables(warehouse, source, staged, publish_id)
    renamed = {**source.row, "run_name": new, "publish_id": publish_id, "removed": False}
    rows = [renamed, _tombstone(source.row)]
    return warehouse.publish_rows(staged, _runs_table(rows), publish_id)


def _require(live: dict[str, Current], names: list[str]) -> None:
    missing = [n for n in names if n not in live]
    if missing:
        raise WarehouseError(f"no run named {', '.join(repr(n) for n in missing)} in the "
                             "warehouse (etl runs lists them); nothing changed")


def _tombstone(row: dict[str, Any]) -> dict[str, Any]:
    return {**row, "publish_id": f"{row['run_id']}-rm{uuid.uuid4().hex[:10]}",
            "removed": True, "ingested_at": datetime.now(UTC)}


def _runs_table(rows: list[dict[str, Any]]) -> pa.Table:
    import pyarrow as pa

    from etl.core.schema import table_schema

    return pa.Table.from_pylist(rows, schema=table_schema("runs").arrow())


def _empty_tables(staged: Any) -> None:
    from etl.warehouse.store import RUN_TABLES, TableWriter

    for table in RUN_TABLES:
        TableWriter(staged, table, {}).close()


def _copy_tables(warehouse: Warehouse, source: Current, staged: Any, publish_id: str) -> None:
    """Every table's rows of the source publish, streamed batch by batch, with the new
    publish id (a segment holds other runs too: only this publish's rows are read)."""
    import pyarrow.dataset as ds

    from etl.warehouse.store import RUN_TABLES, TableWriter

    old_id = source.row["publish_id"]
    constants = {"run_id": source.row["run_id"], "publish_id": publish_id}
    for table in RUN_TABLES:
        writer = TableWriter(staged, table, constants)
        path = warehouse.data / source.folder / f"{table}.parquet"
        if path.exists():
            scanner = ds.dataset(path, format="parquet").scanner(
                filter=ds.field("publish_id") == old_id)
            for batch in scanner.to_batches():
                if batch.num_rows:
                    writer.write(_without_ids(batch))
        writer.close()


def _without_ids(batch: Any) -> pa.Table:
    import pyarrow as pa

    table = pa.Table.from_batches([batch])
    return table.drop_columns([c for c in ("run_id", "publish_id") if c in table.column_names])
