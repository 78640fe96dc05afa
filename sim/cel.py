"""CEL as Kubernetes evaluates it, on cel-python: one environment for the process, cel-go's words
for errors, and the Kubernetes libraries a DRA device selector may call, written from their
definitions (k8s.io/apiserver/pkg/cel/library, cel-go's strings extension).

Quantities: `quantity(s)` (an error for text that is no quantity; read untrimmed), `isQuantity(s)`,
`sign(q)`, `q.isInteger()`, `q.asInteger()` (an error unless it is one), `q.asApproximateFloat()`,
`q.compareTo(r)`, `q.isGreaterThan(r)`, `q.isLessThan(r)`, `q.add(r)` and `q.sub(r)` (a quantity
or an int), `q.mul(n)`; `==` compares amounts. Kubernetes answers from how it holds the amount
(`sim.quantity.holding`), not from its value alone: `quantity("1000m").isInteger()` is false
(`held_integer`), `quantity("0.3").asApproximateFloat()` is 3 × 0.1 in floating point
(`approximate_float`), and sums and products keep the holding Kubernetes' int64 arithmetic gives
them (a decimal, once a step overflows).

Semantic versions, as blang/semver parses them: `semver(s)` and `isSemver(s)`, each also with
`normalize` (drop one leading `v`, leading zeros, fill a missing minor or patch with 0), then
`v.major()`, `v.minor()`, `v.patch()` (a part of 2^63 or more wraps to a negative int, as Go
converts it), `compareTo`, `isGreaterThan`, `isLessThan` and `==`, by semver precedence with
build metadata ignored. A version is MAJOR.MINOR.PATCH, each a number without leading zeros below
2^64, then an optional `-pre.release` (numeric parts without leading zeros) and `+build` (parts of
letters, digits and '-').

Strings: `lowerAscii` and `upperAscii` change the ASCII letters only.

Not modelled: `div` and `divInt`, the rest of the strings extension, `cel.bind`: an expression
calling them fails to evaluate.
"""

import re
from dataclasses import dataclass
from fractions import Fraction
from functools import cache

import celpy
from celpy import celtypes

from sim.quantity import Held, approximate_float, held_integer, held_product, held_sum, holding


@cache
def environment() -> celpy.Environment:
    """One CEL environment per process, made on first use: building its parser takes a third of a second."""
    return celpy.Environment()


def error_message(error: Exception) -> str:
    """celpy's message on one line, without the dump of the whole activation it appends."""
    text = str(error.args[0]) if error.args else str(error)
    return " ".join(text.split(" (in activation", 1)[0].split())


# --- CEL values: what an overload takes; anything else is cel-go's "no such overload" ---------

def _string(value, function: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"no such overload: {function}")
    return str(value)


def _is_int(value) -> bool:
    """A CEL int: celpy's bool is an int to Python, not to CEL."""
    return isinstance(value, int) and not isinstance(value, (bool, celtypes.BoolType))


def _boolean(value, function: str) -> bool:
    if not isinstance(value, (bool, celtypes.BoolType)):
        raise TypeError(f"no such overload: {function}")
    return bool(value)


# --- quantities ------------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class Quantity:
    """A resource.Quantity in CEL: its digits and decimal scale, and whether Kubernetes holds them
    as an int64 amount (else as an arbitrary decimal, `inf.Dec`)."""

    held: Held
    int64: bool

    @staticmethod
    def parse(text: str, trimmed: bool = False) -> "Quantity":
        return Quantity(*holding(text.strip() if trimmed else text))

    @property
    def value(self) -> Fraction:
        return self.held[0] * Fraction(10) ** self.held[1]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Quantity) and other.value == self.value

    def __hash__(self) -> int:
        return hash(self.value)

    def plus(self, other: "Quantity") -> "Quantity":
        """`Quantity.Add`: the int64 sum while it fits, else (for good) the decimal sum, at the
        smaller scale."""
        if self.int64 and other.int64:
            held = held_sum(self.held, other.held)
            if held is not None:
                return Quantity(held, True)
        scale = min(self.held[1], other.held[1])
        digits = self.held[0] * 10 ** (self.held[1] - scale) + other.held[0] * 10 ** (other.held[1] - scale)
        return Quantity((digits, scale), False)

    def negated(self) -> "Quantity":
        return Quantity((-self.held[0], self.held[1]), self.int64)


def _quantity(text) -> Quantity:
    return Quantity.parse(_string(text, "quantity"))


def _is_quantity(text) -> celtypes.BoolType:
    try:
        holding(_string(text, "isQuantity"))
    except ValueError:
        return celtypes.BoolType(False)
    return celtypes.BoolType(True)


def _as_quantity(operand, function: str) -> Quantity:
    """The right-hand side of `add` or `sub`: a quantity, or an int held at scale 0."""
    if isinstance(operand, Quantity):
        return operand
    if _is_int(operand):
        return Quantity((int(operand), 0), True)
    raise TypeError(f"no such overload: {function}")


def _add(q, other) -> Quantity:
    return _receiver(q, "add").plus(_as_quantity(other, "add"))


def _sub(q, other) -> Quantity:
    return _receiver(q, "sub").plus(_as_quantity(other, "sub").negated())


def _mul(q, factor) -> Quantity:
    q = _receiver(q, "mul")
    if not _is_int(factor):
        raise TypeError("no such overload: mul")
    held = held_product(q.held, int(factor)) if q.int64 else None
    return Quantity(held, True) if held is not None else Quantity((q.held[0] * int(factor), q.held[1]), False)


def _as_integer(q) -> celtypes.IntType:
    q = _receiver(q, "asInteger")
    value = held_integer(q.held, q.int64)
    if value is None:
        raise ValueError("cannot convert value to integer")
    return celtypes.IntType(value)


def _receiver(q, function: str) -> Quantity:
    if not isinstance(q, Quantity):
        raise TypeError(f"no such overload: {function}")
    return q


# --- semantic versions -----------------------------------------------------------------------

_DIGITS = re.compile(r"[0-9]+")
_ALPHANUMERIC = re.compile(r"[0-9A-Za-z-]+")


@dataclass(frozen=True, eq=False)
class Semver:
    major: int
    minor: int
    patch: int
    pre: tuple[int | str, ...] = ()
    build: tuple[str, ...] = ()

    def precedence(self) -> tuple:
        """Numbers first, then a version without pre-release above one with; pre-release parts
        compared in turn (numbers below words), more parts above fewer."""
        pre = tuple((0, part, "") if isinstance(part, int) else (1, 0, part) for part in self.pre)
        return self.major, self.minor, self.patch, not self.pre, pre

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Semver) and other.precedence() == self.precedence()

    def __hash__(self) -> int:
        return hash(self.precedence())


def parse_semver(text: str) -> Semver | None:
    """blang/semver's `Parse`; None where it returns an error."""
    parts = text.split(".", 2)
    if len(parts) != 3:
        return None
    rest, _, build = parts[2].partition("+")
    patch, dash, pre = rest.partition("-")
    numbers = [_number(p) for p in (parts[0], parts[1], patch)]
    pre_parts = [_pre_release(p) for p in pre.split(".")] if dash else []
    build_parts = build.split(".") if "+" in parts[2] else []
    if None in numbers or None in pre_parts or not all(_ALPHANUMERIC.fullmatch(b) for b in build_parts):
        return None
    return Semver(*numbers, tuple(pre_parts), tuple(build_parts))


def normalized_semver(text: str) -> Semver | None:
    """The semver library's normalizing parse: one leading `v` dropped, leading zeros dropped from
    each of the three parts, a missing minor or patch filled with 0 (then no `-` or `+` may follow)."""
    parts = text.removeprefix("v").split(".", 2)
    for index, part in enumerate(parts):
        if len(part) > 1:
            part = part.lstrip("0")
            parts[index] = part if part[:1].isdigit() and part[:1].isascii() else "0" + part
    if len(parts) < 3:
        if "+" in parts[-1] or "-" in parts[-1]:
            return None
        parts += ["0"] * (3 - len(parts))
    return parse_semver(".".join(parts))


def _number(text: str) -> int | None:
    if not _DIGITS.fullmatch(text) or (len(text) > 1 and text[0] == "0") or int(text) >= 2**64:
        return None
    return int(text)


def _pre_release(text: str) -> int | str | None:
    if _DIGITS.fullmatch(text):
        return _number(text)
    return text if _ALPHANUMERIC.fullmatch(text) else None


def _semver(text, normalize=False) -> Semver:
    text = _string(text, "semver")
    version = normalized_semver(text) if _boolean(normalize, "semver") else parse_semver(text)
    if version is None:
        raise ValueError(f"invalid semantic version {text!r}")
    return version


def _is_semver(text, normalize=False) -> celtypes.BoolType:
    text = _string(text, "isSemver")
    version = normalized_semver(text) if _boolean(normalize, "isSemver") else parse_semver(text)
    return celtypes.BoolType(version is not None)


def _version_part(name: str):
    """cel-go's int of the uint64 part: Go's conversion wraps 2^63 and above to negative ints."""
    def part(version) -> celtypes.IntType:
        if not isinstance(version, Semver):
            raise TypeError(f"no such overload: {name}")
        number = getattr(version, name)
        return celtypes.IntType(number if number < 2**63 else number - 2**64)
    return part


# --- both: comparisons -----------------------------------------------------------------------

def _compare(a, b, function: str) -> int:
    if isinstance(a, Quantity) and isinstance(b, Quantity):
        left, right = a.value, b.value
    elif isinstance(a, Semver) and isinstance(b, Semver):
        left, right = a.precedence(), b.precedence()
    else:
        raise TypeError(f"no such overload: {function}")
    return (left > right) - (left < right)


# --- strings ---------------------------------------------------------------------------------

_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_ASCII_UPPER = str.maketrans("abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ")

FUNCTIONS = {
    "quantity": _quantity,
    "isQuantity": _is_quantity,
    "sign": lambda q: celtypes.IntType((_receiver(q, "sign").value > 0) - (q.value < 0)),
    "isInteger": lambda q: celtypes.BoolType(held_integer(_receiver(q, "isInteger").held, q.int64) is not None),
    "asInteger": _as_integer,
    "asApproximateFloat": lambda q: celtypes.DoubleType(approximate_float(_receiver(q, "asApproximateFloat").held)),
    "add": _add,
    "sub": _sub,
    "mul": _mul,
    "semver": _semver,
    "isSemver": _is_semver,
    "major": _version_part("major"),
    "minor": _version_part("minor"),
    "patch": _version_part("patch"),
    "compareTo": lambda a, b: celtypes.IntType(_compare(a, b, "compareTo")),
    "isGreaterThan": lambda a, b: celtypes.BoolType(_compare(a, b, "isGreaterThan") > 0),
    "isLessThan": lambda a, b: celtypes.BoolType(_compare(a, b, "isLessThan") < 0),
    "lowerAscii": lambda s: celtypes.StringType(_string(s, "lowerAscii").translate(_ASCII_LOWER)),
    "upperAscii": lambda s: celtypes.StringType(_string(s, "upperAscii").translate(_ASCII_UPPER)),
}
