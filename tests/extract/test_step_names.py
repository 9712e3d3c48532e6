"""Step markers by name (etl/extract/step_names.py): run.toml's step_pattern alone when
set, matched at the start of the name, group 1 the number."""
from __future__ import annotations

import pyarrow as pa
import pytest

from etl.extract.step_names import StepNames, StepNumberError

DEFAULTS = ["^ProfilerStep#(\\d+)$", "^(?:[Ii]teration|[Ss]tep)[ _#:]?(\\d+)$"]


@pytest.mark.parametrize("custom,name,number", [
    ("train_step (\\d+)", "train_step 3", 3),
    ("train_step (\\d+)", "train_step 3 extra", 3),     # matched at the start
    ("train_step (\\d+)", "my train_step 3", None),     # not searched
    ("train_step (\\d+)$", "train_step 3 extra", None),
    ("train_step (\\d+)", "ProfilerStep#3", None),      # the pattern alone
    (None, "ProfilerStep#3", 3),
    (None, "iteration7", 7),                            # the second default
    (None, "train_step 3", None),
])
def test_the_number_of_a_name(custom: str | None, name: str, number: int | None) -> None:
    assert StepNames.of(custom, DEFAULTS).number(name) == number


@pytest.mark.parametrize("pattern,name", [("train_(\\w+)", "train_step"),
                                          ("step (\\d+)?", "step x"),
                                          ("s(\\d+)", "s" + "9" * 19)])  # >= 2^63
def test_a_group_that_is_no_step_number_is_refused(pattern: str, name: str) -> None:
    with pytest.raises(StepNumberError):
        StepNames((pattern,)).number(name)


def test_numbers_of_an_arrow_array() -> None:
    names = pa.chunked_array([["step 2", None, "op", "step 2"], ["step 10"]])
    got = StepNames(("^step (\\d+)$",)).numbers(names)
    assert got.to_pylist() == [2, None, None, 2, 10]
