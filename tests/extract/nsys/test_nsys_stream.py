"""The streaming nsys reader against a naive sqlite3 reading, and its page decoder against
sqlite3's own values; step ranges named by run.toml's step_pattern."""
from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from etl.core.errors import InputError
from etl.extract.kineto import kernel_join
from etl.extract.nsys import pages, spill
from etl.extract.nsys.decode import Export
from etl.extract.nsys.read import read as ingest_sqlite
from etl.extract.trace_role import PipelineOptions, Sinks
from tests.conftest import corpus_path
from tests.extract.nsys.test_nsys import tiny_export
from tests.oracle import naive_nsys

EXPORTS = ["rtx2070s_dlprof_pytorch-dummy_nsys2022.1.sqlite",
           "rtx3060_p4arth_vecadd_nsys2025.5.sqlite",
           "rtx4090_lashi_memTransfer_NO-KERNELS_nsys2023.2.sqlite",
           "rtxa4500_flame_resnet18-fwd_nsys2024.6.sqlite"]


def _ingest(path: Path, tmp_path: Path, **options: Any) -> tuple[Any, dict[str, list[dict]]]:
    got: dict[str, list[dict]] = {}

    def sink(name: str) -> Any:
        return lambda table: got.setdefault(name, []).extend(table.to_pylist())

    sinks = Sinks(sink("host_events"), sink("kernels"), sink("anomalies"), lambda: None,
                  lambda name, table: got.setdefault(name, []).extend(table.to_pylist()))
    spill = tmp_path / f"spill-{len(list(tmp_path.iterdir()))}"
    return ingest_sqlite(path, 1, None, spill, sinks, PipelineOptions(**options)), got


@pytest.mark.parametrize("name", EXPORTS)
def test_streamed_tables_equal_a_naive_reading(name: str, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Small chunks, pages and join partitions: every boundary is crossed many times."""
    monkeypatch.setattr(kernel_join, "PART_ROWS", 500)
    monkeypatch.setattr(pages, "BATCH_PAGES", 3)
    monkeypatch.setattr(spill, "SCATTER_ROWS", 50)
    path = corpus_path("nsys", name)
    _, got = _ingest(path, tmp_path, chunk_rows=17)
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    session = (con.execute("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME")
               .fetchone() or (0,))[0]
    host = sorted((h["event_id"], h["category"], h["name"], h["ts_ns"] - session,
                   h["dur_ns"], int(h["pid"]) << 24 | int(h["tid"]), h["correlation_id"])
                  for h in got["host_events"])
    naive_host = [(i, c, n, s, d, (t or 0) & 0xFFFFFFFFFFFF, corr)
                  for i, c, n, s, d, t, corr in naive_nsys.host_rows(path)]
    assert host == naive_host
    kernels = sorted((k["kernel_id"], k["kind"], k["name"], k["ts_ns"] - session, k["dur_ns"],
                      k["device_id"], k["correlation_id"], k["grid_x"], k["block_x"],
                      k["shared_memory_bytes"], k["launch_event_id"])
                     for k in got.get("kernels", []))
    assert kernels == naive_nsys.gpu_rows(path)


def test_page_decoder_reads_what_sqlite_reads(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Every integer size and sign, NULL, the constants 0 and 1, reals, text in a numeric
    column (NULL), a column added later (NULL in older records), an INTEGER PRIMARY KEY,
    a b-tree of several levels, and a long text that forces the sqlite3 path midway."""
    monkeypatch.setattr(pages, "BATCH_PAGES", 2)
    path = tmp_path / "t.sqlite"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE NVTX_EVENTS (textId INTEGER PRIMARY KEY, start INT, end INT, "
                "eventType REAL, text TEXT)")
    values = [0, 1, -1, 127, -128, 255, 32767, -32768, 8388607, -8388608, 2**31 - 1, -2**31,
              2**47 - 1, -2**47, 2**63 - 1, -2**63, None, "x", 2.5]
    rows = [(i * 3, values[i % len(values)], values[(i * 7) % len(values)], None)
            for i in range(4000)]
    con.executemany("INSERT INTO NVTX_EVENTS (textId, start, end, eventType) VALUES (?, ?, ?, ?)",
                    rows)
    con.execute("ALTER TABLE NVTX_EVENTS ADD COLUMN globalTid INT")
    con.execute("INSERT INTO NVTX_EVENTS VALUES (20000, 5, 6, 1.5, ?, 77)", ("y" * 9000,))
    con.execute("INSERT INTO NVTX_EVENTS VALUES (20001, 7, 8, 3, NULL, -77)")
    con.commit()
    expected = con.execute("SELECT textId, start, end, eventType, globalTid FROM NVTX_EVENTS "
                           "ORDER BY rowid").fetchall()
    con.close()
    import pyarrow as pa

    export = Export(path)
    assert export.pages is not None and len(export.pages.leaf_pages(2)) > 2  # several levels
    got = export.read("NVTX_EVENTS", "nvtx", {"text_id": pa.int64(), "start": pa.int64(),
                                             "end": pa.int64(), "event_type": pa.float64(),
                                             "thread": pa.int64()})
    export.close()

    def numeric(v: Any, real: bool = False) -> Any:
        return None if isinstance(v, str) else (float(v) if real and v is not None else
                                                 (v if real or not isinstance(v, float) else None))

    want = [(numeric(i), numeric(s), numeric(e), numeric(t, True), numeric(g))
            for i, s, e, t, g in expected]
    assert list(zip(*(got[k].to_pylist() for k in ("text_id", "start", "end", "event_type",
                                                   "thread")))) == want


def _stepped_export(path: Path) -> Path:
    """Two NVTX ranges "batch 7" [100, 200) and "batch 8" [200, 300), a range "conv"
    [110, 150) inside the first; a launch in each (at 120 and 220) and its kernel."""
    con = sqlite3.connect(path)
    con.executescript("""
        CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INTEGER);
        INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (1000000000000);
        CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT);
        INSERT INTO StringIds VALUES (1, 'cudaLaunchKernel'), (2, 'gemm');
        CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INT, end INT, globalTid INT,
            correlationId INT, nameId INT);
        INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (120, 130, 5, 1, 1), (220, 230, 5, 2, 1);
        CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INT, end INT, deviceId INT,
            streamId INT, correlationId INT, demangledName INT);
        INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (140, 160, 0, 7, 1, 2),
            (240, 260, 0, 7, 2, 2);
        CREATE TABLE NVTX_EVENTS (start INT, end INT, eventType INT, text TEXT,
            globalTid INT);
        INSERT INTO NVTX_EVENTS VALUES (100, 200, 59, 'batch 7', 5), (200, 300, 59, 'batch 8', 5),
            (110, 150, 59, 'conv', 5);
    """)
    con.commit()
    con.close()
    return path


def test_step_pattern_names_the_step_ranges(tmp_path: Path) -> None:
    path = _stepped_export(tmp_path / "steps.sqlite")
    result, got = _ingest(path, tmp_path, step_pattern=r"^batch (\d+)$")
    start = 1000000000000
    assert [(i["iteration"], i["start_ns"] - start, i["end_ns"] - start, i["event_id"])
            for i in result.iterations.to_pylist()] == [(7, 100, 200, 2), (8, 200, 300, 3)]
    assert [(k["iteration"], k["layer"]) for k in got["kernels"]] == [(7, "conv"), (8, None)]
    # without it, the defaults (ProfilerStep#N, iterationN, stepN) find no step: the
    # ranges are layers and one row spans the trace
    result, got = _ingest(path, tmp_path)
    assert [i["boundary"] for i in result.iterations.to_pylist()] == ["whole_trace"]
    assert [(k["iteration"], k["layer"]) for k in got["kernels"]] == [
        (None, "conv"), (None, "batch 8")]


def test_run_toml_step_pattern_reaches_the_reader(tmp_path: Path) -> None:
    import etl

    folder = tmp_path / "runs" / "r"
    folder.mkdir(parents=True)
    _stepped_export(folder / "profile.sqlite")
    (folder / "run.toml").write_text("step_pattern = '^batch (\\d+)$'\n")
    [run] = etl.ingest([tmp_path / "runs"], tmp_path / "wh")
    assert run.status == "ingested", run.error
    with etl.connect(tmp_path / "wh") as con:
        assert con.execute("SELECT iteration FROM iterations ORDER BY 1").fetchall() == [
            (7,), (8,)]


@pytest.mark.parametrize("pattern,problem", [("^batch \\d+$", "no group"),
                                             ("^batch (\\d+$", "not a regular expression")])
def test_a_bad_step_pattern_refuses_the_run_in_one_line(tmp_path: Path, pattern: str,
                                                        problem: str) -> None:
    from etl.core.errors import InputError
    from etl.load.runfolder import read_run_toml

    (tmp_path / "run.toml").write_text(f"step_pattern = '{pattern}'\n")
    with pytest.raises(InputError) as info:
        read_run_toml(tmp_path / "run.toml")
    assert problem in info.value.line() and "step_pattern" in info.value.line()


def test_a_step_number_that_is_no_number_is_refused_in_one_line(tmp_path: Path) -> None:
    from etl.core.errors import InputError

    path = _stepped_export(tmp_path / "steps.sqlite")
    with pytest.raises(InputError) as info:
        _ingest(path, tmp_path, step_pattern=r"^(batch) \d+$")
    assert "'batch 7'" in info.value.line() and "group 1 ('batch')" in info.value.line()


def test_gpu_tables_read_by_a_worker_give_the_same_tables(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """workers=2: a second process reads the activity tables while the host rows are read
    and sorted here. Every table equals the one-process reading: kernel ids after the host
    rows, names of copies and sets (coded in both processes), launches joined across many
    partitions, the never-popped last step closed with the worker's GPU rows."""
    monkeypatch.setattr(kernel_join, "PART_ROWS", 500)
    path = corpus_path("nsys", "rtxa4500_flame_resnet18-fwd_nsys2024.6.sqlite")
    one, got_one = _ingest(path, tmp_path, chunk_rows=97)
    two, got_two = _ingest(path, tmp_path, chunk_rows=97, workers=2)
    assert {k["kind"] for k in got_one["kernels"]} == {"kernel", "memcpy", "memset"}
    assert [a["kind"] for a in got_one["anomalies"]] == ["step_end_inferred"]
    for table in ("host_events", "kernels", "anomalies"):
        assert sorted(map(repr, got_two[table])) == sorted(map(repr, got_one[table]))
    assert two.iterations.equals(one.iterations) and two.devices.equals(one.devices)


def _export_with_a_broken_kernel_table(path: Path) -> Path:
    con = sqlite3.connect(tiny_export(path, None))
    [(root,)] = con.execute("SELECT rootpage FROM sqlite_master "
                            "WHERE name = 'CUPTI_ACTIVITY_KIND_KERNEL'").fetchall()
    page_size = con.execute("PRAGMA page_size").fetchone()[0]
    con.close()
    with open(path, "r+b") as fh:  # the kernel table's only page: not a b-tree page
        fh.seek((root - 1) * page_size)
        fh.write(b"\x00" * 16)
    return path


@pytest.mark.parametrize("workers", [1, 2])
def test_a_gpu_table_that_cannot_be_read_is_one_line_in_either_process(
        tmp_path: Path, workers: int) -> None:
    path = _export_with_a_broken_kernel_table(tmp_path / "broken.sqlite")
    with pytest.raises(InputError) as info:
        _ingest(path, tmp_path, workers=workers)
    line = info.value.line()
    assert line.startswith(str(path)) and "CUPTI_ACTIVITY_KIND_KERNEL" in line
    assert "\n" not in line and not (tmp_path / "spill-0").exists()


def _launch_cases_export(path: Path) -> Path:
    """Calls 0 and 1 share correlation id 5 (the first launches), call 0 inside the NVTX
    range "conv1" (event 3; its step "iteration1"'s span holds everything); kernel 4 has
    id 5, kernel 5 id 9 with no call, copy 6 id 8 with none, kernel 7 id 7 (call 2, no
    layer: outside "conv1")."""
    con = sqlite3.connect(path)
    con.executescript("""
        CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INTEGER);
        INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (1700000000000000000);
        CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT);
        INSERT INTO StringIds VALUES (1, 'cudaLaunchKernel'), (2, 'gemm'), (3, 'relu');
        CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INT, end INT, globalTid INT,
            correlationId INT, nameId INT);
        INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (100, 120, 7, 5, 1), (150, 160, 7, 5, 1),
            (300, 310, 7, 7, 1);
        CREATE TABLE NVTX_EVENTS (start INT, end INT, eventType INT, textId INT,
            globalTid INT, text TEXT);
        INSERT INTO NVTX_EVENTS VALUES (90, 130, 59, NULL, 7, 'conv1'),
            (50, 900, 59, NULL, 7, 'iteration1');
        CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INT, end INT, deviceId INT,
            streamId INT, correlationId INT, shortName INT);
        INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (400, 500, 0, 7, 5, 2),
            (510, 520, 0, 7, 9, 3);
        CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INT, end INT, deviceId INT,
            streamId INT, correlationId INT, bytes INT, copyKind INT);
        INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (530, 540, 0, 7, 8, 64, 1);
        INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (600, 650, 0, 7, 7, 3);
    """)
    con.commit()
    con.close()
    return path


@pytest.mark.parametrize("workers", [1, 2])
def test_launch_layer_and_status_of_every_gpu_row_by_hand(tmp_path: Path,
                                                          workers: int) -> None:
    """The first of two calls with one id is the launch; a kernel without a call has no
    launch, layer or iteration and is an anomaly (a copy without one is not)."""
    path = _launch_cases_export(tmp_path / "launches.sqlite")
    _, got = _ingest(path, tmp_path, workers=workers)
    rows = {(k["kernel_id"], k["kind"], k["name"], k["launch_event_id"], k["layer"],
             k["layer_kind"], k["layer_status"], k["iteration"]) for k in got["kernels"]}
    assert rows == {
        (5, "kernel", "gemm", 0, "conv1", "nvtx", "enclosing_scope", 1),
        (6, "kernel", "relu", None, None, None, "no_launch", None),
        (7, "kernel", "relu", 2, None, None, "no_scope", 1),
        (8, "memcpy", "[CUDA memcpy HtoD]", None, None, None, "no_launch", None)}
    assert [(a["kind"], a["event_id"]) for a in got["anomalies"]] == [
        ("kernel_without_launch", 6)]

