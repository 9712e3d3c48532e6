"""The run tables' writer: row groups written in a background thread, in order, with any
write error reaching the ingest."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from etl.warehouse import store as warehouse
from etl.warehouse.store import TableWriter


def _batch(start: int, n: int) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table({"source_id": pa.array([0] * n, pa.int32()), "kind": ["x"] * n,
                     "event_id": ids, "detail": [f"m{i}" for i in ids],
                     "ncu_source_id": pa.nulls(n, pa.int32()), "ncu_id": pa.nulls(n, pa.int64())})


def test_groups_are_written_in_order_with_the_constants(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(warehouse, "STREAM_ROW_GROUP_ROWS", 10)
    asked: list[int] = []

    def constants() -> dict[str, str]:
        asked.append(1)
        return {"run_id": "r", "publish_id": "p"}

    writer = TableWriter(tmp_path, "anomalies", constants)
    for start in range(0, 95, 7):
        writer.write(_batch(start, 7))
    writer.close()
    got = pq.read_table(tmp_path / "anomalies.parquet")
    assert got["event_id"].to_pylist() == list(range(0, 98))
    assert set(got["run_id"].to_pylist()) == {"r"} and set(got["publish_id"].to_pylist()) == {"p"}
    assert asked == [1], "the ids are asked for once, at the first batch"


def test_an_error_of_the_background_write_reaches_the_writer(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(warehouse, "STREAM_ROW_GROUP_ROWS", 10)
    writer = TableWriter(tmp_path, "anomalies", {"run_id": "r", "publish_id": "p"})

    def full_disk(*args: Any, **kwargs: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(writer._writer, "write_table", full_disk)
    writer.write(_batch(0, 12))  # a full group: its write starts in the background
    with pytest.raises(OSError, match="No space left"):
        writer.close()


def test_a_forked_child_gets_its_own_writer_thread(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The thread does not survive fork (only the executor object would): a child that
    reused the parent's executor would wait forever for its first row group."""
    import os
    import signal
    import time

    monkeypatch.setattr(warehouse, "STREAM_ROW_GROUP_ROWS", 10)
    parent = TableWriter(tmp_path, "anomalies", {"run_id": "r", "publish_id": "p"})
    parent.write(_batch(0, 12))  # the parent's writer thread now exists
    parent.close()
    child_dir = tmp_path / "child"
    child_dir.mkdir()
    pid = os.fork()
    if pid == 0:  # the child: write and close a table, then leave without pytest's exit
        try:
            child = TableWriter(child_dir, "anomalies", {"run_id": "r", "publish_id": "p"})
            child.write(_batch(0, 12))
            child.close()
            os._exit(0)
        except BaseException:
            os._exit(1)
    deadline = time.monotonic() + 30
    while (status := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    if status[0] == 0:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        pytest.fail("the forked child's write never finished")
    assert os.waitstatus_to_exitcode(status[1]) == 0
    assert pq.read_table(child_dir / "anomalies.parquet").num_rows == 12


def test_distinct_columns_are_stored_without_a_dictionary(tmp_path: Path) -> None:
    """schemas/*.toml marks ids and start times `distinct`; every other column (names,
    small integers) gets a dictionary."""
    from etl.core.schema import table_schema

    schema = table_schema("host_events")
    n = 50

    def value(kind: pa.DataType, i: int) -> Any:
        if pa.types.is_list(kind):  # e.g. input_types: a one-item list
            return [value(kind.value_type, i)]
        return f"v{i % 3}" if pa.types.is_string(kind) else i % 3

    columns = {f.name: pa.array([value(f.type, i) for i in range(n)], f.type)
               for f in schema.arrow() if f.name not in ("run_id", "publish_id")}
    writer = TableWriter(tmp_path, "host_events", {"run_id": "r", "publish_id": "p"})
    writer.write(pa.table(columns))
    writer.close()
    group = pq.ParquetFile(tmp_path / "host_events.parquet").metadata.row_group(0)
    # a list column's path is name.list.element: its top-level name is the column
    with_dictionary = {group.column(i).path_in_schema.split(".")[0]
                       for i in range(group.num_columns)
                       if group.column(i).dictionary_page_offset is not None}
    distinct = {c.name for c in schema.columns if c.distinct}
    assert distinct == {"event_id", "ts_ns", "correlation_id", "external_id",
                        "parent_event_id"}
    assert with_dictionary == set(schema.names) - distinct
