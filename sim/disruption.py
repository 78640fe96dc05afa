"""PodDisruptionBudgets (policy/v1): their rules, and kube-controller-manager's disruption
controller, which keeps every budget's status.

For each budget the controller (pkg/controller/disruption, v1.36) counts:
- its pods: those of its namespace its selector matches (a missing selector matches none, an
  empty one every pod), in every phase, terminating ones included;
- `expectedPods` and `desiredHealthy`: an integer `minAvailable` is `desiredHealthy` itself, over
  as many expected pods as it matches. A percentage `minAvailable`, and any `maxUnavailable`, are
  counted against the replicas of the pods' controllers, read through their scale subresource,
  each controller once, percentages rounded up (for `maxUnavailable` too). A pod without a
  controller is left out (unmanaged); a pod whose controller has no scale subresource fails the
  sync. Of the kinds the emulation serves only the PyTorchJob has one (its CRD's, over
  `spec.pytorchReplicaSpecs.Worker.replicas`): a percentage or `maxUnavailable` budget over Job
  or JobSet pods fails with `jobs.batch does not implement the scale subresource`, as the
  documentation warns (for pods of other controllers only an integer `minAvailable` works);
- `currentHealthy`: pods Ready (the Ready condition True, whatever the phase) that are neither
  terminating nor recorded by an eviction in `disruptedPods` less than two minutes ago;
- `disruptionsAllowed`: currentHealthy − desiredHealthy, never below 0, and 0 while no pod is
  expected; `observedGeneration`: the budget's generation; the `DisruptionAllowed` condition:
  True `SufficientPods` while a disruption is allowed, False `InsufficientPods` otherwise;
- `disruptedPods`: an eviction's entry stays while its pod is there, not terminating, and its two
  minutes are not up; the controller syncs the budget again when they are.
A failed sync is the controller's fail-safe: `disruptionsAllowed` 0 and the condition False
`SyncFailed` with the error as message, the rest of the status as it was (a budget that never
synced keeps `observedGeneration` 0, so evictions are told it is still being processed).

Not modelled: the Events (NoPods, UnmanagedPods, CalculateExpectedPodCountFailed, NotDeleted),
the Deployment, ReplicaSet, StatefulSet and ReplicationController finders (the emulation serves
none of those kinds), the cleanup of a stale DisruptionTarget condition on a pod an eviction
never deleted (the emulated eviction deletes in the commit that sets it) and the informer resync.
A pod's change re-syncs every budget that selects it (upstream: the first one found).
"""

import re
from collections.abc import Mapping

from sim.admission import selector_requirements
from sim.api import APIError, ClusterAPI, WatchEvent, service_account
from sim.clock import epoch, rfc3339
from sim.kinds import Registry
from sim.names import PODS, PYTORCHJOBS
from sim.patching import JSON_PATCH
from sim.selectors import matches
from sim.status import FieldError

PODDISRUPTIONBUDGETS = "poddisruptionbudgets"
DISRUPTION_CONTROLLER = service_account("kube-system", "disruption-controller")
DISRUPTION_ALLOWED = "DisruptionAllowed"
SUFFICIENT_PODS = "SufficientPods"
INSUFFICIENT_PODS = "InsufficientPods"
SYNC_FAILED = "SyncFailed"
ALWAYS_ALLOW = "AlwaysAllow"
IF_HEALTHY_BUDGET = "IfHealthyBudget"
# How long an eviction's entry in disruptedPods keeps its pod out of currentHealthy.
DELETION_TIMEOUT = 120.0
# The scale subresources of the kinds served, as their CRDs declare them: (resource, path of the
# replica count). The emulated API server itself serves no /scale.
SCALED = {("kubeflow.org", "PyTorchJob"): (PYTORCHJOBS, ("spec", "pytorchReplicaSpecs", "Worker", "replicas"))}
_PERCENT = re.compile(r"^[0-9]+%$")
_PERCENT_HELP = ("a valid percent string must be a numeric string followed by an ending '%' "
                 "(e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')")
_POLICIES = (ALWAYS_ALLOW, IF_HEALTHY_BUDGET)
_COUNTS = ("disruptionsAllowed", "currentHealthy", "desiredHealthy", "expectedPods")
Key = tuple[str, str]


class SyncFailure(Exception):
    """A budget whose status cannot be computed; the message is upstream's error."""


# --- which pods, and which are healthy ----------------------------------------------------------

def selects(budget: Mapping, pod: Mapping) -> bool:
    """Whether the budget covers the pod: its namespace, and a selector matching its labels."""
    if budget["metadata"].get("namespace") != pod["metadata"].get("namespace"):
        return False
    selector = (budget.get("spec") or {}).get("selector")
    if selector is None:
        return False
    requirements = selector_requirements(selector)
    return requirements is None or matches(requirements, pod["metadata"].get("labels"))


def is_healthy(pod: Mapping) -> bool:
    """`IsPodReady`, which is what the budget counts as healthy: the Ready condition is True."""
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or ())


def is_terminating(pod: Mapping) -> bool:
    return bool(pod["metadata"].get("deletionTimestamp"))


# --- expected and desired -----------------------------------------------------------------------

def scaled(value: int | str, total: int) -> int:
    """An int-or-percent of `total`, a percentage rounded up (`GetScaledValueFromIntOrPercent`)."""
    if isinstance(value, int):
        return value
    return -(-int(value.rstrip("%")) * total // 100)


def counts_controllers(spec: Mapping) -> bool:
    """Whether the budget is counted against its pods' controllers rather than its pods."""
    return spec.get("maxUnavailable") is not None or isinstance(spec.get("minAvailable"), str)


def controller_of(pod: Mapping) -> Mapping | None:
    return next((r for r in pod["metadata"].get("ownerReferences") or () if r.get("controller")), None)


def scale_of(reference: Mapping, kinds: Registry) -> tuple[str, tuple[str, ...]]:
    """(resource, path of the replica count) of the scale subresource of the controller `reference`
    names; SyncFailure, worded as upstream's, when its kind is not served or has none."""
    api_version, kind_name = reference.get("apiVersion", ""), reference.get("kind", "")
    kind = kinds.by_kind(api_version, kind_name)
    if kind is None:
        raise SyncFailure(f'no matches for kind "{kind_name}" in version "{api_version}"')
    scale = SCALED.get((kind.group, kind.kind))
    if scale is None:
        raise SyncFailure(f"{kind.qualified_resource} does not implement the scale subresource")
    return scale


def replicas_at(controller: Mapping, path: tuple[str, ...]) -> int:
    """The replica count a custom resource's scale shows: the value at the path, 0 when it is not set."""
    node = controller
    for part in path:
        node = node.get(part) if isinstance(node, Mapping) else None
    return node if isinstance(node, int) else 0


def expected_scale(pods: list[Mapping], replicas: Mapping[str, int], kinds: Registry) -> int:
    """`getExpectedScale`: the replicas of the pods' controllers, each counted once; `replicas` holds
    those of the controllers found, by uid. A pod without a controller is left out."""
    scales: dict[str, int] = {}
    for pod in sorted(pods, key=lambda p: p["metadata"]["name"]):
        reference = controller_of(pod)
        if reference is None or reference.get("uid") in scales:
            continue
        scale_of(reference, kinds)  # a kind without a scale subresource fails the sync here
        if reference.get("uid") not in replicas:
            raise SyncFailure(f'found no controllers for pod "{pod["metadata"]["name"]}"')
        scales[reference["uid"]] = replicas[reference["uid"]]
    return sum(scales.values())


def expected_and_desired(spec: Mapping, pods: list[Mapping], replicas: Mapping[str, int],
                         kinds: Registry) -> tuple[int, int]:
    """`getExpectedPodCount`: (expectedPods, desiredHealthy); neither field set expects nothing."""
    max_unavailable, min_available = spec.get("maxUnavailable"), spec.get("minAvailable")
    if max_unavailable is not None:
        expected = expected_scale(pods, replicas, kinds)
        return expected, max(expected - scaled(max_unavailable, expected), 0)
    if isinstance(min_available, int):
        return len(pods), min_available
    if min_available is not None:
        expected = expected_scale(pods, replicas, kinds)
        return expected, scaled(min_available, expected)
    return 0, 0


# --- disrupted and healthy pods -----------------------------------------------------------------

def still_disrupted(recorded: Mapping[str, str], pods: list[Mapping], now: float) -> tuple[dict[str, str], float | None]:
    """`buildDisruptedPodMap`: the entries of disruptedPods whose pod is there, not terminating, and
    within its two minutes, and the moment the first of those runs out (None without any)."""
    kept: dict[str, str] = {}
    for pod in pods:
        name = pod["metadata"]["name"]
        if not is_terminating(pod) and name in recorded and now < epoch(recorded[name]) + DELETION_TIMEOUT:
            kept[name] = recorded[name]
    recheck = min((epoch(moment) + DELETION_TIMEOUT for moment in kept.values()), default=None)
    return kept, recheck


def count_healthy(pods: list[Mapping], disrupted: Mapping[str, str]) -> int:
    """`countHealthyPods`: Ready pods neither terminating nor in `disrupted` (entries still running)."""
    return sum(1 for pod in pods if not is_terminating(pod) and pod["metadata"]["name"] not in disrupted
               and is_healthy(pod))


# --- the status ---------------------------------------------------------------------------------

def initial_status() -> dict:
    """The status every budget is created with, whatever the client sent: zero counts, no conditions."""
    return {"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0}


def condition(status: str, reason: str, message: str, observed_generation: int, now_text: str) -> dict:
    """A metav1.Condition of type DisruptionAllowed; observedGeneration 0 is left out (omitempty)."""
    out = {"type": DISRUPTION_ALLOWED, "status": status}
    if observed_generation:
        out["observedGeneration"] = observed_generation
    out.update(lastTransitionTime=now_text, reason=reason, message=message)
    return out


def allowed_condition(disruptions_allowed: int, observed_generation: int, now_text: str) -> dict:
    """`UpdateDisruptionAllowedCondition`: SufficientPods while a disruption is allowed, else InsufficientPods."""
    if disruptions_allowed > 0:
        return condition("True", SUFFICIENT_PODS, "", observed_generation, now_text)
    return condition("False", INSUFFICIENT_PODS, "", observed_generation, now_text)


def set_condition(conditions: list[Mapping], new: Mapping) -> list[dict]:
    """`meta.SetStatusCondition`: the condition of its type replaced, keeping its lastTransitionTime
    while its status stays; appended when there is none."""
    out = [dict(c) for c in conditions]
    for index, old in enumerate(out):
        if old.get("type") == new["type"]:
            kept = old.get("lastTransitionTime") if old.get("status") == new["status"] else None
            out[index] = dict(new, lastTransitionTime=kept or new["lastTransitionTime"])
            return out
    return out + [dict(new)]


def find_condition(status: Mapping, kind: str = DISRUPTION_ALLOWED) -> Mapping | None:
    return next((c for c in status.get("conditions") or () if c.get("type") == kind), None)


def conditions_up_to_date(budget: Mapping) -> bool:
    """`ConditionsAreUpToDate`: the DisruptionAllowed condition agrees with disruptionsAllowed, observed."""
    status = budget.get("status") or {}
    current = find_condition(status)
    if current is None or status.get("observedGeneration", 0) != budget["metadata"].get("generation", 0):
        return False
    if status.get("disruptionsAllowed", 0) > 0:
        return current.get("status") == "True" and current.get("reason") == SUFFICIENT_PODS
    return current.get("status") == "False" and current.get("reason") == INSUFFICIENT_PODS


def synced_status(budget: Mapping, healthy: int, desired: int, expected: int, disrupted: Mapping[str, str],
                  now_text: str) -> dict:
    """`updatePdbStatus`: the status from the counts, the stored one when nothing in it would change."""
    allowed = healthy - desired if expected > 0 and healthy > desired else 0
    status = budget.get("status") or {}
    generation = budget["metadata"].get("generation", 0)
    if (status.get("currentHealthy"), status.get("desiredHealthy"), status.get("expectedPods"),
            status.get("disruptionsAllowed"), status.get("disruptedPods") or {}, status.get("observedGeneration", 0)) \
            == (healthy, desired, expected, allowed, disrupted, generation) and conditions_up_to_date(budget):
        return dict(status)
    new: dict = {"observedGeneration": generation}
    if disrupted:
        new["disruptedPods"] = dict(disrupted)
    new.update(disruptionsAllowed=allowed, currentHealthy=healthy, desiredHealthy=desired, expectedPods=expected)
    new["conditions"] = set_condition(status.get("conditions") or [], allowed_condition(allowed, generation, now_text))
    return new


def fail_safe(budget: Mapping, error: str, now_text: str) -> dict:
    """`failSafe`: no disruption allowed, the condition saying why; the rest of the status kept."""
    status = dict(budget.get("status") or {}, disruptionsAllowed=0)
    failed = condition("False", SYNC_FAILED, error, status.get("observedGeneration", 0), now_text)
    status["conditions"] = set_condition(status.get("conditions") or [], failed)
    return status


def budget_status(budget: Mapping, pods: list[Mapping], replicas: Mapping[str, int], kinds: Registry,
                  now: float) -> tuple[dict, float | None]:
    """One sync (`trySync`, or `failSafe` when it fails): the status the budget should have, and when
    to sync it again for an entry of disruptedPods running out (None: no need). `replicas`: those of
    the pods' controllers found, by uid."""
    now_text = rfc3339(now)
    try:
        expected, desired = expected_and_desired(budget.get("spec") or {}, pods, replicas, kinds)
    except SyncFailure as failure:
        return fail_safe(budget, str(failure), now_text), None
    disrupted, recheck = still_disrupted((budget.get("status") or {}).get("disruptedPods") or {}, pods, now)
    return synced_status(budget, count_healthy(pods, disrupted), desired, expected, disrupted, now_text), recheck


# --- validation ---------------------------------------------------------------------------------

def validate_spec(budget: Mapping) -> list[FieldError]:
    """`ValidatePodDisruptionBudgetSpec`, as create and update run it. Not checked: the label keys
    and values of the selector."""
    spec = budget.get("spec") or {}
    errors = []
    if spec.get("minAvailable") is not None and spec.get("maxUnavailable") is not None:
        errors.append(FieldError("spec", "Invalid", "minAvailable and maxUnavailable cannot be both set", spec))
    for field in ("minAvailable", "maxUnavailable"):
        if spec.get(field) is not None:
            errors += _int_or_percent(f"spec.{field}", spec[field])
    for index, expression in enumerate((spec.get("selector") or {}).get("matchExpressions") or ()):
        errors += _selector_requirement(f"spec.selector.matchExpressions[{index}]", expression)
    policy = spec.get("unhealthyPodEvictionPolicy")
    if policy is not None and policy not in _POLICIES:
        errors.append(FieldError("spec.unhealthyPodEvictionPolicy", "NotSupported", '"AlwaysAllow", "IfHealthyBudget"',
                                 policy))
    return errors


def validate_status(budget: Mapping) -> list[FieldError]:
    """`ValidatePodDisruptionBudgetStatusUpdate` for policy/v1: no count below zero."""
    status = budget.get("status") or {}
    return [FieldError(f"status.{field}", "Invalid", "must be greater than or equal to 0", status[field])
            for field in _COUNTS if isinstance(status.get(field), int) and status[field] < 0]


def _int_or_percent(path: str, value: int | str) -> list[FieldError]:
    if isinstance(value, int):
        return [FieldError(path, "Invalid", "must be greater than or equal to 0", value)] if value < 0 else []
    if not _PERCENT.match(value):
        return [FieldError(path, "Invalid", _PERCENT_HELP, value)]
    if int(value[:-1]) > 100:
        return [FieldError(path, "Invalid", "must not be greater than 100%", value)]
    return []


def _selector_requirement(path: str, expression: Mapping) -> list[FieldError]:
    operator, values = expression.get("operator"), expression.get("values") or ()
    if operator in ("In", "NotIn"):
        return [] if values else [FieldError(f"{path}.values", "Required",
                                             "must be specified when `operator` is 'In' or 'NotIn'")]
    if operator in ("Exists", "DoesNotExist"):
        return [FieldError(f"{path}.values", "Forbidden",
                           "may not be specified when `operator` is 'Exists' or 'DoesNotExist'")] if values else []
    return [FieldError(f"{path}.operator", "Invalid", "not a valid selector operator", operator)]


# --- the controller -----------------------------------------------------------------------------

def key_of(obj: Mapping) -> Key:
    return obj["metadata"].get("namespace", ""), obj["metadata"]["name"]


class DisruptionController:
    """The disruption controller of kube-controller-manager (see the module docstring)."""

    resources = (PODS, PODDISRUPTIONBUDGETS)

    def __init__(self, api: ClusterAPI, *, kinds: Registry | None = None):
        """`kinds`: what the API server serves, to tell a controller kind it lacks from one without scale."""
        self.api = api
        self.kinds = kinds or Registry()
        self.pods: dict[str, dict[str, dict]] = {}  # namespace → name → pod
        self.budgets: dict[str, dict[str, dict]] = {}  # namespace → name → budget
        self.dirty: set[Key] = set()
        self.rechecks: dict[Key, float] = {}  # budget → when an entry of its disruptedPods runs out

    def observe(self, event: WatchEvent, now: float) -> None:
        namespace, name = key_of(event.object)
        if event.resource == PODDISRUPTIONBUDGETS:
            budgets = self.budgets.setdefault(namespace, {})
            if event.type == "DELETED":
                budgets.pop(name, None)
                self.rechecks.pop((namespace, name), None)
            else:
                budgets[name] = event.object
                self.dirty.add((namespace, name))
            return
        pods = self.pods.setdefault(namespace, {})
        before = pods.pop(name, None)
        if event.type != "DELETED":
            pods[name] = event.object
        self.dirty |= {(namespace, budget_name) for budget_name, budget in self.budgets.get(namespace, {}).items()
                       if selects(budget, event.object) or (before is not None and selects(budget, before))}

    def step(self, now: float) -> bool:
        for key in [key for key, moment in self.rechecks.items() if moment <= now]:
            del self.rechecks[key]
            self.dirty.add(key)
        dirty, self.dirty = sorted(self.dirty), set()
        wrote = False
        for key in dirty:
            wrote |= self._sync(key, now)
        return wrote

    def next_due(self) -> float | None:
        return min(self.rechecks.values(), default=None)

    def _sync(self, key: Key, now: float) -> bool:
        namespace, name = key
        budget = self.budgets.get(namespace, {}).get(name)
        if budget is None:
            return False
        pods = [pod for pod in self.pods.get(namespace, {}).values() if selects(budget, pod)]
        replicas = self._replicas(pods) if counts_controllers(budget.get("spec") or {}) else {}
        status, recheck = budget_status(budget, pods, replicas, self.kinds, now)
        if recheck is None:
            self.rechecks.pop(key, None)
        else:
            self.rechecks[key] = recheck
        if status == budget.get("status"):
            return False
        try:
            # UpdateStatus: refused when the budget changed since it was read (its event is on its way).
            written = self.api.patch(PODDISRUPTIONBUDGETS, name, [
                {"op": "test", "path": "/metadata/resourceVersion", "value": budget["metadata"]["resourceVersion"]},
                {"op": "add", "path": "/status", "value": status}],
                namespace=namespace, patch_type=JSON_PATCH, subresource="status", user=DISRUPTION_CONTROLLER)
        except APIError:
            return False
        self.budgets[namespace][name] = written
        return True

    def _replicas(self, pods: list[dict]) -> dict[str, int]:
        """The replicas of the pods' controllers that have a scale subresource, read from the API, by uid."""
        found: dict[str, int] = {}
        for pod in pods:
            reference = controller_of(pod)
            if reference is None or reference.get("uid") in found:
                continue
            try:
                resource, path = scale_of(reference, self.kinds)
                controller = self.api.get(resource, reference.get("name", ""), namespace=pod["metadata"]["namespace"])
            except (SyncFailure, APIError):
                continue  # no scale to read: the sync says so
            if controller["metadata"].get("uid") == reference.get("uid"):
                found[reference["uid"]] = replicas_at(controller, path)
        return found
