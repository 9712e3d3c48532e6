"""collective_ops holds every record_param_comms op of a trace with its args as written:
compared with a naive reading of the raw corpus files (stdlib json, Decimal times)."""
from __future__ import annotations

import decimal
import gzip
import json
from pathlib import Path
from typing import Any

import pytest

import etl
from tests.conftest import KINETO, corpus_path

# columns of collective_ops → the arg names torch has written for them
ARGS = {"collective_name": ["Collective name"], "dtype": ["dtype"],
        "in_msg_nelems": ["In msg nelems"], "out_msg_nelems": ["Out msg nelems"],
        "in_split_size": ["In split size"], "out_split_size": ["Out split size"],
        "group_size": ["Group size"],
        "process_group_name": ["Process Group Name", "Process Group ID"],
        "process_group_desc": ["Process Group Description"],
        "process_group_ranks": ["Process Group Ranks"], "comm_rank": ["Rank"],
        "seq": ["Seq"], "global_rank_start": ["Global rank start"],
        "global_rank_stride": ["Global rank stride"]}
TEXT = {"in_split_size", "out_split_size", "process_group_name", "process_group_ranks"}
# runs whose traces hold record_param_comms ops: with the torch >= 2.4 args (nccl_parser_config,
# b200_eager), with the older "Process Group ID" (ns_resolution_trace), without args (the rest)
RUNS = ("nccl_parser_config", "b200_eager", "ns_resolution_trace", "trace_filter",
        "negative_queue", "df_index_resolver")


def naive_ops(folder: Path) -> list[tuple[Any, ...]]:
    rows = []
    for path in sorted(p for p in folder.rglob("*.json*") if p.is_file()):
        opener = gzip.open if path.read_bytes()[:2] == b"\x1f\x8b" else open
        with opener(path, "rt", encoding="utf-8") as fh:
            doc = json.load(fh, parse_float=decimal.Decimal)
        rank = (doc.get("distributedInfo") or {}).get("rank") if isinstance(doc, dict) else None
        for ev in doc["traceEvents"] if isinstance(doc, dict) else doc:
            if ev.get("name") == "record_param_comms" and ev.get("ph") == "X":
                rows.append((rank, int(decimal.Decimal(ev["ts"]) * 1000),
                             int(decimal.Decimal(ev["dur"]) * 1000),
                             *(_arg(ev.get("args") or {}, column) for column in ARGS)))
    return sorted(rows, key=repr)


def _arg(args: dict[str, Any], column: str) -> Any:
    value = next((args[k] for k in ARGS[column] if args.get(k) is not None), None)
    if value is None or column not in TEXT:
        return value
    return value if isinstance(value, str) else json.dumps(value)


@pytest.mark.parametrize("run", RUNS)
def test_collective_ops_are_the_record_param_comms_ops(timeline_warehouse: Path, run: str
                                                      ) -> None:
    expected = naive_ops(corpus_path(*KINETO[run]))
    assert expected, "the corpus run holds record_param_comms ops"
    con = etl.connect(timeline_warehouse)
    got = con.execute(
        f"SELECT o.rank, o.ts_ns, o.dur_ns, {', '.join('o.' + c for c in ARGS)} "
        "FROM collective_ops AS o JOIN runs AS r USING (run_id) WHERE r.run_name = ?",
        [run]).fetchall()
    assert sorted(got, key=repr) == expected


def test_old_traces_name_the_group_by_its_id(timeline_warehouse: Path) -> None:
    """torch before kineto #906 wrote 'Process Group ID' (an integer or a string)."""
    con = etl.connect(timeline_warehouse)
    names = {n for (n,) in con.execute(
        "SELECT DISTINCT process_group_name FROM collective_ops JOIN runs USING (run_id) "
        "WHERE run_name = 'ns_resolution_trace'").fetchall()}
    assert names and None not in names
