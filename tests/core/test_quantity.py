from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gangkeeper.quantity import format_quantity, parse_quantity


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1", Fraction(1)),
        ("500m", Fraction(1, 2)),
        ("1.5", Fraction(3, 2)),
        ("16Gi", Fraction(16 * 2**30)),
        ("512Mi", Fraction(512 * 2**20)),
        ("1e3", Fraction(1000)),
        ("1E-3", Fraction(1, 1000)),
        ("2k", Fraction(2000)),
        ("100n", Fraction(1, 10**7)),
        (".5", Fraction(1, 2)),
        ("0", Fraction(0)),
        (8, Fraction(8)),
        (0.25, Fraction(1, 4)),
    ],
)
def test_parses_kubernetes_quantities_exactly(text, expected):
    assert parse_quantity(text) == expected


def test_tenths_of_a_cpu_add_up_exactly():
    assert parse_quantity("100m") + parse_quantity("200m") == parse_quantity("300m")


@pytest.mark.parametrize("bad", ["", "1.2.3", "abc", "1Gb", "5 Gi", "1e", "--1", "1e999"])
def test_refuses_what_is_not_a_quantity_and_says_what_to_write(bad):
    with pytest.raises(ValueError, match=r"quantity|exponent"):
        parse_quantity(bad)


@pytest.mark.parametrize("bad", [True, None, [1], {"a": 1}])
def test_refuses_wrong_types_naming_the_type(bad):
    with pytest.raises(ValueError, match="quantity"):
        parse_quantity(bad)


@given(st.integers(min_value=0, max_value=10**12))
def test_millis_round_trip(millis):
    value = Fraction(millis, 1000)
    assert parse_quantity(format_quantity(value)) == value
