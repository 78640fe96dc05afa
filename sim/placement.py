"""Where the default kube-scheduler would put one pod: a pure function of the pod and the nodes.

NodeAffinity's PreFilter goes first: a pod whose every required node-affinity term names nodes
by `matchFields metadata.name In` (gangkeeper's pin) is tried on those nodes only, and every other
node counts as "didn't satisfy plugin(s) [NodeAffinity]". Then the filter plugins of the default
profile in their order — NodeUnschedulable, TaintToleration, NodeAffinity (nodeSelector and
required node affinity), NodePorts, NodeResourcesFit, PodTopologySpread, InterPodAffinity,
DynamicResources (the last three given per pod as `Checks`, from `sim.spread`, `sim.interpod`
and `sim.dra`) — stopping at the first plugin that rejects a node, as the scheduler does, with
its reasons word for word so that the `0/6 nodes are available: ...` message reads like the real
one (a PreFilter that refuses the pod everywhere gives its own message instead). `Decision.message`
is the FitError's filters' part; what the PostFilter plugins add (DynamicResources' verdict and
DefaultPreemption's, `sim.preemption`) the scheduler appends. `Decision.rejections` keeps each
filtered node's reasons, which preemption reads to know where removing pods may help, and
`filter_node` is the filter chain for one node, which its dry run reruns with pods taken away
(`usage_with`).

Scoring is NodeResourcesFit's LeastAllocated (the default) or MostAllocated over cpu and memory
(the default resource weights), plus PodTopologySpread's score for ScheduleAnyway constraints at
its default weight of 2. Not modelled: volumes, preferred (anti-)affinity,
balanced allocation, image locality, taint and node-affinity preferences, non-zero request
defaults in scoring, and the random choice among equally scored nodes (ties go to the first
node in the order given, so that runs are reproducible).
"""

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Protocol

from sim.names import NODE_NAME_FIELD, NOT_READY_TAINT, UNSCHEDULABLE_TAINT
from sim.resources import Resources, scheduled_amounts
from sim.selectors import is_label_key, is_label_value, parse_int64

LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
STRATEGIES = (LEAST_ALLOCATED, MOST_ALLOCATED)
DEFAULT_WEIGHTS = {"cpu": 1, "memory": 1}
MAX_NODE_SCORE = 100
FILTERED_EFFECTS = ("NoSchedule", "NoExecute")

SPREAD_WEIGHT = 2  # PodTopologySpread's weight in the default profile; NodeResourcesFit's is 1
DEFAULT_PROTOCOL = "TCP"
ANY_HOST_IP = "0.0.0.0"

REASON_UNSCHEDULABLE = "node(s) were unschedulable"
REASON_TAINTS = "node(s) had untolerated taint(s)"
REASON_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
REASON_NOT_PINNED = "node(s) didn't satisfy plugin(s) [NodeAffinity]"
REASON_PIN_CONFLICT = "pod affinity terms conflict"
REASON_PORTS = "node(s) didn't have free ports for the requested pod ports"
REASON_TOO_MANY_PODS = "Too many pods"
INSUFFICIENT = "Insufficient "  # NodeResourcesFit's reason, followed by the resource's name

HostPort = tuple[str, str, int]  # (host IP, protocol, port)


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
    """Σ requests, count and host ports of the non-terminal pods bound to a node."""

    requested: Resources = field(default_factory=dict)
    pods: int = 0
    ports: Counter = field(default_factory=Counter)


NOTHING_USED = NodeUsage()  # read only, for nodes nothing is bound to


@dataclass(frozen=True)
class PodUse:
    """What one pod takes of its node: its requests and host ports (and one pod slot)."""

    requests: Resources
    ports: tuple[HostPort, ...] = ()


def usage_with(usage: NodeUsage, added: Iterable[PodUse] = (), removed: Iterable[PodUse] = ()) -> NodeUsage:
    """A node's usage with some pods added and others taken away; `usage` is left as it is."""
    requested = dict(usage.requested)
    ports = Counter(usage.ports)
    pods = usage.pods
    for use, sign in [(u, 1) for u in added] + [(u, -1) for u in removed]:
        for name, value in use.requests.items():
            requested[name] = exact(requested.get(name, 0) + sign * value)
        for port in use.ports:
            ports[port] += sign
        pods += sign
    return NodeUsage(requested, pods, +ports)


@dataclass(frozen=True)
class Scoring:
    strategy: str = LEAST_ALLOCATED
    weights: Mapping[str, int] = field(default_factory=lambda: dict(DEFAULT_WEIGHTS))

    def __post_init__(self):
        if self.strategy not in STRATEGIES:
            raise ValueError(f"scoring strategy {self.strategy!r} is not known; use one of {', '.join(STRATEGIES)}")


@dataclass(frozen=True)
class Decision:
    """The chosen node, or for each rejection reason how many nodes gave it (or the message of a
    PreFilter that refused the pod everywhere); `plan` is what DynamicResources will write.
    `rejections` holds the reasons of every node the filters ran on and rejected (not those
    NodeAffinity's PreFilter left out), in the order the nodes were given."""

    node: str | None
    reasons: Counter
    node_count: int
    failure: str = ""
    plan: object = None
    rejections: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # node the filters ran on → why not

    def message(self) -> str:
        """The scheduler's FitError text: reasons as `count reason`, sorted, comma-separated."""
        text = f"0/{self.node_count} nodes are available"
        if self.failure:
            return f"{text}: {self.failure}."
        histogram = sorted(f"{count} {reason}" for reason, count in self.reasons.items())
        return f"{text}: {', '.join(histogram)}." if histogram else f"{text}."


class NodeCheck(Protocol):
    def reason(self, node: NodeFacts) -> str | None: ...


class ClaimCheck(NodeCheck, Protocol):
    plans: Mapping[str, object]  # per node that passed: what binding there writes


class Scores(Protocol):
    def __call__(self, feasible: list[NodeFacts]) -> Mapping[str, int] | None: ...


@dataclass
class Checks:
    """What PreFilter found for one pod beyond its own spec: filters that depend on what runs
    where, in the order the scheduler runs them, the extended resources DRA serves where a node
    does not list them, a PreFilter's refusal, and ScheduleAnyway spread scores."""

    spread: NodeCheck | None = None
    affinity: NodeCheck | None = None
    claims: ClaimCheck | None = None
    served_by_dra: frozenset[str] = frozenset()
    failure: str = ""
    spread_scores: Scores | None = None

    def reason(self, node: NodeFacts) -> str | None:
        for check in (self.spread, self.affinity, self.claims):
            if check is not None:
                reason = check.reason(node)
                if reason:
                    return reason
        return None

    def plan(self, node: str | None) -> object:
        return self.claims.plans.get(node) if node and self.claims is not None else None


NO_CHECKS = Checks()


def node_facts(node: Mapping) -> NodeFacts:
    """Parse a Node; a node that is not Ready carries the not-ready NoSchedule taint, as the
    node lifecycle controller would have put it there."""
    spec = node.get("spec") or {}
    status = node.get("status") or {}
    taints = tuple(spec.get("taints") or ())
    if not is_ready(node):
        taints += ({"key": NOT_READY_TAINT, "effect": "NoSchedule"},)
    allocatable = exact_resources(scheduled_amounts(status.get("allocatable") or {}))
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
    if any(taint.get("effect") in FILTERED_EFFECTS and not tolerates(tolerations, taint) for taint in node.taints):
        return (REASON_TAINTS,)
    if not matches_node_affinity(spec, node):
        return (REASON_AFFINITY,)
    return ()


def pinned_nodes(spec: Mapping) -> frozenset[str] | None:
    """NodeAffinity's PreFilter: the nodes the required terms name by `metadata.name In`, or None
    when some term names none (terms are ORed, so then every node may match)."""
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    terms = (required or {}).get("nodeSelectorTerms") or ()
    if not terms:
        return None
    names: set[str] = set()
    for term in terms:
        named = [frozenset(f.get("values") or ()) for f in term.get("matchFields") or ()
                 if f.get("key") == NODE_NAME_FIELD and f.get("operator") == "In"]
        if not named:
            return None
        names |= frozenset.intersection(*named)
    return frozenset(names)


def host_ports(pod: Mapping) -> tuple[HostPort, ...]:
    """The host ports the pod's containers ask for (NodePorts reads app containers only)."""
    return tuple(sorted((p.get("hostIP") or ANY_HOST_IP, p.get("protocol") or DEFAULT_PROTOCOL, int(p["hostPort"]))
                        for c in (pod.get("spec") or {}).get("containers") or ()
                        for p in c.get("ports") or () if int(p.get("hostPort") or 0) > 0))


def ports_conflict(wanted: Iterable[HostPort], used: Counter) -> bool:
    """A port is taken on the same protocol and port when either side binds every address."""
    return any(count and (used_protocol, used_port) == (protocol, port) and (ip == used_ip or ANY_HOST_IP in (ip, used_ip))
               for ip, protocol, port in wanted for (used_ip, used_protocol, used_port), count in used.items())


def resource_reasons(requests: Mapping[str, Fraction], node: NodeFacts, usage: NodeUsage,
                     served_by_dra: frozenset[str] = frozenset()) -> tuple[str, ...]:
    """NodeResourcesFit: the pod slot first, then every resource that is short; an extended
    resource a DeviceClass serves is left to DynamicResources on nodes that do not list it."""
    if usage.pods + 1 > node.max_pods:
        return (REASON_TOO_MANY_PODS,)
    short = [name for name, wanted in sorted(requests.items())
             if wanted > node.allocatable.get(name, 0) - usage.requested.get(name, 0)]
    if short and served_by_dra:
        short = [name for name in short if name not in served_by_dra or node.allocatable.get(name)]
    return tuple(INSUFFICIENT + name for name in short)


def filter_node(requests: Mapping[str, Fraction], node: NodeFacts, used: NodeUsage, static: tuple[str, ...],
                ports: tuple[HostPort, ...], checks: Checks) -> tuple[str, ...]:
    """The filter plugins on one node, after the static ones (`static`: their rejection), up to
    the first that rejects it: its reasons, or () when the pod fits."""
    if static:
        return static
    if ports and ports_conflict(ports, used.ports):
        return (REASON_PORTS,)
    rejected = resource_reasons(requests, node, used, checks.served_by_dra)
    if rejected:
        return rejected
    reason = checks.reason(node)
    return (reason,) if reason else ()


def place(pod: Mapping, requests: Mapping[str, Fraction], nodes: Iterable[NodeFacts],
          usage: Mapping[str, NodeUsage], scoring: Scoring = Scoring(),
          static: Mapping[str, tuple[str, ...]] | None = None, checks: Checks = NO_CHECKS) -> Decision:
    """Filter every node, score the feasible ones, pick the best. `static` may hold
    `static_reasons` already computed per node name (they change only when nodes do); `checks`
    holds the pod's filters that depend on other pods, devices and claims."""
    nodes = list(nodes)
    spec = pod.get("spec") or {}
    pinned = pinned_nodes(spec)
    if pinned is not None and not pinned:
        return Decision(None, Counter(), len(nodes), REASON_PIN_CONFLICT)
    if checks.failure:
        return Decision(None, Counter(), len(nodes), checks.failure)
    ports = host_ports(pod)
    spread_scores = checks.spread_scores
    reasons: Counter = Counter()
    rejections: dict[str, tuple[str, ...]] = {}
    feasible: list[tuple[NodeFacts, int]] = []  # kept only when spread scores need all of them
    best: tuple[int, str] | None = None
    for node in nodes:
        if pinned is not None and node.name not in pinned:
            reasons[REASON_NOT_PINNED] += 1
            continue
        used = usage.get(node.name) or NOTHING_USED
        rejected = filter_node(requests, node, used, static[node.name] if static is not None
                               else static_reasons(pod, node), ports, checks)
        if rejected:
            reasons.update(rejected)
            rejections[node.name] = rejected
            continue
        fit = score(requests, node, used, scoring)
        if spread_scores is not None:
            feasible.append((node, fit))
        elif best is None or fit > best[0]:
            best = (fit, node.name)
    if spread_scores is not None:
        best = with_spread(feasible, spread_scores([n for n, _ in feasible]))
    chosen = best[1] if best else None
    return Decision(chosen, reasons, len(nodes), plan=checks.plan(chosen), rejections=rejections)


def with_spread(feasible: list[tuple[NodeFacts, int]], spread: Mapping[str, int] | None) -> tuple[int, str] | None:
    """The highest total of fit and weighted spread score; the first node of the highest on a tie."""
    best: tuple[int, str] | None = None
    for node, fit in feasible:
        total = fit + (SPREAD_WEIGHT * spread.get(node.name, 0) if spread else 0)
        if best is None or total > best[0]:
            best = (total, node.name)
    return best


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
    """v1 Toleration.ToleratesTaint: an empty effect matches every effect, an empty key every key
    (the API server admits an empty key with Exists only), Exists every value, and Equal (the
    default) compares values."""
    if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
        return False
    if toleration.get("key") and toleration["key"] != taint.get("key"):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    if operator == "Equal":
        return (toleration.get("value") or "") == (taint.get("value") or "")
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
    """All expressions and fields of a term must match. An empty term matches no node, and neither
    does a term the scheduler cannot parse (component-helpers `nodeaffinity`: a term with an error
    is set aside, its error ignored): see `expression_parses` and `field_parses`."""
    expressions = term.get("matchExpressions") or ()
    fields = term.get("matchFields") or ()
    if not expressions and not fields:
        return False
    if not all(map(expression_parses, expressions)) or not all(map(field_parses, fields)):
        return False
    node_fields = {NODE_NAME_FIELD: node.name}
    return (all(requirement_matches(e, node.labels) for e in expressions)
            and all(requirement_matches(f, node_fields) for f in fields))


def expression_parses(requirement: Mapping) -> bool:
    """Whether apimachinery's `labels.NewRequirement` accepts a `matchExpressions` entry: a label
    key; values for In and NotIn, none for Exists and DoesNotExist, exactly one integer
    (`strconv.ParseInt`) for Gt and Lt; and every value a label value. The API server checks
    only the key and the number of values, so a pod may carry a value that never matches
    (`Gt: "-1"` is no label value)."""
    operator = requirement.get("operator")
    values = requirement.get("values") or ()
    if not is_label_key(requirement.get("key", "")) or not all(map(is_label_value, values)):
        return False
    if operator in ("In", "NotIn"):
        return bool(values)
    if operator in ("Exists", "DoesNotExist"):
        return not values
    if operator in ("Gt", "Lt"):
        return len(values) == 1 and parse_int64(values[0]) is not None
    return False


def field_parses(requirement: Mapping) -> bool:
    """Whether a `matchFields` entry makes a field selector: In or NotIn with exactly one value."""
    return requirement.get("operator") in ("In", "NotIn") and len(requirement.get("values") or ()) == 1


def requirement_matches(requirement: Mapping, values: Mapping[str, str]) -> bool:
    """`labels.Requirement.Matches`, for a requirement that parses (`matchFields` ones are read
    against the node's name: the API server admits no other field)."""
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
        have, bound = parse_int64(values[key]), parse_int64(wanted[0])
        if have is None or bound is None:
            return False
        return have > bound if operator == "Gt" else have < bound
    return False
