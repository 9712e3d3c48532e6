"""Speed never changes a number: the streaming reader equals naive full-file readings."""
from __future__ import annotations

import decimal
import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from etl.extract.kineto.decode import _read_whole, read_trace
from etl.extract.rawio import read_all
from etl.extract.kineto.rows import build
from tests.conftest import (CORPUS, corpus_param, corpus_path, event, kernel, launch, step,
                            write_trace)

TRACES = sorted(str(p.relative_to(CORPUS)) for p in CORPUS.rglob("*.json.gz")) or [
    "hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"]
ARGS = {"correlation_id": ["correlation"], "external_id": ["External id", "external id"],
        "device_id": ["device"], "stream_id": ["stream"],
        "registers_per_thread": ["registers per thread"],
        "shared_memory_bytes": ["shared memory"], "bytes": ["bytes"],
        # the [memory] events' allocator args (→ memory_events)
        "memory_total_allocated": ["Total Allocated"], "memory_total_reserved": ["Total Reserved"],
        "memory_bytes": ["Bytes"], "memory_device_id": ["Device Id"],
        "memory_device_type": ["Device Type"],
        # the autograd link (→ host_events.sequence_number, fwd_thread_id)
        "sequence_number": ["Sequence number"], "fwd_thread_id": ["Fwd thread id"],
        # cuda_sync waits (→ syncs)
        "wait_stream": ["wait_on_stream"],
        "wait_record_correlation": ["wait_on_cuda_event_record_corr_id"],
        "wait_cuda_event": ["wait_on_cuda_event_id"],
        # record_param_comms' integer args (→ collective_ops)
        "in_msg_nelems": ["In msg nelems"], "out_msg_nelems": ["Out msg nelems"],
        "group_size": ["Group size"], "comm_rank": ["Rank"], "comm_seq": ["Seq"],
        "global_rank_start": ["Global rank start"], "global_rank_stride": ["Global rank stride"],
        "src_rank": ["Src Rank"], "dst_rank": ["Dst Rank"]}
# record_param_comms' text args: a string as written, an integer as its digits
LABELS = {"collective_name": ["Collective name"], "collective_dtype": ["dtype"],
          "in_split_size": ["In split size"], "out_split_size": ["Out split size"],
          "process_group_name": ["Process Group Name", "Process Group ID"],
          "process_group_desc": ["Process Group Description"],
          "process_group_ranks": ["Process Group Ranks"], "comms_id": ["Comms Id"]}


def naive_events(path: Path) -> list[dict[str, Any]]:
    """Stdlib json + Decimal: the obviously-correct reading of the kept events."""
    opener = gzip.open if path.read_bytes()[:2] == b"\x1f\x8b" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        doc = json.load(fh, parse_float=decimal.Decimal)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    return [_row(i, ev) for i, ev in enumerate(events)
            if ev.get("ph") in ("X", "i", "I", "B", "E")]  # B/E are paired later, by build


def _row(i: int, ev: dict[str, Any]) -> dict[str, Any]:
    args = ev.get("args") or {}
    row: dict[str, Any] = {"event_id": i, "ph": ev["ph"], "category": ev.get("cat"),
                           "name": ev.get("name"), "ts_ns": _ns(ev.get("ts")),
                           "dur_ns": _ns(ev.get("dur")), "pid": _str(ev.get("pid")),
                           "tid": _str(ev.get("tid"))}
    for column, keys in ARGS.items():
        row[column] = _int(next((args[k] for k in keys if args.get(k) is not None), None))
    for column, keys in LABELS.items():
        value = next((args[k] for k in keys if args.get(k) is not None), None)
        row[column] = str(value) if isinstance(value, int) else (value or None)
    for dim in ("grid", "block"):
        value = _inductor_grid(args.get(dim))
        ok = isinstance(value, list) and len(value) == 3
        for axis, suffix in enumerate("xyz"):
            row[f"{dim}_{suffix}"] = value[axis] if ok else None
    return row | _naive_op_and_kernel_args(args)


def _inductor_grid(value: Any) -> Any:
    """Inductor's text "grid(100,)" as the list [100, 1, 1] (symbolic sizes stay text)."""
    if not (isinstance(value, str) and value.startswith("grid(") and value.endswith(")")):
        return value
    parts = [p.strip() for p in value[len("grid("):-1].split(",") if p.strip()]
    if not 1 <= len(parts) <= 3 or not all(p.isdigit() for p in parts):
        return value
    return [int(p) for p in parts] + [1] * (3 - len(parts))


def _naive_op_and_kernel_args(args: dict[str, Any]) -> dict[str, Any]:
    """The operator and kernel args of fields.toml [arg_types] (and flops), as their
    columns define them."""
    def number(key: str) -> float | None:
        return None if args.get(key) is None else float(args[key])

    dims = args.get("Input Dims")
    occupancy = number("est. achieved occupancy %")
    return {"flops": args.get("flops"),
            "est_achieved_occupancy_share": None if occupancy is None else occupancy / 100,
            "blocks_per_sm": number("blocks per SM"), "warps_per_sm": number("warps per SM"),
            "input_dims": None if dims is None else json.dumps(dims, separators=(",", ":")),
            "input_types": args.get("Input type"),
            "call_stack": args.get("Call stack") or None,
            "module_hierarchy": args.get("Module Hierarchy") or None}


def _ns(value: Any) -> int | None:
    return None if value is None else int(decimal.Decimal(value) * 1000)


def _str(value: Any) -> str | None:
    return None if value is None else str(value)


def _int(value: Any) -> int | None:
    if isinstance(value, str):
        return int(value, 0)  # ROCm writes stream "0x0"
    return value


@pytest.mark.parametrize("relative", [corpus_param(t, trace=t) for t in TRACES])
def test_streaming_equals_naive_reading(relative: str) -> None:
    path = corpus_path(relative)
    streamed = read_trace(path, slice_bytes=256 << 10)  # many slices even for small files
    got = streamed.events.to_pylist()
    assert got == naive_events(path)
    whole = _read_whole(path, read_all(path))
    assert whole.events.equals(streamed.events)
    a, b = build(streamed, 0, None), build(whole, 0, None)
    for table in ("host_events", "kernels", "iterations", "devices", "anomalies"):
        assert getattr(a, table).equals(getattr(b, table)), table


def _events(n: int) -> list[dict[str, Any]]:
    out = [step(1, 0, 10_000_000)]
    for i in range(n):
        tricky = 'k"}, {"x": [' + str(i) + "]"  # a boundary and a `]` inside a string
        out += [launch(i, 1_000 + i * 100), kernel(i, 2_000 + i * 100, 50, name=tricky)]
    return out


@pytest.mark.parametrize("slice_bytes", [64, 1000, 1 << 20])
def test_slicing_is_invisible_even_with_braces_in_strings(tmp_path: Path,
                                                           slice_bytes: int) -> None:
    path = write_trace(tmp_path / "t.json", _events(300), traceName="x",
                       INFO=["a]", "b ]}"], deviceProperties=[{"id": 0, "name": "g"}])
    streamed = read_trace(path, slice_bytes=slice_bytes)
    assert streamed.events.to_pylist() == naive_events(path)
    assert streamed.device_properties == [{"id": 0, "name": "g"}]


def test_truncated_stream_salvages_complete_events(tmp_path: Path) -> None:
    path = write_trace(tmp_path / "t.json", _events(200))
    data = path.read_bytes()
    cut = tmp_path / "cut.json"
    cut.write_bytes(data[: len(data) * 2 // 3])
    trace = read_trace(cut, salvage=True, slice_bytes=2048)
    naive = naive_events(path)
    assert trace.truncated
    rows = trace.events.to_pylist()
    assert rows == naive[: len(rows)] and len(naive) // 2 < len(rows) < len(naive)


def test_begin_end_events_are_read(tmp_path: Path) -> None:
    """B and E events reach the reader's table unpaired, in event order, across slices."""
    events = [event(ph="B", name="a", ts=5, dur=None), event(ph="C", name="counter", ts=6),
              {"ph": "E", "pid": 1, "tid": 1, "ts": 7, "args": {"correlation": 3}}]
    path = write_trace(tmp_path / "t.json", events * 50)
    for slice_bytes in (64, 1 << 20):
        streamed = read_trace(path, slice_bytes=slice_bytes)
        assert streamed.events.to_pylist() == naive_events(path)
        assert streamed.events["ph"].to_pylist() == ["B", "E"] * 50


def test_bare_array_form(tmp_path: Path) -> None:
    events = [event(name="a", ts=5, dur=1), event(name="b", ts=6, dur=1)]
    path = tmp_path / "t.json"
    write_trace(tmp_path / "doc.json", events)
    text = (tmp_path / "doc.json").read_text()
    path.write_text(text[text.index("["): text.rindex("]") + 1])
    assert read_trace(path, slice_bytes=16).events["name"].to_pylist() == ["a", "b"]
