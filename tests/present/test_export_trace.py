"""`etl export-trace`: a Chrome trace that ingests back to the same kernels and levels."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import cli


@pytest.fixture(scope="module")
def demo(demo_warehouse: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of this file's own: wh/ a copy of the session's demo warehouse (ingested
    once for every file that reads it; a copy reads its own files, tests/views/
    test_relocate.py), the exports and the warehouses they are ingested into beside it."""
    root = tmp_path_factory.mktemp("export")
    shutil.copytree(demo_warehouse, root / "wh", symlinks=True)
    return root


def export(demo: Path, run: str, out: Path, *options: str) -> dict:
    out.parent.mkdir(parents=True, exist_ok=True)
    result = cli("export-trace", run, "--warehouse", str(demo / "wh"), "-o", str(out),
                 *options)
    assert result.returncode == 0, result.stderr
    doc = json.loads(out.read_text())
    assert result.stdout.strip() == f"wrote {out} ({len(doc['traceEvents'])} events)"
    return doc


def fetch(warehouse: Path, sql: str, run: str) -> list[tuple]:
    import etl

    con = etl.connect(warehouse)
    try:
        return con.execute(sql, [run]).fetchall()
    finally:
        con.close()


KERNELS = ("SELECT kind, name, ts_ns, dur_ns, device_id, stream_id, correlation_id, op_name, "
           "layer, iteration, grid_x, block_x FROM kernels JOIN runs USING (run_id) "
           "WHERE run_name = ? ORDER BY ALL")
UTIL = ("SELECT iteration, window_start_ns, window_ns, busy_ns, gpu_util FROM gpu_utilization "
        "WHERE run_name = ? ORDER BY ALL")
CLOCK = ("SELECT source_id, iteration, clock, utc_offset_ns FROM iterations JOIN runs USING "
         "(run_id) WHERE run_name = ? ORDER BY ALL")


def test_round_trip(demo: Path) -> None:
    export(demo, "resnet_amp_eager", demo / "back" / "again" / "trace.json")
    ingest = cli("ingest", str(demo / "back" / "again"), "--warehouse", str(demo / "wh2"))
    assert ingest.returncode == 0, ingest.stderr
    original = fetch(demo / "wh", KERNELS, "resnet_amp_eager")
    assert len(original) == 275
    assert fetch(demo / "wh2", KERNELS, "again") == original
    assert fetch(demo / "wh2", UTIL, "again") == fetch(demo / "wh", UTIL, "resnet_amp_eager")
    clock = fetch(demo / "wh", CLOCK, "resnet_amp_eager")
    assert {(c, base) for _s, _i, c, base in clock} == {("base_time", 1712188800000000000)}
    assert fetch(demo / "wh2", CLOCK, "again") == clock


def test_ncu_levels_and_counters(demo: Path) -> None:
    doc = export(demo, "resnet_amp_eager", demo / "t" / "trace.json")
    events = doc["traceEvents"]
    with_ncu = {(e["ts"], e["name"]): e["args"] for e in events if "ncu id" in e.get("args", {})}
    levels = fetch(demo / "wh", "SELECT k.ts_ns, k.name, u.issue_slot_util, u.tc_issue_util "
                   "FROM kernel_utilization AS u JOIN kernels AS k USING (run_id, source_id, "
                   "kernel_id) WHERE u.run_name = ?", "resnet_amp_eager")
    assert len(with_ncu) == len(levels) == 50
    for ts_ns, name, issue, tc in levels:
        args = with_ncu[(ts_ns / 1000, name)]
        assert args["ncu issue_slot_util"] == pytest.approx(issue, rel=1e-12)
        assert args["ncu tc_issue_util"] == pytest.approx(tc, rel=1e-12)
    counters = [e for e in events if e["ph"] == "C"]
    utils = fetch(demo / "wh", "SELECT gpu_util FROM gpu_utilization WHERE run_name = ? "
                  "ORDER BY window_start_ns", "resnet_amp_eager")
    assert [c["args"]["gpu_util"] for c in counters] == [u for (u,) in utils] + [0]
    assert doc["deviceProperties"][0]["numSms"] == 108


def test_one_iteration_of_one_rank(demo: Path) -> None:
    doc = export(demo, "resnet_amp_ddp", demo / "i" / "trace.json", "--source", "1",
                 "--iteration", "3")
    gpu = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["pid"] == 0]
    (count,) = fetch(demo / "wh", "SELECT count(*) FROM kernels JOIN runs USING (run_id) "
                     "WHERE run_name = ? AND source_id = 1 AND iteration = 3",
                     "resnet_amp_ddp")[0]
    assert len(gpu) == count > 0
    assert doc["distributedInfo"] == {"rank": 1}
    assert [e["name"] for e in doc["traceEvents"] if e.get("name", "").startswith(
        "ProfilerStep")] == ["ProfilerStep#3"]


RANK_KERNELS = KERNELS.replace("SELECT kind", "SELECT rank, kind")
RANK_UTIL = UTIL.replace("SELECT iteration", "SELECT rank, device_id, iteration")


def test_several_ranks_in_one_trace_round_trip(demo: Path) -> None:
    from etl.present.export_trace import split_merged

    doc = export(demo, "resnet_amp_ddp", demo / "ddp" / "trace.json")
    names = {e["pid"]: e["args"]["name"] for e in doc["traceEvents"]
             if e["ph"] == "M" and e["name"] == "process_name"}
    assert sorted(names.values()) == ["rank 0 GPU 0", "rank 0 host pid 100",
                                      "rank 1 GPU 0", "rank 1 host pid 100"]
    gpu_pids = {n: p for p, n in names.items() if "GPU" in n}
    kernels_on = {n: sum(e["ph"] == "X" and e["pid"] == p and e.get("cat") == "kernel"
                         for e in doc["traceEvents"]) for n, p in gpu_pids.items()}
    per_rank = fetch(demo / "wh", "SELECT rank, count(*) FROM kernels JOIN runs USING "
                     "(run_id) WHERE run_name = ? AND kind = 'kernel' GROUP BY rank ORDER BY "
                     "rank", "resnet_amp_ddp")
    assert [(int(n.split()[1]), count) for n, count in sorted(kernels_on.items())] == per_rank
    back = demo / "ddp_back" / "again"
    back.mkdir(parents=True)
    for source, text in split_merged((demo / "ddp" / "trace.json").read_text()).items():
        (back / f"rank{source}.json").write_text(text)
    ingest = cli("ingest", str(back), "--warehouse", str(demo / "wh3"))
    assert ingest.returncode == 0, ingest.stderr
    original = fetch(demo / "wh", RANK_KERNELS, "resnet_amp_ddp")
    assert len(original) == 580 and {r[0] for r in original} == {0, 1}
    assert fetch(demo / "wh3", RANK_KERNELS, "again") == original
    assert fetch(demo / "wh3", RANK_UTIL, "again") == fetch(demo / "wh", RANK_UTIL,
                                                            "resnet_amp_ddp")


DIMENSIONS = ("SELECT model, precision, batch_size, tags, run_toml FROM runs WHERE run_name = ?")
ANOMALIES = ("SELECT kind, count(*) FROM anomalies JOIN runs USING (run_id) WHERE run_name = ? "
             "GROUP BY kind ORDER BY kind")


def test_folder_of_ranks_ingests_back_as_the_same_run(demo: Path) -> None:
    out = demo / "copies" / "ddp_copy"
    result = cli("export-trace", "resnet_amp_ddp", "--warehouse", str(demo / "wh"), "-o",
                 f"{out}/")
    assert result.returncode == 0, result.stderr
    files = ["rank0.pt.trace.json", "rank1.pt.trace.json"]
    assert sorted(p.name for p in out.iterdir()) == [*files, "run.toml"]
    assert result.stdout.splitlines() == [
        f"wrote {out / f} ({len(json.loads((out / f).read_text())['traceEvents'])} events)"
        for f in files]
    ingest = cli("ingest", str(out), "--warehouse", str(demo / "wh4"))
    assert ingest.returncode == 0, ingest.stderr
    original = fetch(demo / "wh", RANK_KERNELS, "resnet_amp_ddp")
    assert len(original) == 580 and {r[0] for r in original} == {0, 1}
    assert fetch(demo / "wh4", RANK_KERNELS, "ddp_copy") == original
    for sql in (RANK_UTIL, CLOCK, DIMENSIONS, ANOMALIES):
        assert fetch(demo / "wh4", sql, "ddp_copy") == fetch(demo / "wh", sql, "resnet_amp_ddp")
    assert fetch(demo / "wh4", DIMENSIONS, "ddp_copy")[0][1:3] == ("amp", 64)


def steps_in(doc: dict) -> list[tuple[str, str]]:
    return [(e["cat"], e["name"]) for e in doc["traceEvents"]
            if e.get("name", "").startswith("ProfilerStep#")]


def test_steps_of_another_format_come_back_as_kineto_markers(demo: Path) -> None:
    """nsys marks steps with NVTX ranges: the export writes NVTX ranges as user_annotation
    (HOST_CATEGORY), so the demo's ProfilerStep#N ranges are Kineto's step markers and no
    other is added; a source whose steps are not such events gets one ProfilerStep#N
    user_annotation per iteration (tests/present/test_export_categories.py)."""
    out = demo / "copies" / "nsys_copy"
    result = cli("export-trace", "resnet_amp_nsys", "--warehouse", str(demo / "wh"), "-o",
                 f"{out}/")
    assert result.returncode == 0, result.stderr
    doc = json.loads((out / "source0.pt.trace.json").read_text())
    assert sorted(steps_in(doc)) == [("user_annotation", f"ProfilerStep#{i}")
                                     for i in range(5)]
    ingest = cli("ingest", str(out), "--warehouse", str(demo / "wh5"))
    assert ingest.returncode == 0, ingest.stderr
    original = fetch(demo / "wh", KERNELS, "resnet_amp_nsys")
    assert len(original) == 200 and {r[9] for r in original} == set(range(5))
    assert fetch(demo / "wh5", KERNELS, "nsys_copy") == original
    util = fetch(demo / "wh", UTIL, "resnet_amp_nsys")
    assert len(util) == 5 and fetch(demo / "wh5", UTIL, "nsys_copy") == util
    kineto = export(demo, "resnet_amp_eager", demo / "steps" / "trace.json")
    assert steps_in(kineto) == [("cpu_op", f"ProfilerStep#{i}") for i in range(1, 6)]


def test_folder_export_refuses_a_folder_with_other_files(demo: Path) -> None:
    out = demo / "busy"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    result = cli("export-trace", "resnet_amp_eager", "--warehouse", str(demo / "wh"), "-o",
                 str(out))
    assert result.returncode == 1
    assert result.stderr.strip().endswith(f"{out}: holds other files (notes.txt) that `etl "
                                          "ingest` would read as part of the run; export "
                                          "into a new or empty folder")
    assert len(result.stderr.strip().splitlines()) == 1
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]
    (out / "notes.txt").unlink()
    again = [cli("export-trace", "resnet_amp_eager", "--warehouse", str(demo / "wh"), "-o",
                 str(out)).returncode for _ in range(2)]
    assert again == [0, 0]
    assert sorted(p.name for p in out.iterdir()) == ["run.toml", "source0.pt.trace.json"]


def test_errors_name_the_fix(demo: Path) -> None:
    unknown = cli("export-trace", "resnet_amp_ddp", "--source", "7", "--warehouse",
                  str(demo / "wh"), "-o", str(demo / "x.json"))
    assert unknown.returncode == 1 and "its sources: 0, 1" in unknown.stderr
    missing = cli("export-trace", "resnet_amp_eager", "--iteration", "9", "--warehouse",
                  str(demo / "wh"), "-o", str(demo / "x.json"))
    assert missing.returncode == 1 and "has no iteration 9" in missing.stderr
    assert not (demo / "x.json").exists()
