"""One SparkSession for the whole test session (local[2], 2 shuffle partitions, no UI):
starting Spark costs seconds, and the machine is shared. Without Java or pyspark the
Spark tests skip and say why."""
from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import Any

import pytest


def _java_missing() -> str | None:
    if shutil.which("java") is None:
        return "Java is not installed (Spark needs Java 17 or newer)"
    try:
        import pyspark  # noqa: F401
    except ImportError:
        return "pyspark is not installed (pip install '.[spark]'; make setup installs it)"
    return None


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    reason = _java_missing()
    if reason:
        pytest.skip(reason)
    from etl.spark import local_session

    session = local_session("local[2,3]", "etl-tests")  # 2 cores; a task is tried 3 times
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
