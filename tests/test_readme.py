"""Every SQL example of the README runs on the demo warehouse and returns rows."""
from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from tests.conftest import ROOT, query_json

README = (ROOT / "README.md").read_text(encoding="utf-8")


def readme_sql() -> list[str]:
    """SQL of the ```sql blocks and of every `etl query "..."` command line."""
    blocks = re.findall(r"```sql\n(.*?)```", README, re.S)
    commands = [line for line in README.splitlines() if re.search(r"etl query \"", line)]
    queries = [shlex.split(line.split("etl query", 1)[1].split("#")[0])[0]
               for line in commands]
    python = re.findall(r'con\.sql\("([^"]+)"\)', README)
    return [q.strip().rstrip(";") for q in blocks + queries + python]


def test_the_readme_has_examples() -> None:
    assert len(readme_sql()) >= 4


@pytest.mark.parametrize("sql", readme_sql())
def test_readme_sql_answers_on_the_demo(demo_warehouse: Path, sql: str) -> None:
    rows = query_json(demo_warehouse, sql)
    assert rows, f"no rows: {sql}"


def test_comparison_keeps_runs_without_ncu(demo_warehouse: Path) -> None:
    rows = query_json(demo_warehouse, "SELECT run_name, gpu_util, smsp_active_util, ncu_reason "
                      "FROM run_comparison WHERE model = 'resnet50-synthetic' ORDER BY run_name")
    assert [r["run_name"] for r in rows] == ["resnet_amp_ddp", "resnet_amp_eager",
                                             "resnet_amp_nsys", "resnet_fp32_eager"]
    ddp = rows[0]
    assert ddp["ncu_reason"] == "no ncu export in the run" and ddp["smsp_active_util"] is None
    assert 0 < ddp["gpu_util"] < 1
    [mean] = query_json(demo_warehouse, "SELECT avg(gpu_util) AS g FROM run_summary "
                        "WHERE run_name = 'resnet_amp_ddp'")
    assert ddp["gpu_util"] == pytest.approx(mean["g"], abs=1e-12)
    v1 = query_json(demo_warehouse, "SELECT * FROM run_utilization_v1 ORDER BY run_name")
    v2 = query_json(demo_warehouse, "SELECT * EXCLUDE (ncu_reason) FROM run_utilization_v2 "
                    "WHERE ncu_reason IS NULL ORDER BY run_name")
    assert v1 == v2  # where ncu levels exist, v2 is v1


def test_etl_runs_shows_what_users_look_for_first(demo_warehouse: Path) -> None:
    from tests.conftest import cli

    out = cli("runs", "--warehouse", str(demo_warehouse), env={"COLUMNS": "200"})
    assert out.returncode == 0, out.stderr
    header, _, *rows = out.stdout.splitlines()
    assert header.split() == ["run", "gpu", "ranks", "iterations", "kernels", "gpu_util",
                              "hint", "ncu_coverage", "ingested_at"]
    by_run = {row.split()[0]: row.split() for row in rows}
    ddp = by_run["resnet_amp_ddp"]
    assert ddp[:5] == ["resnet_amp_ddp", "synthetic-A100", "2", "5", "580"]
    assert ddp[6] == "NULL"  # its traces have steps: no hint
    assert ddp[7] == "NULL" and by_run["resnet_amp_eager"][7] == "1.0"


def readme_python() -> str:
    [block] = re.findall(r"```python\n(import etl\n.*?)```", README, re.S)
    return block


def test_the_python_example_runs_as_a_plain_script(tmp_path: Path) -> None:
    """The README's Python block, as a script file without a main guard, after the demo's
    runs are written: it ingests them with worker processes and answers."""
    import os
    import subprocess
    import sys

    from etl.demo.runs import write_demo

    runs = len(write_demo(tmp_path / "demo-runs"))
    script = tmp_path / "example.py"
    script.write_text(readme_python() + "print(len(results), {r.status for r in results})\n")
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == [f"{runs} {{'ingested'}}"]


def readme_use_block() -> list[str]:
    """The command lines of the Use section's sh block, in order."""
    section = README.split("\n## Use\n", 1)[1]
    [block] = re.findall(r"```sh\n(.*?)```", section, re.S)[:1]
    return [line for line in block.splitlines() if line.strip()]


@pytest.mark.slow
def test_the_use_section_runs_as_written_after_make_demo(tmp_path: Path) -> None:
    """`make demo` (its setup taken as done: this Python's venv is the .venv), then every
    line of the Use section's block in one shell, as written and in order."""
    import os
    import subprocess
    import sys

    (tmp_path / ".venv").symlink_to(Path(sys.executable).parent.parent)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "120"}
    env.pop("ETL_WAREHOUSE", None)
    demo = subprocess.run(["make", "--no-print-directory", "-o", "setup", "-f",
                           str(ROOT / "Makefile"), "demo"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert demo.returncode == 0, demo.stderr[-3000:]
    script = tmp_path / "use.sh"
    script.write_text("set -e\n" + "\n".join(readme_use_block()) + "\n")
    use = subprocess.run(["bash", "-x", str(script)], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=600)
    assert use.returncode == 0, use.stderr[-3000:]
    for written in ("kernels.parquet", "report.html", "trace.json", "ddp_copy/run.toml"):
        assert (tmp_path / written).stat().st_size > 0, written
    assert "wrote report.html" in use.stdout and "error" not in use.stderr.lower()
