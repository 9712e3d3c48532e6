"""Shared fixtures: the real corpus beside the checkout, tiny inline traces, the CLI."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Callable
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


@pytest.hookimpl(tryfirst=True, optionalhook=True)  # optional: -p no:xdist has no such hook
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under `-n N` with no --dist of the caller's, each test file goes whole to one worker
    (xdist's --dist loadfile) rather than test by test: a module-scoped fixture (an ingest,
    most of them) is then built once, not once per worker that runs one of its tests. Any
    --dist given on the command line is xdist's to honour."""
    if config.getvalue("dist") != "load" or any(
            a == "-d" or a.startswith("--dist") for a in config.invocation_params.args):
        return None
    from xdist.scheduler import LoadFileScheduling

    return LoadFileScheduling(config, log)


# Warehouses built once per session from the whole corpus or the demo: a test that reads
# one is slow (tests/slow_tests.py says what else is, and why)
SHARED_WAREHOUSES = frozenset(("kineto_wh", "corpus_wh", "timeline_warehouse",
                               "demo_warehouse"))


def shared(value: str) -> Any:
    """A parameter value naming one of SHARED_WAREHOUSES (read by request.getfixturevalue,
    which the collection cannot see): marked slow as such a fixture would be."""
    return pytest.param(value, marks=pytest.mark.slow)


# Entries of tests/slow_tests.py that named no test of this session's collection
# (tests/test_tiers.py fails on them: an error raised here would reach a user of `-n 2`
# as an INTERNALERROR of the xdist worker, without its text)
STALE_SLOW_ENTRIES: list[str] = []


@pytest.hookimpl(tryfirst=True)  # before -m deselects: every entry is checked
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark slow the tests on the shared warehouses and those tests/slow_tests.py names."""
    from tests.slow_tests import COSTLY, PROCESSES

    listed = set(PROCESSES) | set(COSTLY)
    matched: set[str] = set()
    for item in items:
        hits = listed & slow_entry_keys(item.nodeid)
        matched |= hits
        if hits or SHARED_WAREHOUSES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
    if not config.getoption("lf", False):  # --lf collects only some parameters
        STALE_SLOW_ENTRIES[:] = _stale_entries(listed - matched, items, config)


def slow_entry_keys(nodeid: str) -> set[str]:
    """The entries of tests/slow_tests.py that would name a test: its node id, its function
    (all parameters) and its file."""
    function = nodeid.split("[", 1)[0]
    return {nodeid, function, function.split("::", 1)[0]}


def _stale_entries(unmatched: set[str], items: list[pytest.Item],
                   config: pytest.Config) -> list[str]:
    """Entries that name no test: a file that is not there, a function its collected
    module lacks, or a parameter its function does not have (unless one parameter was
    asked for by node id)."""
    modules = {item.nodeid.split("::", 1)[0]: getattr(item, "module", None) for item in items}
    functions = {item.nodeid.split("[", 1)[0] for item in items}
    one_parameter = any("[" in arg for arg in config.invocation_params.args)
    stale = []
    for entry in sorted(unmatched):
        path, _, name = entry.partition("::")
        if not name and not (ROOT / path).is_file():
            stale.append(entry)  # a whole file's entry
        if path not in modules or not name:
            continue  # its file was not collected this time
        function = name.split("[", 1)[0]
        if not hasattr(modules[path], function) or (
                "[" in name and f"{path}::{function}" in functions and not one_parameter):
            stale.append(entry)
    return stale


def corpus_path(*parts: str) -> Path:
    """A corpus path; in CI (CI=true) a missing corpus fails instead of skipping."""
    path = CORPUS.joinpath(*parts)
    if not path.exists():
        if os.environ.get("CI") == "true":
            pytest.fail(f"corpus missing at {path}: CI must have ../shared beside the checkout")
        pytest.skip(f"corpus not available at {path}")
    return path


# The per-trace tests over the corpus read every trace in `make test`; `make check` leaves
# out the seven largest (0.7-3.0 MB compressed, the cost of those tests) as `slow`: the
# ten it reads hold ROCm, Triton, H100, two ranks and GPU user annotations (NCCL, the ns
# timestamps and the B200 trace are read by `make test` only; tests/extract/kineto/
# test_collective_ops.py and tests/views/test_collectives.py build NCCL events of their own).
QUICK_CORPUS_BYTES = 250_000


def corpus_param(*values: Any, trace: str | Path) -> Any:
    """pytest.param(*values), marked slow when `trace` (a corpus file or folder, absolute
    or relative to the corpus) holds more than QUICK_CORPUS_BYTES of traces."""
    path = CORPUS / trace
    files = [path] if path.is_file() else list(path.glob("*.json.gz"))
    size = sum(f.stat().st_size for f in files if f.exists())
    marks = [pytest.mark.slow] if size > QUICK_CORPUS_BYTES else []
    return pytest.param(*values, marks=marks)


def duckdb_shell() -> Path:
    """The `duckdb` shell installed beside this Python (duckdb-cli), else the checkout's
    .venv: a worktree without a .venv of its own runs the tests with another's Python."""
    for folder in (os.environ.get("VIRTUAL_ENV"), Path(sys.executable).parent.parent,
                   ROOT / ".venv"):
        if folder and (Path(folder) / "bin" / "duckdb").exists():
            return Path(folder) / "bin" / "duckdb"
    return ROOT / ".venv" / "bin" / "duckdb"


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


@dataclass
class Completed:
    """What a command gave: the fields of subprocess.CompletedProcess that tests read."""

    args: list[str]
    returncode: int
    stdout: str
    stderr: str


def cli(*args: str | os.PathLike[str], cwd: Path | None = None,
        env: dict[str, str] | None = None) -> Completed:
    """The command line, run in this process by click's CliRunner (as sqlite-utils tests
    its CLI): `etl.cli.commands:main` with the arguments, stdout and stderr kept apart,
    the working directory and environment set for the call and restored after it.

    What the subprocess gave is given here too: exit code 1 with one `error:` line for
    the project's errors, and for any other exception exit code 1 with its traceback on
    stderr, as Python prints it. Output written to the file descriptors themselves (by
    DuckDB, or by worker processes the command starts) is captured with the rest. What
    only a process of its own can show (the installed entry point, signals, kill -9, the
    locale, processes racing) goes through `cli_subprocess`.
    """
    import inspect
    import traceback

    from click.testing import CliRunner

    from etl.cli.commands import main

    fd_capture = "capture" in inspect.signature(CliRunner).parameters  # click >= 8.3
    runner = CliRunner(**({"capture": "fd"} if fd_capture else {}))
    argv = [os.fspath(a) for a in args]
    before = os.getcwd()
    if cwd is not None:
        os.chdir(cwd)
    try:
        result = runner.invoke(main, argv, env=env, prog_name="etl", catch_exceptions=True)
    finally:
        os.chdir(before)
    stderr = result.stderr
    if result.exc_info is not None and not isinstance(result.exception, SystemExit | None):
        stderr += "".join(traceback.format_exception(*result.exc_info))
    return Completed(argv, result.exit_code, result.stdout, stderr)


def cli_subprocess(*args: str | os.PathLike[str], cwd: Path | None = None,
                   env: dict[str, str] | None = None, timeout: float = 600
                   ) -> subprocess.CompletedProcess[str]:
    """The real command line in a process of its own (`python -m etl.cli`): for what an
    in-process call cannot show (signals, the locale, processes racing each other)."""
    full_env = {**os.environ, **(env or {})}
    full_env["PYTHONPATH"] = str(ROOT)
    return subprocess.run([*ETL, *map(os.fspath, args)], capture_output=True, text=True,
                          cwd=cwd, env=full_env, timeout=timeout)


def snapshot(warehouse: Path) -> Any:
    """etl.connect(warehouse): the views with every table pinned to the current publishes,
    as `etl query` and the report read them. Binding reads one footer per table reference,
    where a connection on the stored views (the DuckDB shell's) reads every file's: that
    path is tested where it is the point (test_catalog, test_relocate, test_concurrent)."""
    import etl

    return etl.connect(warehouse)


def grouped_rows(con: Any) -> Callable[..., list[tuple[Any, ...]]]:
    """rows(sql, *key): the rows of `sql` on `con` whose first len(key) columns equal `key`,
    without those columns. Each `sql` runs once, for every key: a deep view costs ~0.3 CPU s
    to plan whatever rows it gives, so the tests of one trace each read one answer for all
    the traces rather than each plan the view again with a WHERE of its own."""
    from collections import defaultdict

    answers: dict[tuple[str, int], dict[tuple[Any, ...], list[tuple[Any, ...]]]] = {}

    def rows(sql: str, *key: Any) -> list[tuple[Any, ...]]:
        if (sql, len(key)) not in answers:
            by_key = defaultdict(list)
            for row in con.execute(sql).fetchall():
                by_key[tuple(row[:len(key)])].append(tuple(row[len(key):]))
            answers[(sql, len(key))] = by_key
        return answers[(sql, len(key))].get(key, [])

    return rows


def query_json(warehouse: Path, sql: str) -> list[dict[str, Any]]:
    """`etl query SQL --format json`, in this process, parsed."""
    result = cli("query", sql, "--warehouse", str(warehouse), "--format", "json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def built_once(tmp_path_factory: pytest.TempPathFactory, name: str,
               build: Callable[[Path], Path]) -> Path:
    """What `build(folder)` returns, built once per test session: under pytest-xdist the
    first worker to ask builds it in a folder beside the workers' own, under a file lock,
    and the others wait for it and use the same one (pytest-xdist's "Making session-scoped
    fixtures execute only once"). Only for what the tests read and never change: the
    workers share it while they run.
    """
    import fcntl

    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker is None:  # one process: nothing to share
        return build(tmp_path_factory.mktemp(name))
    shared = tmp_path_factory.getbasetemp().parent / f"shared-{name}"
    shared.mkdir(exist_ok=True)
    with open(shared / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file is closed
        done = shared / "built"
        if done.exists():
            return Path(done.read_text("utf-8"))
        # a folder of the worker's own: a build that failed in another worker left its
        # partial folder behind, and this worker tries again from nothing
        result = build(shared / worker)
        done.write_text(str(result), "utf-8")
        return result


def demo_ingested(root: Path) -> Path:
    import etl
    from etl.demo.runs import write_demo
    from etl.load.ingest import ingest_all
    from etl.warehouse.store import Warehouse

    write_demo(root / "runs")
    results = ingest_all(sorted((root / "runs").iterdir()), Warehouse.at(root / "wh"))
    assert {r.status for r in results} == {"ingested"}, [r.error for r in results]
    # the derived tables too (etl report, etl forecast compute what is missing): the
    # workers share the warehouse, and it must not change under one while the other reads
    etl.api.critical_path(warehouse=root / "wh")
    etl.api.costs(warehouse=root / "wh")
    return root / "wh"


@pytest.fixture(scope="session")
def demo_warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's runs ingested once per test session and shared by the xdist workers
    (built_once); tests only read it."""
    return built_once(tmp_path_factory, "demo", demo_ingested)


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


def ingested(root: Path) -> Path:
    """`etl ingest root/runs --warehouse root/wh`, in this process; the warehouse."""
    result = cli("ingest", str(root / "runs"), "--warehouse", str(root / "wh"))
    assert result.returncode == 0, result.stderr + result.stdout
    return root / "wh"


def ingested_onto(base: Path, root: Path) -> Path:
    """`etl ingest root/runs` into root/wh, a copy of the warehouse `base` (a copy reads its
    own files: tests/views/test_relocate.py); the warehouse."""
    shutil.copytree(base, root / "wh", symlinks=True)
    return ingested(root)


def corpus_runs_ingested(root: Path, kineto: Path) -> Path:
    """corpus_wh's runs into a copy of `kineto`, which holds those of KINETO already."""
    from tests.load.test_corpus import RUNS
    from tests.views.warehouses import write_corpus_runs

    assert all(RUNS[name] == parts for name, parts in KINETO.items())  # the same traces
    write_corpus_runs(root / "runs", skip=KINETO)
    return ingested_onto(kineto, root)


@pytest.fixture(scope="session")
def corpus_wh(tmp_path_factory: pytest.TempPathFactory, kineto_wh: Path) -> Path:
    """Every corpus trace of tests/load/test_corpus.py (RUNS, under those names), the ncu
    exports alone and beside a trace, and the levels case (tests/views/warehouses.py),
    ingested once per session and shared by the xdist workers (built_once): the load and
    the view tests only read it."""
    return built_once(tmp_path_factory, "corpus",
                      lambda root: corpus_runs_ingested(root, kineto_wh))


# ---- a warehouse of every corpus trace that has a timeline (the replay's tests) ----

KINETO = {"amd_trace": ("hta", "amd_trace"),
          "alexnet": ("hta", "critical_path", "alexnet"),
          "event_sync": ("hta", "critical_path", "cuda_event_sync_multi_stream"),
          "df_index_resolver": ("hta", "df_index_resolver"),
          "nccl_parser_config": ("hta", "nccl_parser_config"),
          "negative_queue": ("hta", "negative_queue_length_values_check"),
          "ns_resolution_trace": ("hta", "ns_resolution_trace"),
          "control": ("hta", "trace_diff", "control"), "test": ("hta", "trace_diff", "test"),
          "trace_file_list": ("hta", "trace_file_list"),
          "trace_filter": ("hta", "trace_filter"), "triton_example": ("hta", "triton_example"),
          "with_gpu_user_annotation": ("hta", "with_gpu_user_annotation"),
          "h100_bert": ("other", "tracelens", "h100"),
          "b200_eager": ("other", "tracelens", "b200")}
NSYS = ("rtx2070s_dlprof_pytorch-dummy_nsys2022.1.sqlite",
        "rtx3060_p4arth_vecadd_nsys2025.5.sqlite", "rtxa4500_flame_resnet18-fwd_nsys2024.6.sqlite")


def kineto_ingested(root: Path) -> Path:
    for name, parts in KINETO.items():
        copy_corpus_run(corpus_path(*parts), root / "runs", name)
    return ingested(root)


@pytest.fixture(scope="session")
def kineto_wh(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Kineto traces of KINETO, which corpus_wh and timeline_warehouse both hold,
    ingested once per session (8 CPU s): each of those two starts from a copy of it."""
    return built_once(tmp_path_factory, "kineto", kineto_ingested)


def timelines_ingested(root: Path, kineto: Path) -> Path:
    """timeline_warehouse's runs into a copy of `kineto`, which holds those of KINETO."""
    shutil.copytree(kineto, root / "wh", symlinks=True)
    for file in NSYS:
        copy_corpus_run(corpus_path("nsys", file), root / "runs", "nsys_" + file.split("_")[0])
    tf = root / "runs" / "tf_v100" / "plugins" / "profile" / "session"
    tf.mkdir(parents=True)
    for pb in corpus_path("tf").glob("*.xplane.pb"):
        (tf / pb.name).symlink_to(pb)
    import etl

    results = etl.ingest(root / "runs", root / "wh")
    assert {r.status for r in results} == {"ingested"}, [r.error for r in results if r.error]
    # the critical paths too (derived files): the workers share the warehouse, and it must
    # not change under one while the other reads it (test_corpus_replay's calls find them)
    etl.api.critical_path(warehouse=root / "wh")
    return root / "wh"


@pytest.fixture(scope="session")
def timeline_warehouse(tmp_path_factory: pytest.TempPathFactory, kineto_wh: Path) -> Path:
    """Every corpus trace with a timeline, ingested once per session and shared by the
    xdist workers (built_once): the replay, what-if, sync and collective tests only read it."""
    return built_once(tmp_path_factory, "timelines",
                      lambda root: timelines_ingested(root, kineto_wh))
