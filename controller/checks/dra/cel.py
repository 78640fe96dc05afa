"""CEL as the DRA allocator runs it: a DeviceClass's selectors, then a request's, on each device.

celpy with the DRA environment: `device.driver`, `device.attributes['<domain>'].<name>` (an
unqualified attribute belongs to the driver's domain; an unknown domain is an empty map),
`device.capacity` (quantities), `quantity()`, `isQuantity()`, `semver()`, `isSemver()`, their
comparison methods, `lowerAscii`/`upperAscii` and celpy's standard library. `cel.bind` and the
other Kubernetes extension libraries are not available: such an expression fails. Each
expression is compiled once, and its answer is remembered per device shape (driver, attributes,
capacity), so that 40,000 identical devices cost one evaluation.
"""

import re
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import celpy
from celpy import celtypes
from celpy.evaluation import CELEvalError

from gangkeeper.cel import error_message
from gangkeeper.controller.checks.dra.devices import Shape
from gangkeeper.quantity import parse_quantity


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
    for (domain, ident), value in shape.capacity:
        capacity.setdefault(celtypes.StringType(domain), {})[celtypes.StringType(ident)] = _Quantity(value)
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


class _Quantity:
    """A `resource.Quantity` in CEL (k8s.io/apiserver/pkg/cel/library quantity)."""

    __slots__ = ("value",)

    def __init__(self, value: Fraction):
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Quantity) and other.value == self.value

    def __hash__(self) -> int:
        return hash(self.value)


_SEMVER = re.compile(r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?"
                     r"(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?")


@dataclass(frozen=True, slots=True)
class _Semver:
    """A semantic version in CEL (k8s.io/apiserver/pkg/cel/library semver): build metadata ignored."""

    major: int
    minor: int
    patch: int
    pre: tuple[str, ...] = ()

    @staticmethod
    def parse(text: str) -> "_Semver | None":
        match = _SEMVER.fullmatch(text)
        if match is None:
            return None
        return _Semver(int(match[1]), int(match[2]), int(match[3]), tuple(match[4].split(".")) if match[4] else ())

    def order(self) -> tuple:
        """Semver precedence: a pre-release comes before its release; numbers before words."""
        pre = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in self.pre)
        return self.major, self.minor, self.patch, not self.pre, pre


# The functions CEL expressions call get what the expression holds, of any CEL type (`Any`).

def _compare(a: Any, b: Any) -> int:
    if isinstance(a, _Quantity) and isinstance(b, _Quantity):
        return (a.value > b.value) - (a.value < b.value)
    if isinstance(a, _Semver) and isinstance(b, _Semver):
        left, right = a.order(), b.order()
        return (left > right) - (left < right)
    raise TypeError("compareTo needs two quantities or two versions")


def _quantity(text: Any) -> "_Quantity | CELEvalError":
    try:
        return _Quantity(parse_quantity(str(text)))
    except ValueError as error:
        return CELEvalError(str(error), ValueError, None)


def _semver(text: Any) -> _Semver | CELEvalError:
    version = _Semver.parse(str(text))
    return version if version is not None else CELEvalError(f"invalid semver {text!r}", ValueError, None)


def _arithmetic(sign: int) -> Callable[[Any, Any], _Quantity]:
    def apply(a: Any, b: Any) -> _Quantity:
        if not isinstance(a, _Quantity):
            raise TypeError("add and sub apply to quantities")
        other = b.value if isinstance(b, _Quantity) else Fraction(int(b))
        return _Quantity(a.value + sign * other)
    return apply


def _as_integer(q: Any) -> celtypes.IntType | CELEvalError:
    if not isinstance(q, _Quantity) or q.value.denominator != 1:
        return CELEvalError("cannot convert the quantity to an integer", ValueError, None)
    return celtypes.IntType(q.value.numerator)


def _version_part(index: int) -> Callable[[_Semver], celtypes.IntType]:
    return lambda v: celtypes.IntType((v.major, v.minor, v.patch)[index])


# They return our own values too (quantities, versions), which celpy carries as it does its own.
_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "quantity": _quantity,
    "isQuantity": lambda text: celtypes.BoolType(not isinstance(_quantity(text), CELEvalError)),
    "semver": _semver,
    "isSemver": lambda text: celtypes.BoolType(_Semver.parse(str(text)) is not None),
    "compareTo": lambda a, b: celtypes.IntType(_compare(a, b)),
    "isGreaterThan": lambda a, b: celtypes.BoolType(_compare(a, b) > 0),
    "isLessThan": lambda a, b: celtypes.BoolType(_compare(a, b) < 0),
    "add": _arithmetic(+1),
    "sub": _arithmetic(-1),
    "asInteger": _as_integer,
    "isInteger": lambda q: celtypes.BoolType(q.value.denominator == 1),
    "asApproximateFloat": lambda q: celtypes.DoubleType(float(q.value)),
    "sign": lambda q: celtypes.IntType((q.value > 0) - (q.value < 0)),
    "major": _version_part(0),
    "minor": _version_part(1),
    "patch": _version_part(2),
    "lowerAscii": lambda s: celtypes.StringType(str(s).lower()),
    "upperAscii": lambda s: celtypes.StringType(str(s).upper()),
}
