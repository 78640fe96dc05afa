"""The devices a cluster publishes (ResourceSlices) and which of them a CEL selector picks.

A driver publishes a pool of devices in one or more ResourceSlices; only the slices of a pool's
newest generation count, and a pool is complete when all `resourceSliceCount` of them are there.
A slice's devices are local to one node (`nodeName`), on the nodes its `nodeSelector` picks, or on
every node (`allNodes`); with `perDeviceNodeSelection` each device says so itself.

Selectors are CEL expressions over `device` (`driver`, `attributes`, `capacity`, as the DRA CEL
environment declares them), evaluated with cel-python and the Kubernetes CEL libraries of
`sim.cel` (quantities, semantic versions, `lowerAscii`). Attributes keep their types (int, bool,
string, and a version is a semantic version); an attribute published without a domain belongs
to the driver's domain, and a domain a device has nothing in is an empty map. Capacities are
quantities. An expression that does not compile, or fails at run time (a missing attribute),
selects nothing; the real scheduler reports the latter as a scheduling error instead. Device
taints, shared counters (partitionable devices) and consumable capacity are not modelled.
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import celpy
from celpy import celtypes

from sim.cel import FUNCTIONS, Quantity, environment, parse_semver
from sim.placement import NodeFacts, term_matches
from sim.quantity import canonical

DeviceID = tuple[str, str, str]  # (driver, pool, device)
ATTRIBUTE_KINDS = ("int", "bool", "string", "version")


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
    for kind in ATTRIBUTE_KINDS:
        if kind in value:
            return value[kind]
    return None


def selects_node(selector: Mapping, node: NodeFacts) -> bool:
    """A core/v1 NodeSelector: any of its terms (`sim.placement.term_matches`)."""
    return any(term_matches(term, node) for term in selector.get("nodeSelectorTerms") or ())


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

class Domains(celtypes.MapType):
    """`device.attributes` and `device.capacity`: a domain the device has nothing in is an empty
    map, as DRA's CEL environment answers it, so `"x" in device.attributes["other.io"]` is false."""

    def __getitem__(self, key):
        return super().__getitem__(key) if key in self else celtypes.MapType({})


def cel_value(kind: str, value):
    """An attribute's value in CEL; a version is a semantic version (an unparsable one fails the
    whole device, as DRA's `getAttributeValue` does)."""
    if kind == "version":
        version = parse_semver(str(value))
        if version is None:
            raise ValueError(f"parse semantic version {value!r}")
        return version
    if kind == "bool":
        return celtypes.BoolType(value)
    if kind == "int":
        return celtypes.IntType(value)
    return celtypes.StringType(str(value))


def cel_device(device: Device) -> celtypes.MapType:
    """The `device` variable; ValueError when an attribute cannot be given to CEL. Capacities are
    quantities as the API server stored them, in canonical form."""
    attributes: dict = {}
    for name, value in device.attributes.items():
        domain, short = device.qualified(name)
        kind = next((k for k in ATTRIBUTE_KINDS if k in value), None)
        if kind is None:
            raise ValueError(f"attribute {name}: unsupported attribute value")
        attributes.setdefault(celtypes.StringType(domain), {})[celtypes.StringType(short)] = cel_value(kind, value[kind])
    capacity: dict = {}
    for name, value in device.capacity.items():
        domain, short = device.qualified(name)
        capacity.setdefault(celtypes.StringType(domain), {})[celtypes.StringType(short)] = \
            Quantity.parse(canonical(value.get("value", "0")))
    return celtypes.MapType({
        celtypes.StringType("driver"): celtypes.StringType(device.driver),
        celtypes.StringType("attributes"): Domains({k: celtypes.MapType(v) for k, v in attributes.items()}),
        celtypes.StringType("capacity"): Domains({k: celtypes.MapType(v) for k, v in capacity.items()}),
    })


@dataclass
class Selection:
    """Compiled expressions and their verdict per device, kept while the devices stay the same."""

    programs: dict[str, object] = field(default_factory=dict)
    verdicts: dict[tuple[str, DeviceID], bool] = field(default_factory=dict)
    activations: dict[DeviceID, celtypes.MapType | None] = field(default_factory=dict)  # None: CEL cannot read it

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
        if device.id not in self.activations:
            try:
                self.activations[device.id] = cel_device(device)
            except ValueError:
                self.activations[device.id] = None
        activation = self.activations[device.id]
        if activation is None:
            return False
        try:
            result = program.evaluate({"device": activation})
        except celpy.CELEvalError:
            return False
        return isinstance(result, celtypes.BoolType) and bool(result)
