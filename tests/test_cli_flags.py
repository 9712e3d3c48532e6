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

    out = cli("--version")
    assert out.returncode == 0
    lines = out.stdout.splitlines()
    assert lines[0] == f"etl {__version__}"
    assert lines[1].startswith(f"extractors etl-{__version__}/data-")
    assert "gpu_utilization_v" in lines[2] and "_busy_intervals" not in lines[2]
