"""The bodies of the controller's pod writes: reserve (a merge patch, for a group whose Gang
cannot hold its reservations: `gangs.reservations_patch`) and release (a JSON Patch).

Both are guarded, so that a write made from a stale cache fails with a Conflict instead of
landing on a pod that changed (docs/design.md, "Release, binding and rollback"): the reserve
patch carries the `resourceVersion` it was decided on, the release patch `test`s it. A
rollback writes no body: it deletes the member with its uid as precondition.
"""

from collections.abc import Mapping
from datetime import datetime, timezone
from types import MappingProxyType

from gangkeeper import names
from gangkeeper.controller.model.objects import PodFacts

_AFFINITY_PATH = ("affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms")


def reserve_patch(resource_version: str, node: str) -> dict:
    """The reservation annotation, as a merge patch that fails unless the pod is as read."""
    return {"metadata": {"resourceVersion": resource_version,
                         "annotations": {names.RESERVED_NODE_ANNOTATION: node}}}


def release_patch(facts: PodFacts, node: str, released_at: float | None = None,
                  annotations: Mapping[str, str] = MappingProxyType({})) -> tuple[Mapping, ...]:
    """Pin to `node` and remove our gate, in one JSON Patch that fails unless the pod is as read.

    The pin is added to every existing required term (terms are ORed: a pin missing from one
    would let the pod land anywhere that term allows), or as a new term when there are none.
    Only our gate is removed, by index, after a `test` that the index still names it. With
    `released_at`, the release annotation records it (the webhook gave every gated member
    annotations, its group source among them, to add it to), and the bind timeout counts from it
    even after a restart. `annotations` are added too (the booking of a ProvisioningRequest it consumes).
    """
    pin = {"key": names.PIN_FIELD, "operator": "In", "values": [node]}
    ops: list[Mapping] = [{"op": "test", "path": "/metadata/resourceVersion", "value": facts.resource_version}]
    if released_at is not None:
        ops.append({"op": "add", "path": f"/metadata/annotations/{_escape(names.RELEASED_AT_ANNOTATION)}",
                    "value": _micro_time(released_at)})
    ops += [{"op": "add", "path": f"/metadata/annotations/{_escape(key)}", "value": value}
            for key, value in sorted(annotations.items())]
    terms = facts.member.affinity_terms
    if terms:
        for index, term in enumerate(terms):
            path = f"/spec/{'/'.join(_AFFINITY_PATH)}/{index}/matchFields"
            ops.append({"op": "add", "path": f"{path}/-", "value": pin} if term.match_fields
                       else {"op": "add", "path": path, "value": [pin]})
    else:
        depth = min(facts.affinity_depth, 3)
        value: object = [{"matchFields": [pin]}]
        for key in reversed(_AFFINITY_PATH[depth + 1:]):
            value = {key: value}
        ops.append({"op": "add", "path": "/spec/" + "/".join(_AFFINITY_PATH[:depth + 1]), "value": value})
    gate = f"/spec/schedulingGates/{facts.gate_index}"
    ops += [{"op": "test", "path": f"{gate}/name", "value": names.SCHEDULING_GATE}, {"op": "remove", "path": gate}]
    return tuple(ops)


def _escape(key: str) -> str:
    """A map key as a JSON Pointer token (RFC 6901)."""
    return key.replace("~", "~0").replace("/", "~1")


def _micro_time(moment: float) -> str:
    """Kubernetes MicroTime (RFC 3339, UTC, microseconds): a bind timeout of seconds needs better than seconds."""
    return datetime.fromtimestamp(moment, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
