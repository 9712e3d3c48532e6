"""The test warehouses of the view tests, ingested once per session (tests/views/warehouses.py)."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import cli
from tests.views.warehouses import write_corpus_runs, write_edge_runs


def ingested(root: Path) -> Path:
    result = cli("ingest", str(root / "runs"), "--warehouse", str(root / "wh"))
    assert result.returncode == 0, result.stderr
    return root / "wh"


@pytest.fixture(scope="session")
def edge_wh(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("edges")
    write_edge_runs(root / "runs")
    return ingested(root)


@pytest.fixture(scope="session")
def corpus_wh(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("corpus_views")
    write_corpus_runs(root / "runs")
    return ingested(root)
