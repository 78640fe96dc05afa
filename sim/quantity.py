"""Resource quantities as Kubernetes reads, holds, counts and writes them (apimachinery `resource.Quantity`).

The emulation is the oracle gangkeeper is tested against, so it parses quantities itself, from
Kubernetes' grammar, rather than with gangkeeper's parser: a mistake there must not hide here.

Text is an optional sign, digits with an optional fraction (`5`, `0.5`, `.5`, `5.`), then one
suffix: a decimal SI one (`n u m k M G T P E`, or none), a binary one (`Ki` … `Ei`) or a decimal
exponent (`e3`, `E-2`). Anything else is refused; so is a capital `K`. The digits may be left out
where Kubernetes reads the text as an int64 amount (below): `+`, `.`, `m` and `Ki` are zero, while
`Pi`, `Ei` and `e-10` are refused. The API server reads an object's quantity with surrounding
whitespace trimmed (JSON and YAML numbers are their text); CEL's `quantity()` reads its argument
untrimmed (`parse_quantity(..., trimmed=False)`). Values are exact Fractions.

How Kubernetes holds an amount (`holding`) decides some of CEL's answers: as an int64 and a
decimal scale when the text allows (at most 18 digits, none finer than a nano; a binary amount
without a fraction while it is small), else as an arbitrary decimal, rounded up to the next nano
away from zero ("if you want some resources, you should get some") and, for a binary amount,
capped at 2^63-1.

The kube-scheduler counts whole numbers: cpu in millicores and everything else in units, each
pod's requests and each node's allocatable rounded up on their own (`Quantity.MilliValue` and
`Quantity.Value`): `counted`. Two pods asking for 0.4m of cpu take 1m each.

`canonical` is `Quantity.String()`, what the API server writes back and quotes in its messages.

Not followed: an exponent beyond ±1000 is refused: no amount of anything is that large or small.
"""

import math
import re
from fractions import Fraction

EXAMPLES = "e.g. 2, 500m, 1.5, 16Gi, 512Mi, 1e3"
CPU = "cpu"

_GRAMMAR = re.compile(r"(?P<sign>[+-]?)(?P<whole>[0-9]*)(?:\.(?P<fraction>[0-9]*))?"
                      r"(?P<suffix>[numkMGTPE]?|[KMGTPE]i|[eE][+-]?[0-9]+)")
_DECIMAL_EXPONENTS = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY_EXPONENTS = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_SUFFIXES = {exponent: suffix for suffix, exponent in _DECIMAL_EXPONENTS.items()}
_BINARY_SUFFIXES = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
_LARGEST_EXPONENT = 1000
_NANO = 10**9
INT64 = range(-(2**63), 2**63)


def parse_quantity(value: str | int | float, trimmed: bool = True) -> Fraction:
    """The exact amount a quantity stands for; ValueError naming the value and what to write."""
    text = _text(value)
    (digits, scale), _ = holding(text.strip() if trimmed else text, shown=value)
    return digits * Fraction(10) ** scale


def _text(value: object) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ValueError(f"quantity {value!r} is a {type(value).__name__}; write a string or a number ({EXAMPLES})")
    return value if isinstance(value, str) else str(value)


def _away_from_zero(value: Fraction) -> int:
    return math.ceil(value) if value >= 0 else math.floor(value)


def counted(resource: str, amount: Fraction) -> Fraction:
    """An amount as the kube-scheduler counts it: cpu rounded up to a millicore, the rest to a unit."""
    if resource == CPU:
        return Fraction(_away_from_zero(amount * 1000), 1000)
    return Fraction(_away_from_zero(amount))


def canonical(value: str | int | float) -> str:
    """`Quantity.String()`: a decimal amount with the largest SI suffix that keeps it whole
    (`1000m` → `1`, `0.5` → `500m`, `2000` → `2k`), an exponent one alike (`15e2` → `1500`), a
    binary one whole in the largest binary suffix (`2048Mi` → `2Gi`) unless it is under 1024 or
    not whole, then decimal. A decimal amount past the largest suffix is written without one, its
    power of ten lost (`1000E` → `1`), as Kubernetes writes it. Text that is no quantity comes
    back as it is."""
    try:
        amount = parse_quantity(value)
    except ValueError:
        return str(value)
    suffix = _GRAMMAR.fullmatch(str(value).strip())["suffix"]
    if suffix in _BINARY_EXPONENTS and abs(amount) >= 1024 and amount.denominator == 1:
        return _binary_text(int(amount))
    return _decimal_text(amount, exponent_form=len(suffix) > 1 and suffix[0] in "eE")


def _binary_text(amount: int) -> str:
    power = 0
    while power < len(_BINARY_SUFFIXES) - 1 and amount % 1024 == 0:
        amount //= 1024
        power += 1
    return f"{amount}{_BINARY_SUFFIXES[power]}"


def _decimal_text(amount: Fraction, exponent_form: bool) -> str:
    if not amount:
        return "0"
    mantissa, exponent = int(amount * _NANO), -9
    while mantissa % 10 == 0:
        mantissa //= 10
        exponent += 1
    shift = exponent % 3
    mantissa, exponent = mantissa * 10**shift, exponent - shift
    if exponent_form:
        return f"{mantissa}e{exponent}" if exponent else str(mantissa)
    return f"{mantissa}{_DECIMAL_SUFFIXES.get(exponent, '')}"


Held = tuple[int, int]  # digits and a decimal scale: the amount is digits × 10^scale


def holding(text: str, shown: object = None) -> tuple[Held, bool]:
    """How Kubernetes holds the quantity `text` (`ParseQuantity`): its digits and scale, and
    whether as an int64 amount (else as an arbitrary decimal); ValueError naming the text (or
    `shown`) and what to write."""
    shown = text if shown is None else shown
    match = _GRAMMAR.fullmatch(text)
    if not text or match is None:
        raise ValueError(f"quantity {shown!r} is not a Kubernetes quantity ({EXAMPLES})")
    power = _power(match["suffix"])
    if abs(power) > _LARGEST_EXPONENT:
        raise ValueError(f"quantity {shown!r} has an exponent beyond ±{_LARGEST_EXPONENT} ({EXAMPLES})")
    held = _int64_amount(match, power)
    if held is not None:
        return held, True
    if not (match["whole"] or match["fraction"]):
        raise ValueError(f"quantity {shown!r} is not a Kubernetes quantity ({EXAMPLES})")
    return _decimal_amount(match, power), False


def _power(suffix: str) -> int:
    """The power of ten (of two, for a binary suffix) the suffix stands for."""
    if suffix in _BINARY_EXPONENTS:
        return _BINARY_EXPONENTS[suffix]
    return _DECIMAL_EXPONENTS[suffix] if suffix in _DECIMAL_EXPONENTS else int(suffix[1:])


def _int64_amount(match: re.Match, power: int) -> Held | None:
    """The int64 amount, when the digits allow it: at most 18 of them, no finer than a nano; a
    binary amount without a fraction while it fits (`15 - digits - 3 × its power of 1024 - 1`
    decimal digits to spare)."""
    whole, fraction, suffix = match["whole"].lstrip("0") or "0", match["fraction"] or "", match["suffix"]
    sign = -1 if match["sign"] == "-" else 1
    if suffix in _BINARY_EXPONENTS:
        if fraction or 15 - len(whole) - power * 3 // 10 - 1 < 0:
            return None
        return sign * (int(whole) << power), 0
    scale = power - len(fraction)
    if 18 - len(whole) - len(fraction) < 0 or scale < -9:
        return None
    return sign * int(whole + fraction), scale


def _decimal_amount(match: re.Match, power: int) -> Held:
    """The arbitrary decimal: the digits as written, the suffix applied, rounded up to a nano
    away from zero (zero stays as written), a binary amount capped at 2^63-1."""
    fraction = match["fraction"] or ""
    digits, scale = int(match["whole"] + fraction), -len(fraction)
    if match["suffix"] in _BINARY_EXPONENTS:
        digits <<= power
    else:
        scale += power
    if digits:
        digits, scale = math.ceil(digits * Fraction(10) ** (scale + 9)), -9
    if match["suffix"] in _BINARY_EXPONENTS and digits * Fraction(10) ** scale > INT64[-1]:
        digits, scale = INT64[-1], 0
    return (-digits if match["sign"] == "-" else digits), scale


def held_integer(held: Held, int64: bool) -> int | None:
    """`Quantity.AsInt64()`: the value of an int64 amount held at scale 0 or above, if it fits.
    Only how the amount is held decides: `1000m` and `1.0` are held at scale -3 and -1, so they
    are no integers here though their values are whole."""
    if not int64 or held[1] < 0:
        return None
    value = held[0] * 10 ** held[1]
    return value if value in INT64 else None


def held_sum(a: Held, b: Held) -> Held | None:
    """`int64Amount.Add`: a zero takes the other's scale, else the sum at the smaller scale; None
    when a step overflows int64 (Kubernetes then holds the sum as an arbitrary decimal)."""
    if b[0] == 0:
        return a
    if a[0] == 0:
        return b
    scale = min(a[1], b[1])
    left, right = a[0] * 10 ** (a[1] - scale), b[0] * 10 ** (b[1] - scale)
    if left not in INT64 or right not in INT64 or left + right not in INT64:
        return None
    return left + right, scale


def held_product(held: Held, factor: int) -> Held | None:
    """`int64Amount.Mul`: zero stays as it is, times zero is 0 at scale 0; else the product if it
    fits, and so does its value at a positive scale, or (at a negative scale) it is whole there;
    None otherwise (Kubernetes then multiplies the amount as a decimal)."""
    if held[0] == 0:
        return held
    if factor == 0:
        return 0, 0
    product, scale = held[0] * factor, held[1]
    fits = product in INT64 and (scale <= 0 or product * 10**scale in INT64)
    return (product, scale) if fits and (scale >= 0 or product % 10**-scale == 0) else None


def approximate_float(held: Held) -> float:
    """`Quantity.AsApproximateFloat64()`: the digits as a float, times Go's `math.Pow10(scale)`
    (built from tables of 10^(32i) and of 10^j, j < 32: not always the float nearest the amount)."""
    digits, scale = held
    try:
        base = float(digits)
    except OverflowError:
        base = math.inf if digits > 0 else -math.inf
    if scale == 0:
        return base
    if 0 < scale <= 308:
        return base * (float(10 ** (32 * (scale // 32))) * float(10 ** (scale % 32)))
    if -323 <= scale < 0:
        return base * (float(f"1e-{32 * (-scale // 32)}") / float(10 ** (-scale % 32)))
    return base * (math.inf if scale > 0 else 0.0)
