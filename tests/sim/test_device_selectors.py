"""DRA device selectors in the emulation's CEL: the Kubernetes quantity and semver libraries and the
strings extension's ASCII case, as the real scheduler's DRA CEL environment evaluates them."""

import pytest

from sim.devices import Selection, devices_of

DRIVER = "gpu.example.com"


def device(attributes=None, capacity=None):
    """One device; attributes as published (`{"model": {"string": "H100"}}`), capacity as quantities."""
    spec = {"driver": DRIVER, "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1}, "nodeName": "n1",
            "devices": [{"name": "gpu-0", "attributes": attributes or {},
                         "capacity": {name: {"value": value} for name, value in (capacity or {}).items()}}]}
    [found] = devices_of([{"metadata": {"name": "n1-gpus"}, "spec": spec}])
    return found


def selects(expression, **published):
    return Selection().matches(expression, device(**published))


VERSIONED = {"attributes": {"driverVersion": {"version": "1.10.0"}}}


@pytest.mark.parametrize("expression", [
    "device.attributes['gpu.example.com'].driverVersion.isGreaterThan(semver('1.9.0'))",
    "device.attributes['gpu.example.com'].driverVersion == semver('1.10.0')",
    "device.attributes['gpu.example.com'].driverVersion.compareTo(semver('1.10.0-rc.1')) == 1",
    "device.attributes['gpu.example.com'].driverVersion.minor() == 10",
])
def test_a_version_attribute_is_a_semantic_version(expression):
    assert selects(expression, **VERSIONED)


@pytest.mark.parametrize("expression", [
    "semver('1.0.0-alpha').isLessThan(semver('1.0.0'))",
    "semver('1.0.0-alpha.2').isLessThan(semver('1.0.0-alpha.10'))",
    "semver('1.0.0-2').isLessThan(semver('1.0.0-alpha'))",
    "semver('1.0.0-alpha').isLessThan(semver('1.0.0-alpha.1'))",
    "semver('1.0.0+build.1') == semver('1.0.0+build.2')",
    "semver('1.2.3').major() == 1 && semver('1.2.3').patch() == 3",
    "isSemver('1.0.0-rc.1+build-5')",
    "!isSemver('v1.0.0') && !isSemver('1.0') && !isSemver('01.0.0') && !isSemver('1.0.0-01')",
    "!isSemver('1.0.0+') && !isSemver('1.0.0-') && !isSemver('18446744073709551616.0.0')",
    "isSemver('v1.0', true) && semver('v01.2', true) == semver('1.2.0')",
    "!isSemver('1.0-rc.1', true)",
])
def test_semver_follows_semantic_version_precedence_and_blang_parsing(expression):
    assert selects(expression)


def test_a_version_that_does_not_parse_selects_nothing():
    assert not selects("semver('1.0') == semver('1.0.0')")
    assert not selects("true", attributes={"driverVersion": {"version": "not-a-version"}})


@pytest.mark.parametrize("expression", [
    "isQuantity('16Gi') && !isQuantity('16GB') && !isQuantity(' 1')",
    "quantity('50k').add(20) == quantity('50020') && quantity('50k').sub(quantity('20k')) == quantity('30k')",
    "quantity('200M').compareTo(quantity('0.2G')) == 0 && quantity('50Mi').isGreaterThan(quantity('50M'))",
    "sign(quantity('-1m')) == -1 && quantity('2k').mul(3) == quantity('6k')",
    "quantity('2k').isInteger() && quantity('2k').asInteger() == 2000",
    "!quantity('1000m').isInteger() && !quantity('1.0').isInteger()",
    "quantity('1').add(quantity('500m')).add(quantity('500m')) == quantity('2')",
    "!quantity('1').add(quantity('500m')).add(quantity('500m')).isInteger()",
    "device.capacity['gpu.example.com'].memory.isInteger()",
])
def test_quantities_as_the_kubernetes_quantity_library_has_them(expression):
    """A capacity is read as the API server stored it: `1000m` is stored as `1`, an integer."""
    assert selects(expression, capacity={"memory": "1000m"})


@pytest.mark.parametrize("expression", [
    "quantity('1000m').mul(0).isInteger()",  # times zero is 0 at scale 0
    "!quantity('5E').mul(2).sub(quantity('5E')).isInteger()",  # the product overflowed: a decimal for good
    "quantity('0.3').asApproximateFloat() == 0.30000000000000004",  # 3 × 0.1 in floating point
    "quantity('+') == quantity('0') && quantity('Ki') == quantity('0') && !isQuantity('Pi')",
    "quantity('8Ei') == quantity('9223372036854775807')",
    "semver('9223372036854775808.0.0').major() == -9223372036854775808",  # Go's int64 of a uint64
])
def test_what_kubernetes_answers_from_how_it_holds_and_converts(expression):
    assert selects(expression)


def test_a_capacity_past_the_largest_suffix_is_stored_without_one():
    assert selects("device.capacity['gpu.example.com'].memory == quantity('1')", capacity={"memory": "1000E"})


def test_as_integer_of_what_kubernetes_holds_as_a_decimal_fails():
    assert not selects("quantity('1.5').asInteger() == 1")
    assert not selects("quantity('1000m').asInteger() == 1")


def test_lower_ascii_lowers_ascii_letters_only():
    assert selects("device.attributes['gpu.example.com'].model.lowerAscii() == 'h100'",
                   attributes={"model": {"string": "H100"}})
    assert selects("'ÄB'.lowerAscii() == 'Äb' && 'äb'.upperAscii() == 'äB'")


def test_a_domain_the_device_has_nothing_in_is_an_empty_map():
    assert selects("!('model' in device.attributes['other.example.com'])", attributes={"model": {"string": "H100"}})
    assert selects("size(device.capacity['other.example.com']) == 0")
