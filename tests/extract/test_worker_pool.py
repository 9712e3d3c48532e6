"""The worker processes of etl/extract/worker_pool.py."""
from __future__ import annotations

import os

import pytest

from etl.extract.worker_pool import ALLOCATOR_ENVIRONMENT, worker_pool


def _purge_delay_after_pyarrow_loads() -> str:
    import pyarrow as pa

    pa.array([1, 2, 3])
    return os.environ.get("MIMALLOC_PURGE_DELAY", "")


def test_workers_keep_freed_pages_a_while(monkeypatch: pytest.MonkeyPatch,
                                          capfd: pytest.CaptureFixture[str]) -> None:
    """mimalloc, told to speak, prints its options as pyarrow loads it in the worker: the
    purge delay is the worker's (set before the import), not mimalloc's 1 s default."""
    monkeypatch.setenv("MIMALLOC_VERBOSE", "1")
    monkeypatch.delenv("MIMALLOC_PURGE_DELAY", raising=False)
    with worker_pool(1) as pool:
        got = pool.submit(_purge_delay_after_pyarrow_loads).result()
    delay = ALLOCATOR_ENVIRONMENT["MIMALLOC_PURGE_DELAY"]
    assert got == delay
    assert f"option 'purge_delay': {delay}" in capfd.readouterr().err
