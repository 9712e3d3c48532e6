"""--debug before or after the subcommand; --version."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import cli


@pytest.mark.parametrize("where", ["before", "after"])
def test_debug_shows_the_traceback_wherever_it_is(tmp_path: Path, where: str) -> None:
    run = tmp_path / "runs" / "r"
    run.mkdir(parents=True)
    (run / "t.json").write_text('{"traceEvents": [')
    args = ["ingest", str(tmp_path / "runs"), "--warehouse", str(tmp_path / "wh")]
    out = cli(*(["--debug", *args] if where == "before" else [*args, "--debug"]))
    assert out.returncode == 1
    assert "Traceback" in out.stderr and "InputError" in out.stderr
    plain = cli(*args)
    assert "Traceback" not in plain.stderr and plain.stderr.count("error:") == 1


def test_version_names_extractors_and_views() -> None:
    from etl import __version__
    from etl.load.ingest import ROWS_REVISION

    out = cli("--version")
    assert out.returncode == 0
    lines = out.stdout.splitlines()
    assert lines[0] == f"etl {__version__}"
    assert lines[1].startswith(f"extractors etl-{__version__}.r{ROWS_REVISION}/data-")
    assert "gpu_utilization_v" in lines[2] and "_busy_intervals" not in lines[2]


def test_progress_is_a_line_per_run_on_stdout_when_not_a_terminal(tmp_path: Path) -> None:
    from tests.conftest import write_trace
    from tests.views.test_tiny_trace import EVENTS

    for name in ("a", "b"):
        write_trace(tmp_path / "runs" / name / "t.json", EVENTS)
    out = cli("ingest", str(tmp_path / "runs"), "--warehouse", str(tmp_path / "wh"))
    assert out.returncode == 0
    progress = [line for line in out.stdout.splitlines() if "/2 " in line]
    heads = [line.split(" in ")[0].split(" ", 1) for line in progress]  # any finishing order
    assert [h[0] for h in heads] == ["1/2", "2/2"]
    assert sorted(h[1] for h in heads) == ["ingested a", "ingested b"]
