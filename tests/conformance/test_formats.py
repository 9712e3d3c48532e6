"""The conformance suite: every registered input format is held to the same promises.

A format joins by being registered (etl/extract/registry.py) and listing its inputs in
samples.toml beside this file. For each format:
- its samples ingest, are recorded in runs.sources with the format's name and role, and
  every table it fills has exactly the schema's column types;
- its broken inputs refuse their run with one line naming the file;
- editing one byte of an input changes run_id (the file is among the hashed inputs);
- mutated inputs (truncations, flipped and deleted bytes) raise nothing but the project's
  own errors from the whole extraction, reader included.
"""
from __future__ import annotations

import shutil
import tomllib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from etl.core.errors import EtlError
from etl.extract.registry import NotThisFormat, by_name, formats
from etl.load.ingest import Options, _hash_inputs, ingest_all, prepare_folder
from etl.load.runfolder import run_id_for, scan
from etl.warehouse.store import Warehouse
from tests.conftest import corpus_path

HERE = Path(__file__).resolve().parent
DATA = HERE.parent / "data"
SAMPLES: dict[str, dict[str, Any]] = tomllib.loads((HERE / "samples.toml").read_text("utf-8"))
FUZZ_EXAMPLES = 12


def _cases(kind: str) -> list[tuple[str, str, str]]:
    """(format, where, relative path) for every listed sample of `kind`."""
    cases = []
    for name, entry in SAMPLES.items():
        if kind == "good":
            cases += [(name, "corpus", p) for p in entry.get("corpus", [])]
            cases += [(name, "local", p) for p in entry.get("local", [])]
        else:
            cases += [(name, "local", p) for p in entry.get("broken", [])]
    return cases


def _file(where: str, rel: str) -> Path:
    return corpus_path(*rel.split("/")) if where == "corpus" else DATA / rel


def _run_with(tmp_path: Path, sample: Path, name: str = "run") -> Path:
    folder = tmp_path / "runs" / name
    folder.mkdir(parents=True)
    shutil.copyfile(sample, folder / sample.name)
    return folder


def test_every_registered_format_has_samples() -> None:
    registered = {f.name for f in formats()}
    assert registered == set(SAMPLES), (
        "tests/conformance/samples.toml must list inputs for exactly the registered formats")
    for name, entry in SAMPLES.items():
        assert entry.get("corpus") or entry.get("local"), f"{name}: no sample to ingest"
        assert entry.get("broken"), f"{name}: no broken input"


@pytest.mark.parametrize("fmt,where,rel", _cases("good"))
def test_sample_ingests_with_schema_types(tmp_path: Path, fmt: str, where: str,
                                          rel: str) -> None:
    sample = _file(where, rel)
    warehouse = Warehouse.at(tmp_path / "wh")
    [result] = ingest_all([_run_with(tmp_path, sample)], warehouse)
    if SAMPLES[fmt].get("refused"):
        assert result.status == "refused" and sample.name in (result.error or "")
        return
    assert result.status == "ingested", result.error
    [row] = warehouse.read_runs(["sources"]).to_pylist()
    [entry] = [s for s in row["sources"] if s["path"] == sample.name]
    assert (entry["format"], entry["role"]) == (fmt, by_name(fmt).role)
    _assert_filled_with_schema_types(warehouse, by_name(fmt).fills)


def _assert_filled_with_schema_types(warehouse: Warehouse, tables: tuple[str, ...]) -> None:
    import pyarrow.parquet as pq

    from etl.core.schema import table_schema

    [folder] = [p for p in warehouse.data.iterdir() if not p.name.startswith("_")]
    rows = 0
    for table in tables:
        written = pq.read_schema(folder / f"{table}.parquet").remove_metadata()
        assert written.equals(table_schema(table).arrow()), table
        rows += pq.ParquetFile(folder / f"{table}.parquet").metadata.num_rows
    assert rows > 0, f"none of {tables} got a row"


@pytest.mark.parametrize("fmt,where,rel", _cases("broken"))
def test_broken_input_refuses_its_run_in_one_line(tmp_path: Path, fmt: str, where: str,
                                                  rel: str) -> None:
    sample = _file(where, rel)
    assert by_name(fmt).sniff(sample.read_bytes()[:65536]) or by_name(fmt).claimed_by(
        sample.name), f"{rel} is not recognised as {fmt}"
    [result] = ingest_all([_run_with(tmp_path, sample)], Warehouse.at(tmp_path / "wh"))
    assert result.status == "refused"
    assert result.error is not None and "\n" not in result.error
    assert sample.name in result.error


@pytest.mark.parametrize("fmt", sorted(SAMPLES))
def test_one_byte_edited_changes_run_id(tmp_path: Path, fmt: str) -> None:
    [(_, where, rel), *_] = [c for c in _cases("good") if c[0] == fmt]
    folder = _run_with(tmp_path, _file(where, rel))
    before = run_id_for("run", list(_hash_inputs(scan(folder)).items()))
    [file] = [p for p in folder.iterdir()]
    data = bytearray(file.read_bytes())
    data[len(data) // 2] ^= 0x01
    file.write_bytes(bytes(data))
    assert run_id_for("run", list(_hash_inputs(scan(folder)).items())) != before


def _mutations(data: bytes, binary: bool) -> st.SearchStrategy[bytes]:
    cut = st.integers(0, len(data)).map(lambda n: data[:n])
    if binary:  # a native reader is only ever fed what a crash or a copy leaves: a prefix
        return cut
    flip = st.tuples(st.integers(0, len(data) - 1), st.integers(1, 255)).map(
        lambda p: data[:p[0]] + bytes([data[p[0]] ^ p[1]]) + data[p[0] + 1:])
    hole = st.tuples(st.integers(0, len(data)), st.integers(1, 4096)).map(
        lambda p: data[:p[0]] + data[p[0] + p[1]:])
    return st.one_of(cut, flip, hole)


@pytest.mark.parametrize("fmt", sorted(SAMPLES))
def test_mutated_inputs_raise_only_project_errors(tmp_path: Path, fmt: str) -> None:
    [(_, where, rel), *_] = [c for c in _cases("good") if c[0] == fmt]
    sample = _file(where, rel)
    data = sample.read_bytes()
    binary = b"\0" in data[:4096] or sample.name.endswith(".gz")
    counter = iter(range(1 << 30))

    @settings(max_examples=FUZZ_EXAMPLES, derandomize=True, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(_mutations(data, binary))
    def extract(mutated: bytes) -> None:
        folder = tmp_path / f"case{next(counter)}" / "run"
        folder.mkdir(parents=True)
        (folder / sample.name).write_bytes(mutated)
        warehouse = Warehouse.at(folder.parent / "wh")
        warehouse.init()
        try:
            prepare_folder(folder, warehouse, Options(debug=True))
        except (EtlError, NotThisFormat):
            pass  # refused or skipped: the project's own outcomes

    extract()
    assert next(counter) >= FUZZ_EXAMPLES // 2  # the property really ran
