"""A ResourceClaim (or a claim template's spec) as the API writes it, read into
`model.claims.Claim`, with its allocation once the scheduler made one."""

from collections.abc import Mapping

from gangkeeper.controller.model.claims import (
    EXACT_COUNT,
    Allocation,
    Claim,
    ClaimKey,
    DeviceRequest,
    DeviceResult,
    MatchAttribute,
)
from gangkeeper.controller.reading.selectors import selector_terms, toleration
from gangkeeper.names import EXTENDED_RESOURCE_CLAIM_ANNOTATION


class Unsupported(Exception):
    """A claim uses an API field the allocator does not know (it refuses such claims too)."""


def claim_from_api(obj: Mapping, name: str, shared: ClaimKey | None = None) -> Claim:
    """A ResourceClaim (or a template's claim spec) as the pod's claim `name`."""
    devices = (obj.get("spec") or {}).get("devices") or {}
    requests = tuple(_request(raw) for raw in devices.get("requests") or ())
    constraints = []
    for index, raw in enumerate(devices.get("constraints") or ()):
        if not raw.get("matchAttribute"):
            raise Unsupported(f"constraint #{index}: only matchAttribute is supported")
        constraints.append(MatchAttribute(raw["matchAttribute"], tuple(raw.get("requests") or ())))
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    return Claim(name, requests, tuple(constraints), shared, allocation_from_api(obj),
                 annotations.get(EXTENDED_RESOURCE_CLAIM_ANNOTATION) == "true")


def allocation_from_api(obj: Mapping) -> Allocation | None:
    allocation = (obj.get("status") or {}).get("allocation")
    if not allocation:
        return None
    results = tuple(DeviceResult(r.get("request", ""), (r.get("driver", ""), r.get("pool", ""), r.get("device", "")),
                                 bool(r.get("adminAccess")))
                    for r in (allocation.get("devices") or {}).get("results") or ())
    return Allocation(results, selector_terms(allocation.get("nodeSelector")))


def _request(raw: Mapping) -> DeviceRequest:
    name = raw.get("name", "")
    if raw.get("firstAvailable"):
        return DeviceRequest(name, first_available=tuple(_exact(sub.get("name", ""), sub)
                                                         for sub in raw["firstAvailable"]))
    if not raw.get("exactly"):
        raise Unsupported(f"request {name}: neither exactly nor firstAvailable")
    return _exact(name, raw["exactly"])


def _exact(name: str, raw: Mapping) -> DeviceRequest:
    selectors = []
    for index, selector in enumerate(raw.get("selectors") or ()):
        expression = (selector.get("cel") or {}).get("expression")
        if expression is None:
            raise Unsupported(f"request {name}, selector #{index}: CEL expression empty (unsupported selector type?)")
        selectors.append(expression)
    tolerations = tuple(toleration(t) for t in raw.get("tolerations") or ())
    return DeviceRequest(name, raw.get("deviceClassName", ""), tuple(selectors), int(raw.get("count") or 1),
                         raw.get("allocationMode") or EXACT_COUNT, bool(raw.get("adminAccess")), tolerations)

