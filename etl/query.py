"""Read-only SQL on a warehouse."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from etl.errors import EtlError, WarehouseError


def run_query(warehouse_dir: Path, sql: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    import duckdb

    from etl.views import ensure_views
    from etl.warehouse import Warehouse

    warehouse = Warehouse.at(warehouse_dir)
    if not warehouse.exists():
        raise WarehouseError(f"{warehouse.root}: no warehouse here; run `etl ingest RUNS "
                             f"--warehouse {warehouse_dir}` first")
    ensure_views(warehouse)
    try:
        con = duckdb.connect(str(warehouse.database), read_only=True)
    except duckdb.Error as exc:
        raise WarehouseError(f"{warehouse.database}: cannot open ({exc})") from None
    try:
        cursor = con.execute(sql)
        columns = [d[0] for d in cursor.description] if cursor.description else []
        return columns, cursor.fetchall()
    except duckdb.Error as exc:
        first = str(exc).strip().splitlines()[0]
        raise EtlError(f"query failed: {first}") from None
    finally:
        con.close()
