"""The devices a cluster publishes (ResourceSlices) and which of them a CEL selector picks.

A driver publishes a pool of devices in one or more ResourceSlices; only the slices of a pool's
newest generation count, and a pool is complete when all `resourceSliceCount` of them are there.
A slice's devices are local to one node (`nodeName`), on the nodes its `nodeSelector` picks, or on
every node (`allNodes`); with `perDeviceNodeSelection` each device says so itself.

Selectors are CEL expressions over `device` (`driver`, `attributes`, `capacity`, as the DRA CEL
environment declares them), evaluated with cel-python. Attributes keep their types (int, bool,
string; a version is a string); an attribute published without a domain belongs to the driver's
domain. Capacities are quantities, with the Kubernetes quantity library's `quantity()`,
`compareTo`, `isGreaterThan`, `isLessThan`, `asInteger` and `asApproximateFloat`. An expression
that does not compile, or fails at run time (a missing attribute), selects nothing; the real
scheduler reports the latter as a scheduling error instead. Semver functions, device taints,
shared counters (partitionable devices) and consumable capacity are not modelled.
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cache

import celpy
from celpy import celtypes

from gangkeeper.names import PIN_FIELD
from gangkeeper.quantity import parse_quantity
from sim.placement import NodeFacts, requirement_matches

DeviceID = tuple[str, str, str]  # (driver, pool, device)


@dataclass(frozen=True)
class Device:
    driver: str
    pool: str
    name: str
    attributes: Mapping[str, Mapping]  # as published: {"model": {"string": "h100"}}
    capacity: Mapping[str, Mapping]  # {"memory": {"value": "80Gi"}}
    node_name: str | None  # local to this node
    node_selector: Mapping | None  # or on the nodes it selects; neither: on every node
    pool_complete: bool

    @property
    def id(self) -> DeviceID:
        return self.driver, self.pool, self.name

    def qualified(self, name: str) -> tuple[str, str]:
        """(domain, name) of an attribute or capacity name; an unqualified one is the driver's."""
        domain, _, short = name.rpartition("/")
        return (domain or self.driver), short

    def attribute(self, qualified_name: str):
        """The value of a fully qualified attribute, or None when the device has none."""
        for name, value in self.attributes.items():
            if self.qualified(name) == self.qualified(qualified_name):
                return attribute_value(value)
        return None

    def on(self, node: NodeFacts) -> bool:
        if self.node_name is not None:
            return self.node_name == node.name
        if self.node_selector is not None:
            return selects_node(self.node_selector, node)
        return True


def attribute_value(value: Mapping):
    for kind in ("int", "bool", "string", "version"):
        if kind in value:
            return value[kind]
    return None


def selects_node(selector: Mapping, node: NodeFacts) -> bool:
    """A core/v1 NodeSelector: any term, each term all of its requirements; an empty term none."""
    fields = {PIN_FIELD: node.name}
    for term in selector.get("nodeSelectorTerms") or ():
        expressions, by_field = term.get("matchExpressions") or (), term.get("matchFields") or ()
        if (expressions or by_field) and all(requirement_matches(e, node.labels) for e in expressions) \
                and all(requirement_matches(f, fields) for f in by_field):
            return True
    return False


def devices_of(slices: Iterable[Mapping]) -> list[Device]:
    """Every device of the newest generation of each pool, pools in (driver, pool) order, then
    slices by name, then devices as listed."""
    pools: dict[tuple[str, str], list[Mapping]] = {}
    for s in slices:
        spec = s.get("spec") or {}
        pools.setdefault((spec.get("driver", ""), (spec.get("pool") or {}).get("name", "")), []).append(s)
    devices = []
    for (driver, pool), members in sorted(pools.items()):
        newest = max(int((m["spec"].get("pool") or {}).get("generation", 0)) for m in members)
        current = sorted((m for m in members if int(m["spec"]["pool"].get("generation", 0)) == newest),
                         key=lambda m: m["metadata"]["name"])
        complete = len(current) == int(current[0]["spec"]["pool"].get("resourceSliceCount", 1))
        for s in current:
            devices += slice_devices(s["spec"], driver, pool, complete)
    return devices


def slice_devices(spec: Mapping, driver: str, pool: str, complete: bool) -> list[Device]:
    found = []
    for d in spec.get("devices") or ():
        source = d if spec.get("perDeviceNodeSelection") else spec
        node_name = source.get("nodeName") or None
        node_selector = None if node_name or source.get("allNodes") else source.get("nodeSelector")
        found.append(Device(driver, pool, d.get("name", ""), d.get("attributes") or {}, d.get("capacity") or {},
                            node_name, node_selector, complete))
    return found


# --- CEL -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Quantity:
    """A resource.Quantity inside CEL: only the quantity library's functions read it."""

    value: Fraction


def _quantity(text) -> Quantity:
    return Quantity(parse_quantity(str(text)))


def _compare(a: Quantity, b: Quantity) -> celtypes.IntType:
    return celtypes.IntType((a.value > b.value) - (a.value < b.value))


FUNCTIONS = {
    "quantity": _quantity,
    "compareTo": _compare,
    "isGreaterThan": lambda a, b: celtypes.BoolType(a.value > b.value),
    "isLessThan": lambda a, b: celtypes.BoolType(a.value < b.value),
    "asInteger": lambda a: celtypes.IntType(int(a.value)),
    "asApproximateFloat": lambda a: celtypes.DoubleType(float(a.value)),
}


def cel_value(value):
    if isinstance(value, bool):
        return celtypes.BoolType(value)
    if isinstance(value, int):
        return celtypes.IntType(value)
    return celtypes.StringType(str(value))


def cel_device(device: Device) -> celtypes.MapType:
    attributes: dict = {}
    for name, value in device.attributes.items():
        domain, short = device.qualified(name)
        attributes.setdefault(celtypes.StringType(domain), {})[celtypes.StringType(short)] = \
            cel_value(attribute_value(value))
    capacity: dict = {}
    for name, value in device.capacity.items():
        domain, short = device.qualified(name)
        capacity.setdefault(celtypes.StringType(domain), {})[celtypes.StringType(short)] = \
            _quantity(value.get("value", "0"))
    return celtypes.MapType({
        celtypes.StringType("driver"): celtypes.StringType(device.driver),
        celtypes.StringType("attributes"): celtypes.MapType({k: celtypes.MapType(v) for k, v in attributes.items()}),
        celtypes.StringType("capacity"): celtypes.MapType({k: celtypes.MapType(v) for k, v in capacity.items()}),
    })


@cache
def environment() -> celpy.Environment:
    """One CEL environment per process, made on first use: building its parser takes a third of a second."""
    return celpy.Environment()


@dataclass
class Selection:
    """Compiled expressions and their verdict per device, kept while the devices stay the same."""

    programs: dict[str, object] = field(default_factory=dict)
    verdicts: dict[tuple[str, DeviceID], bool] = field(default_factory=dict)
    activations: dict[DeviceID, celtypes.MapType] = field(default_factory=dict)

    def selects(self, expressions: Iterable[str], device: Device) -> bool:
        return all(self.matches(e, device) for e in expressions)

    def matches(self, expression: str, device: Device) -> bool:
        key = (expression, device.id)
        verdict = self.verdicts.get(key)
        if verdict is None:
            verdict = self.verdicts[key] = self._evaluate(expression, device)
        return verdict

    def _evaluate(self, expression: str, device: Device) -> bool:
        program = self.programs.get(expression)
        if program is None:
            try:
                program = environment().program(environment().compile(expression), functions=FUNCTIONS)
            except celpy.CELParseError:
                program = False
            self.programs[expression] = program
        if program is False:
            return False
        activation = self.activations.get(device.id)
        if activation is None:
            activation = self.activations[device.id] = cel_device(device)
        try:
            result = program.evaluate({"device": activation})
        except celpy.CELEvalError:
            return False
        return isinstance(result, celtypes.BoolType) and bool(result)
