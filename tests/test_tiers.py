"""The line between `make check` and `make test` (tests/slow_tests.py, conftest)."""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from tests import conftest
from tests.slow_tests import COSTLY, PROCESSES


def test_every_slow_entry_names_a_test() -> None:
    """An entry of tests/slow_tests.py that names no test (renamed, removed) is stale."""
    assert conftest.STALE_SLOW_ENTRIES == [], "remove or rename these entries"


def test_every_test_on_a_shared_warehouse_is_slow(request: pytest.FixtureRequest) -> None:
    for item in request.session.items:
        if conftest.SHARED_WAREHOUSES & set(getattr(item, "fixturenames", ())):
            assert item.get_closest_marker("slow"), item.nodeid


def test_the_listed_tests_are_marked_slow(request: pytest.FixtureRequest) -> None:
    """Whatever this session selected of the listed tests carries the mark (`make check`
    selects none of them)."""
    listed = set(PROCESSES) | set(COSTLY)
    for item in request.session.items:
        if listed & conftest.slow_entry_keys(item.nodeid):
            assert item.get_closest_marker("slow"), item.nodeid


def _item(nodeid: str, module: Any) -> Any:
    return SimpleNamespace(nodeid=nodeid, module=module)


def _config(*args: str) -> Any:
    return SimpleNamespace(invocation_params=SimpleNamespace(args=args))


def test_an_entry_that_names_no_test_is_refused() -> None:
    module = SimpleNamespace(test_a=None, test_b=None)
    items = [_item("tests/x.py::test_a[1]", module), _item("tests/x.py::test_a[2]", module),
             _item("tests/x.py::test_b", module)]
    unmatched = {"tests/x.py::test_gone", "tests/x.py::test_a[3]", "tests/y.py::test_c",
                 "tests/no_such_file.py", "tests/test_tiers.py"}
    assert conftest._stale_entries(unmatched, items, _config()) == [
        "tests/no_such_file.py", "tests/x.py::test_a[3]", "tests/x.py::test_gone"]
    # y.py was not collected; a whole file's entry stands while the file is there
    # one parameter asked for by node id: the others are not collected, so not stale
    assert conftest._stale_entries(unmatched, items[:1], _config("tests/x.py::test_a[1]")
                                   ) == ["tests/no_such_file.py", "tests/x.py::test_gone"]
