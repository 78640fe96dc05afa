"""Quantities as Kubernetes holds them (`resource.Quantity`), for CEL's quantity library.

`gangkeeper.quantity` says what an amount is worth; CEL also answers from how Kubernetes holds
it. An amount is held as an int64 times a power of ten (`int64Amount`) when its text allows (at
most 18 digits, none finer than a nano; a binary amount without a fraction while it is small),
else as an arbitrary decimal (`inf.Dec`: rounded up to a nano, away from zero; a binary amount
capped at 2^63-1). So `isInteger()` and `asInteger()` read an int64 amount at a scale of 0 or
above only (`quantity("1000m").isInteger()` is false, its value whole); `asApproximateFloat()`
multiplies the held digits by Go's `math.Pow10` of the held exponent
(`quantity("0.3").asApproximateFloat()` is 0.30000000000000004); and a sum, a difference or a
product stays an int64 amount while each step of Kubernetes' int64 arithmetic fits, and is a
decimal for good once one does not.

`parse` is `resource.ParseQuantity`, as CEL's `quantity()` calls it: the text untrimmed, a sign,
digits with an optional fraction, then a suffix (`n u m k M G T P E`, `Ki` … `Ei`, or an exponent
`e3`, `E-2`). The digits may be left out where Kubernetes reads the text the int64 way (`+`, `.`,
`m`, `Ki` are zero) but not where it reads a decimal (`Pi`, `Ei`, `e-10` are refused). `stored`
is a device's capacity as the scheduler reads it: the text trimmed, written back as the API
server stores it (`Quantity.String()`, which drops a decimal suffix beyond `E`: 1000E is "1")
and parsed again.

Not followed: an exponent beyond ±1000 is refused (Kubernetes takes any int32 one).
"""

import math
import re
from dataclasses import dataclass
from fractions import Fraction

from gangkeeper.quantity import EXAMPLES

_TEXT = re.compile(r"(?P<sign>[+-]?)(?P<whole>[0-9]*)(?:\.(?P<fraction>[0-9]*))?"
                   r"(?P<suffix>[eEinumkKMGTP]*[+-]?[0-9]*)")
_DECIMAL_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY_SUFFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_WRITTEN_DECIMAL = {power: suffix for suffix, power in _DECIMAL_SUFFIXES.items()}
_WRITTEN_BINARY = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
_EXPONENT = re.compile(r"[eE](?P<power>[+-]?[0-9]+)")
_LARGEST_POWER = 1000
_INT64_DIGITS = 18  # the most digits an int64 amount is read from
_NANO = -9
_INT64 = range(-(2**63), 2**63)

_DECIMAL_SI, _DECIMAL_EXPONENT, _BINARY_SI = "DecimalSI", "DecimalExponent", "BinarySI"


@dataclass(frozen=True, slots=True, eq=False)
class Quantity:
    """`digits` × 10^`exponent`, held as an int64 amount or (not `in_int64`) as a decimal.
    Equal quantities are those of equal value, as CEL's `==` compares them."""

    digits: int
    exponent: int
    in_int64: bool

    @staticmethod
    def of_int(number: int) -> "Quantity":
        """What `add` and `sub` make of an int (`resource.NewQuantity`)."""
        return Quantity(number, 0, True)

    @property
    def value(self) -> Fraction:
        return self.digits * Fraction(10) ** self.exponent

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Quantity) and other.value == self.value

    def __hash__(self) -> int:
        return hash(self.value)

    def compare(self, other: "Quantity") -> int:
        return (self.value > other.value) - (self.value < other.value)

    def sign(self) -> int:
        return (self.digits > 0) - (self.digits < 0)

    def plus(self, other: "Quantity") -> "Quantity":
        """`Quantity.Add`: the int64 sum when it fits, else the decimal sum at the finer exponent."""
        if self.in_int64 and other.in_int64:
            total = _int64_sum(self, other)
            if total is not None:
                return total
        exponent = min(self.exponent, other.exponent)
        return Quantity(_at(self, exponent) + _at(other, exponent), exponent, False)

    def minus(self, other: "Quantity") -> "Quantity":
        return self.plus(Quantity(-other.digits, other.exponent, other.in_int64))

    def times(self, factor: int) -> "Quantity":
        """`Quantity.Mul`: the int64 product when it fits (times zero: 0 at scale 0), else the
        decimal product at the same exponent."""
        if self.in_int64:
            product = _int64_product(self, factor)
            if product is not None:
                return product
        return Quantity(self.digits * factor, self.exponent, False)

    def as_int64(self) -> int | None:
        """`Quantity.AsInt64`: an int64 amount at a scale of 0 or above whose value fits."""
        if not self.in_int64 or self.exponent < 0:
            return None
        value = self.digits * 10**self.exponent
        return value if value in _INT64 else None

    def approximate_float(self) -> float:
        """`Quantity.AsApproximateFloat64`: the digits as a float, times `math.Pow10(exponent)`."""
        try:
            base = float(self.digits)
        except OverflowError:
            base = math.copysign(math.inf, self.digits)
        return base if self.exponent == 0 else base * _go_pow10(self.exponent)


def parse(text: str) -> Quantity:
    """`resource.ParseQuantity`; ValueError naming the text and what to write."""
    return _read(text)[0]


def stored(text: str) -> Quantity:
    """A quantity as the API server stores it and the scheduler reads it back."""
    return parse(_written(*_read(text.strip())))


def _read(text: str) -> tuple[Quantity, str]:
    """The quantity and its format (which decides how it is written back)."""
    match = _TEXT.fullmatch(text)
    if not text or match is None:
        raise ValueError(f"quantity {text!r} is not a Kubernetes quantity ({EXAMPLES})")
    power, form = _suffix(text, match["suffix"])
    whole, fraction, negative = match["whole"], match["fraction"] or "", match["sign"] == "-"
    held = _int64_amount(whole.lstrip("0") or "0", fraction, power, form)
    if held is None:
        if not (whole or fraction):
            raise ValueError(f"quantity {text!r} has no digits ({EXAMPLES})")
        held = _decimal_amount(int(whole + fraction), len(fraction), power, form)
    return (Quantity(-held.digits, held.exponent, held.in_int64) if negative else held), form


def _suffix(text: str, suffix: str) -> tuple[int, str]:
    """The power the suffix stands for (of 10, or of 2 for a binary one) and its format."""
    if suffix in _DECIMAL_SUFFIXES:
        return _DECIMAL_SUFFIXES[suffix], _DECIMAL_SI
    if suffix in _BINARY_SUFFIXES:
        return _BINARY_SUFFIXES[suffix], _BINARY_SI
    exponent = _EXPONENT.fullmatch(suffix)
    if exponent is None:
        raise ValueError(f"quantity {text!r} has an unknown suffix {suffix!r} ({EXAMPLES})")
    power = int(exponent["power"])
    if abs(power) > _LARGEST_POWER:
        raise ValueError(f"quantity {text!r} has an exponent beyond ±{_LARGEST_POWER} ({EXAMPLES})")
    return power, _DECIMAL_EXPONENT


def _int64_amount(number: str, fraction: str, power: int, form: str) -> Quantity | None:
    """The int64 amount ParseQuantity reads when the digits allow (`number` without leading zeros)."""
    if form == _BINARY_SI:
        if fraction or 15 - len(number) - power * 3 // 10 - 1 < 0:
            return None
        return Quantity(int(number) << power, 0, True)
    scale = power - len(fraction)
    if len(number) + len(fraction) > _INT64_DIGITS or scale < _NANO:
        return None
    return Quantity(int(number + fraction), scale, True)


def _decimal_amount(digits: int, decimals: int, power: int, form: str) -> Quantity:
    """The decimal ParseQuantity reads otherwise: rounded up to a nano (when not zero), a binary
    amount capped at the largest int64."""
    exponent = -decimals
    if form == _BINARY_SI:
        digits <<= power
    else:
        exponent += power
    if digits:
        digits = digits * 10 ** (exponent - _NANO) if exponent >= _NANO else -(-digits // 10 ** (_NANO - exponent))
        exponent = _NANO
    if form == _BINARY_SI and digits * Fraction(10) ** exponent > _INT64[-1]:
        digits, exponent = _INT64[-1], 0
    return Quantity(digits, exponent, False)


def _written(quantity: Quantity, form: str) -> str:
    """`Quantity.String()`: binary in the largest power of 1024 that keeps it whole (when it is
    whole and not under 1024), else the digits with a power of ten that is a multiple of 3, as a
    suffix (none beyond the table) or an exponent (`DecimalExponent`)."""
    if not quantity.digits:
        return "0"
    value = quantity.value
    if form == _BINARY_SI and abs(value) >= 1024 and value.denominator == 1:
        digits, power = int(value), 0
        while abs(digits) >= 1024 and digits % 1024 == 0 and power < len(_WRITTEN_BINARY) - 1:
            digits, power = digits // 1024, power + 1
        return f"{digits}{_WRITTEN_BINARY[power]}"
    digits, exponent = quantity.digits, quantity.exponent
    while digits % 10 == 0:
        digits, exponent = digits // 10, exponent + 1
    shift = exponent % 3
    digits, exponent = digits * 10**shift, exponent - shift
    if form == _DECIMAL_EXPONENT:
        return f"{digits}e{exponent}" if exponent else str(digits)
    return f"{digits}{_WRITTEN_DECIMAL.get(exponent, '')}"


def _at(quantity: Quantity, exponent: int) -> int:
    """The digits of the quantity at a finer (or equal) exponent."""
    return quantity.digits * 10 ** (quantity.exponent - exponent)


def _int64_sum(a: Quantity, b: Quantity) -> Quantity | None:
    """`int64Amount.Add`: a zero takes the other as it is; else the sum at the finer scale, if
    the coarser one scaled to it and the sum both fit."""
    if not b.digits:
        return a
    if not a.digits:
        return b
    exponent = min(a.exponent, b.exponent)
    left, right = _at(a, exponent), _at(b, exponent)
    if left in _INT64 and right in _INT64 and left + right in _INT64:
        return Quantity(left + right, exponent, True)
    return None


def _int64_product(quantity: Quantity, factor: int) -> Quantity | None:
    """`int64Amount.Mul`: zero stays as it is, times zero is 0 at scale 0; else the product, if
    it fits and so does its value at a positive scale (at a negative one: if the scale drops
    only zeros)."""
    if not quantity.digits:
        return quantity
    if not factor:
        return Quantity(0, 0, True)
    product, exponent = quantity.digits * factor, quantity.exponent
    if product not in _INT64:
        return None
    if exponent > 0 and product * 10**exponent not in _INT64:
        return None
    if exponent < 0 and product % 10**-exponent:
        return None
    return Quantity(product, exponent, True)


def _go_pow10(n: int) -> float:
    """Go's `math.Pow10`: from tables of 10^(32i) and 10^j, j < 32, so not always the nearest float."""
    if 0 <= n <= 308:
        return float(10 ** (n // 32 * 32)) * float(10 ** (n % 32))
    if -323 <= n < 0:
        return float(f"1e-{-n // 32 * 32}") / float(10 ** (-n % 32))
    return math.inf if n > 0 else 0.0
