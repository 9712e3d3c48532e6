"""GPU utilization warehouse: profiler outputs → Parquet → DuckDB views.

    import etl
    etl.ingest("runs/", "warehouse")                # list of RunResult, one per run folder
    con = etl.connect("warehouse")                  # read-only DuckDB connection, one snapshot
    con.sql("SELECT run_name, gpu_util FROM run_summary").arrow()
"""
from __future__ import annotations

import sys
import types

__version__ = "0.1.0"
__all__ = ["connect", "ingest"]


class _Package(types.ModuleType):
    """Keeps `etl.ingest` the API function once the submodule etl/ingest.py is imported.

    The import system binds every submodule as an attribute of its package, which would
    replace the function by the module and make `etl.ingest(...)` fail after the first
    `from etl.ingest import ...`. The module itself stays importable by its full name.
    """

    def __setattr__(self, name: str, value: object) -> None:
        if name in __all__ and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package

from etl.api import connect, ingest  # noqa: E402  (after the guard above)
