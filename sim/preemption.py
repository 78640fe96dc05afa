"""Pod preemption as kube-scheduler's DefaultPreemption PostFilter plugin decides it: a pure
function of the pod, the nodes the filters rejected, the pods on them and a fit function.

When a pod fits nowhere, the plugin
1. asks whether the pod may preempt at all (PodEligibleToPreemptOthers): not with
   `preemptionPolicy: Never`, and not while a lower-priority pod on the node it is already
   nominated to is still terminating because the scheduler preempted it (unless the filters now
   call that node unresolvable); the pod's nomination is then left as it is;
2. takes as potential nodes only those whose rejection removing pods could change: the filters'
   `Unschedulable` verdicts (free host ports, pod slots and resources — unless the pod asks for
   more of a resource than the node has at all —, spread skew, pod anti-affinity), not their
   `UnschedulableAndUnresolvable` ones (unschedulable, taints, node affinity and the pin, pod
   affinity, missing topology labels, devices);
3. per potential node (SelectVictimsOnNode): every pod of strictly lower priority is a potential
   victim ("No preemption victims found for incoming pod" when there is none); with all of them
   removed the filters must pass (else their reasons stand for the node); then, most important
   first (higher priority, then earlier start), each is added back and stays if the pod still
   fits — the rest are the victims;
4. among the nodes with victims (pickOneNodeForPreemption) takes the one whose most important
   victim has the lowest priority, then the smallest sum of victims' priorities, then the
   fewest victims, then the latest start of the most important victims;
5. with no candidate at all, says why as a FitError over every node ("Preemption is not
   helpful for scheduling" for the nodes it did not try) and clears the pod's nomination;
   otherwise nominates the pod to the chosen node and says nothing.
The dry run stops once it has max(10% of the potential nodes, 100) candidates, as the plugin's
default arguments have it.

Not modelled: PodDisruptionBudgets (no budget is read, so no victim violates one: upstream
first tries to reprieve the victims that would, and prefers the node with the fewest
violations; that criterion would come first in `pick_candidate`, and those victims before the
others in `select_victims`' reprieve), extenders, the random offset the dry run starts at (here
the first potential node), and randomness among equal choices: victims that tie on priority and
start time keep the order they are given in, and of equally good nodes the first given wins.
Pods that have not started count as started at `now` (upstream reads the clock for each).
"""

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from sim.interpod import REASON_ANTI_AFFINITY, REASON_EXISTING_ANTI_AFFINITY
from sim.placement import INSUFFICIENT, REASON_PORTS, REASON_TOO_MANY_PODS, Decision, NodeFacts
from sim.spread import REASON_SKEW

NEVER = "Never"
PREFIX = "preemption: "
NOT_ELIGIBLE_NEVER = "not eligible due to preemptionPolicy=Never."
NOT_ELIGIBLE_TERMINATING = "not eligible due to a terminating pod on the nominated node."
NO_VICTIMS = "No preemption victims found for incoming pod"
NOT_HELPFUL = "Preemption is not helpful for scheduling"
MIN_CANDIDATE_NODES_PERCENTAGE = 10
MIN_CANDIDATE_NODES_ABSOLUTE = 100
PRIORITY_OFFSET = 2 ** 31  # makes every priority count positively in a sum, as upstream adds MaxInt32+1

# Filter verdicts that removing pods can change (the plugins' Unschedulable); "Insufficient X" is
# one unless the pod asks for more X than the node has at all. Any other reason is
# UnschedulableAndUnresolvable, DynamicResources' among them (devices stay allocated in the dry run).
RESOLVABLE = frozenset({REASON_PORTS, REASON_TOO_MANY_PODS, REASON_SKEW, REASON_ANTI_AFFINITY,
                        REASON_EXISTING_ANTI_AFFINITY})


@dataclass(frozen=True)
class Resident:
    """A pod bound to a node, as preemption weighs it."""

    key: str
    priority: int
    started: float  # status.startTime (seconds); a pod not started yet: now
    deleting: bool = False  # has a deletionTimestamp
    preempted: bool = False  # carries DisruptionTarget=True, reason PreemptionByScheduler

    @property
    def terminating_by_preemption(self) -> bool:
        return self.deleting and self.preempted


@dataclass(frozen=True)
class Preemptor:
    priority: int
    policy: str  # spec.preemptionPolicy
    nominated: str | None  # status.nominatedNodeName


@dataclass(frozen=True)
class Candidate:
    node: str
    victims: tuple[Resident, ...]  # most important first


@dataclass(frozen=True)
class Verdict:
    """What the plugin says and does. `words`: its part of the Unschedulable message (empty when it
    nominated a node); `nominate`: the node to nominate the pod to, None to clear the nomination,
    unless `keeps_nomination`; `victims`: the pods to evict from that node."""

    words: str
    nominate: str | None = None
    keeps_nomination: bool = False
    victims: tuple[Resident, ...] = ()


Fit = Callable[[str, frozenset[str]], tuple[str, ...]]  # node, keys of pods taken away → filters' reasons
Residents = Callable[[str, int], Sequence[Resident]]  # node, priority → its pods of lower priority, in a stable order


def may_help(reasons: Iterable[str], requests: Mapping[str, Fraction | int], node: NodeFacts) -> bool:
    """Whether removing pods from the node could change the filters' rejection."""
    for reason in reasons:
        if reason.startswith(INSUFFICIENT):
            name = reason[len(INSUFFICIENT):]
            if requests.get(name, 0) > node.allocatable.get(name, 0):
                return False
        elif reason not in RESOLVABLE:
            return False
    return True


def potential_nodes(decision: Decision, requests: Mapping[str, Fraction | int],
                    nodes: Mapping[str, NodeFacts]) -> list[str]:
    """The rejected nodes where preemption may help, in the decision's node order."""
    return [name for name, reasons in decision.rejections.items()
            if name in nodes and may_help(reasons, requests, nodes[name])]


def more_important_first(pods: Iterable[Resident]) -> list[Resident]:
    """Higher priority first, then the earlier started; ties keep their order."""
    return sorted(pods, key=lambda p: (-p.priority, p.started))


def select_victims(priority: int, node: str, residents: Sequence[Resident], fit: Fit) -> Candidate | tuple[str, ...]:
    """The pods of lower priority that must go for the pod to fit on the node — all taken away,
    then each added back, most important first, while the pod still fits — or why it cannot."""
    potential = [p for p in residents if p.priority < priority]
    if not potential:
        return (NO_VICTIMS,)
    removed = frozenset(p.key for p in potential)
    reasons = fit(node, removed)
    if reasons:
        return reasons
    victims = []
    for pod in more_important_first(potential):
        reprieved = removed - {pod.key}
        if fit(node, reprieved):
            victims.append(pod)
        else:
            removed = reprieved
    return Candidate(node, tuple(victims))


def pick_candidate(candidates: Sequence[Candidate]) -> Candidate:
    """The best node to preempt on; each criterion decides only among the ones the previous tied."""
    criteria = (
        lambda c: -c.victims[0].priority,
        lambda c: -sum(v.priority + PRIORITY_OFFSET for v in c.victims),
        lambda c: -len(c.victims),
        lambda c: min(v.started for v in c.victims if v.priority == c.victims[0].priority),
    )
    remaining = list(candidates)
    for score in criteria:
        best = max(score(c) for c in remaining)
        remaining = [c for c in remaining if score(c) == best]
        if len(remaining) == 1:
            break
    return remaining[0]


def candidates_wanted(potential: int) -> int:
    """How many candidates the dry run looks for before it stops."""
    return min(max(potential * MIN_CANDIDATE_NODES_PERCENTAGE // 100, MIN_CANDIDATE_NODES_ABSOLUTE), potential)


def ineligibility(preemptor: Preemptor, potential: Sequence[str], residents: Residents) -> str | None:
    """Why the pod may not preempt now, or None."""
    if preemptor.policy == NEVER:
        return NOT_ELIGIBLE_NEVER
    nominated = preemptor.nominated
    if nominated and nominated in potential and any(
            p.terminating_by_preemption for p in residents(nominated, preemptor.priority)):
        return NOT_ELIGIBLE_TERMINATING
    return None


def post_filter(preemptor: Preemptor, potential: Sequence[str], residents: Residents, fit: Fit,
                node_count: int) -> Verdict:
    """DefaultPreemption's PostFilter for a pod the filters refused on every one of `node_count`
    nodes; `potential` are the nodes where removing pods may help."""
    why = ineligibility(preemptor, potential, residents)
    if why:
        return Verdict(PREFIX + why, keeps_nomination=True)
    statuses: dict[str, tuple[str, ...]] = {}
    candidates: list[Candidate] = []
    wanted = candidates_wanted(len(potential))
    for node in potential:
        found = select_victims(preemptor.priority, node, residents(node, preemptor.priority), fit)
        if isinstance(found, Candidate):
            candidates.append(found)
            if len(candidates) >= wanted:
                break
        else:
            statuses[node] = found
    if not candidates:
        reasons = Counter(reason for found in statuses.values() for reason in found)
        if node_count > len(statuses):
            reasons[NOT_HELPFUL] += node_count - len(statuses)
        return Verdict(PREFIX + Decision(None, reasons, node_count).message())
    chosen = pick_candidate(candidates)
    return Verdict("", chosen.node, victims=chosen.victims)
