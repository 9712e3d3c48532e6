"""The SQL house rules are enforced: documented columns, one SELECT, known dependencies."""
from __future__ import annotations

from pathlib import Path

import pytest

from etl.views import ViewError, discover, lint, load_view, order_views

GOOD = """-- demo: a view. Grain: one row per run.
SELECT run_id, count(*) AS n FROM kernels GROUP BY run_id
-- run_id: run
-- n: kernels
"""


def test_shipped_views_pass_lint() -> None:
    views = discover()
    assert lint(views) == []
    assert {"gpu_utilization_v1", "run_summary_v1", "kernel_summary_v1", "op_time_v1"} <= {
        v.name for v in views}


def test_undocumented_column_fails(tmp_path: Path) -> None:
    path = tmp_path / "demo_v1.sql"
    path.write_text(GOOD.replace("-- n: kernels\n", ""))
    problems = lint([load_view(path)])
    assert problems == [f"{path}: column n is not documented in the trailing comment"]


def test_missing_grain_comment_fails(tmp_path: Path) -> None:
    path = tmp_path / "demo_v1.sql"
    path.write_text(GOOD.split("\n", 1)[1])
    assert "no leading comment" in lint([load_view(path)])[0]


@pytest.mark.parametrize("body,fragment", [
    ("-- x\nSELECT * FROM kernels\n", "SELECT *"),
    ("-- x\nDROP VIEW runs\n", "single SELECT"),
    ("-- x\nSELECT a FROM nowhere\n-- a: b\n", "unknown table"),
])
def test_rules(tmp_path: Path, body: str, fragment: str) -> None:
    path = tmp_path / "bad_v1.sql"
    path.write_text(body)
    with pytest.raises(ViewError, match=fragment):
        order_views([load_view(path)])


def test_dependencies_come_first() -> None:
    names = [v.name for v in discover()]
    assert names.index("_busy_intervals_v1") < names.index("gpu_utilization_v1")
    assert names.index("gpu_utilization_v1") < names.index("run_summary_v1")


def test_code_passes_ruff_and_mypy() -> None:
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    bin_dir = Path(sys.executable).parent
    for cmd in ([str(bin_dir / "ruff"), "check", "etl", "tests"], [str(bin_dir / "mypy")]):
        result = subprocess.run(cmd, cwd=root, capture_output=True, text=True, check=False)
        assert result.returncode == 0, result.stdout[-2000:]
