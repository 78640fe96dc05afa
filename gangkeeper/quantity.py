"""Kubernetes resource quantities (`500m`, `16Gi`, `1e3`), parsed exactly.

Capacity decisions add and compare many quantities; floats would let `0.1 + 0.2` CPUs decide
whether a pod fits. Every quantity is therefore a `Fraction`, as exact as the API server's
own `resource.Quantity`.
"""

import re
from fractions import Fraction

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_QUANTITY = re.compile(
    r"^(?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?:(?P<binary>Ki|Mi|Gi|Ti|Pi|Ei)|(?P<exponent>[eE][+-]?[0-9]+)|(?P<decimal>[numkMGTPE]?))$"
)
_MAX_EXPONENT = 100

EXAMPLES = "e.g. 2, 500m, 1.5, 16Gi, 512Mi, 1e3"


def parse_quantity(value: str | int | float) -> Fraction:
    """Return the exact value of a Kubernetes quantity; raise ValueError saying what to write."""
    if isinstance(value, bool):
        raise ValueError(f"quantity {value!r} is a boolean; write a number or a string ({EXAMPLES})")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        return Fraction(str(value))
    if not isinstance(value, str):
        raise ValueError(f"quantity {value!r} is a {type(value).__name__}; write a string ({EXAMPLES})")
    match = _QUANTITY.match(value.strip())
    if match is None:
        raise ValueError(f"quantity {value!r} is not a Kubernetes quantity ({EXAMPLES})")
    number = Fraction(match["number"])
    if match["binary"]:
        return number * _BINARY[match["binary"]]
    if match["exponent"]:
        exponent = int(match["exponent"][1:])
        if abs(exponent) > _MAX_EXPONENT:
            raise ValueError(f"quantity {value!r} has an exponent beyond ±{_MAX_EXPONENT}")
        return number * Fraction(10) ** exponent
    return number * _DECIMAL[match["decimal"] or ""]


def format_quantity(value: Fraction) -> str:
    """A short human form: whole numbers as they are, fractions of one in millis (`500m`)."""
    if value.denominator == 1:
        return str(value.numerator)
    millis = value * 1000
    if millis.denominator == 1:
        return f"{millis.numerator}m"
    return f"{float(value):.3f}"
