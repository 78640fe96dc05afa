"""Our ProvisioningRequests, read into `model.capacity.CapacityRequest` (the informer's transform)."""

import sys
from collections.abc import Mapping

from gangkeeper import names
from gangkeeper.controller.model.capacity import Answer, CapacityRequest, attempt_of
from gangkeeper.controller.reading.pods import epoch

# The conditions that answer a request, the strongest first, each with the answer it gives when
# True; `Provisioned=False` for want of capacity is an answer too (`Answer.NOT_FOUND`).
_ANSWERS = (("Failed", Answer.FAILED), ("CapacityRevoked", Answer.CAPACITY_REVOKED),
            ("BookingExpired", Answer.BOOKING_EXPIRED), ("Provisioned", Answer.PROVISIONED),
            ("Accepted", Answer.ACCEPTED))


def capacity_request_from_api(obj: Mapping) -> CapacityRequest | None:
    """A request of ours as the autoscaler answered it; None for one gangkeeper did not make."""
    metadata = obj.get("metadata") or {}
    labels = metadata.get("labels") or {}
    gang = labels.get(names.CAPACITY_FOR_LABEL)
    if gang is None:
        return None
    conditions = {c.get("type"): c for c in (obj.get("status") or {}).get("conditions") or () if isinstance(c, Mapping)}
    answer, since, message = Answer.PENDING, epoch(metadata.get("creationTimestamp")) or 0.0, ""
    for kind, given in _ANSWERS:
        condition = conditions.get(kind)
        reason = condition.get("reason") if condition is not None else None
        if condition is not None and condition.get("status") == "True":
            answer = Answer.CONSUMED if given is Answer.BOOKING_EXPIRED and reason == names.BOOKING_CONSUMED_REASON else given
        elif kind == "Provisioned" and condition is not None and reason == names.CAPACITY_NOT_FOUND_REASON:
            answer = Answer.NOT_FOUND
        else:
            continue
        since = epoch(condition.get("lastTransitionTime")) or since
        message = ": ".join(part for part in (reason, condition.get("message")) if part)
        break
    spec = obj.get("spec") or {}
    templates = tuple(str((pod_set.get("podTemplateRef") or {}).get("name", "")) for pod_set in spec.get("podSets") or ()
                      if isinstance(pod_set, Mapping))
    return CapacityRequest(namespace=sys.intern(metadata.get("namespace", "")), name=metadata.get("name", ""),
                           uid=metadata.get("uid", ""), gang=gang, attempt=attempt_of(labels),
                           provisioning_class=spec.get("provisioningClassName", ""),
                           answer=answer, since=since, message=message, templates=tuple(t for t in templates if t),
                           deleting=bool(metadata.get("deletionTimestamp")))
