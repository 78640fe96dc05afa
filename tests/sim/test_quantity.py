"""The emulation's own quantities: Kubernetes' grammar, its rounding, the scheduler's whole numbers,
`Quantity.String()`, and how Kubernetes holds an amount (what CEL's `isInteger` and
`asApproximateFloat` read)."""

import math
from fractions import Fraction

import pytest

from sim.quantity import (
    approximate_float,
    canonical,
    counted,
    held_integer,
    held_product,
    held_sum,
    holding,
    parse_quantity,
)


@pytest.mark.parametrize("text, amount", [
    ("2", 2), ("500m", Fraction(1, 2)), ("0.5", Fraction(1, 2)), (".5", Fraction(1, 2)), ("5.", 5), ("+1", 1),
    ("-1", -1), ("1k", 1000), ("1E", 10**18), ("1e3", 1000), ("1E3", 1000), ("1e-3", Fraction(1, 1000)),
    ("16Gi", 16 * 2**30), ("1.5Gi", 3 * 2**29), ("250u", Fraction(1, 4000)), (" 1 ", 1), (2, 2), (0.25, Fraction(1, 4)),
    ("+", 0), (".", 0), ("m", 0), ("Ki", 0),  # no digits: zero, where Kubernetes reads an int64 amount
    ("8Ei", 2**63 - 1), ("-16Ei", -(2**63 - 1)), ("10000E", 10**22),  # a binary amount is capped, a decimal not
])
def test_what_the_api_server_reads(text, amount):
    assert parse_quantity(text) == amount


@pytest.mark.parametrize("text", ["", "Pi", "Ei", "e-10", "1K", "1ki", "1e", "1 k", "1_000", "٣", "1e1001", "10%"])
def test_what_the_api_server_refuses_names_the_value_and_what_to_write(text):
    with pytest.raises(ValueError) as refused:
        parse_quantity(text)
    assert str(refused.value).startswith(f"quantity {text!r} ") and "(e.g. 2, 500m, 1.5, 16Gi" in str(refused.value)


def test_a_boolean_is_no_quantity():
    with pytest.raises(ValueError, match="quantity True is a bool; write a string or a number"):
        parse_quantity(True)


def test_cel_reads_its_argument_untrimmed():
    with pytest.raises(ValueError):
        parse_quantity(" 1", trimmed=False)


def test_an_amount_finer_than_a_nano_is_rounded_up_away_from_zero():
    assert parse_quantity("0.0000000001") == Fraction(1, 10**9)
    assert parse_quantity("-1.0000000001") == -Fraction(10**9 + 1, 10**9)


def test_the_scheduler_counts_millicores_and_whole_units_rounded_up():
    assert counted("cpu", parse_quantity("0.4m")) == Fraction(1, 1000)
    assert counted("cpu", parse_quantity("1.0001")) == Fraction(1001, 1000)
    assert counted("memory", parse_quantity("1.5")) == 2
    assert counted("nvidia.com/gpu", parse_quantity("8")) == 8


@pytest.mark.parametrize("text, written", [
    ("1000m", "1"), ("0.5", "500m"), ("2000", "2k"), ("100", "100"), ("1E", "1E"), ("0.001", "1m"),
    ("1e3", "1e3"), ("15e2", "1500"), ("12e-1", "1200e-3"),
    ("2048Mi", "2Gi"), ("1.5Gi", "1536Mi"), ("0.5Ki", "512"), ("4Mi", "4Mi"), ("0", "0"), ("lots", "lots"),
    ("+", "0"), ("1000E", "1"), ("1000e18", "1e21"),  # past the largest suffix Kubernetes writes none
])
def test_canonical_is_what_the_api_server_writes_back(text, written):
    assert canonical(text) == written


@pytest.mark.parametrize("text, integer", [
    ("8", 8), ("2k", 2000), ("1e3", 1000), ("80Gi", 80 * 2**30), ("0", 0),
    ("1000m", None), ("1.0", None), ("0.0", None), ("1.5", None), ("1Ei", None), ("10E", None),
    ("1234567890123456789", None),
])
def test_kubernetes_answers_integer_from_how_it_holds_the_amount(text, integer):
    assert held_integer(*holding(text)) == integer


def test_a_sum_is_held_at_the_smaller_scale_and_overflow_leaves_int64():
    assert held_sum((1, 0), (500, -3)) == (1500, -3)
    assert held_sum((0, -3), (2, 0)) == (2, 0)
    assert held_sum((2**62, 0), (2**62, 0)) is None


@pytest.mark.parametrize("text, held", [
    ("1.5", ((15, -1), True)), ("1000m", ((1000, -3), True)), ("0", ((0, 0), True)), ("Ki", ((0, 0), True)),
    ("1234567890123456789", ((1234567890123456789 * 10**9, -9), False)),  # a decimal is held in nanos
    ("1.0000000001", ((1000000001, -9), False)), ("1.5Gi", ((1610612736 * 10**9, -9), False)),
    ("8Ei", ((2**63 - 1, 0), False)), ("0.0000000000", ((0, -10), False)),  # zero is not rounded
])
def test_holding_is_an_int64_amount_when_the_digits_allow_else_a_decimal(text, held):
    assert holding(text) == held


def test_a_product_is_held_as_int64_multiplication_allows():
    assert held_product((1000, -3), 0) == (0, 0)  # times zero: 0 at scale 0
    assert held_product((0, -1), 0) == (0, -1)  # zero stays as it is held
    assert held_product((5, 18), 2) is None  # 10 × 10^18 does not fit an int64
    assert held_product((15, -1), 3) is None  # 45 tenths: not whole
    assert held_product((15, -1), 2) == (30, -1)


@pytest.mark.parametrize("held, approximately", [
    ((3, -1), 0.30000000000000004), ((300, -3), 0.3), ((1, 33), 1.0000000000000001e33), ((1, 400), math.inf),
])
def test_approximate_float_is_the_held_digits_times_gos_pow10(held, approximately):
    assert approximate_float(held) == approximately
