"""Our ProvisioningRequests, read into `model.capacity.CapacityRequest` (the informer's transform)."""

import sys
from collections.abc import Mapping

from gangkeeper import names
from gangkeeper.controller.model.capacity import Answer, CapacityRequest, attempt_of
from gangkeeper.controller.reading.pods import epoch

# The conditions that answer a request, the strongest first (`Answer`'s order).
_ANSWERS = (Answer.FAILED, Answer.CAPACITY_REVOKED, Answer.BOOKING_EXPIRED, Answer.PROVISIONED, Answer.ACCEPTED)


def capacity_request_from_api(obj: Mapping) -> CapacityRequest | None:
    """A request of ours as the autoscaler answered it; None for one gangkeeper did not make."""
    metadata = obj.get("metadata") or {}
    labels = metadata.get("labels") or {}
    gang = labels.get(names.CAPACITY_FOR_LABEL)
    if gang is None:
        return None
    conditions = {c.get("type"): c for c in (obj.get("status") or {}).get("conditions") or () if isinstance(c, Mapping)}
    answer, since, message = Answer.PENDING, epoch(metadata.get("creationTimestamp")) or 0.0, ""
    for kind in _ANSWERS:
        condition = conditions.get(kind.value)
        if condition is not None and condition.get("status") == "True":
            answer = kind
            since = epoch(condition.get("lastTransitionTime")) or since
            message = ": ".join(part for part in (condition.get("reason"), condition.get("message")) if part)
            break
    spec = obj.get("spec") or {}
    templates = tuple(str((pod_set.get("podTemplateRef") or {}).get("name", "")) for pod_set in spec.get("podSets") or ()
                      if isinstance(pod_set, Mapping))
    return CapacityRequest(namespace=sys.intern(metadata.get("namespace", "")), name=metadata.get("name", ""),
                           uid=metadata.get("uid", ""), gang=gang, attempt=attempt_of(labels),
                           provisioning_class=spec.get("provisioningClassName", ""),
                           answer=answer, since=since, message=message, templates=tuple(t for t in templates if t),
                           deleting=bool(metadata.get("deletionTimestamp")))
