"""Progress inside one big trace: bytes read during pass 1, then the later passes by name
(a single-file run used to show "0/1" for its whole ingest)."""
from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest

from etl.cli import output as report
from etl.extract import progress
from etl.extract.progress import FileProgress, describe
from tests.conftest import corpus_path, event, kernel, launch, step, write_trace
from tests.extract.kineto.test_pipeline import run_pipeline


def _trace(path: Path, steps: int = 40) -> Path:
    events = []
    for n in range(steps):
        t = n * 100_000
        events += [step(n, t, 90_000), event(name="aten::mm", ts=t + 1_000, dur=5_000),
                   launch(n + 1, t + 2_000), kernel(n + 1, t + 10_000, 4_000)]
    return write_trace(path, events)


@pytest.fixture
def heard() -> list[FileProgress]:
    got: list[FileProgress] = []
    progress.listen(got.append)
    yield got
    progress.listen(None)


def test_a_trace_reports_its_bytes_then_its_passes(tmp_path: Path,
                                                   heard: list[FileProgress]) -> None:
    path = _trace(tmp_path / "t.json")
    run_pipeline(path, tmp_path / "spill", slice_bytes=2048)
    reads = [p.done_bytes for p in heard if p.stage == "read"]
    assert reads == sorted(reads) and reads[-1] == path.stat().st_size
    assert {p.total_bytes for p in heard if p.stage == "read"} == {path.stat().st_size}
    later = [p.stage for p in heard if p.stage != "read"]
    assert later == ["linking host events", "joining GPU activities"]
    assert heard[-len(later):] == [p for p in heard if p.stage != "read"], "reads come first"


def test_gzip_counts_decompressed_bytes_without_a_total(tmp_path: Path,
                                                        heard: list[FileProgress]) -> None:
    plain = _trace(tmp_path / "t.json")
    packed = tmp_path / "t.json.gz"
    with open(plain, "rb") as src, gzip.open(packed, "wb") as dst:
        shutil.copyfileobj(src, dst)
    run_pipeline(packed, tmp_path / "spill", slice_bytes=2048)
    reads = [p for p in heard if p.stage == "read"]
    assert reads and all(p.compressed for p in reads)
    assert reads[-1].done_bytes == plain.stat().st_size  # the JSON's bytes, not the file's
    assert describe(reads[-1]).endswith("MB read")


def test_a_corpus_trace_reports_progress(tmp_path: Path, heard: list[FileProgress]) -> None:
    run_pipeline(corpus_path("hta/trace_diff/control/control.json.gz"), tmp_path / "spill",
                 slice_bytes=1 << 20)
    reads = [p.done_bytes for p in heard if p.stage == "read"]
    assert len(reads) > 3, "a report per slice (a file under one 4 MiB read block is one)"
    assert reads == sorted(reads)


def test_descriptions() -> None:
    path = Path("/runs/a/trace.json")
    assert describe(FileProgress(path, "read", 412_000_000, 1_033_000_000)) == \
        "trace.json 412/1,033 MB"
    assert describe(FileProgress(path, "linking host events", None, None)) == \
        "trace.json: linking host events"


def test_the_bar_listens_only_on_a_terminal_and_stops_after(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from rich.console import Console

    with report.progress(1):  # pytest's stderr is not a terminal
        assert progress._listener is None
    monkeypatch.setattr(Console, "is_terminal", property(lambda self: True))
    with report.progress(1):
        assert progress._listener is not None
        progress.report(FileProgress(Path("t.json"), "read", 1, 2))  # updates the bar
    assert progress._listener is None
