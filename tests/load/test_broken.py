"""The named broken corpus: every odd or broken input gets a clear answer.

One test per entry of tests/data/broken/EXPECTED.toml (its header says what each `kind`
must satisfy). The case's run folder `a-case` is ingested with a good run `z-good` in one
`etl ingest` command, as users run it. Every input that ingests is then put in one
warehouse, where every view must answer (test_no_odd_input_breaks_a_view).
"""
from __future__ import annotations

import importlib.util
import shutil
import tomllib
from pathlib import Path
from typing import Any

import pytest

from etl.core.sql_files import discover
from tests.conftest import ROOT, cli, kernel, launch, snapshot, step, write_trace

BROKEN = ROOT / "tests" / "data" / "broken"
EXPECTED: dict[str, dict[str, Any]] = tomllib.loads((BROKEN / "EXPECTED.toml").read_text())
CASE_RUN = "a-case"   # sorts before GOOD_RUN: a crash on the case also loses the good run
GOOD_RUN = "z-good"
GOOD_BUSY_NS = 40_000
VIEWS = tuple(sorted({v.stable for v in discover() if not v.stable.startswith("_")}))
KNOWN_KEYS = {"kind", "defect", "companion", "place", "fragment", "names", "anomalies",
              "flagged", "checks", "skipped", "sources", "symlinks", "bug"}


def good_events() -> list[dict[str, Any]]:
    return [step(1, 0, 100_000), launch(1, 1_000), kernel(1, 10_000, GOOD_BUSY_NS)]


def corpus_cases() -> list[Any]:
    return [pytest.param(name, spec, id=name, marks=[pytest.mark.xfail(
        strict=True, reason=spec["bug"])] if "bug" in spec else [])
        for name, spec in EXPECTED.items()]


def make_runs(root: Path, name: str, spec: dict[str, Any]) -> Path:
    runs = root / "runs"
    make_case(runs / CASE_RUN, name, spec)
    write_trace(runs / GOOD_RUN / "t.json", good_events())
    return runs


def make_case(case: Path, name: str, spec: dict[str, Any]) -> None:
    source = BROKEN / name
    if source.is_dir():
        shutil.copytree(source, case)
    else:
        case.mkdir(parents=True)
        shutil.copyfile(source, case / spec.get("place", name))
        if spec.get("companion") or name.startswith("runtoml-"):
            write_trace(case / "ok.json", good_events())
    for link, target in spec.get("symlinks", {}).items():
        (case / link).symlink_to(target)


def connect(wh: Path) -> Any:
    return snapshot(wh)


def plain_rows(rows: list[tuple[Any, ...]]) -> list[list[Any]]:
    return [["NULL" if v is None else v for v in row] for row in rows]


def test_every_corpus_file_has_an_expectation() -> None:
    on_disk = {p.name for p in BROKEN.iterdir()} - {"EXPECTED.toml", "make_broken.py",
                                                     "__pycache__"}
    assert on_disk == set(EXPECTED)
    assert len(EXPECTED) >= 30
    for name, spec in EXPECTED.items():
        assert set(spec) <= KNOWN_KEYS, (name, set(spec) - KNOWN_KEYS)
        assert spec["kind"] in ("unreadable", "odd"), name
        assert spec["kind"] == "odd" or spec.get("fragment"), name
        assert "bug" not in spec or spec["bug"].startswith("BUG: "), name


def test_generator_reproduces_the_corpus(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("make_broken", BROKEN / "make_broken.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    written = module.write(tmp_path)
    assert sum(p.stat().st_size for p in written) < 300_000
    for path in written:
        assert path.read_bytes() == (BROKEN / path.relative_to(tmp_path)).read_bytes(), path


@pytest.mark.parametrize("name,spec", corpus_cases())
def test_broken_input(tmp_path: Path, name: str, spec: dict[str, Any]) -> None:
    runs = make_runs(tmp_path, name, spec)
    wh = tmp_path / "wh"
    # one process: answers do not depend on --jobs, and extraction workers race the
    # publisher on the manifest (an xfail of test_concurrent.py) which would make this flaky
    result = cli("ingest", str(runs), "--warehouse", str(wh), "--jobs", "1")
    assert "Traceback" not in result.stderr, result.stderr[-600:]
    assert "internal error" not in result.stderr, result.stderr[-600:]  # an admitted bug
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    with connect(wh) as con:
        good = con.execute("SELECT g.busy_ns FROM gpu_utilization g JOIN runs r USING "
                           "(run_id) WHERE r.run_name = ?", [GOOD_RUN]).fetchall()
        assert good == [(GOOD_BUSY_NS,)], "the good run of the same command was not ingested"
        if spec["kind"] == "unreadable":
            check_refused(wh, con, spec, name, result.returncode, errors)
        else:
            assert result.returncode == 0 and errors == [], result.stderr
            check_odd(con, spec, result.stderr)


def check_refused(wh: Path, con: Any, spec: dict[str, Any], name: str, code: int,
                  errors: list[str]) -> None:
    assert code == 1
    assert len(errors) == 1, errors
    names = spec.get("names", f"{CASE_RUN}/{spec.get('place', name)}")
    assert names in errors[0], errors[0]
    assert spec["fragment"].lower() in errors[0].lower(), errors[0]
    runs = con.execute("SELECT run_name FROM runs").fetchall()
    assert runs == [(GOOD_RUN,)]
    published = [p for p in (wh / "data").iterdir() if p.name != "_schema"]
    assert len(published) == 1  # the good run's folder only
    assert list((wh / "staging").iterdir()) == []


def check_odd(con: Any, spec: dict[str, Any], stderr: str) -> None:
    [(run_id, anomaly_count, skipped, sources)] = con.execute(
        "SELECT run_id, anomaly_count, [s.path FOR s IN skipped], [s.path FOR s IN sources] "
        "FROM runs WHERE run_name = ?", [CASE_RUN]).fetchall()
    anomalies = con.execute("SELECT kind, event_id FROM anomalies WHERE run_id = ?",
                            [run_id]).fetchall()
    assert anomaly_count == len(anomalies)
    kinds = {kind for kind, _ in anomalies}
    assert set(spec.get("anomalies", [])) <= kinds, anomalies
    assert set(spec.get("flagged", [])) <= {event for _, event in anomalies}, anomalies
    check_values_of_bad_times(con, run_id, anomalies)
    for check in spec.get("checks", []):
        sql = check["sql"].replace("$run", f"run_id = '{run_id}'")
        assert plain_rows(con.execute(sql).fetchall()) == check["rows"], sql
    for path in spec.get("skipped", []):
        assert f"warning: {CASE_RUN}/{path}: skipped" in stderr
    assert sorted(skipped) == sorted(spec.get("skipped", skipped))
    assert sorted(sources) == sorted(spec.get("sources", sources))


def test_no_odd_input_breaks_a_view(tmp_path: Path) -> None:
    """Every input that ingests (each its own run) in one warehouse, then every stable
    view once: a run whose values break a view fails here. Once, not per input: planning
    the deepest views costs seconds whatever the rows."""
    odd = [(name, spec) for name, spec in EXPECTED.items()
           if spec["kind"] != "unreadable" and "bug" not in spec]
    for i, (name, spec) in enumerate(odd):
        make_case(tmp_path / "runs" / f"case-{i:03d}", name, spec)
    wh = tmp_path / "wh"
    result = cli("ingest", str(tmp_path / "runs"), "--warehouse", str(wh), "--jobs", "1")
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr[-600:]
    with connect(wh) as con:
        assert con.execute("SELECT count(*) FROM runs").fetchone() == (len(odd),)
        for view in VIEWS:
            con.execute(f"SELECT * FROM {view}").fetchall()  # every column evaluated


def check_values_of_bad_times(con: Any, run_id: str, anomalies: list[tuple[Any, Any]]) -> None:
    """An event flagged for an unusable ts/dur keeps NULL there, never a guess."""
    column = {"bad_ts": "ts_ns", "missing_ts": "ts_ns", "bad_dur": "dur_ns",
              "missing_dur": "dur_ns"}
    for kind, event in anomalies:
        if kind not in column:
            continue
        values = con.execute(
            f"SELECT {column[kind]} FROM host_events WHERE run_id = $1 AND event_id = $2 "
            f"UNION ALL SELECT {column[kind]} FROM kernels WHERE run_id = $1 AND "
            f"kernel_id = $2", [run_id, event]).fetchall()
        assert values == [(None,)], (kind, event, values)


def test_trust_report_is_current() -> None:
    from tests.report_trust import README, readme_with_table, render

    stale = "is stale: run .venv/bin/python tests/report_trust.py"
    assert (ROOT / "tests" / "TRUST.md").read_text() == render(), f"tests/TRUST.md {stale}"
    text = README.read_text()
    assert "<!-- trust table" in text and text == readme_with_table(text), f"README.md {stale}"
