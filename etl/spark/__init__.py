"""The warehouse on Apache Spark (the optional `[spark]` extra: pip install '.[spark]').

- `register_warehouse(spark, path[, views])`: every table and view (or only the views that
  `views` read) as TEMP views of a SparkSession (etl/spark/session.py), for `etl query
  --engine spark` (which registers what its query names) and for users' own Spark jobs;
- `view_select(view, dialect)`: a view in Spark SQL, Trino or DuckDB (etl/views/dialects.py);
- `ingest_spark(...)`: run folders extracted as Spark tasks, published by the driver
  (etl/spark/ingest.py).

Nothing here imports pyspark at import time: `etl --help` stays instant.
"""
from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterable

    from pyspark.sql import SparkSession


def register_warehouse(spark: SparkSession, warehouse: Any,
                       views: Iterable[str] | None = None) -> list[str]:
    """Register every table and view of `warehouse` in `spark`, or only the views `views`
    need (see etl.spark.session)."""
    from etl.spark.session import register_warehouse as register

    return register(spark, warehouse, views)


def local_session(master: str = "local[2]", app_name: str = "etl") -> SparkSession:
    """A SparkSession for the command line: `master` as spark-submit's --master; small
    shuffles (the warehouse's views aggregate per run), no UI."""
    from etl.core.errors import EtlError

    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise EtlError("--engine spark needs pyspark: pip install 'gpu-util-warehouse[spark]' "
                       "(and Java 17 or newer)") from None
    if master.startswith("local"):
        # local tasks run in this interpreter's environment (etl, pyarrow installed); on a
        # cluster, PYSPARK_PYTHON names the executors' Python (pyspark reads the variable
        # when the context starts, not a setting)
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.master(master).appName(app_name)
    if master.startswith("local"):
        # the driver plans every view: the deepest (tc_amdahl over run_utilization over the
        # windows and the matches) ran out of 1 GiB, then of 3 GiB, while being analysed
        # in a session holding every view; a ceiling, not an allocation
        builder = builder.config("spark.driver.memory", "6g")
    return (builder
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.sql.session.timeZone", "UTC")
            .getOrCreate())


__all__ = ["local_session", "register_warehouse"]
