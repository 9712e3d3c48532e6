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


def write_views(folder: Path, files: dict[str, str]) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    for name, body in files.items():
        (folder / name).write_text(body)
    return [folder / name for name in files]


def test_a_view_reads_pinned_versions_not_the_moving_name(tmp_path: Path) -> None:
    base = GOOD.replace("demo", "base")
    reader = "-- reader: a view. Grain: one row per run.\nSELECT run_id FROM {}\n-- run_id: run\n"
    write_views(tmp_path, {"base_v1.sql": base, "base_v2.sql": base,
                           "pinned_v1.sql": reader.format("base_v1"),
                           "moving_v1.sql": reader.format("base")})
    problems = lint(discover(tmp_path))
    assert problems == [f"{tmp_path / 'moving_v1.sql'}: reads base, the name that follows the "
                        "newest version; read base_v2 instead"]


@pytest.mark.parametrize("expression,guarded", [
    ("sum(n) / count(*)", False),
    ("sum(n) / (count(*))", False),
    ("sum(n) / nullif(count(*), 0)", True),
    ("sum(n) / (nullif(count(*), 0))", True),
    ("sum(n) * 1e9 / 2", True),
    ("sum(n) / 0", False),
    ("CASE WHEN count(*) > 0 THEN sum(n) / count(*) END", True),
    ("CASE WHEN sum(n) / count(*) > 1 THEN 1 END", False),
])
def test_every_division_guards_its_denominator(tmp_path: Path, expression: str,
                                               guarded: bool) -> None:
    [path] = write_views(tmp_path, {"demo_v1.sql": (
        f"-- demo: a view. Grain: one row per run.\nSELECT run_id, {expression} AS x "
        "FROM kernels GROUP BY run_id\n-- run_id: run\n-- x: a ratio\n")})
    problems = lint([load_view(path)])
    assert (problems == []) == guarded, problems
    assert guarded or "unguarded; write x / nullif(d, 0)" in problems[0]


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
