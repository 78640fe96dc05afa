"""The Kubernetes CEL libraries in the controller's selectors (`checks.dra.cel`), answering as the
scheduler's DRA environment does: quantities by how Kubernetes holds them, semantic versions as
blang/semver reads them, ASCII case."""

import pytest

from gangkeeper.controller.checks.dra.cel import Broken, Cel
from gangkeeper.controller.checks.dra.devices import shape

DRIVER = "gpu.example.com"
MEMORY = f"device.capacity['{DRIVER}'].memory"


def answer(selector, capacity=None):
    """What the selector says of one device of the driver, as published with this memory capacity."""
    raw = {"name": "gpu-0", "capacity": {"memory": {"value": capacity}} if capacity is not None else {}}
    found = Cel().all_hold("gpu", (), (selector,), 0, shape(DRIVER, raw))
    return found.reason if isinstance(found, Broken) else found


@pytest.mark.parametrize("selector", [
    "'ÄB'.lowerAscii() == 'Äb'",
    "'äb'.upperAscii() == 'äB'",
    "'İK'.lowerAscii() == 'İk'",
])
def test_ascii_case_changes_ascii_letters_only(selector):
    assert answer(selector) is True


@pytest.mark.parametrize("text, accepted", [
    (" 1", False),  # read untrimmed
    ("1 ", False),
    ("+", True),  # no digits: read as zero where Kubernetes reads an int64 amount
    (".", True),
    ("Ki", True),
    ("Pi", False),  # ... but refused where it reads a decimal
    ("e-10", False),
    ("1e1000", True),
])
def test_is_quantity_reads_the_text_as_kubernetes_parses_it(text, accepted):
    assert answer(f"isQuantity('{text}')") is accepted


@pytest.mark.parametrize("selector", [
    "quantity('+') == quantity('0') && quantity('Ki') == quantity('0')",
    "quantity('8Ei') == quantity('9223372036854775807')",  # a binary amount is capped at the largest int64
    "quantity('-8Ei') == quantity('-9223372036854775807')",
    "quantity('0.0000000001') == quantity('1n')",  # rounded up to a nano
])
def test_quantity_has_the_amount_kubernetes_parses(selector):
    assert answer(selector) is True


@pytest.mark.parametrize("selector, integer", [
    ("quantity('1000m').isInteger()", False),  # held at scale -3, though whole
    ("quantity('1.0').isInteger()", False),
    ("quantity('1.0E').isInteger()", True),  # 10 at scale 17
    ("quantity('999999999999999999').isInteger()", True),
    ("quantity('1000000000000000000').isInteger()", False),  # 19 digits: held as a decimal
    ("quantity('1Pi').isInteger()", False),  # a binary amount too large for the int64 way
    ("quantity('1000m').mul(0).isInteger()", True),  # times zero is 0 at scale 0
    ("quantity('0.0').mul(0).isInteger()", False),  # zero stays as it is held
    ("quantity('5E').mul(2).sub(quantity('5E')).isInteger()", False),  # once a decimal, always one
    ("quantity('1.5').mul(2).isInteger()", False),
    ("quantity('1').add(quantity('500m')).add(quantity('500m')).isInteger()", False),
])
def test_is_integer_answers_from_how_kubernetes_holds_the_amount(selector, integer):
    assert answer(selector) is integer


@pytest.mark.parametrize("selector", [
    "quantity('0.3').asApproximateFloat() != 0.3",  # 3 × 0.1 in floating point
    "quantity('0.3').asApproximateFloat() == 0.30000000000000004",
    "quantity('300m').asApproximateFloat() == 0.3",
    "quantity('1.5Gi').asApproximateFloat() == 1610612736.0",
])
def test_as_approximate_float_multiplies_the_held_digits_by_a_power_of_ten(selector):
    assert answer(selector) is True


def test_as_integer_of_an_amount_not_held_as_an_int64_fails():
    assert "cannot convert value to integer" in answer("quantity('1000m').asInteger() == 1")


@pytest.mark.parametrize("selector", [
    "quantity('50k').add(20).sub(quantity('100k')).sub(-50000).asInteger() == 20",
    "quantity('2k').mul(3) == quantity('6k') && sign(quantity('-1m')) == -1",
    "quantity('50Mi').compareTo(quantity('50M')) == 1 && quantity('200M').compareTo(quantity('0.2G')) == 0",
])
def test_quantity_arithmetic_and_comparisons(selector):
    assert answer(selector) is True


@pytest.mark.parametrize("capacity, selector", [
    ("1000m", f"{MEMORY}.isInteger()"),  # stored as `1`
    ("1125899906842624", f"{MEMORY}.isInteger()"),
    ("1Pi", f"!{MEMORY}.isInteger()"),  # stored as `1Pi`, read back as a decimal
    ("1000E", f"{MEMORY} == quantity('1')"),  # Kubernetes writes 10^21 as `1`, its suffix lost
    (" 80Gi ", f"{MEMORY} == quantity('80Gi')"),  # the API server trims
])
def test_a_capacity_is_read_as_the_api_server_stores_it(capacity, selector):
    assert answer(selector, capacity) is True


def test_a_capacity_that_is_no_quantity_breaks_the_selector():
    assert answer(f"{MEMORY}.isInteger()", "lots") == \
        "request: selector #0: CEL runtime error: capacity gpu.example.com/memory: quantity 'lots' is not " \
        "a Kubernetes quantity (e.g. 2, 500m, 1.5, 16Gi, 512Mi, 1e3)"


@pytest.mark.parametrize("text, valid", [
    ("1.2.3-beta.1+build.1", True),
    ("1.0.0-01", False),  # a numeric pre-release part has no leading zero
    ("1.0.0-0", True),
    ("18446744073709551615.0.0", True),
    ("18446744073709551616.0.0", False),  # beyond uint64
    ("1.0.0-18446744073709551616", False),
    ("v1.0.0", False),
    ("1.0.0+", False),
])
def test_is_semver_reads_as_blang_semver_parses(text, valid):
    assert answer(f"isSemver('{text}')") is valid


@pytest.mark.parametrize("text, valid", [
    ("v1.0", True),
    ("01.01.01", True),
    ("1", True),
    ("v1.0.0-rc.1", True),
    ("1.0-rc.1", False),  # a short version takes no pre-release
    (" 1.0.0", False),
    ("", False),
])
def test_is_semver_normalizes_when_asked(text, valid):
    assert answer(f"isSemver('{text}', true)") is valid


@pytest.mark.parametrize("selector", [
    "semver('v01.01', true) == semver('1.1.0')",
    "semver('1.0.0-alpha.2').isLessThan(semver('1.0.0-alpha.10'))",
    "semver('1.0.0-2').isLessThan(semver('1.0.0-alpha'))",
    "semver('1.0.0+build.1') == semver('1.0.0+build.2')",
    "semver('1.2.3').compareTo(semver('1.2.3-rc.1')) == 1",
    "semver('9223372036854775808.0.0').major() == -9223372036854775808",  # Go's int64 of a uint64
])
def test_semantic_versions_compare_by_precedence_and_part_as_go_converts_them(selector):
    assert answer(selector) is True


@pytest.mark.parametrize("selector", [
    "quantity(1) == quantity('1')",
    "isQuantity(1)",
    "quantity('1').add(1.5) == quantity('2.5')",
    "isSemver('1.0.0', 1)",
    "semver('1.0.0').compareTo(quantity('1')) == 0",
])
def test_an_argument_of_another_type_is_no_such_overload(selector):
    assert "no such overload" in answer(selector)
