"""The edge-case warehouse of the view tests, ingested once per session
(tests/views/warehouses.py)."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import built_once, ingested
from tests.views.warehouses import write_edge_runs


def edge_runs_ingested(root: Path) -> Path:
    write_edge_runs(root / "runs")
    return ingested(root)


# built once per session and shared by the xdist workers (tests/conftest.py, built_once):
# the tests only read it (test_rewrites' released SQL goes in TEMP views of its own
# connection); the corpus warehouse, corpus_wh, is tests/conftest.py's
@pytest.fixture(scope="session")
def edge_wh(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return built_once(tmp_path_factory, "edges", edge_runs_ingested)
