"""A run of another format exported as a Kineto trace comes back without new anomalies:
its host and GPU categories are written as the Kineto categories that play their part."""
from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import cli, copy_corpus_run, corpus_path, query_json


def round_trip(tmp_path: Path, run: str) -> Path:
    """Export `run` of tmp_path/wh as a run folder and ingest that as `copy`."""
    out = tmp_path / "copy"
    done = cli("export-trace", run, "--warehouse", str(tmp_path / "wh"), "-o", f"{out}/")
    assert done.returncode == 0, done.stderr
    done = cli("ingest", str(out), "--warehouse", str(tmp_path / "wh"))
    assert done.returncode == 0, done.stderr
    return out


def kineto_categories() -> set[str]:
    from etl.extract.fields import field_map

    return set(field_map("kineto")["categories"])


def per_run(warehouse: Path, sql: str) -> dict[str, list[dict]]:
    rows = query_json(warehouse, sql)
    out: dict[str, list[dict]] = {}
    for r in rows:
        out.setdefault(r.pop("run_name"), []).append(r)
    return out


def test_a_jax_run_comes_back_without_new_anomalies(tmp_path: Path) -> None:
    """JAX's host plane holds TraceMe events (Python tracer, PjitFunction: trace_me) and
    hipModuleLaunchKernel calls (launch): written as stored, each TraceMe was an
    unknown_category anomaly and each kernel one kernel_without_launch."""
    from tests.extract.xplane.test_jax import jax_xspace

    folder = tmp_path / "runs" / "jax" / "plugins" / "profile" / "s"
    folder.mkdir(parents=True)
    (folder / "h.xplane.pb").write_bytes(jax_xspace(rocm=True, steps=3))
    assert cli("ingest", str(tmp_path / "runs"), "--warehouse",
               str(tmp_path / "wh")).returncode == 0
    out = round_trip(tmp_path, "jax")
    doc = json.loads((out / "source0.pt.trace.json").read_text())
    written = {e["cat"] for e in doc["traceEvents"] if e.get("ph") == "X"}
    assert written <= kineto_categories(), written - kineto_categories()
    assert query_json(tmp_path / "wh", "SELECT a.kind FROM anomalies AS a JOIN runs AS r "
                      "USING (run_id) WHERE r.run_name = 'copy'") == []
    kernels = per_run(tmp_path / "wh", "SELECT run_name, name, ts_ns, dur_ns, iteration, "
                      "launch_event_id IS NOT NULL AS launched FROM kernels JOIN runs USING "
                      "(run_id) ORDER BY ALL")
    assert len(kernels["jax"]) == 9 and all(k["launched"] for k in kernels["copy"])
    assert kernels["copy"] == kernels["jax"]
    util = per_run(tmp_path / "wh", "SELECT run_name, iteration, busy_ns, gpu_util FROM "
                   "gpu_utilization ORDER BY ALL")
    assert util["copy"] == util["jax"] and len(util["jax"]) == 3


def test_an_nsys_run_keeps_its_copies_and_sets(tmp_path: Path) -> None:
    """nsys stores copies and sets with the category memcpy / memset, which Kineto reads
    as gpu_memcpy / gpu_memset: written as stored, the 203 of the corpus run were lost."""
    name = "rtxa4500_flame_resnet18-fwd_nsys2024.6.sqlite"
    copy_corpus_run(corpus_path("nsys", name), tmp_path / "runs", "nsys")
    assert cli("ingest", str(tmp_path / "runs"), "--warehouse",
               str(tmp_path / "wh")).returncode == 0
    round_trip(tmp_path, "nsys")
    kinds = per_run(tmp_path / "wh", "SELECT run_name, kind, count(*) AS n FROM kernels "
                    "JOIN runs USING (run_id) GROUP BY ALL ORDER BY ALL")
    assert kinds["nsys"] == [{"kind": "kernel", "n": 2482}, {"kind": "memcpy", "n": 122},
                             {"kind": "memset", "n": 81}]
    assert kinds["copy"] == kinds["nsys"]
    assert query_json(tmp_path / "wh", "SELECT count(*) AS n FROM anomalies JOIN runs "
                      "USING (run_id) WHERE run_name = 'copy' AND kind = "
                      "'unknown_category'") == [{"n": 0}]
