"""The decisions of the Eviction API (POST pods/NAME/eviction, body a policy/v1 Eviction), as
kube-apiserver v1.36 makes them (pkg/registry/core/pod/storage/eviction.go); the reads and writes
are `sim.apiserver.APIServer.create_eviction`'s.

- A pod that is Succeeded, Failed or Pending, or already terminating, is deleted without a look
  at any budget.
- Otherwise the budgets of its namespace that select it decide: none, it is deleted; more than
  one, a 500 (the eviction subresource does not support it). With one: a pod that is not Ready is
  deleted without taking a disruption when the budget's `unhealthyPodEvictionPolicy` is
  AlwaysAllow, or when the budget is healthy enough (currentHealthy ≥ desiredHealthy > 0); any
  other pod takes one: refused with 429 TooManyRequests while the disruption controller has not
  observed the budget's generation (Retry-After 10 s) or the budget allows none, otherwise
  `disruptionsAllowed` goes down by one and the pod is recorded in `disruptedPods`.
- Deleting is: the condition DisruptionTarget (True, EvictionByEvictionAPI, "Eviction API:
  evicting") written on the pod, then the pod deleted with the Eviction's deleteOptions (grace
  period, preconditions, propagation policy), gracefully as any DELETE. Dry run changes nothing.
- The answer is a Status: Success with code 201.

Not modelled: the conflict retries (the emulated server reads the pod and its budget and writes
both under one lock, so nothing changes in between: the 429 a real server answers when an
unhealthy pod became Ready meanwhile never happens) and `ignoreStoreReadErrorWithClusterBreakingPotential`.
A failed precondition refuses the eviction before the budget is touched (upstream takes the
disruption first, and the disruption controller gives it back two minutes later).
"""

from collections.abc import Mapping

from sim.api import APIError
from sim.disruption import (
    ALWAYS_ALLOW,
    SYNC_FAILED,
    allowed_condition,
    find_condition,
    is_healthy,
    is_terminating,
    selects,
    set_condition,
)
from sim.names import DISRUPTION_TARGET
from sim.status import bad_request, forbidden, status

EVICTION_KIND = {"group": "policy", "version": "v1", "kind": "Eviction"}
ACCEPTED_VERSIONS = ("policy/v1", "policy/v1beta1")
EVICTION_REASON = "EvictionByEvictionAPI"
EVICTION_MESSAGE = "Eviction API: evicting"
DISRUPTION_BUDGET_CAUSE = "DisruptionBudget"
VIOLATION = "Cannot evict pod as it would violate the pod's disruption budget."
# Upstream refuses to record more evictions the disruption controller has not confirmed.
MAX_DISRUPTED_PODS = 2000
_PENDING_RETRY_SECONDS = 10


def eviction(namespace: str, name: str, grace_period_seconds: int | None = None) -> dict:
    """The Eviction a client POSTs for the pod, with a grace period when one is given."""
    body: dict = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": namespace}}
    if grace_period_seconds is not None:
        body["deleteOptions"] = {"gracePeriodSeconds": grace_period_seconds}
    return body


def check_request(namespace: str, name: str, body: Mapping) -> None:
    """400 for an Eviction of another API version, namespace or pod than the path names."""
    api_version = body.get("apiVersion")
    if api_version and api_version not in ACCEPTED_VERSIONS:
        raise bad_request(f"the API version in the data ({api_version}) does not match the expected API version "
                          f"({ACCEPTED_VERSIONS[0]})")
    metadata = body.get("metadata") or {}
    if metadata.get("namespace", namespace) != namespace:
        raise bad_request("the namespace of the provided object does not match the namespace sent on the request")
    if metadata.get("name") != name:
        raise bad_request("name in URL does not match name in Eviction object")


def can_ignore_budgets(pod: Mapping) -> bool:
    """Terminal pods have disrupted already; Pending ones count for nothing; terminating ones are going."""
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed", "Pending") or is_terminating(pod)


def budget_to_charge(pod: Mapping, budgets: list[Mapping]) -> Mapping | None:
    """The budget the eviction takes a disruption from; None when the pod goes without taking one."""
    covering = [budget for budget in budgets if selects(budget, pod)]
    if len(covering) > 1:
        raise APIError({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                        "message": "This pod has more than one PodDisruptionBudget, which the eviction subresource "
                                   "does not support.", "code": 500})
    if not covering:
        return None
    budget = covering[0]
    if is_healthy(pod):
        return budget
    spec, budget_status = budget.get("spec") or {}, budget.get("status") or {}
    desired = budget_status.get("desiredHealthy", 0)
    if spec.get("unhealthyPodEvictionPolicy") == ALWAYS_ALLOW or budget_status.get("currentHealthy", 0) >= desired > 0:
        return None
    return budget


def charged(budget: Mapping, pod_name: str, now_text: str) -> dict:
    """`checkAndDecrement`: the budget's status with one disruption taken for the pod, or the refusal.
    (Validation keeps disruptionsAllowed from going below zero, so upstream's 403 for that never comes.)"""
    name, current = budget["metadata"]["name"], budget.get("status") or {}
    if current.get("observedGeneration", 0) < budget["metadata"].get("generation", 0):
        raise too_many_requests(f"The disruption budget {name} is still being processed by the server.",
                                _PENDING_RETRY_SECONDS)
    disrupted = current.get("disruptedPods") or {}
    if len(disrupted) > MAX_DISRUPTED_PODS:
        raise forbidden("policy", "poddisruptionbudget", name,
                        "DisruptedPods map too big - too many evictions not confirmed by PDB controller")
    allowed = current.get("disruptionsAllowed", 0)
    if allowed <= 0:
        raise too_many_requests(refusal_cause(budget))
    new = dict(current, disruptionsAllowed=allowed - 1, disruptedPods={**disrupted, pod_name: now_text})
    if allowed == 1:
        new["conditions"] = set_condition(current.get("conditions") or [],
                                          allowed_condition(0, current.get("observedGeneration", 0), now_text))
    return new


def refusal_cause(budget: Mapping) -> str:
    """Why a budget allowing no disruption refuses, as the cause of the 429 says it."""
    name, current = budget["metadata"]["name"], budget.get("status") or {}
    condition = find_condition(current)
    explained = condition is not None and condition.get("status") == "False" and condition.get("message")
    if explained and condition.get("reason") == SYNC_FAILED:
        return f"The disruption budget {name} does not allow evicting pods currently because it failed sync: " \
               f"{condition['message']}"
    if current.get("currentHealthy", 0) <= current.get("desiredHealthy", 0):
        return f"The disruption budget {name} needs {current.get('desiredHealthy', 0)} healthy pods and has " \
               f"{current.get('currentHealthy', 0)} currently"
    if explained:
        return f"The disruption budget {name} does not allow evicting pods currently " \
               f"({condition.get('reason', '')}): {condition['message']}"
    return f"The disruption budget {name} does not allow evicting pods currently"


def too_many_requests(cause: str, retry_after_seconds: int = 0) -> APIError:
    """`NewTooManyRequests` with the DisruptionBudget cause; retryAfterSeconds 0 is left out."""
    details: dict = {"causes": [{"reason": DISRUPTION_BUDGET_CAUSE, "message": cause}]}
    if retry_after_seconds:
        details["retryAfterSeconds"] = retry_after_seconds
    return APIError(status(429, "TooManyRequests", VIOLATION, details))


def precondition_conflict(pod: Mapping, preconditions: Mapping) -> APIError | None:
    """The 409 for deleteOptions.preconditions the pod does not meet, worded as the eviction's own check."""
    meta = pod["metadata"]
    uid, version = preconditions.get("uid"), preconditions.get("resourceVersion")
    if uid and uid != meta.get("uid"):
        why = (f"the UID in the precondition ({uid}) does not match the UID in record ({meta.get('uid')}). "
               "The object might have been deleted and then recreated")
    elif version and version != meta.get("resourceVersion"):
        why = (f"the ResourceVersion in the precondition ({version}) does not match the ResourceVersion in record "
               f"({meta.get('resourceVersion')}). The object might have been modified")
    else:
        return None
    return APIError(status(409, "Conflict", f'Operation cannot be fulfilled on Pod "{meta["name"]}": {why}',
                           {"name": meta["name"], "kind": "Pod"}))


def with_disruption_target(pod: Mapping, now_text: str) -> dict:
    """The pod's status with the DisruptionTarget condition (`UpdatePodCondition`: an existing one
    replaced in place, keeping its lastTransitionTime while its status stays), observing the pod's
    generation."""
    current = pod.get("status") or {}
    condition: dict = {"type": DISRUPTION_TARGET}
    if pod["metadata"].get("generation"):
        condition["observedGeneration"] = pod["metadata"]["generation"]
    condition.update(status="True", lastProbeTime=None, lastTransitionTime=now_text, reason=EVICTION_REASON,
                     message=EVICTION_MESSAGE)
    conditions = list(current.get("conditions") or ())
    for index, old in enumerate(conditions):
        if old.get("type") == DISRUPTION_TARGET:
            if old.get("status") == "True":
                condition["lastTransitionTime"] = old.get("lastTransitionTime", now_text)
            conditions[index] = condition
            break
    else:
        conditions.append(condition)
    return dict(current, conditions=conditions)
