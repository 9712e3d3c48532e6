from __future__ import annotations

from etl.extract.timeconv import us_texts_to_ns


def test_epoch_scale_decimals_are_exact() -> None:
    # float64 of this µs value is 1712195495519689.0: the .047 would be lost
    got = us_texts_to_ns([b"1712195495519689.047", b"1712195495519695.8", b"5", b"-3.2"])
    assert got.ns.to_pylist() == [1712195495519689047, 1712195495519695800, 5000, -3200]
    assert got.problems == [] and got.rounded == []


def test_absent_values_are_null_not_zero() -> None:
    assert us_texts_to_ns([b"", b"1.5"]).ns.to_pylist() == [None, 1500]


def test_odd_numbers_take_the_exact_slow_path() -> None:
    got = us_texts_to_ns([b"1.5e-03", b"2.0005", b"2.0015", b"7"])
    assert got.ns.to_pylist() == [2, 2000, 2002, 7000]  # half-even rounding at sub-ns
    assert got.rounded == [0, 1, 2]


def test_non_numbers_become_null_with_a_problem() -> None:
    got = us_texts_to_ns([b'"12"', b"99999999999999999999999", b"3"])
    assert got.ns.to_pylist() == [None, None, 3000]
    assert [row for row, _ in got.problems] == [0, 1]
