"""The package as users install it: a wheel carrying sql/ and schemas/, run outside the checkout.

The wheel is built from the checkout's files (tracked, or new and not ignored) copied to a
temporary folder, so a build never writes build/ or *.egg-info into the checkout. It is
installed into a fresh venv with no pip of its own; that venv borrows the third-party
packages (duckdb, pyarrow, ...) of the running one through a .pth file, written after the
install so that pip does not see the running environment's editable install.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from etl.core import resources, schema
from etl.core import sql_files
from tests.conftest import ROOT


def checkout_files() -> list[str]:
    """The files a build of the checkout sees: tracked, or new and not ignored."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others",
                             "--exclude-standard"], cwd=ROOT, capture_output=True, check=True)
    names = [n for n in listed.stdout.decode().split("\0") if n]
    return [n for n in names if (ROOT / n).is_file()]  # a tracked file deleted since is gone


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = tmp_path_factory.mktemp("source")
    for name in checkout_files():
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, source / name)
    dist = tmp_path_factory.mktemp("dist")
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet",
                            "-w", str(dist), str(source)], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr[-3000:]
    (built,) = dist.glob("*.whl")
    return built


def test_wheel_holds_code_and_data(wheel: Path) -> None:
    """Every module, every TOML of the package (nested packages too) and every file of
    sql/ and schemas/ (as etl/sql/, etl/schemas/) is in the wheel; tests are not."""
    files = checkout_files()
    wanted = {n for n in files if n.startswith("etl/") and n.endswith((".py", ".toml", ".j2"))}
    wanted |= {f"etl/{n}" for n in files if n.startswith(("sql/", "schemas/"))}
    shipped = set(zipfile.ZipFile(wheel).namelist())
    assert wanted - shipped == set()
    assert any(n.startswith("etl/sql/views/") and n.endswith(".sql") for n in shipped)
    assert not any(n.startswith(("tests/", "sql/", "schemas/")) for n in shipped)


def fresh_venv(where: Path, wheel: Path) -> Path:
    """A venv holding the wheel only; the running environment's packages borrowed."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    python = where / "bin" / "python"
    install = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install",
                              "--no-deps", "--no-index", "--quiet", str(wheel)],
                             capture_output=True, text=True)
    assert install.returncode == 0, install.stderr[-3000:]
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()"
                           "['purelib'])"], capture_output=True, text=True, check=True)
    borrowed = {sysconfig.get_paths()[k] for k in ("purelib", "platlib")}
    (Path(site.stdout.strip()) / "borrowed-dependencies.pth").write_text("\n".join(borrowed))
    return where / "bin"


def test_wheel_runs_outside_the_checkout(wheel: Path, tmp_path: Path) -> None:
    bin_dir = fresh_venv(tmp_path / "venv", wheel)
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "ETL_WAREHOUSE")}

    def run(*args: str) -> str:
        done = subprocess.run(args, cwd=work, env=env, capture_output=True, text=True,
                              timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout

    where = run(str(bin_dir / "python"), "-c", "import etl, etl.core.sql_files; "
                "print(etl.__file__); print(etl.core.sql_files.SQL_DIR)").splitlines()
    assert all(Path(p).is_relative_to(tmp_path / "venv") for p in where), where
    run(str(bin_dir / "etl"), "demo", "runs")
    ingested = run(str(bin_dir / "etl"), "ingest", "runs", "--warehouse", "wh")
    assert "16 ingested" in ingested  # 3 PyTorch, nsys, 8 TF (xplane), 4 overhead
    rows = json.loads(run(str(bin_dir / "etl"), "query", "SELECT run_name, count(*) AS n FROM "
                          "kernels JOIN runs USING (run_id) WHERE model = 'resnet50-synthetic' "
                          "GROUP BY run_name ORDER BY run_name",
                          "--warehouse", "wh", "--format", "json"))
    # the demo's kernel counts, as its ingest table printed them (every one a real row)
    assert [(r["run_name"], r["n"]) for r in rows] == [
        ("resnet_amp_ddp", 580), ("resnet_amp_eager", 275), ("resnet_amp_nsys", 200),
        ("resnet_fp32_eager", 240)]
    levels = json.loads(run(str(bin_dir / "etl"), "query", "SELECT run_name, "
                            "matched_time_share FROM run_utilization WHERE ncu_reason IS NULL "
                            "ORDER BY run_name",
                            "--warehouse", "wh", "--format", "json"))
    assert levels == [{"run_name": "resnet_amp_eager", "matched_time_share": 1.0},
                      {"run_name": "resnet_fp32_eager", "matched_time_share": 1.0}]
    api = run(str(bin_dir / "python"), "-c", "import etl; con = etl.connect('wh'); "
              "print(con.execute('SELECT count(*) FROM kernels').fetchone()[0])")
    assert api.strip() == "2915"


def test_checkout_reads_its_own_folders() -> None:
    """A checkout or an editable install reads the top-level folders, not a stale copy."""
    assert sql_files.SQL_DIR == ROOT / "sql" / "views"
    assert schema.SCHEMA_DIR == ROOT / "schemas"
    assert {v.name for v in sql_files.discover()} >= {"gpu_utilization_v1", "run_summary_v1"}


def test_data_dir_prefers_the_packaged_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                            ) -> None:
    package = tmp_path / "site" / "etl"
    package.mkdir(parents=True)
    monkeypatch.setattr(resources, "PACKAGE_DIR", package)
    assert resources.data_dir("sql") == package / "sql"  # neither: the wheel's place
    (tmp_path / "site" / "sql").mkdir()
    assert resources.data_dir("sql") == tmp_path / "site" / "sql"  # a checkout
    (package / "sql").mkdir()
    assert resources.data_dir("sql") == package / "sql"  # an installed wheel
