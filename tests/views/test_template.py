"""A new warehouse copies its views database from the machine's template instead of
building it (etl/views/template.py), and gets exactly the views a build gives."""
from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import duckdb
import pytest

from etl.views import template as view_template
from etl.views.database import STAMP, ensure_views, inputs_fingerprint, views_current
from etl.views.template import catalog_digest
from etl.warehouse.store import Warehouse


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Warehouse, Path]:
    """A warehouse whose views were built (3 CPU s), and the cache folder holding the
    template that build left: built once for the tests that need a template to start
    from; the one whose point is the build on an empty cache builds its own."""
    root = tmp_path_factory.mktemp("built")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(view_template.CACHE_ENV, str(root / "cache"))
        warehouse = Warehouse.at(root / "wh")
        assert ensure_views(warehouse)
    assert sorted(p.suffix for p in (root / "cache").iterdir()) == [".duckdb", ".stamp"]
    return warehouse, root / "cache"


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv(view_template.CACHE_ENV, str(folder))
    return folder


@pytest.fixture
def template_cache(cache: Path, built: tuple[Warehouse, Path]) -> Path:
    """`cache` holding a copy of the template the build of `built` left."""
    return Path(shutil.copytree(built[1], cache))


def _catalog(warehouse: Warehouse) -> str:
    with duckdb.connect(str(warehouse.database), read_only=True) as con:
        assert views_current(con, warehouse)
        return catalog_digest(con)


def test_second_warehouse_is_a_copy_with_the_same_views(tmp_path: Path, template_cache: Path,
                                                        built: tuple[Warehouse, Path],
                                                        monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    built_wh = built[0]  # its build left the template (the fixture checks what it wrote)

    def no_build(*_: object) -> None:
        raise AssertionError("built the views instead of copying the template")

    monkeypatch.setattr("etl.views.database.all_statements", no_build)
    copied = Warehouse.at(tmp_path / "copied")
    assert ensure_views(copied)
    assert _catalog(copied) == _catalog(built_wh)
    assert (copied.root / STAMP).read_text() == (built_wh.root / STAMP).read_text()
    with duckdb.connect(str(copied.database), read_only=True) as con:  # its own root
        [(files,)] = con.execute("SELECT _warehouse_files('runs')").fetchall()
    assert files == f"{copied.root}/data/*/runs.parquet"


def test_a_damaged_template_is_rebuilt_not_trusted(tmp_path: Path,
                                                   template_cache: Path) -> None:
    [template] = template_cache.glob("*.duckdb")
    template.write_bytes(b"not a database")
    second = Warehouse.at(tmp_path / "second")
    assert ensure_views(second)
    _catalog(second)
    third = Warehouse.at(tmp_path / "third")  # the build replaced the damaged template
    third.init()
    assert view_template.copy_template(third, inputs_fingerprint(), STAMP)
    _catalog(third)


def test_an_existing_database_is_never_replaced(tmp_path: Path) -> None:
    """On the session's cache (tests/conftest.py), whose template the first warehouse is
    built from or copied from: what is checked is the refusal, not the build."""
    first = Warehouse.at(tmp_path / "first")
    assert ensure_views(first)
    assert view_template._template(inputs_fingerprint()).exists()  # there to be copied
    before = first.database.read_bytes()
    assert not view_template.copy_template(first, inputs_fingerprint(), STAMP)
    assert first.database.read_bytes() == before


def test_no_cache_folder_builds_as_before(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("a file where the cache folder would be")
    monkeypatch.setenv(view_template.CACHE_ENV, str(blocked / "cache"))
    wh = Warehouse.at(tmp_path / "wh")
    assert ensure_views(wh)
    _catalog(wh)


def test_a_template_is_used_only_with_the_bytes_its_stamp_names(tmp_path: Path,
                                                                template_cache: Path) -> None:
    [template] = template_cache.glob("*.duckdb")
    [stamp] = template_cache.glob("*.stamp")
    fingerprint, digest, file_digest = stamp.read_text().split()
    assert file_digest == hashlib.sha256(template.read_bytes()).hexdigest()
    second = Warehouse.at(tmp_path / "second")
    second.init()
    stamp.write_text(f"{fingerprint}\n{digest}\n{'0' * 64}\n")
    assert not view_template.copy_template(second, inputs_fingerprint(), STAMP)
    stamp.write_text(f"{fingerprint}\n{digest}\n")  # an older stamp names no bytes
    assert not view_template.copy_template(second, inputs_fingerprint(), STAMP)
    assert not second.database.exists()
    stamp.write_text(f"{fingerprint}\n{digest}\n{file_digest}\n")
    assert view_template.copy_template(second, inputs_fingerprint(), STAMP)
    assert (second.root / STAMP).read_text() == f"{fingerprint}\n{digest}\n"
