"""What a pod's claims ask for as the cluster's claims and templates stand now (`device_demand`),
and what a demand takes: the claim the scheduler makes for extended resources DRA serves, the
devices a claim's results take from everyone else, what tells demands apart on a shared node."""

from collections.abc import Hashable, Iterable, Mapping
from functools import lru_cache

from gangkeeper.controller.model.claims import (
    EXACT_COUNT,
    Claim,
    ClaimKey,
    DeviceDemand,
    DeviceKey,
    DeviceRequest,
    DeviceResult,
    Unresolved,
)
from gangkeeper.controller.reading.claims import Unsupported, claim_from_api

IN_USE = "resourceclaim in use"  # the scheduler's words (DynamicResources PreFilter)
EXTENDED_CLAIM_NAME = "<extended-resources>"
MAX_RESERVED_FOR = 256


def device_demand(pod: Mapping, templates: Mapping[ClaimKey, Mapping],
                  claims: Mapping[ClaimKey, Mapping]) -> DeviceDemand | Unresolved:
    """The claims the pod needs, in its order; empty for a pod without `spec.resourceClaims`."""
    metadata = pod.get("metadata") or {}
    namespace, uid = metadata.get("namespace", ""), metadata.get("uid", "")
    generated = {status.get("name"): status.get("resourceClaimName")
                 for status in (pod.get("status") or {}).get("resourceClaimStatuses") or ()}
    demand = []
    for entry in (pod.get("spec") or {}).get("resourceClaims") or ():
        name, shared = entry.get("name", ""), entry.get("resourceClaimName")
        template = entry.get("resourceClaimTemplateName")
        if shared:
            obj = claims.get((namespace, shared))
            if obj is None:
                return Unresolved(f'resourceclaim.resource.k8s.io "{shared}" not found')
            source, key = obj, (namespace, shared)
        elif template:
            if name in generated and generated[name] is None:
                continue  # the claim controller decided that no claim is needed for it
            obj = claims.get((namespace, generated.get(name) or ""))
            if obj is None:
                obj = templates.get((namespace, template))
                if obj is None:
                    return Unresolved(f'resourceclaimtemplate.resource.k8s.io "{template}" not found')
                obj = {"spec": (obj.get("spec") or {}).get("spec") or {}}
            source, key = obj, None
        else:
            continue
        try:
            claim = claim_from_api(source, name, key)
        except Unsupported as unsupported:
            return Unresolved(f"claim {name}: {unsupported}")
        if claim.allocation is not None and _in_use_by_others(source, uid):
            return Unresolved(IN_USE)
        demand.append(claim)
    return interned(tuple(demand))


def _in_use_by_others(obj: Mapping, uid: str) -> bool:
    consumers = (obj.get("status") or {}).get("reservedFor") or ()
    return len(consumers) >= MAX_RESERVED_FOR and all(c.get("uid") != uid for c in consumers)


@lru_cache(maxsize=4096)
def interned(demand: DeviceDemand) -> DeviceDemand:
    """The first equal demand seen: members of one group share one."""
    return demand


@lru_cache(maxsize=1024)
def extended_claim(served: tuple[tuple[str, str, int], ...]) -> Claim:
    """One claim object per distinct set of (resource, class, count): pods asking alike share it."""
    return Claim(EXTENDED_CLAIM_NAME, tuple(DeviceRequest(resource, class_name, count=count)
                                            for resource, class_name, count in served), extended=True)


def sharing_key(demand: DeviceDemand) -> Hashable:
    """What tells the demand apart where members share a node before they bind.

    A demand of one claim of the pod's own with one plain request (ExactCount, no subrequests,
    constraints or admin access) takes the first free devices of its class, selectors and
    tolerations: demands of one such key, whatever their counts, all get their devices in any
    binding order exactly when the node has as many free as they ask for in all. Any other
    demand is its own key: first-fit in an unknown order could fail where the plan succeeded.
    """
    request = plain_request(demand)
    return demand if request is None else (request.device_class, request.selectors, request.tolerations)


def plain_request(demand: DeviceDemand) -> DeviceRequest | None:
    """The request of a demand of one claim of the pod's own with one plain request (ExactCount,
    no subrequests, constraints or admin access), which takes the first free devices it matches."""
    if len(demand) != 1 or len(demand[0].requests) != 1:
        return None
    claim, request = demand[0], demand[0].requests[0]
    if (claim.shared is not None or claim.allocation is not None or claim.constraints or request.first_available
            or request.mode != EXACT_COUNT or request.admin_access):
        return None
    return request


def variants_of(request: DeviceRequest) -> list[tuple[str, DeviceRequest]]:
    if request.first_available:
        return [(f"{request.name}/{sub.name}", sub) for sub in request.first_available]
    return [(request.name, request)]


def exclusive(results: Iterable[DeviceResult]) -> list[DeviceKey]:
    """The devices a claim takes from everyone else: all but those given for admin access."""
    return [r.device for r in results if not r.admin_access]
