"""Resource quantities as Kubernetes reads, counts and writes them (apimachinery `resource.Quantity`).

The emulation is the oracle gangkeeper is tested against, so it parses quantities itself, from
Kubernetes' grammar, rather than with gangkeeper's parser: a mistake there must not hide here.

Text is an optional sign, digits with an optional fraction (`5`, `0.5`, `.5`, `5.`), then one
suffix: a decimal SI one (`n u m k M G T P E`, or none), a binary one (`Ki` … `Ei`) or a decimal
exponent (`e3`, `E-2`). Anything else is refused; so is a capital `K`. The API server reads an
object's quantity with surrounding whitespace trimmed (JSON and YAML numbers are their text);
CEL's `quantity()` reads its argument untrimmed (`parse_quantity(..., trimmed=False)`). A value
finer than a nano is rounded up to the next nano, away from zero, as Kubernetes does ("if you
want some resources, you should get some"). Values are exact Fractions.

The kube-scheduler counts whole numbers: cpu in millicores and everything else in units, each
pod's requests and each node's allocatable rounded up on their own (`Quantity.MilliValue` and
`Quantity.Value`): `counted`. Two pods asking for 0.4m of cpu take 1m each.

`canonical` is `Quantity.String()`, what the API server writes back and quotes in its messages.

Not followed: Kubernetes reads a bare sign, a lone dot or a suffix without a digit (`+`, `.`,
`Ki`) as zero, and caps binary amounts at 2^63-1; here the first are refused, the second is not
applied. An exponent beyond ±1000 is refused: no amount of anything is that large or small.
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
    if trimmed:
        text = text.strip()
    match = _GRAMMAR.fullmatch(text)
    if match is None or not (match["whole"] or match["fraction"]):
        raise ValueError(f"quantity {value!r} is not a Kubernetes quantity ({EXAMPLES})")
    number = Fraction(int(match["whole"] or 0)) + Fraction(int(match["fraction"] or 0), 10 ** len(match["fraction"] or ""))
    suffix = match["suffix"]
    if suffix in _BINARY_EXPONENTS:
        amount = number * 2 ** _BINARY_EXPONENTS[suffix]
    else:
        exponent = _DECIMAL_EXPONENTS[suffix] if suffix in _DECIMAL_EXPONENTS else int(suffix[1:])
        if abs(exponent) > _LARGEST_EXPONENT:
            raise ValueError(f"quantity {value!r} has an exponent beyond ±{_LARGEST_EXPONENT} ({EXAMPLES})")
        amount = number * Fraction(10) ** exponent
    amount = Fraction(_away_from_zero(amount * _NANO), _NANO)
    return -amount if match["sign"] == "-" else amount


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
    not whole, then decimal. Text that is no quantity comes back as it is."""
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
    suffix = _DECIMAL_SUFFIXES.get(exponent)
    return f"{mantissa}{suffix}" if suffix is not None else f"{mantissa}e{exponent}"


Held = tuple[int, int]  # Kubernetes' int64 amount: (unscaled value, decimal scale)


def held_amount(text: str) -> Held | None:
    """How Kubernetes holds the quantity parsed from `text` (which must parse): as an int64 and a
    decimal scale when its digits allow (at most 18 of them, no finer than a nano; a binary
    amount without a fraction while it fits), else (None) as an arbitrary decimal."""
    if text == "0":
        return 0, 0
    match = _GRAMMAR.fullmatch(text)
    whole, fraction, suffix = match["whole"].lstrip("0") or "0", match["fraction"] or "", match["suffix"]
    sign = -1 if match["sign"] == "-" else 1
    if suffix in _BINARY_EXPONENTS:
        exponent = _BINARY_EXPONENTS[suffix]
        if fraction or 15 - len(whole) - exponent * 3 // 10 - 1 < 0:
            return None
        value = sign * (int(whole) << exponent)
        return (value, 0) if value in INT64 else None
    exponent = _DECIMAL_EXPONENTS[suffix] if suffix in _DECIMAL_EXPONENTS else int(suffix[1:])
    scale = exponent - len(fraction)
    if 18 - len(whole) - len(fraction) < 0 or scale < -9:
        return None
    return sign * int(whole + fraction), scale


def held_integer(held: Held | None) -> int | None:
    """`Quantity.AsInt64()`: the value of an int64 amount held at scale 0 or above, if it fits.
    Only how the amount is held decides: `1000m` and `1.0` are held at scale -3 and -1, so they
    are no integers here though their values are whole."""
    if held is None or held[1] < 0:
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
