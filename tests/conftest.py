"""Shared fixtures: the real corpus beside the checkout, tiny inline traces, the CLI."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
INPUTS = ROOT / "tests" / "data" / "inputs"  # inputs of our own, for variants the corpus lacks
CORPUS = ROOT.parent / "shared" / "corpus"
ETL = [sys.executable, "-m", "etl.cli"]
# new warehouses copy their views database from a template (etl/views/template.py): the
# tests keep theirs in a folder of their own, never in the user's cache; subprocesses
# inherit it
os.environ.setdefault("ETL_CACHE_DIR", str(Path(os.environ.get("TMPDIR", "/tmp"))
                                          / f"etl-test-cache-{os.getuid()}"))


def corpus_path(*parts: str) -> Path:
    """A corpus path; in CI (CI=true) a missing corpus fails instead of skipping."""
    path = CORPUS.joinpath(*parts)
    if not path.exists():
        if os.environ.get("CI") == "true":
            pytest.fail(f"corpus missing at {path}: CI must have ../shared beside the checkout")
        pytest.skip(f"corpus not available at {path}")
    return path


def us(ns: int) -> str:
    """Integer ns → Kineto's decimal µs text with three decimals (exact)."""
    sign = "-" if ns < 0 else ""
    ns = abs(ns)
    return f"{sign}{ns // 1000}.{ns % 1000:03d}"


class Raw(str):
    """A JSON number written verbatim (keeps the exact decimal digits)."""


def event(ph: str = "X", cat: str = "cpu_op", name: str = "op", ts: int | None = 0,
          dur: int | None = 0, pid: Any = 1, tid: Any = 1, **args: Any) -> dict[str, Any]:
    """One trace event; ts/dur in integer ns."""
    ev: dict[str, Any] = {"ph": ph, "cat": cat, "name": name, "pid": pid, "tid": tid}
    if ts is not None:
        ev["ts"] = Raw(us(ts))
    if dur is not None:
        ev["dur"] = Raw(us(dur))
    if args:
        ev["args"] = {k.replace("_", " ") if k in ("External_id",) else k: v
                      for k, v in args.items()}
    return ev


def _dump(value: Any) -> str:
    if isinstance(value, Raw):
        return str(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)}: {_dump(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_dump(v) for v in value) + "]"
    return json.dumps(value)


def write_trace(path: Path, events: list[dict[str, Any]], **header: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"schemaVersion": 1, **header, "traceEvents": events}
    path.write_text(_dump(doc))
    return path


def launch(corr: int, ts: int, dur: int = 1000, tid: Any = 1, name: str = "cudaLaunchKernel"
           ) -> dict[str, Any]:
    return event(cat="cuda_runtime", name=name, ts=ts, dur=dur, tid=tid, correlation=corr)


def kernel(corr: int, ts: int, dur: int, device: int = 0, stream: int = 7,
           name: str = "k", cat: str = "kernel") -> dict[str, Any]:
    return event(cat=cat, name=name, ts=ts, dur=dur, pid=device, tid=stream,
                 correlation=corr, device=device, stream=stream)


def step(n: int, ts: int, dur: int, cat: str = "user_annotation") -> dict[str, Any]:
    return event(cat=cat, name=f"ProfilerStep#{n}", ts=ts, dur=dur)


def cli(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None
        ) -> subprocess.CompletedProcess[str]:
    """The real command line in a subprocess."""
    full_env = {**os.environ, **(env or {})}
    full_env["PYTHONPATH"] = str(ROOT)
    return subprocess.run([*ETL, *args], capture_output=True, text=True, cwd=cwd,
                          env=full_env, timeout=600)


def query_json(warehouse: Path, sql: str) -> list[dict[str, Any]]:
    result = cli("query", sql, "--warehouse", str(warehouse), "--format", "json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.fixture(scope="session")
def demo_warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's runs ingested once per test process; tests only read it."""
    from etl.demo.runs import write_demo
    from etl.load.ingest import ingest_all
    from etl.warehouse.store import Warehouse

    root = tmp_path_factory.mktemp("demo")
    write_demo(root / "runs")
    results = ingest_all(sorted((root / "runs").iterdir()), Warehouse.at(root / "wh"))
    assert {r.status for r in results} == {"ingested"}, [r.error for r in results]
    return root / "wh"


@pytest.fixture
def runs_dir(tmp_path: Path) -> Path:
    path = tmp_path / "runs"
    path.mkdir()
    return path


def copy_corpus_run(src: Path, dest_root: Path, name: str | None = None) -> Path:
    """A run folder holding (symlinks to) a corpus folder's traces; never copied into git."""
    dest = dest_root / (name or src.name)
    dest.mkdir(parents=True)
    files = [src] if src.is_file() else sorted(p for p in src.iterdir() if p.name != "SOURCES.md")
    for f in files:
        if f.is_file():
            (dest / f.name).symlink_to(f)
    return dest


__all__ = ["shutil"]


def publish_folder(warehouse: Path, publish_id: str) -> Path | None:
    """The folder of a run's own publish (data/<publish_id>.v<µs>/), current or superseded."""
    found = [p for p in (warehouse / "data").glob(f"{publish_id}.v*") if p.is_dir()]
    return found[0] if found else None


def publish_id_of(folder: Path) -> str:
    """A run's own publish folder's publish id: its name without the visible-from suffix."""
    return folder.name.rpartition(".v")[0] or folder.name
