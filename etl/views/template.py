"""A new warehouse's views database, copied from a template on this machine, not built.

Building `warehouse.duckdb` imports sqlglot, parses and lints every view and runs ~1 500
statements (views, macros, a comment per column): most of the cost of ingesting a small
trace into a new warehouse. The file holds views and macros only, and the macros find the
warehouse from the database's own path at query time, so the file built for one warehouse
serves any other built from the same inputs. The first warehouse built on a machine (per
view inputs, DuckDB and sqlglot version) leaves a copy in the user's cache; later new
warehouses copy it. The cache is only a shortcut: when it cannot be read or written the
views are built as before, and every query still checks the catalog against its stamp
(views_current), so a stale or damaged template is rebuilt, never trusted.
"""
from __future__ import annotations

import hashlib
import os
import tempfile
from importlib import metadata
from pathlib import Path
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    import duckdb

    from etl.warehouse.store import Warehouse

CACHE_ENV = "ETL_CACHE_DIR"
# In the template's name: a change of what its stamp holds gets a file of its own, so that
# two versions of the tool on one machine do not replace each other's template
STAMP_FORMAT = "2"  # 2: the stamp names the sha256 of the template's bytes


def cache_dir() -> Path:
    """$ETL_CACHE_DIR, else $XDG_CACHE_HOME/gpu-util-warehouse, else ~/.cache/..."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gpu-util-warehouse"


def _template(fingerprint: str) -> Path:
    """The template's path: the view inputs and the versions that wrote the file (DuckDB's
    storage format; sqlglot renders the stored SQL)."""
    import duckdb

    key = (f"{fingerprint}\0{duckdb.__version__}\0{metadata.version('sqlglot')}"
           f"\0{STAMP_FORMAT}")
    return cache_dir() / f"views-{hashlib.sha256(key.encode()).hexdigest()[:24]}.duckdb"


def _stamp_of(template: Path) -> Path:
    return template.with_suffix(".stamp")


def copy_template(warehouse: Warehouse, fingerprint: str, stamp_name: str) -> bool:
    """Give a warehouse without a database the template's; False when there is none (or
    the database appeared meanwhile: another writer made it, which is as good)."""
    template = _template(fingerprint)
    try:
        *stamp, file_digest = _stamp_of(template).read_text("utf-8").split()
        with tempfile.NamedTemporaryFile(dir=warehouse.root, prefix=".views-",
                                         suffix=".duckdb", delete=False) as tmp:
            copied = _copy_hashing(template, tmp)
        try:  # a damaged template is never used: the copy must be the bytes its stamp names
            if len(stamp) != 2 or copied != file_digest:
                return False
            os.link(tmp.name, warehouse.database)  # never replaces a database that exists
        finally:
            os.unlink(tmp.name)
    except (OSError, ValueError):  # ValueError: no stamp line to unpack
        return False
    (warehouse.root / stamp_name).write_text("".join(f"{line}\n" for line in stamp), "utf-8")
    return True


def _copy_hashing(source: Path, target: IO[bytes]) -> str:
    """Copy `source` into `target`; the sha256 of the bytes written (one read of each
    block: checking the copy this way costs milliseconds, opening it in DuckDB ~0.1 s)."""
    digest = hashlib.sha256()
    with open(source, "rb") as src:
        while block := src.read(1 << 20):
            digest.update(block)
            target.write(block)
    return digest.hexdigest()


def save_template(warehouse: Warehouse, stamp_name: str) -> None:
    """Keep a copy of a warehouse's freshly built views database as the template, checked
    against its stamp before it is put in place (a torn copy is never a template). The
    template's stamp is the warehouse's plus the sha256 of the template's bytes."""
    try:
        stamp = (warehouse.root / stamp_name).read_text("utf-8")
        fingerprint, digest = stamp.split()
        template = _template(fingerprint)
        template.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=template.parent, prefix=".views-",
                                         suffix=".duckdb", delete=False) as tmp:
            file_digest = _copy_hashing(warehouse.database, tmp)
        if catalog_digest_of(Path(tmp.name)) != digest:
            os.unlink(tmp.name)
            return
        _stamp_of(template).write_text(f"{fingerprint}\n{digest}\n{file_digest}\n", "utf-8")
        os.replace(tmp.name, template)
    except (OSError, ValueError):
        return


# What a writable shell can break: a view dropped or replaced (its text or comment changes,
# and a replaced view loses its column comments with its own). duckdb_views() costs a few
# ms; duckdb_functions() tens, so the macros are checked by what they return instead.
_STORED_VIEWS = ("SELECT view_name, sql, comment FROM duckdb_views() "
                 "WHERE database_name = current_database() AND NOT internal ORDER BY view_name")


def catalog_digest(con: duckdb.DuckDBPyConnection) -> str:
    return hashlib.sha256(repr(con.execute(_STORED_VIEWS).fetchall()).encode()).hexdigest()


def catalog_digest_of(database: Path) -> str | None:
    """The catalog digest of a views database file; None when it is not one."""
    import duckdb

    try:
        with duckdb.connect(str(database), read_only=True) as con:
            return catalog_digest(con)
    except duckdb.Error:
        return None
