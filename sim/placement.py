"""Where the default kube-scheduler would put one pod: a pure function of the pod and the nodes.

It follows the filter plugins of the default profile in their order — NodeUnschedulable,
TaintToleration, NodeAffinity (nodeSelector and required node affinity), NodeResourcesFit —
stops at the first plugin that rejects a node, as the scheduler does, and keeps its reasons
word for word so that the `0/6 nodes are available: ...` message reads like the real one.
Scoring is NodeResourcesFit's LeastAllocated (the default) or MostAllocated over cpu and
memory (the default resource weights). Not modelled: preemption, inter-pod (anti-)affinity,
topology spread, host ports, volumes, balanced allocation, image locality, non-zero request
defaults in scoring, and the random choice among equally scored nodes (ties go to the first
node in the order given, so that runs are reproducible).
"""

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction

from gangkeeper.names import PIN_FIELD
from gangkeeper.quantity import parse_quantity
from gangkeeper.resources import Resources
from sim.names import NOT_READY_TAINT, UNSCHEDULABLE_TAINT

LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
STRATEGIES = (LEAST_ALLOCATED, MOST_ALLOCATED)
DEFAULT_WEIGHTS = {"cpu": 1, "memory": 1}
MAX_NODE_SCORE = 100
FILTERED_EFFECTS = ("NoSchedule", "NoExecute")

REASON_UNSCHEDULABLE = "node(s) were unschedulable"
REASON_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
REASON_TOO_MANY_PODS = "Too many pods"


def exact(value: Fraction | int) -> Fraction | int:
    """Whole quantities as ints: the same exact value, compared and added many times faster."""
    return value.numerator if value.denominator == 1 else value


def exact_resources(resources: Mapping[str, Fraction]) -> Resources:
    return {name: exact(value) for name, value in resources.items()}


@dataclass(frozen=True)
class NodeFacts:
    """What the filters read of a node, parsed once per node version."""

    name: str
    labels: Mapping[str, str]
    taints: tuple[Mapping, ...]
    unschedulable: bool
    allocatable: Resources
    max_pods: int


@dataclass
class NodeUsage:
    """Σ requests and count of the non-terminal pods bound to a node."""

    requested: Resources = field(default_factory=dict)
    pods: int = 0


@dataclass(frozen=True)
class Scoring:
    strategy: str = LEAST_ALLOCATED
    weights: Mapping[str, int] = field(default_factory=lambda: dict(DEFAULT_WEIGHTS))

    def __post_init__(self):
        if self.strategy not in STRATEGIES:
            raise ValueError(f"scoring strategy {self.strategy!r} is not known; use one of {', '.join(STRATEGIES)}")


@dataclass(frozen=True)
class Decision:
    """The chosen node, or for each rejection reason how many nodes gave it."""

    node: str | None
    reasons: Counter
    node_count: int

    def message(self) -> str:
        """The scheduler's FitError text: reasons as `count reason`, sorted, comma-separated."""
        histogram = sorted(f"{count} {reason}" for reason, count in self.reasons.items())
        text = f"0/{self.node_count} nodes are available"
        return f"{text}: {', '.join(histogram)}." if histogram else f"{text}."


def node_facts(node: Mapping) -> NodeFacts:
    """Parse a Node; a node that is not Ready carries the not-ready NoSchedule taint, as the
    node lifecycle controller would have put it there."""
    spec = node.get("spec") or {}
    status = node.get("status") or {}
    taints = tuple(spec.get("taints") or ())
    if not is_ready(node):
        taints += ({"key": NOT_READY_TAINT, "effect": "NoSchedule"},)
    allocatable = {name: exact(parse_quantity(value)) for name, value in (status.get("allocatable") or {}).items()}
    max_pods = int(allocatable.pop("pods", 0))
    return NodeFacts(node["metadata"]["name"], dict(node["metadata"].get("labels") or {}), taints,
                     bool(spec.get("unschedulable")), allocatable, max_pods)


def is_ready(node: Mapping) -> bool:
    conditions = (node.get("status") or {}).get("conditions") or ()
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def static_reasons(pod: Mapping, node: NodeFacts) -> tuple[str, ...]:
    """Rejections that do not depend on what runs on the node (first failing plugin only)."""
    spec = pod.get("spec") or {}
    tolerations = spec.get("tolerations") or ()
    if node.unschedulable and not tolerates(tolerations, {"key": UNSCHEDULABLE_TAINT, "effect": "NoSchedule"}):
        return (REASON_UNSCHEDULABLE,)
    for taint in node.taints:
        if taint.get("effect") in FILTERED_EFFECTS and not tolerates(tolerations, taint):
            return (f"node(s) had untolerated taint {{{taint.get('key', '')}: {taint.get('value', '')}}}",)
    if not matches_node_affinity(spec, node):
        return (REASON_AFFINITY,)
    return ()


def resource_reasons(requests: Mapping[str, Fraction], node: NodeFacts, usage: NodeUsage) -> tuple[str, ...]:
    """NodeResourcesFit: the pod slot first, then every resource that is short."""
    if usage.pods + 1 > node.max_pods:
        return (REASON_TOO_MANY_PODS,)
    return tuple(
        f"Insufficient {name}"
        for name, wanted in sorted(requests.items())
        if wanted > node.allocatable.get(name, 0) - usage.requested.get(name, 0)
    )


def place(pod: Mapping, requests: Mapping[str, Fraction], nodes: Iterable[NodeFacts],
          usage: Mapping[str, NodeUsage], scoring: Scoring = Scoring(),
          static: Mapping[str, tuple[str, ...]] | None = None) -> Decision:
    """Filter every node, score the feasible ones, pick the best. `static` may hold
    `static_reasons` already computed per node name (they change only when nodes do)."""
    reasons: Counter = Counter()
    best: tuple[int, str] | None = None
    count = 0
    for node in nodes:
        count += 1
        used = usage.get(node.name) or NodeUsage()
        rejected = static[node.name] if static is not None else static_reasons(pod, node)
        rejected = rejected or resource_reasons(requests, node, used)
        if rejected:
            reasons.update(rejected)
            continue
        node_score = score(requests, node, used, scoring)
        if best is None or node_score > best[0]:
            best = (node_score, node.name)
    return Decision(best[1] if best else None, reasons, count)


def score(requests: Mapping[str, Fraction], node: NodeFacts, usage: NodeUsage, scoring: Scoring) -> int:
    """NodeResourcesFit scoring with the scheduler's integer arithmetic; resources the node
    does not have are left out of the weighted mean."""
    total = weight_sum = 0
    for name, weight in scoring.weights.items():
        capacity = node.allocatable.get(name, 0)
        if not capacity:
            continue
        requested = usage.requested.get(name, 0) + requests.get(name, 0)
        if scoring.strategy == MOST_ALLOCATED:
            resource_score = int(min(requested, capacity) * MAX_NODE_SCORE // capacity)
        else:
            resource_score = 0 if requested > capacity else int((capacity - requested) * MAX_NODE_SCORE // capacity)
        total += resource_score * weight
        weight_sum += weight
    return total // weight_sum if weight_sum else 0


def tolerates(tolerations: Iterable[Mapping], taint: Mapping) -> bool:
    return any(toleration_matches(t, taint) for t in tolerations)


def toleration_matches(toleration: Mapping, taint: Mapping) -> bool:
    """v1 Toleration.ToleratesTaint: empty effect matches all effects, empty key with Exists
    matches all keys, operator Equal (the default) compares values."""
    if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
        return False
    if toleration.get("key") and toleration["key"] != taint.get("key"):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    if operator == "Equal":
        return bool(toleration.get("key")) and (toleration.get("value") or "") == (taint.get("value") or "")
    return False


def matches_node_affinity(spec: Mapping, node: NodeFacts) -> bool:
    """nodeSelector (every pair) and required node affinity (any term) must both match."""
    selector = spec.get("nodeSelector") or {}
    if any(node.labels.get(key) != value for key, value in selector.items()):
        return False
    node_affinity = (spec.get("affinity") or {}).get("nodeAffinity") or {}
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is None:
        return True
    return any(term_matches(term, node) for term in required.get("nodeSelectorTerms") or ())


def term_matches(term: Mapping, node: NodeFacts) -> bool:
    """All expressions and fields of a term must match; an empty term matches no node."""
    expressions = term.get("matchExpressions") or ()
    fields = term.get("matchFields") or ()
    if not expressions and not fields:
        return False
    node_fields = {PIN_FIELD: node.name}
    return (all(requirement_matches(e, node.labels) for e in expressions)
            and all(requirement_matches(f, node_fields) for f in fields))


def requirement_matches(requirement: Mapping, values: Mapping[str, str]) -> bool:
    key = requirement.get("key", "")
    operator = requirement.get("operator")
    wanted = requirement.get("values") or ()
    present = key in values
    if operator == "In":
        return present and values[key] in wanted
    if operator == "NotIn":
        return not present or values[key] not in wanted
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if operator in ("Gt", "Lt") and present and len(wanted) == 1:
        try:
            have, bound = int(values[key]), int(wanted[0])
        except ValueError:
            return False
        return have > bound if operator == "Gt" else have < bound
    return False
