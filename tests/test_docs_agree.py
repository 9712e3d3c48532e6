"""What the READMEs say about the same thing agrees with each other and with the code."""
from __future__ import annotations

import re

from tests.conftest import ROOT

README = (ROOT / "README.md").read_text()
WAREHOUSE_README = (ROOT / "warehouse" / "README.md").read_text()


def test_a_moved_warehouse_opens_as_is_in_both_readmes() -> None:
    """README: the folder 'can be copied or moved', its views read the files beside the
    database (tests/views/test_relocate.py checks it); warehouse/README.md said a moved
    copy needs `etl views` first."""
    assert "can be copied" in README and "SET VARIABLE warehouse_root" in README
    assert "with no `etl` command first" in WAREHOUSE_README
    assert "SET VARIABLE warehouse_root" in WAREHOUSE_README
    assert "etl views --warehouse NEW_PLACE" not in WAREHOUSE_README


def test_the_readme_names_stable_views_not_old_versions() -> None:
    """A pinned version in the README's prose goes stale with the next version (it named
    gpu_utilization_v3 and instrument_comparison_v1 after newer ones existed)."""
    from etl.core.sql_files import discover

    views = {view.name for view in discover()}
    pinned = [name for name in re.findall(r"`([a-z_]+_v\d+)`", README) if name in views]
    assert pinned == [], pinned
