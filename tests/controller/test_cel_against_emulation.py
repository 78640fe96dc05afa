"""The controller's CEL (`checks.dra.cel`) against the emulation's (`sim.cel`, `sim.devices`), which
share no code.

Generated selectors over a generated device get the same answer from both: true, false, or an
error (whichever). The selectors call what the Kubernetes libraries offer a device selector:
quantities (parsed, held, added, multiplied, compared, read as ints and floats), semantic versions
(parsed plainly and normalized, compared, taken apart) and ASCII case, on literals and on the
device's attributes and capacity. Texts are drawn near the edges of what Kubernetes accepts, and
mostly well formed where a malformed one would only make the whole selector fail.
"""

from fractions import Fraction

import celpy
from hypothesis import given, settings
from hypothesis import strategies as st

from gangkeeper.controller.checks.dra.cel import Broken, Cel
from gangkeeper.controller.checks.dra.devices import shape
from sim.cel import FUNCTIONS, environment
from sim.devices import cel_device, slice_devices

DRIVER = "gpu.example.com"
ATTRIBUTES = f"device.attributes['{DRIVER}']"
environment()  # celpy raises the recursion limit as it builds one: before the test, not during it

# --- texts ---------------------------------------------------------------------------------------

EDGY_QUANTITIES = st.builds(
    "{}{}{}{}".format,
    st.sampled_from(["", "", "+", "-"]),
    st.sampled_from(["", "0", "1", "3", "007", "15", "1000", "1024", "999999999999999999", "9223372036854775807",
                     "12345678901234567890"]),
    st.sampled_from(["", "", ".", ".0", ".5", ".25", ".000", ".0000000001"]),
    st.sampled_from(["", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei",
                     "e3", "E-2", "e+0", "e-10", "e21", "K", "Mo", " "]))
WELL_FORMED_QUANTITIES = st.builds(
    "{}{}{}{}".format,
    st.sampled_from(["", "-"]),
    st.sampled_from(["0", "1", "3", "15", "1000", "1024", "999999999999999999", "12345678901234567890"]),
    st.sampled_from(["", ".5", ".3", ".000"]),
    st.sampled_from(["", "m", "k", "E", "Ki", "Gi", "Pi", "e3", "e21"]))
EDGY_VERSIONS = st.builds(
    lambda v, numbers, pre, build: v + ".".join(numbers) + pre + build,
    st.sampled_from(["", "", "v"]),
    st.lists(st.sampled_from(["0", "1", "2", "01", "10", "9223372036854775808", "18446744073709551615",
                              "18446744073709551616", ""]), min_size=1, max_size=3),
    st.sampled_from(["", "", "-alpha", "-1", "-01", "-alpha.10", "-x-y.2", "-", "-a..b"]),
    st.sampled_from(["", "", "+build.5", "+", "+b-1"]))
WELL_FORMED_VERSIONS = st.builds(
    lambda numbers, pre: ".".join(numbers) + pre,
    st.lists(st.sampled_from(["0", "1", "10", "9223372036854775808", "18446744073709551615"]), min_size=3, max_size=3),
    st.sampled_from(["", "-alpha", "-1", "-alpha.10+build.5"]))
SOME_QUANTITIES = st.one_of(WELL_FORMED_QUANTITIES, WELL_FORMED_QUANTITIES, EDGY_QUANTITIES)
SOME_VERSIONS = st.one_of(WELL_FORMED_VERSIONS, WELL_FORMED_VERSIONS, EDGY_VERSIONS)
WORDS = st.text(alphabet="aAzZÄäİıß- 0", max_size=4)
INTS = st.sampled_from([-1, 0, 1, 2, 3, 1000, 9223372036854775807, -9223372036854775807])
FLOATS = st.sampled_from(["0.0", "0.3", "1.0", "1000.0", "1e18", "1e21"])


def quoted(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def spellings(digits: int, scale: int) -> list[str]:
    """Ways to write digits × 10^scale, which Kubernetes holds differently: `3e-1`, `30e-2`, `0.3`,
    `300m`."""
    suffix_power = max(p for p in (-9, -6, -3, 0, 3) if p <= scale)
    suffix = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k"}[suffix_power]
    padded = str(digits).rjust(1 - scale, "0")
    point = f"{padded[:scale]}.{padded[scale:]}" if scale < 0 else f"{digits}{'0' * scale}"
    return [f"{digits}e{scale}", f"{digits}0e{scale - 1}", point, f"{digits * 10 ** (scale - suffix_power)}{suffix}"]


# An amount in two spellings: their floats, and each against the float nearest the amount.
AMOUNTS = st.tuples(st.sampled_from([1, 3, 7, 15, 333, 123456789]), st.integers(-9, 3))
SAME_AMOUNT_FLOATS = AMOUNTS.flatmap(lambda amount: st.tuples(
    st.sampled_from(spellings(*amount)), st.sampled_from(spellings(*amount)),
    st.just(repr(float(amount[0] * Fraction(10) ** amount[1])))))


# --- expressions ---------------------------------------------------------------------------------

QUANTITIES = st.recursive(
    st.one_of(SOME_QUANTITIES.map(lambda t: f"quantity({quoted(t)})"), st.just(f"device.capacity['{DRIVER}'].memory")),
    lambda inner: st.one_of(
        st.builds("{}.{}({})".format, inner, st.sampled_from(["add", "sub"]), inner),
        st.builds("{}.{}({})".format, inner, st.sampled_from(["add", "sub", "mul"]), INTS)),
    max_leaves=3)
VERSIONS = st.one_of(SOME_VERSIONS.map(lambda t: f"semver({quoted(t)})"),
                     SOME_VERSIONS.map(lambda t: f"semver({quoted(t)}, true)"),
                     st.just(f"{ATTRIBUTES}.driverVersion"))
STRINGS = st.one_of(WORDS.map(quoted), st.just(f"{ATTRIBUTES}.model")).flatmap(
    lambda s: st.sampled_from([s, f"{s}.lowerAscii()", f"{s}.upperAscii()"]))
ORDERED = st.sampled_from(["{}.compareTo({}) == -1", "{}.compareTo({}) == 0", "{}.compareTo({}) == 1",
                           "{}.isGreaterThan({})", "{}.isLessThan({})", "{} == {}"])

SELECTORS = st.one_of(
    st.builds("{}.isInteger()".format, QUANTITIES),
    st.builds("{}.asInteger() == {}.asInteger()".format, QUANTITIES, QUANTITIES),
    st.builds("{}.asInteger() >= {}".format, QUANTITIES, INTS),
    st.builds("{}.asApproximateFloat() == {}.asApproximateFloat()".format, QUANTITIES, QUANTITIES),
    st.builds("{}.asApproximateFloat() == {}".format, QUANTITIES, FLOATS),
    st.builds("sign({}) == {}".format, QUANTITIES, st.sampled_from([-1, 0, 1])),
    SAME_AMOUNT_FLOATS.map(lambda a: f"quantity({quoted(a[0])}).asApproximateFloat() == "
                                     f"quantity({quoted(a[1])}).asApproximateFloat()"),
    SAME_AMOUNT_FLOATS.map(lambda a: f"quantity({quoted(a[0])}).asApproximateFloat() == {a[2]}"),
    st.builds(str.format, ORDERED, QUANTITIES, QUANTITIES),
    EDGY_QUANTITIES.map(lambda t: f"isQuantity({quoted(t)})"),
    EDGY_VERSIONS.map(lambda t: f"isSemver({quoted(t)})"),
    EDGY_VERSIONS.map(lambda t: f"isSemver({quoted(t)}, true)"),
    st.builds(str.format, ORDERED, VERSIONS, VERSIONS),
    st.builds("{}.{}() == {}".format, VERSIONS, st.sampled_from(["major", "minor", "patch"]),
              st.sampled_from([0, 1, 2, 10, -9223372036854775808])),
    st.builds("{} == {}".format, STRINGS, STRINGS))
DEVICES = st.fixed_dictionaries({
    "name": st.just("gpu-0"),
    "attributes": st.fixed_dictionaries({"model": st.fixed_dictionaries({"string": WORDS}),
                                         "driverVersion": st.fixed_dictionaries({"version": SOME_VERSIONS})}),
    "capacity": st.fixed_dictionaries({"memory": st.fixed_dictionaries({"value": SOME_QUANTITIES})}),
})


# --- the two answers -----------------------------------------------------------------------------

def controller_answer(selector: str, raw: dict) -> bool | str:
    answer = Cel().all_hold("gpu", (), (selector,), 0, shape(DRIVER, raw))
    return "error" if isinstance(answer, Broken) else answer


def emulation_answer(selector: str, raw: dict) -> bool | str:
    """What `sim.cel` evaluates the selector to on the device as `sim.devices` gives it to CEL
    (the emulated scheduler itself reads an error as "not selected")."""
    [device] = slice_devices({"nodeName": "n1", "devices": [raw]}, DRIVER, "n1", True)
    try:
        result = environment().program(environment().compile(selector), functions=FUNCTIONS).evaluate(
            {"device": cel_device(device)})
    except (celpy.CELParseError, celpy.CELEvalError, ValueError):
        return "error"
    return bool(result) if isinstance(result, celpy.celtypes.BoolType) else "error"


@settings(max_examples=200, deadline=None)
@given(SELECTORS, DEVICES)
def test_the_controller_and_the_emulation_answer_every_selector_alike(selector, raw):
    assert controller_answer(selector, raw) == emulation_answer(selector, raw), (selector, raw)
