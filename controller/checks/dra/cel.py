"""CEL as the DRA allocator runs it: a DeviceClass's selectors, then a request's, on each device.

celpy with the DRA environment: `device.driver`, `device.attributes['<domain>'].<name>` (an
unqualified attribute belongs to the driver's domain; an unknown domain is an empty map),
`device.capacity` (quantities as the API server stores them), celpy's standard library and the
Kubernetes libraries a selector may call, to the letter of their sources
(k8s.io/apiserver/pkg/cel/library, cel-go's strings extension):

  - quantities (`checks.dra.quantities`): `quantity()` and `isQuantity()` (the text untrimmed),
    `sign()`, `isInteger()`, `asInteger()`, `asApproximateFloat()`, `add()` and `sub()` (of a
    quantity or an int), `mul()`, `compareTo()`, `isGreaterThan()`, `isLessThan()`, `==`;
  - semantic versions as blang/semver reads them: `semver()` and `isSemver()`, each also with
    `normalize` (`isSemver("v1.0", true)`), `major()`, `minor()`, `patch()` (a part of 2^63 or
    more wraps to a negative int, as Go converts it), the comparisons and `==`;
  - `lowerAscii()` and `upperAscii()`, which change ASCII letters only.

`div`, `divInt`, `cel.bind` and the other extension libraries are not available: such an
expression fails. Each expression is compiled once, and its answer is remembered per device
shape (driver, attributes, capacity), so that 40,000 identical devices cost one evaluation.
"""

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import celpy
from celpy import celtypes
from celpy.evaluation import CELEvalError

from gangkeeper.cel import error_message
from gangkeeper.controller.checks.dra.devices import Shape
from gangkeeper.controller.checks.dra.quantities import Quantity, parse, stored


@dataclass(frozen=True, slots=True)
class Broken:
    """What a selector said instead of true or false: the compile or runtime error, and on which
    device (its position on the node) it broke, when known."""

    reason: str
    position: int = -1  # of the device it broke on, when known


class SelectorSet:
    """A class's selectors then a request's, with what they said of each device shape so far."""

    __slots__ = ("_cel", "_class_name", "_class_selectors", "_request_selectors", "by_shape")

    def __init__(self, cel: "Cel", class_name: str, class_selectors: tuple[str, ...],
                 request_selectors: tuple[str, ...]):
        self._cel, self._class_name = cel, class_name
        self._class_selectors, self._request_selectors = class_selectors, request_selectors
        self.by_shape: dict[int, bool | Broken] = {}

    def match(self, shape_id: int, shape: Shape) -> bool | Broken:
        answer = self.by_shape.get(shape_id)
        if answer is None:
            answer = self.by_shape[shape_id] = self._cel.all_hold(
                self._class_name, self._class_selectors, self._request_selectors, shape_id, shape)
        return answer


class Cel:
    """Each expression compiled once; each answer per (expression, device shape) remembered."""

    def __init__(self) -> None:
        self._environment = celpy.Environment()
        self._programs: dict[str, celpy.Runner | str] = {}
        self._devices: dict[int, celtypes.MapType | str] = {}
        self._answers: dict[tuple[str, int], bool | str] = {}
        self._sets: dict[tuple, SelectorSet] = {}
        self.evaluations = 0

    def selector_set(self, class_name: str, class_selectors: tuple[str, ...],
                     request_selectors: tuple[str, ...]) -> SelectorSet:
        key = (class_name, class_selectors, request_selectors)
        found = self._sets.get(key)
        if found is None:
            found = self._sets[key] = SelectorSet(self, class_name, class_selectors, request_selectors)
        return found

    def all_hold(self, class_name: str, class_selectors: tuple[str, ...], request_selectors: tuple[str, ...],
                 shape_id: int, shape: Shape) -> bool | Broken:
        for label, selectors in ((f"class {class_name}", class_selectors), ("request", request_selectors)):
            for index, expression in enumerate(selectors):
                answer = self._answer(expression, shape_id, shape)
                if isinstance(answer, str):
                    return Broken(f"{label}: selector #{index}: {answer}")
                if not answer:
                    return False
        return True

    def _answer(self, expression: str, shape_id: int, shape: Shape) -> bool | str:
        key = (expression, shape_id)
        answer = self._answers.get(key)
        if answer is None:
            answer = self._answers[key] = self._evaluate(expression, shape_id, shape)
        return answer

    def _evaluate(self, expression: str, shape_id: int, shape: Shape) -> bool | str:
        program = self._program(expression)
        if isinstance(program, str):
            return program
        device = self._device(shape_id, shape)
        if isinstance(device, str):
            return f"CEL runtime error: {device}"
        self.evaluations += 1
        try:
            result = program.evaluate({"device": device})
        except Exception as error:  # celpy raises CELEvalError, and whatever a broken expression makes it raise
            return f"CEL runtime error: {error_message(error)}"
        if not isinstance(result, celtypes.BoolType):
            return f"CEL result of type {type(result).__name__} could not be converted to bool"
        return bool(result)

    def _program(self, expression: str) -> celpy.Runner | str:
        program = self._programs.get(expression)
        if program is None:
            try:
                program = self._environment.program(self._environment.compile(expression), _FUNCTIONS)
            except Exception as error:  # celpy's parser raises CELParseError and lark's own errors
                program = f"CEL compile error: {error_message(error)}"
            self._programs[expression] = program
        return program

    def _device(self, shape_id: int, shape: Shape) -> celtypes.MapType | str:
        device = self._devices.get(shape_id)
        if device is None:
            device = self._devices[shape_id] = _cel_device(shape)
        return device


def _cel_device(shape: Shape) -> celtypes.MapType | str:
    """The `device` variable, or why the device's attributes cannot be given to CEL."""
    attributes: dict = {}
    for (domain, ident), (kind, value) in shape.attributes:
        converted = _cel_attribute(kind, value)
        if converted is None:
            return f"attribute {domain}/{ident}: unsupported attribute value"
        attributes.setdefault(celtypes.StringType(domain), {})[celtypes.StringType(ident)] = converted
    capacity: dict = {}
    for (domain, ident), text in shape.capacity:
        try:
            capacity.setdefault(celtypes.StringType(domain), {})[celtypes.StringType(ident)] = stored(text)
        except ValueError as error:
            return f"capacity {domain}/{ident}: {error}"
    return celtypes.MapType({
        celtypes.StringType("driver"): celtypes.StringType(shape.driver),
        celtypes.StringType("attributes"): _Domains({d: celtypes.MapType(v) for d, v in attributes.items()}),
        celtypes.StringType("capacity"): _Domains({d: celtypes.MapType(v) for d, v in capacity.items()}),
    })


def _cel_attribute(kind: str, value: Any) -> "celtypes.Value | _Semver | None":
    """The attribute as CEL sees it; None for a kind it has no type for. `value` is as the slice
    wrote it, of the JSON type `kind` names."""
    if kind == "int":
        return celtypes.IntType(value)
    if kind == "bool":
        return celtypes.BoolType(value)
    if kind == "string":
        return celtypes.StringType(value)
    if kind == "version":
        return _Semver.parse(str(value))
    return None


class _Domains(celtypes.MapType):
    """Attributes or capacity by domain: a domain the device does not have is an empty map."""

    def __getitem__(self, key: Any) -> Any:
        return super().__getitem__(key) if key in self else celtypes.MapType({})


# --- the Kubernetes libraries: an argument of another type is cel-go's "no such overload" -----

def _text(value: Any, function: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"no such overload: {function}")
    return str(value)


def _held(value: Any, function: str) -> Quantity:
    if not isinstance(value, Quantity):
        raise TypeError(f"no such overload: {function}")
    return value


def _integer(value: Any, function: str) -> int:
    """A CEL int (celpy's bool is an int to Python, not to CEL)."""
    if not isinstance(value, int) or isinstance(value, celtypes.BoolType):
        raise TypeError(f"no such overload: {function}")
    return int(value)


def _quantity(text: Any) -> Quantity | CELEvalError:
    try:
        return parse(_text(text, "quantity"))
    except ValueError as error:
        return CELEvalError(str(error), ValueError, None)


def _operand(value: Any, function: str) -> Quantity:
    """What `add` and `sub` take: a quantity or an int."""
    return value if isinstance(value, Quantity) else Quantity.of_int(_integer(value, function))


def _as_integer(q: Any) -> celtypes.IntType | CELEvalError:
    value = _held(q, "asInteger").as_int64()
    if value is None:
        return CELEvalError("cannot convert value to integer", ValueError, None)
    return celtypes.IntType(value)


_NUMBER = r"(?:0|[1-9][0-9]*)"
_PRE_RELEASE_PART = rf"(?:{_NUMBER}|[0-9]*[A-Za-z-][0-9A-Za-z-]*)"
_SEMVER = re.compile(rf"({_NUMBER})\.({_NUMBER})\.({_NUMBER})(?:-({_PRE_RELEASE_PART}(?:\.{_PRE_RELEASE_PART})*))?"
                     r"(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?")


@dataclass(frozen=True, slots=True)
class _Semver:
    """A semantic version in CEL (k8s.io/apiserver/pkg/cel/library semver, on blang/semver v4):
    MAJOR.MINOR.PATCH, each below 2^64 and without leading zeros, then an optional `-pre.release`
    (numeric parts without leading zeros) and `+build` (parts of letters, digits and '-'), which
    is read but plays no part in comparisons."""

    major: int
    minor: int
    patch: int
    pre: tuple[int | str, ...] = ()

    @staticmethod
    def parse(text: str) -> "_Semver | None":
        match = _SEMVER.fullmatch(text)
        if match is None:
            return None
        numbers = (int(match[1]), int(match[2]), int(match[3]))
        pre = tuple(int(part) if part.isdigit() else part for part in match[4].split(".")) if match[4] else ()
        if any(isinstance(n, int) and n >= 2**64 for n in numbers + pre):
            return None
        return _Semver(*numbers, pre)

    @staticmethod
    def normalized(text: str) -> "_Semver | None":
        """The library's `normalize`: a leading `v` dropped, leading zeros dropped from each of
        the three parts, a missing minor or patch filled in with 0 (when no `-` or `+` follows)."""
        parts = [_unpadded(part) for part in text.removeprefix("v").split(".", 2)]
        if len(parts) < 3:
            if "-" in parts[-1] or "+" in parts[-1]:
                return None
            parts += ["0"] * (3 - len(parts))
        return _Semver.parse(".".join(parts))

    def order(self) -> tuple:
        """Semver precedence: a pre-release comes before its release; numbers before words."""
        pre = tuple((0, p, "") if isinstance(p, int) else (1, 0, p) for p in self.pre)
        return self.major, self.minor, self.patch, not self.pre, pre


def _unpadded(part: str) -> str:
    """Go's trimming of leading zeros from a part longer than one byte: a part then left without
    a leading digit gets a 0 back."""
    if len(part.encode()) <= 1:
        return part
    part = part.lstrip("0")
    return part if part[:1].isascii() and part[:1].isdigit() else "0" + part


def _version(text: Any, normalize: Any, function: str) -> "_Semver | None":
    if not isinstance(normalize, celtypes.BoolType):
        raise TypeError(f"no such overload: {function}")
    text = _text(text, function)
    return _Semver.normalized(text) if normalize else _Semver.parse(text)


def _semver(text: Any, normalize: Any = celtypes.BoolType(False)) -> "_Semver | CELEvalError":
    version = _version(text, normalize, "semver")
    return version if version is not None else CELEvalError(f"invalid semantic version {text!r}", ValueError, None)


def _version_part(name: str) -> Callable[[Any], celtypes.IntType]:
    """A part as cel-go gives it: Go's int64 of the uint64 (2^63 and above wrap to negatives)."""
    def part(version: Any) -> celtypes.IntType:
        if not isinstance(version, _Semver):
            raise TypeError(f"no such overload: {name}")
        number = getattr(version, name)
        return celtypes.IntType(number - 2**64 if number >= 2**63 else number)
    return part


def _compare(a: Any, b: Any, function: str) -> int:
    if isinstance(a, Quantity) and isinstance(b, Quantity):
        return a.compare(b)
    if isinstance(a, _Semver) and isinstance(b, _Semver):
        left, right = a.order(), b.order()
        return (left > right) - (left < right)
    raise TypeError(f"no such overload: {function}")


def _ascii_case(change: Callable[[str], str], function: str) -> Callable[[Any], celtypes.StringType]:
    """cel-go's `lowerAscii`/`upperAscii`: ASCII letters changed, every other character kept."""
    return lambda s: celtypes.StringType("".join(change(c) if c.isascii() else c for c in _text(s, function)))


# They return our own values too (quantities, versions), which celpy carries as it does its own.
_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "quantity": _quantity,
    "isQuantity": lambda text: celtypes.BoolType(not isinstance(_quantity(text), CELEvalError)),
    "sign": lambda q: celtypes.IntType(_held(q, "sign").sign()),
    "isInteger": lambda q: celtypes.BoolType(_held(q, "isInteger").as_int64() is not None),
    "asInteger": _as_integer,
    "asApproximateFloat": lambda q: celtypes.DoubleType(_held(q, "asApproximateFloat").approximate_float()),
    "add": lambda q, other: _held(q, "add").plus(_operand(other, "add")),
    "sub": lambda q, other: _held(q, "sub").minus(_operand(other, "sub")),
    "mul": lambda q, factor: _held(q, "mul").times(_integer(factor, "mul")),
    "semver": _semver,
    "isSemver": lambda text, normalize=celtypes.BoolType(False):
        celtypes.BoolType(_version(text, normalize, "isSemver") is not None),
    "major": _version_part("major"),
    "minor": _version_part("minor"),
    "patch": _version_part("patch"),
    "compareTo": lambda a, b: celtypes.IntType(_compare(a, b, "compareTo")),
    "isGreaterThan": lambda a, b: celtypes.BoolType(_compare(a, b, "isGreaterThan") > 0),
    "isLessThan": lambda a, b: celtypes.BoolType(_compare(a, b, "isLessThan") < 0),
    "lowerAscii": _ascii_case(str.lower, "lowerAscii"),
    "upperAscii": _ascii_case(str.upper, "upperAscii"),
}
