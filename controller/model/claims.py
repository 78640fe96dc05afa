"""What a pod's DRA claims ask for (`resource.k8s.io/v1`): each claim's requests and constraints,
and its allocation once the scheduler made one. A pod's demand is its claims in its order
(`DeviceDemand`), resolved against the cluster's claims and templates (`checks.dra.demand`)."""

from dataclasses import dataclass

from gangkeeper.controller.model.nodes import Toleration
from gangkeeper.controller.model.selectors import Term

EXACT_COUNT, ALL = "ExactCount", "All"

DeviceKey = tuple[str, str, str]  # (driver, pool, device)
ClaimKey = tuple[str, str]  # (namespace, name)


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    """One request of a claim: `count` devices of a class (or all of them), or the first of
    `first_available` subrequests that can be satisfied (then class and selectors are unused)."""

    name: str
    device_class: str = ""
    selectors: tuple[str, ...] = ()
    count: int = 1
    mode: str = EXACT_COUNT
    admin_access: bool = False
    tolerations: tuple[Toleration, ...] = ()
    first_available: tuple["DeviceRequest", ...] = ()


@dataclass(frozen=True, slots=True)
class MatchAttribute:
    """Every device of the named requests (all requests when empty) has the same value of it."""

    attribute: str
    requests: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class DeviceResult:
    request: str
    device: DeviceKey
    admin_access: bool = False


ClaimResult = tuple[DeviceResult, ...]


@dataclass(frozen=True, slots=True)
class Allocation:
    """A claim's devices, and the nodes that may use them (`None`: every node)."""

    results: ClaimResult
    available_on: tuple[Term, ...] | None = None


@dataclass(frozen=True, slots=True)
class Claim:
    """One claim a pod needs. `name` is the pod's name for it (`spec.resourceClaims[].name`);
    `shared` is the ResourceClaim's key when several pods may name it, None for the pod's own."""

    name: str
    requests: tuple[DeviceRequest, ...]
    constraints: tuple[MatchAttribute, ...] = ()
    shared: ClaimKey | None = None
    allocation: Allocation | None = None
    extended: bool = False


DeviceDemand = tuple[Claim, ...]


@dataclass(frozen=True, slots=True)
class Unresolved:
    """The pod's claims cannot be known yet: the scheduler would not schedule it either."""

    reason: str
