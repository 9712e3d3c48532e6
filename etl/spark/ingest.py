"""`etl ingest --engine spark`: run folders extracted as Spark tasks, published here.

The driver lists the run folders (find_run_folders, as locally) and hands them to Spark,
one run folder per task. A task runs the local extractor (`prepare_folder`): it checks the
warehouse for an unchanged run, streams the run into a private folder under
<warehouse>/staging/ and returns what the publisher needs (the RunResult, the staged
folder, the `runs` row) — a few KB. The driver then publishes the runs one at a time with
`Warehouse.publish`, as `ingest_all` does: one writer, one rename per run. A task that dies
(executor lost, killed) leaves at most a staging folder that nothing reads; Spark runs the
task again, and only the attempt whose result reaches the driver is published. The
warehouse must be on storage every executor sees at the same path (NFS, a shared mount).
"""
from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from etl.load.ingest import Options, Prepared, RunResult
    from etl.load.runfolder import RunTarget
    from etl.warehouse.store import Warehouse


def ingest_spark(spark: SparkSession, folders: Sequence[Path | RunTarget],
                 warehouse: Warehouse, options: Options,
                 on_done: Callable[[RunResult], None] | None = None,
                 kill_once: Path | None = None) -> list[RunResult]:
    """Extract `folders` as Spark tasks and publish them here; one RunResult per folder.

    `kill_once` (tests): the first task to find no file there creates it and kills its
    worker process after staging its run, before returning it.
    """
    from dataclasses import replace

    from etl.core.errors import name_text
    from etl.load.ingest import publish_all
    from etl.load.runfolder import RunTarget

    warehouse.init()
    targets = [f if isinstance(f, RunTarget) else RunTarget(f, name_text(f.name))
               for f in folders]
    if not targets:
        return []
    task_options = replace(options, jobs=1, slice_workers=1)  # Spark gives the parallelism
    root = warehouse.root
    prepared: list[Prepared] = (
        spark.sparkContext.parallelize(targets, len(targets))
        .map(lambda target: _task(target, root, task_options, kill_once)).collect())
    return publish_all(prepared, warehouse, on_done)  # the driver is the one writer


def _task(target: RunTarget, root: Path, options: Options, kill_once: Path | None
          ) -> Prepared:
    """One run folder on an executor: the local extractor, into <root>/staging/."""
    from etl.load.ingest import prepare_folder
    from etl.warehouse.store import Warehouse

    prepared = prepare_folder(target, Warehouse(root), options)
    if kill_once is not None:
        try:
            kill_once.touch(exist_ok=False)
        except FileExistsError:
            pass
        else:
            os._exit(9)  # as a killed worker: the staged folder stays, never published
    return prepared
