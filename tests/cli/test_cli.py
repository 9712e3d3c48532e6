"""The command line as users run it: ingest, query, runs, demo, errors, the DuckDB shell."""
from __future__ import annotations

import gzip
import hashlib
import json
import subprocess
from pathlib import Path

import pytest

from tests.conftest import (
    cli,
    cli_subprocess,
    duckdb_shell,
    kernel,
    launch,
    query_json,
    step,
    write_trace,
)


def tiny_events(shift: int = 0, busy: int = 40_000) -> list[dict]:
    return [step(1, shift, 100_000), launch(1, shift + 1_000), kernel(1, shift + 10_000, busy)]


def test_demo_ingest_and_query(tmp_path: Path) -> None:
    assert cli("demo", str(tmp_path / "demo")).returncode == 0
    result = cli("ingest", str(tmp_path / "demo"), "--warehouse", str(tmp_path / "wh"))
    assert result.returncode == 0, result.stderr
    assert "16 ingested" in result.stdout  # 3 PyTorch, nsys, 8 TF (xplane), 4 overhead
    assert "train.log: skipped" in result.stderr and "config.json: skipped" in result.stderr
    rows = query_json(tmp_path / "wh", "SELECT run_name, rank, gpu_util FROM run_summary "
                      "WHERE model = 'resnet50-synthetic' ORDER BY run_name, rank")
    assert [r["run_name"] for r in rows] == ["resnet_amp_ddp", "resnet_amp_ddp",
                                             "resnet_amp_eager", "resnet_amp_nsys",
                                             "resnet_fp32_eager"]
    assert all(0 < r["gpu_util"] <= 1 for r in rows)
    levels = query_json(tmp_path / "wh", "SELECT run_name, gpu_util, smsp_active_util, "
                        "issue_slot_util, matched_time_share FROM run_utilization "
                        "WHERE ncu_reason IS NULL")
    assert {r["run_name"] for r in levels} == {"resnet_amp_eager", "resnet_fp32_eager"}
    for r in levels:
        assert r["gpu_util"] >= r["smsp_active_util"] >= r["issue_slot_util"] > 0
        assert r["matched_time_share"] == 1.0
    listing = cli("runs", "--warehouse", str(tmp_path / "wh"))
    assert "resnet_amp_ddp" in listing.stdout and listing.returncode == 0


def test_query_formats(tmp_path: Path, runs_dir: Path) -> None:
    write_trace(runs_dir / "a" / "t.json", tiny_events())
    cli("ingest", str(runs_dir), "--warehouse", str(tmp_path / "wh"))
    csv_out = cli("query", "SELECT iteration, busy_ns FROM gpu_utilization", "--warehouse",
                  str(tmp_path / "wh"), "--format", "csv")
    assert csv_out.stdout.splitlines() == ["iteration,busy_ns", "1,40000"]
    table = cli("query", "SELECT 1 AS x", "--warehouse", str(tmp_path / "wh"))
    assert table.stdout.splitlines()[-1] == "(1 row)"
    bad = cli("query", "SELECT nope FROM kernels", "--warehouse", str(tmp_path / "wh"))
    assert bad.returncode == 1 and "Traceback" not in bad.stderr
    assert bad.stderr.startswith("error: query failed")


def test_reingest_is_noop_and_change_replaces(tmp_path: Path, runs_dir: Path) -> None:
    wh = str(tmp_path / "wh")
    write_trace(runs_dir / "a" / "t.json", tiny_events())
    write_trace(runs_dir / "b" / "t.json", tiny_events())
    cli("ingest", str(runs_dir), "--warehouse", wh)
    again = cli("ingest", str(runs_dir), "--warehouse", wh)
    assert "2 unchanged" in again.stdout
    write_trace(runs_dir / "a" / "t.json", tiny_events(busy=20_000))
    changed = cli("ingest", str(runs_dir / "a"), "--warehouse", wh)
    assert "1 ingested" in changed.stdout
    rows = query_json(tmp_path / "wh", "SELECT run_name, busy_ns FROM gpu_utilization "
                      "ORDER BY run_name")
    assert rows == [{"run_name": "a", "busy_ns": 20_000}, {"run_name": "b", "busy_ns": 40_000}]
    counts = query_json(tmp_path / "wh", "SELECT count(*) AS n FROM kernels")
    assert counts == [{"n": 2}]


@pytest.mark.parametrize("name,content,fragment", [
    ("truncated.json", b'{"traceEvents": [{"ph": "X", "cat": "kernel"', "truncated"),
    ("garbage.pt.trace.json", b"\x00\x01garbage\xff", "not valid JSON"),
    ("empty.json", b"", "file is empty"),
    ("cut.json.gz", gzip.compress(b'{"traceEvents": []}' * 50, mtime=0)[:40],
     "gzip stream is truncated"),
], ids=["truncated-json", "garbage", "empty", "truncated-gzip"])
def test_unreadable_trace_refuses_only_its_run(tmp_path: Path, runs_dir: Path, name: str,
                                               content: bytes, fragment: str) -> None:
    write_trace(runs_dir / "good" / "t.json", tiny_events())
    write_trace(runs_dir / "bad" / "ok.json", tiny_events())
    (runs_dir / "bad" / name).write_bytes(content)
    result = cli("ingest", str(runs_dir), "--warehouse", str(tmp_path / "wh"))
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and f"bad/{name}" in errors[0] and fragment in errors[0]
    assert "Traceback" not in result.stderr
    assert query_json(tmp_path / "wh", "SELECT run_name FROM runs") == [{"run_name": "good"}]
    assert query_json(tmp_path / "wh", "SELECT DISTINCT r.run_name FROM kernels "
                      "JOIN runs r USING (run_id)") == [{"run_name": "good"}]


def test_folder_without_profiler_output_is_refused(tmp_path: Path, runs_dir: Path) -> None:
    (runs_dir / "nothing").mkdir()
    (runs_dir / "nothing" / "config.json").write_text('{"lr": 0.1}')
    (runs_dir / "nothing" / "run.toml").write_text('model = "x"\n')
    result = cli("ingest", str(runs_dir), "--warehouse", str(tmp_path / "wh"))
    assert result.returncode == 1 and "no profiler output" in result.stderr


def test_debug_shows_traceback(tmp_path: Path, runs_dir: Path) -> None:
    (runs_dir / "bad").mkdir()
    (runs_dir / "bad" / "t.json").write_text("{")
    result = cli("--debug", "ingest", str(runs_dir), "--warehouse", str(tmp_path / "wh"))
    assert result.returncode != 0 and "Traceback" in result.stderr


def test_bad_run_toml_is_refused(tmp_path: Path, runs_dir: Path) -> None:
    write_trace(runs_dir / "r" / "t.json", tiny_events())
    (runs_dir / "r" / "run.toml").write_text('batch_size = "large"\n')
    result = cli("ingest", str(runs_dir), "--warehouse", str(tmp_path / "wh"))
    assert result.returncode == 1
    assert "r/run.toml" in result.stderr and "batch_size" in result.stderr


def test_duplicate_run_names_are_an_error(tmp_path: Path) -> None:
    for parent in ("x", "y"):
        write_trace(tmp_path / parent / "same" / "t.json", tiny_events())
    result = cli("ingest", str(tmp_path / "x"), str(tmp_path / "y"),
                 "--warehouse", str(tmp_path / "wh"))
    assert result.returncode == 1 and "two run folders named 'same'" in result.stderr


def test_hostile_run_name_is_data(tmp_path: Path, runs_dir: Path) -> None:
    name = "x'; DROP VIEW gpu_utilization; --"
    write_trace(runs_dir / name / "t.json", tiny_events())
    (runs_dir / name / "run.toml").write_text('model = "a\\"; DROP TABLE runs; --"\n')
    assert cli("ingest", str(runs_dir), "--warehouse", str(tmp_path / "wh")).returncode == 0
    rows = query_json(tmp_path / "wh", "SELECT r.run_name, r.model, g.gpu_util FROM runs r "
                      "JOIN gpu_utilization g USING (run_id)")
    assert rows == [{"run_name": name, "model": 'a"; DROP TABLE runs; --', "gpu_util": 0.4}]
    assert {p.name for p in (tmp_path / "wh").iterdir()} <= {
        "data", "catalog", "staging", "readers", "derived", "warehouse.duckdb", "views.sha256",
        ".publish.lock", "warehouse.duckdb.wal"}


def test_duckdb_shell_sees_views_from_any_directory(tmp_path: Path, runs_dir: Path) -> None:
    write_trace(runs_dir / "a" / "t.json", tiny_events())
    cli("ingest", str(runs_dir), "--warehouse", str(tmp_path / "wh"))
    out = subprocess.run([str(duckdb_shell()), "-readonly", "-csv", str(tmp_path / "wh" /
                          "warehouse.duckdb"), "-c", "SELECT iteration, gpu_util FROM "
                          "gpu_utilization"], capture_output=True, text=True, cwd="/",
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["iteration,gpu_util", "1,0.4"]


def test_shell_open_while_ingesting_sees_new_runs(tmp_path: Path, runs_dir: Path) -> None:
    import duckdb

    write_trace(runs_dir / "a" / "t.json", tiny_events())
    wh = tmp_path / "wh"
    cli("ingest", str(runs_dir), "--warehouse", str(wh))
    reader = duckdb.connect(str(wh / "warehouse.duckdb"), read_only=True)
    write_trace(runs_dir / "b" / "t.json", tiny_events(busy=10_000))
    result = cli("ingest", str(runs_dir / "b"), "--warehouse", str(wh))
    assert result.returncode == 0, result.stderr
    rows = reader.execute("SELECT run_name, busy_ns FROM gpu_utilization ORDER BY 1").fetchall()
    assert rows == [("a", 40_000), ("b", 10_000)]


def test_every_command_has_an_example() -> None:
    from click.testing import CliRunner

    from etl.cli import main

    for name in main.commands:
        help_text = CliRunner().invoke(main, [name, "--help"]).output
        assert "Example:" in help_text and f"etl {name.split('-')[0]}" in help_text, name


def test_json_output_is_an_array_of_objects(tmp_path: Path, runs_dir: Path) -> None:
    write_trace(runs_dir / "a" / "t.json", tiny_events())
    cli("ingest", str(runs_dir), "--warehouse", str(tmp_path / "wh"))
    out = cli("query", "SELECT run_name, sources FROM runs", "--warehouse",
              str(tmp_path / "wh"), "--format", "json")
    [row] = json.loads(out.stdout)
    assert row["run_name"] == "a" and row["sources"][0]["path"] == "t.json"
    data = (runs_dir / "a" / "t.json").read_bytes()
    assert row["sources"][0]["sha256"] == hashlib.sha256(data).hexdigest()
    assert row["sources"][0]["bytes"] == len(data)


def test_run_ids_are_the_content_hash_on_first_ingest_and_again(tmp_path: Path,
                                                                 runs_dir: Path) -> None:
    """A run new to the warehouse is hashed while its traces are read; the rows still
    carry the content hash of its files, as on a re-ingest (hashed before anything)."""
    write_trace(runs_dir / "a" / "t.json", tiny_events())
    (runs_dir / "a" / "run.toml").write_text('gpu = "A100"\n')
    files = sorted((p.name, hashlib.sha256(p.read_bytes()).hexdigest())
                   for p in (runs_dir / "a").iterdir())
    digest = hashlib.sha256(b"a")
    for rel, sha in files:
        digest.update(b"\0" + rel.encode() + b"\0" + sha.encode())
    expected = digest.hexdigest()[:16]
    warehouse = tmp_path / "wh"
    for status in ("ingested", "unchanged"):
        out = cli("ingest", str(runs_dir), "--warehouse", str(warehouse))
        assert out.returncode == 0 and status in out.stdout, out.stdout
        ids = query_json(warehouse, "SELECT DISTINCT h.run_id, h.publish_id = r.publish_id "
                         "AS same_publish FROM host_events h JOIN runs r USING (run_id)")
        assert ids == [{"run_id": expected, "same_publish": True}]


def test_concatenated_gzip_members_are_all_read(tmp_path: Path, runs_dir: Path) -> None:
    text = (runs_dir.parent / "t.json")
    write_trace(text, tiny_events())
    data = text.read_bytes()
    half = len(data) // 2
    (runs_dir / "a").mkdir()
    (runs_dir / "a" / "t.json.gz").write_bytes(gzip.compress(data[:half], mtime=0)
                                               + gzip.compress(data[half:], mtime=0))
    assert cli("ingest", str(runs_dir), "--warehouse", str(tmp_path / "wh")).returncode == 0
    assert query_json(tmp_path / "wh", "SELECT busy_ns FROM gpu_utilization") == [
        {"busy_ns": 40_000}]


def test_salvage_keeps_complete_events_of_a_truncated_trace(tmp_path: Path,
                                                            runs_dir: Path) -> None:
    events = tiny_events() + [launch(2, 50_000), kernel(2, 60_000, 1_000)] * 1
    write_trace(tmp_path / "whole.json", events)
    data = (tmp_path / "whole.json").read_bytes()
    (runs_dir / "cut").mkdir()
    (runs_dir / "cut" / "t.json").write_bytes(data[: data.rindex(b'{"ph"') + 20])
    refused = cli("ingest", str(runs_dir), "--warehouse", str(tmp_path / "wh"))
    assert refused.returncode == 1 and "--salvage" in refused.stderr
    kept = cli("ingest", str(runs_dir), "--warehouse", str(tmp_path / "wh"), "--salvage")
    assert kept.returncode == 0, kept.stderr
    rows = query_json(tmp_path / "wh", "SELECT truncated, len(sources) AS n, "
                      "(SELECT count(*) FROM kernels) AS kernels, (SELECT list(kind) FROM "
                      "anomalies) AS kinds FROM runs")
    # the last kernel was cut off: 4 complete events remain, one of them a kernel
    assert rows == [{"truncated": True, "n": 1, "kernels": 1, "kinds": ["truncated_input"]}]


def test_parallel_jobs_give_the_same_warehouse(tmp_path: Path, runs_dir: Path) -> None:
    for i in range(4):
        write_trace(runs_dir / f"r{i}" / "t.json", tiny_events(busy=10_000 * (i + 1)))
    serial = cli("ingest", str(runs_dir), "--warehouse", str(tmp_path / "a"), "--jobs", "1")
    parallel = cli("ingest", str(runs_dir), "--warehouse", str(tmp_path / "b"), "--jobs", "2")
    assert serial.returncode == parallel.returncode == 0
    sql = "SELECT run_name, run_id, busy_ns FROM gpu_utilization ORDER BY run_name"
    assert query_json(tmp_path / "a", sql) == query_json(tmp_path / "b", sql)
    assert len(query_json(tmp_path / "b", sql)) == 4


def test_the_command_line_as_a_process_of_its_own(tmp_path: Path, runs_dir: Path) -> None:
    """`python -m etl.cli` in a process of its own (the other tests of the command line run
    it in-process): the module entry point, output on the real stdout and stderr (which
    Cli.main reconfigures), an error's one line and exit code, and a file-level warning."""
    write_trace(runs_dir / "a" / "t.json", tiny_events())
    (runs_dir / "a" / "notes.txt").write_text("not a trace")
    ingested = cli_subprocess("ingest", runs_dir, "--warehouse", tmp_path / "wh")
    assert ingested.returncode == 0, ingested.stderr
    assert "1 ingested" in ingested.stdout and "notes.txt: skipped" in ingested.stderr
    out = cli_subprocess("query", "SELECT run_name, busy_ns FROM gpu_utilization", "--warehouse",
                         tmp_path / "wh", "--format", "csv")
    assert out.returncode == 0 and out.stdout.splitlines() == ["run_name,busy_ns", "a,40000"]
    bad = cli_subprocess("query", "SELECT nope", "--warehouse", tmp_path / "wh")
    assert bad.returncode == 1 and bad.stderr.startswith("error: query failed")
    assert "Traceback" not in bad.stderr and bad.stdout == ""


@pytest.mark.parametrize("command", [
    ["report", "-o", "missing/dir/r.html"],
    ["export-trace", "resnet_amp_eager", "-o", "missing/x.json"],
    ["query", "SELECT 1", "-o", "missing/x.csv"],
])
def test_an_output_file_in_a_missing_folder_is_one_line_before_the_work(
        tmp_path: Path, command: list[str]) -> None:
    """The folder is checked before the warehouse is even opened (the one named here does
    not exist: the answer is about the output, not the warehouse)."""
    out = cli(*command, "--warehouse", str(tmp_path / "no-warehouse"), cwd=tmp_path)
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert out.stderr.splitlines() == [
        "error: -o missing/" + command[-1].split("/", 1)[1] + ": the folder "
        f"{command[-1].rsplit('/', 1)[0]} does not exist; create it (mkdir -p "
        f"{command[-1].rsplit('/', 1)[0]}) or write elsewhere"]
    assert not (tmp_path / "missing").exists()


def test_a_single_trace_file_is_a_run_named_after_it(tmp_path: Path) -> None:
    trace = tmp_path / "rank0.pt.trace.json.gz"
    plain = write_trace(tmp_path / "plain.json", tiny_events())
    trace.write_bytes(gzip.compress(plain.read_bytes()))
    (tmp_path / "notes.txt").write_text("not a trace")
    out = cli("ingest", str(trace), "--warehouse", str(tmp_path / "wh"))
    assert out.returncode == 0, out.stderr
    [run] = query_json(tmp_path / "wh", "SELECT run_name, run_path, len(sources) AS n, "
                       "kernel_count FROM runs")
    assert run == {"run_name": "rank0", "run_path": str(trace), "n": 1, "kernel_count": 1}
    again = cli("ingest", str(trace), "--warehouse", str(tmp_path / "wh"))
    assert "1 unchanged" in again.stdout
    bad = cli("ingest", str(tmp_path / "notes.txt"), "--warehouse", str(tmp_path / "wh"))
    assert bad.returncode == 1 and bad.stderr.splitlines() == [
        f"error: {tmp_path / 'notes.txt'}: not a recognised profiler output; `etl formats` "
        "lists what is read (a folder of such files is a run: pass the folder)"]


def test_ingest_counts_anomalies_by_kind_and_says_one_run(tmp_path: Path, runs_dir: Path
                                                          ) -> None:
    """Two kernels without a launch and no step markers: counts by kind, no SQL; `1 run`."""
    write_trace(runs_dir / "odd" / "t.json", [launch(1, 1_000), kernel(1, 10_000, 5_000),
                                               kernel(8, 20_000, 5_000, name="k2"),
                                               kernel(9, 30_000, 5_000, name="k3")])
    out = cli("ingest", str(runs_dir / "odd"), "--warehouse", str(tmp_path / "wh"))
    assert out.returncode == 0, out.stderr
    [line] = [x for x in out.stderr.splitlines() if "recorded" in x]
    assert line == ("warning: odd: 3 anomalies recorded: kernel_without_launch 2, "
                    "no_step_markers 1 (each with its detail in the view run_anomalies, by "
                    "run_name, and in etl report)")
    assert "SELECT" not in out.stderr and "│ 1 run " in out.stdout
    rows = query_json(tmp_path / "wh", "SELECT kind, count(*) AS n FROM run_anomalies "
                      "WHERE run_name = 'odd' GROUP BY kind ORDER BY kind")
    assert rows == [{"kind": "kernel_without_launch", "n": 2}, {"kind": "no_step_markers", "n": 1}]


def test_seconds_per_iteration_is_kept_and_checked(tmp_path: Path, runs_dir: Path) -> None:
    write_trace(runs_dir / "timed" / "t.json", tiny_events())
    (runs_dir / "timed" / "run.toml").write_text("seconds_per_iteration = 0.02\n")
    write_trace(runs_dir / "bad" / "t.json", tiny_events())
    (runs_dir / "bad" / "run.toml").write_text("seconds_per_iteration = -1\n")
    out = cli("ingest", str(runs_dir), "--warehouse", str(tmp_path / "wh"))
    assert out.returncode == 1
    assert [x for x in out.stderr.splitlines() if "bad" in x] == [
        "error: bad/run.toml: key seconds_per_iteration: seconds_per_iteration must be a "
        "positive number of seconds. write the training log's time per iteration, e.g. 0.125"]
    assert query_json(tmp_path / "wh", "SELECT run_name, seconds_per_iteration FROM runs") == [
        {"run_name": "timed", "seconds_per_iteration": 0.02}]
