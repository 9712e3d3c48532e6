from __future__ import annotations

import decimal

import pyarrow as pa
from hypothesis import given, settings, strategies as st

from etl.extract.timeconv import _three_decimals_to_ns, us_texts_to_ns


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


# ---- the three-decimal path (text without the dot is the ns) ------------------------

_KINETO_US = st.integers(min_value=-(10 ** 12), max_value=4 * 10 ** 15)


def _oracle_ns(text: bytes) -> int | None:
    """Independent reference: exact decimal arithmetic, no Arrow."""
    return None if not text else int(decimal.Decimal(text.decode()) * 1000)


@st.composite
def _number_text(draw: st.DrawFn) -> bytes:
    us = draw(_KINETO_US)
    form = draw(st.sampled_from(["int", "three", "three", "one", "two", "exp", "absent"]))
    sign = "-" if us < 0 else ""
    whole, frac = abs(us), draw(st.integers(0, 999))
    return {"int": f"{us}", "three": f"{sign}{whole}.{frac:03d}",
            "one": f"{sign}{whole}.{frac % 10}", "two": f"{sign}{whole}.{frac % 100:02d}",
            "exp": f"{sign}{whole % 1000}.5e3", "absent": ""}[form].encode()


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(st.lists(_number_text(), min_size=1, max_size=40))
def test_any_mix_of_kineto_number_texts_is_exact(texts: list[bytes]) -> None:
    got = us_texts_to_ns(texts)
    assert got.ns.to_pylist() == [_oracle_ns(t) for t in texts]
    assert got.problems == [] and got.rounded == []


def test_three_decimals_drop_the_dot_integers_are_scaled() -> None:
    texts = [b"1710461254806416.250", b"-0.500", b"12", b"", b"0.001"]
    got = us_texts_to_ns(texts)
    assert got.ns.to_pylist() == [1710461254806416250, -500, 12000, None, 1]


def _strings(texts: list[bytes]) -> pa.Array:
    return pa.array([t.decode() if t else None for t in texts], pa.large_string())


def test_three_decimal_path_declines_what_it_cannot_read_exactly() -> None:
    # taken: Kineto's own spellings
    assert _three_decimals_to_ns(_strings([b"1.250", b"7", b""])) is not None
    # declined: other decimal counts, an exponent with three characters after the dot
    # (b"15e3" is not digits), quotes, an integer part too large for int64 ns
    for odd in ([b"1.25"], [b"1.2500"], [b"1.5e3"], [b'"1.250"'],
                [b"99999999999999999999.000"], [b"1" * 17]):
        assert _three_decimals_to_ns(_strings([b"2.000", *odd])) is None, odd


def test_exponent_and_boundary_texts_still_end_exact_or_flagged() -> None:
    got = us_texts_to_ns([b"1.5e3", b"2.000"])  # declined by the fast path, exact by Decimal
    assert got.ns.to_pylist() == [1500000, 2000] and got.problems == []
    got = us_texts_to_ns([b"9223372036854775.807", b"1.000"])  # beyond 2^62 ns
    assert got.ns.to_pylist() == [None, 1000] and [r for r, _ in got.problems] == [0]
