"""Quantities as Kubernetes holds them (`checks.dra.quantities`): an int64 amount or a decimal,
decided by the text, kept or lost by arithmetic, and written back as the API server stores them."""

import math
from fractions import Fraction

import pytest

from gangkeeper.controller.checks.dra.quantities import Quantity, parse, stored


def held(quantity):
    return quantity.digits, quantity.exponent, quantity.in_int64


@pytest.mark.parametrize("text, integer", [
    # Kubernetes' own expectations of `AsInt64` (apimachinery TestParseQuantity)
    ("999999999999999999", 999999999999999999), ("-999999999999999999", -999999999999999999),
    ("999999999999999999.0", None), ("9999999999999999999", None), ("1E", 10**18), ("-1E", -(10**18)),
    ("1000000000000000000", None), ("1.0E", 10**18), ("1.000000000000000001E", None), ("10E", None),
    ("9223372036854775807", None),
    ("8", 8), ("2k", 2000), ("1e3", 1000), ("80Gi", 80 * 2**30), ("0", 0), ("1000m", None), ("0.0", None),
    ("1Pi", None), ("1Ti", 2**40),
])
def test_an_int64_amount_is_an_integer_at_a_scale_of_0_or_above(text, integer):
    assert parse(text).as_int64() == integer


@pytest.mark.parametrize("text, value", [
    ("+", 0), ("-", 0), (".", 0), ("m", 0), ("Ki", 0), ("e3", 0),
    ("0.0000000001", Fraction(1, 10**9)), ("-1.0000000001", -Fraction(10**9 + 1, 10**9)),
    ("8Ei", 2**63 - 1), ("16Ei", 2**63 - 1), ("-8Ei", -(2**63 - 1)),  # a binary amount is capped
    ("10000E", 10**22),  # a decimal one is not
])
def test_parse_reads_the_amount_kubernetes_does(text, value):
    assert parse(text).value == value


@pytest.mark.parametrize("text, why", [
    ("", "is not a Kubernetes quantity"), (" 1", "is not a Kubernetes quantity"),
    ("1K", "has an unknown suffix 'K'"), ("1Mo", "is not a Kubernetes quantity"), ("1e", "has an unknown suffix 'e'"),
    ("Pi", "has no digits"), ("e-10", "has no digits"), ("1e1001", "has an exponent beyond ±1000"),
])
def test_parse_refuses_what_kubernetes_refuses_naming_the_text(text, why):
    with pytest.raises(ValueError) as refused:
        parse(text)
    assert str(refused.value).startswith(f"quantity {text!r} {why}") and "(e.g. 2, 500m" in str(refused.value)


@pytest.mark.parametrize("published, written", [
    ("1000m", "1"), ("0.5", "500m"), ("2000", "2k"), ("1e3", "1e3"), ("15e2", "1500"), ("12e-1", "1200e-3"),
    ("2048Mi", "2Gi"), ("1.5Gi", "1536Mi"), ("0.5Ki", "512"), ("1025Ki", "1025Ki"), ("1Pi", "1Pi"),
    ("1000E", "1"), (" 4Mi ", "4Mi"), ("9999999999999999999.1", "9999999999999999999100m"),
])
def test_stored_is_the_text_the_api_server_writes_read_again(published, written):
    assert held(stored(published)) == held(parse(written))


def test_a_sum_is_held_at_the_smaller_scale_while_each_step_fits():
    assert held(parse("1").plus(parse("500m"))) == (1500, -3, True)
    assert held(parse("0.0").plus(parse("2"))) == (2, 0, True)  # a zero takes the other as it is
    overflowed = Quantity.of_int(2**62).plus(Quantity.of_int(2**62))
    assert not overflowed.in_int64 and overflowed.value == 2**63
    assert not overflowed.minus(Quantity.of_int(2**62)).in_int64  # a decimal for good


def test_a_product_is_held_as_int64_multiplication_allows():
    assert held(parse("1000m").times(0)) == (0, 0, True)
    assert held(parse("0.0").times(0)) == (0, -1, True)  # zero stays as it is held
    assert held(parse("5E").times(2)) == (10, 18, False)  # 10 × 10^18 does not fit an int64
    assert held(parse("1.5").times(3)) == (45, -1, False)  # 45 tenths: not whole, so multiplied as a decimal
    assert held(parse("1.5").times(2)) == (30, -1, True)


@pytest.mark.parametrize("text, approximately", [
    ("0.3", 0.30000000000000004),  # 3 × 0.1
    ("300m", 0.3),  # 300 × 0.001
    ("1e33", 1.0000000000000001e33),  # Go's Pow10(33): 1e32 × 10
    ("1.5Gi", 1610612736.0),
    ("1e400", math.inf),
])
def test_approximate_float_is_the_held_digits_times_gos_pow10(text, approximately):
    assert parse(text).approximate_float() == approximately


def test_zero_times_an_infinite_power_of_ten_is_not_a_number_as_in_go():
    assert math.isnan(parse("0e400").approximate_float())
