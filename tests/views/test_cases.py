"""Every case of tests/views/cases/*.toml: a view's rows from given input rows (cases.py)."""
from __future__ import annotations

from dataclasses import replace

import pytest

from tests.views.cases import Case, input_table, load_cases, run_case

CASES = load_cases()


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_view_case(case: Case) -> None:
    problems = run_case(case)
    assert not problems, "\n".join(problems)


def test_a_wrong_row_fails_the_case() -> None:
    """The runner can fail: one cell off, a missing row, an extra row, NULL for a value."""
    case = next(c for c in CASES if c.view == "gpu_utilization" and c.file == "run_summary")
    assert isinstance(case.expect, str) and "70000/100000" not in case.expect
    header, *rows = case.expect.strip().splitlines()
    wrong = [
        case.expect.replace("0.7,", "0.7000001,"),       # a float beyond the tolerance
        case.expect.replace("70000,", "69999,"),          # an int
        case.expect.replace("true\n", "false\n", 1),      # a bool
        "\n".join([header, *rows[:-1]]),                  # a row missing
        "\n".join([header, *rows, rows[-1]]),             # a row too many
        case.expect.replace("0.4,", ",", 1),              # NULL where the view has a value
    ]
    for expect in wrong:
        assert expect != case.expect
        assert run_case(replace(case, expect=expect)), expect


def test_a_column_not_in_the_schema_is_refused() -> None:
    with pytest.raises(ValueError, match="kernels: no columns"):
        input_table("kernels", "kernel_id, no_such\n1, 2\n", {})
