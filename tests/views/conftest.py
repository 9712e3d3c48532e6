"""The test warehouses of the view tests, ingested once per session (tests/views/warehouses.py)."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import built_once, cli
from tests.views.warehouses import write_corpus_runs, write_edge_runs


def ingested(root: Path) -> Path:
    result = cli("ingest", str(root / "runs"), "--warehouse", str(root / "wh"))
    assert result.returncode == 0, result.stderr
    return root / "wh"


def edge_runs_ingested(root: Path) -> Path:
    write_edge_runs(root / "runs")
    return ingested(root)


def corpus_runs_ingested(root: Path) -> Path:
    write_corpus_runs(root / "runs")
    return ingested(root)


# built once per session and shared by the xdist workers (tests/conftest.py, built_once):
# the tests only read them (test_rewrites' released SQL goes in TEMP views of its own
# connection)
@pytest.fixture(scope="session")
def edge_wh(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return built_once(tmp_path_factory, "edges", edge_runs_ingested)


@pytest.fixture(scope="session")
def corpus_wh(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return built_once(tmp_path_factory, "corpus_views", corpus_runs_ingested)
