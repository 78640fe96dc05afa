"""ProvisioningRequests (autoscaling.x-k8s.io/v1): the API's rules, and the words cluster-autoscaler
writes on them. Pure; the API server (`sim.apiserver`) and the emulated autoscaler (`sim.autoscaler`)
use it.

The rules are the CRD's (kubernetes/autoscaler @ 55c37cd5eb, `cluster-autoscaler/apis/config/crd/`,
copied to tests/fixtures/ecosystem/crds/), refused as apiextensions-apiserver refuses them, with
kube-openapi's messages turned into field errors (`kubeOpenAPIResultToFieldErrors`): `spec` with
`podSets` (1 to 32, each a `count` of at least 1 and a `podTemplateRef.name`, a DNS subdomain of at
most 253 characters) and `provisioningClassName` (the same); `parameters`, at most 100 strings of
at most 255 characters. The spec's fields are immutable (CEL `self == oldSelf`: "Value is
immutable", the bad value being the field's type). `status` is written by cluster-autoscaler only
(`tests/sim_cluster/test_served_shapes.py` holds what the emulated one writes to the CRD).

The conditions and their words are cluster-autoscaler's: the types of its API (v1/types.go), the
reasons and messages of `cluster-autoscaler/provisioningrequest/conditions/conditions.go` and of
the code that sets them, read at 87d9c45c02^ (July 2026, the last commit before its core moved to
sigs.k8s.io/cluster-autoscaler). `CapacityRevoked` is a type of the API that cluster-autoscaler
never sets.
"""

import re
from collections.abc import Mapping

from sim.clock import rfc3339
from sim.names import (
    BEST_EFFORT_ATOMIC_CLASS,
    CHECK_CAPACITY_CLASS,
    CONSUME_PROVISIONING_REQUEST_ANNOTATION,
    DEPRECATED_CONSUME_ANNOTATION,
    PROVISIONING_CLASS_ANNOTATION,
)
from sim.status import FieldError

SUPPORTED_CLASSES = (CHECK_CAPACITY_CLASS, BEST_EFFORT_ATOMIC_CLASS)

# Condition types (v1/types.go).
ACCEPTED = "Accepted"
PROVISIONED = "Provisioned"
FAILED = "Failed"
BOOKING_EXPIRED = "BookingExpired"

# (reason, message) as cluster-autoscaler writes them, by where it writes them.
ACCEPTED_BY_AUTOSCALER = ("Accepted", "ProvisioningRequest is accepted by ClusterAutoscaler")  # injector
CAPACITY_FOUND = ("CapacityIsFound", "Capacity is found in the cluster")  # fits what is there (both classes)
CAPACITY_PROVISIONED = ("CapacityIsProvisioned", "Capacity is found in the cluster")  # best-effort: scaled up
CAPACITY_NOT_FOUND = ("CapacityIsNotFound", "Capacity is not found, CA will try to find it later.")  # retried
CHECK_CAPACITY_REFUSED = ("CapacityIsNotFound", "CA could not find requested capacity")  # Failed, noRetry: "true"
RESERVATION_EXPIRED = ("CapacityReservationTimeExpired", "Capacity reservation time is expired")  # BookingExpired
BOOKING_CONSUMED = ("CapacityBookingConsumed", "Capacity booking consumed: all pods scheduled")  # BookingExpired
REQUEST_EXPIRED = ("Expired", "ProvisioningRequest is expired")  # Failed: not provisioned for 7 days
FAILED_TO_CREATE_PODS = "FailedToCreatePods"  # Failed: a PodTemplate is missing; the message is the error
FAILED_TO_BOOK_CAPACITY = "FailedToBookCapacity"  # Failed: ... once it was provisioned ("Couldn't create pods, err: ")
NO_RETRY_PARAMETER = "noRetry"  # check-capacity: Failed instead of Provisioned=False

_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_MAX_NAME = 253
_MAX_POD_SETS = 32
_MAX_PARAMETERS = 100
_MAX_PARAMETER = 255
_IMMUTABLE = ("podSets", "provisioningClassName", "parameters")


# --- the CRD's rules -----------------------------------------------------------------------------

def problems(request: Mapping) -> list[FieldError]:
    """Every field of the request the CRD's schema refuses (the spec; metadata is checked for every kind)."""
    spec = request.get("spec")
    if spec is None:
        return [FieldError("spec", "Required")]
    if not isinstance(spec, dict):
        return [_wrong_type("spec", spec, "object")]
    found = _pod_set_problems(spec.get("podSets"))
    found += _name_problems("spec.provisioningClassName", spec.get("provisioningClassName"))
    return found + _parameter_problems(spec.get("parameters"))


def immutable_problems(current: Mapping, new: Mapping) -> list[FieldError]:
    """The spec's fields that an update changes, each refused by its `self == oldSelf` rule."""
    old, changed = current.get("spec") or {}, new.get("spec") or {}
    return [FieldError(f"spec.{name}", "Invalid", "Value is immutable", _type_name(changed[name]))
            for name in _IMMUTABLE
            if name in old and name in changed and changed[name] != old[name]]


def _pod_set_problems(pod_sets) -> list[FieldError]:
    path = "spec.podSets"
    if pod_sets is None:
        return [FieldError(path, "Required")]
    if not isinstance(pod_sets, list):
        return [_wrong_type(path, pod_sets, "array")]
    found = []
    if not pod_sets:
        found.append(FieldError(path, "Invalid", f"{path} in body should have at least 1 items", 0))
    if len(pod_sets) > _MAX_POD_SETS:
        found.append(FieldError(path, "TooMany", f"must have at most {_MAX_POD_SETS} items", len(pod_sets)))
    for position, pod_set in enumerate(pod_sets):
        where = f"{path}[{position}]"
        if not isinstance(pod_set, dict):
            found.append(_wrong_type(where, pod_set, "object"))
            continue
        found += _count_problems(f"{where}.count", pod_set.get("count"))
        reference = pod_set.get("podTemplateRef")
        if reference is None:
            found.append(FieldError(f"{where}.podTemplateRef", "Required"))
        elif not isinstance(reference, dict):
            found.append(_wrong_type(f"{where}.podTemplateRef", reference, "object"))
        else:
            found += _name_problems(f"{where}.podTemplateRef.name", reference.get("name"))
    return found


def _count_problems(path: str, count) -> list[FieldError]:
    if count is None:
        return [FieldError(path, "Required")]
    if isinstance(count, bool) or not isinstance(count, int):
        return [_wrong_type(path, count, "integer")]
    if count < 1:
        return [FieldError(path, "Invalid", f"{path} in body should be greater than or equal to 1", count)]
    return []


def _name_problems(path: str, name) -> list[FieldError]:
    if name is None:
        return [FieldError(path, "Required")]
    if not isinstance(name, str):
        return [_wrong_type(path, name, "string")]
    found = []
    if len(name.encode()) > _MAX_NAME:
        found.append(FieldError(path, "TooLong", f"may not be more than {_MAX_NAME} bytes", name))
    if not _NAME.match(name):
        found.append(FieldError(path, "Invalid", f"{path} in body should match '{_NAME.pattern}'", name))
    return found


def _parameter_problems(parameters) -> list[FieldError]:
    path = "spec.parameters"
    if parameters is None:
        return []
    if not isinstance(parameters, dict):
        return [_wrong_type(path, parameters, "object")]
    found = []
    if len(parameters) > _MAX_PARAMETERS:
        found.append(FieldError(path, "TooMany", f"must have at most {_MAX_PARAMETERS} items", len(parameters)))
    for key, value in parameters.items():
        if not isinstance(value, str):
            found.append(_wrong_type(f"{path}.{key}", value, "string"))
        elif len(value.encode()) > _MAX_PARAMETER:
            found.append(FieldError(f"{path}.{key}", "TooLong", f"may not be more than {_MAX_PARAMETER} bytes", value))
    return found


def _wrong_type(path: str, value, wanted: str) -> FieldError:
    actual = _type_name(value)
    return FieldError(path, "Invalid", f'{path} in body must be of type {wanted}: "{actual}"', actual)


def _type_name(value) -> str:
    """The JSON type of a value, as kube-openapi and CEL name it."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


# --- reading a request -------------------------------------------------------------------------

class MissingTemplates(Exception):
    """Some of a request's podSets name a PodTemplate its namespace does not have."""


def pod_count(request: Mapping) -> int:
    return sum(int(s.get("count") or 0) for s in request["spec"].get("podSets") or ())


def pods(request: Mapping, templates: Mapping[str, Mapping]) -> list[dict]:
    """The pods cluster-autoscaler simulates for a request (PodsForProvisioningRequest): `count`
    pods of each podSet's PodTemplate (`templates`: the request's namespace's, by name), named
    `{request}-{set}-{index}`, carrying the annotations of pods that consume it, their requests
    defaulted from their limits as every pod's are. Raises MissingTemplates with its message."""
    meta = request["metadata"]
    pod_sets = request["spec"].get("podSets") or ()
    missing = [s["podTemplateRef"]["name"] for s in pod_sets if s["podTemplateRef"]["name"] not in templates]
    if missing:
        raise MissingTemplates(f"missing pod templates, {len(pod_sets)} pod templates were referenced, "
                               f"{len(missing)} templates were missing: {','.join(missing)}")
    built = []
    for position, pod_set in enumerate(pod_sets):
        template = templates[pod_set["podTemplateRef"]["name"]].get("template") or {}
        annotations = {**((template.get("metadata") or {}).get("annotations") or {}),
                       CONSUME_PROVISIONING_REQUEST_ANNOTATION: meta["name"],
                       PROVISIONING_CLASS_ANNOTATION: request["spec"]["provisioningClassName"]}
        for index in range(pod_set["count"]):
            built.append({"metadata": {"name": f"{meta['name']}-{position}-{index}", "namespace": meta.get("namespace"),
                                       "labels": dict((template.get("metadata") or {}).get("labels") or {}),
                                       "annotations": annotations},
                          "spec": _with_requests_from_limits(template.get("spec") or {})})
    return built


def _with_requests_from_limits(spec: Mapping) -> dict:
    """A pod's spec as SetDefaults_Pod leaves it: a limit without a request is also the request."""
    def defaulted(container: Mapping) -> dict:
        resources = container.get("resources") or {}
        requests = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        return {**container, "resources": {**resources, "requests": requests}}

    return {**spec, **{key: [defaulted(c) for c in spec.get(key) or ()] for key in ("containers", "initContainers")}}


def consumed_request(pod: Mapping) -> str | None:
    """The name of the request a pod consumes, if it says one (either annotation cluster-autoscaler reads)."""
    annotations = pod["metadata"].get("annotations") or {}
    return annotations.get(CONSUME_PROVISIONING_REQUEST_ANNOTATION, annotations.get(DEPRECATED_CONSUME_ANNOTATION))


# --- conditions ----------------------------------------------------------------------------------

def condition(request: Mapping, kind: str) -> Mapping | None:
    return next((c for c in (request.get("status") or {}).get("conditions") or () if c.get("type") == kind), None)


def is_true(request: Mapping, kind: str) -> bool:
    found = condition(request, kind)
    return found is not None and found.get("status") == "True"


def with_condition(request: Mapping, kind: str, status: str, words: tuple[str, str], now: float, *,
                   observed: bool = True) -> dict:
    """The request with condition `kind` set, in place of the one of its type or appended
    (AddOrUpdateCondition). Its transition time is now, whether or not its status changed, as
    cluster-autoscaler writes it; `observedGeneration` as AddOrUpdateCondition sets it (`observed`),
    left out where cluster-autoscaler applies a Provisioned condition without one."""
    reason, message = words
    new = {"type": kind, "status": status, "lastTransitionTime": rfc3339(now), "reason": reason, "message": message}
    if observed:
        new["observedGeneration"] = request["metadata"].get("generation", 0)
    status_now = dict(request.get("status") or {})
    conditions = list(status_now.get("conditions") or ())
    position = next((i for i, c in enumerate(conditions) if c.get("type") == kind), None)
    if position is None:
        conditions.append(new)
    else:
        conditions[position] = new
    return {**request, "status": {**status_now, "conditions": conditions}}
