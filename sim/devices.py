"""The devices a cluster publishes (ResourceSlices) and which of them a CEL selector picks.

A driver publishes a pool of devices in one or more ResourceSlices; only the slices of a pool's
newest generation count, and a pool is complete when all `resourceSliceCount` of them are there.
A slice's devices are local to one node (`nodeName`), on the nodes its `nodeSelector` picks, or on
every node (`allNodes`); with `perDeviceNodeSelection` each device says so itself. The API server
accepts exactly one of these per slice, and then per device (`slice_problems`, as
`validateResourceSliceSpec` and `validateDevice` check them); a slice's selector has one term.

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
from sim.status import FieldError

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
    node_selector: Mapping | None  # or on the nodes it selects
    all_nodes: bool  # or on every node; none of the three: on no node
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
        """Whether the node reaches the device (the allocator's `nodeMatches`)."""
        if self.node_name:
            return self.node_name == node.name
        if self.all_nodes:
            return True
        if self.node_selector is not None:
            return selects_node(self.node_selector, node)
        return False


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
        found.append(Device(driver, pool, d.get("name", ""), d.get("attributes") or {}, d.get("capacity") or {},
                            source.get("nodeName") or None, source.get("nodeSelector"), bool(source.get("allNodes")),
                            complete))
    return found


# --- validation ----------------------------------------------------------------------------------

SLICE_SELECTION = "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required"
DEVICE_SELECTION = ("exactly one of `nodeName`, `nodeSelector`, or `allNodes` is required when "
                    "`perDeviceNodeSelection` is set to true in the ResourceSlice spec")
DEVICE_SELECTION_UNUSED = ("`nodeName`, `nodeSelector` and `allNodes` can only be set if `perDeviceNodeSelection` "
                           "is set to true in the ResourceSlice spec")
_MUST_BE_TRUE = "must be either unset or set to true"


def slice_problems(resource_slice: Mapping, old: Mapping | None = None) -> list[FieldError]:
    """Which nodes a ResourceSlice and its devices reach, as `validateResourceSliceSpec` checks it
    on create and update (`old`): exactly one way per slice, and per device under
    `perDeviceNodeSelection`; a slice's selector of exactly one term; `spec.nodeName` immutable.
    Not checked here: the rest of the slice (driver and pool names, devices' attributes, counters)
    and the selectors' requirements themselves."""
    spec = resource_slice.get("spec") or {}
    errors = []
    if old is not None and (old.get("spec") or {}).get("nodeName") != spec.get("nodeName"):
        errors.append(FieldError("spec.nodeName", "Invalid", "field is immutable", spec.get("nodeName")))
    chosen = []
    if spec.get("nodeName") is not None:
        if spec["nodeName"]:
            chosen.append("`nodeName`")
        else:
            errors.append(FieldError("spec.nodeName", "Invalid", "must be either unset or set to a non-empty string", ""))
    if spec.get("nodeSelector") is not None:
        chosen.append("`nodeSelector`")
        terms = spec["nodeSelector"].get("nodeSelectorTerms") or []
        if len(terms) != 1:
            errors.append(FieldError("spec.nodeSelector.nodeSelectorTerms", "Invalid",
                                     "must have exactly one node selector term", terms))
    for switch in ("allNodes", "perDeviceNodeSelection"):
        if spec.get(switch) is not None:
            if spec[switch]:
                chosen.append(f"`{switch}`")
            else:
                errors.append(FieldError(f"spec.{switch}", "Invalid", _MUST_BE_TRUE, False))
    errors += _one_of("spec", chosen, SLICE_SELECTION, f"{SLICE_SELECTION}, but multiple fields are set")
    per_device = bool(spec.get("perDeviceNodeSelection"))
    for index, device in enumerate(spec.get("devices") or ()):
        errors += _device_problems(device, f"spec.devices[{index}]", per_device)
    return errors


def _device_problems(device: Mapping, path: str, per_device: bool) -> list[FieldError]:
    if not per_device:
        unused = any(device.get(name) is not None for name in ("nodeName", "nodeSelector", "allNodes"))
        return [FieldError(path, "Invalid", DEVICE_SELECTION_UNUSED, "null")] if unused else []
    errors, chosen = [], []
    if device.get("nodeName") is not None:
        if device["nodeName"]:
            chosen.append("`nodeName`")
        else:
            errors.append(FieldError(f"{path}.nodeName", "Invalid", "must not be empty", ""))
    if device.get("nodeSelector") is not None:
        chosen.append("`nodeSelector`")
    if device.get("allNodes") is not None:
        if device["allNodes"]:
            chosen.append("`allNodes`")
        else:
            errors.append(FieldError(f"{path}.allNodes", "Invalid", _MUST_BE_TRUE, False))
    return errors + _one_of(path, chosen, DEVICE_SELECTION, DEVICE_SELECTION)


def _one_of(path: str, chosen: list[str], none: str, several: str) -> list[FieldError]:
    """The error for no way, or for several ways (`chosen`, as the API server lists them), of
    saying which nodes reach the slice or device."""
    if not chosen:
        return [FieldError(path, "Required", none)]
    if len(chosen) > 1:
        return [FieldError(path, "Invalid", several, "{" + ", ".join(chosen) + "}")]
    return []


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
