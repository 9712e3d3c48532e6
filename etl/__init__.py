"""GPU utilization warehouse: profiler outputs → Parquet → DuckDB views.

    import etl
    etl.ingest("runs/", "warehouse")                # list of RunResult, one per run folder
    con = etl.connect("warehouse")                  # read-only DuckDB connection, one snapshot
    con.sql("SELECT run_name, gpu_util FROM run_summary").arrow()

The package is laid out by pipeline stage (CONTRIBUTING.md): core (shared definitions) →
extract → match → warehouse → load → views → api → present and spark → cli.
"""
from __future__ import annotations

from etl.api import connect, ingest
from etl.core import VERSION as __version__

__all__ = ["__version__", "connect", "ingest"]
