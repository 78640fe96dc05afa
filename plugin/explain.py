"""The answers of `why` and `plan`, pure: a group, its members and where each stands, and what
the controller decides for it on the cluster as read.

What is decided is the controller's own planning on the controller's own index (`decide`): the
groups that wait to be admitted, in its queue's order (priority, then when first seen: after a
restart, the oldest member's creation), planned by `plan_pass` with preemption as its flags set
it. It is what a controller just started would decide now: it remembers no backoff and no last
pass, which only delay a group, never place it elsewhere. For a group that waits the answer adds
what the pass does not keep: the nodes that came closest and what each lacks (`closest`), and
what the group could preempt at its priority, or why nothing (`preemption.preempt`).

Answers are plain dicts, the same for a table and for `-o json|yaml`.
"""

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone

from gangkeeper.controller.cache.groups import GANGS, GangView, Workloads, gang_for, settled_phase
from gangkeeper.controller.cache.holders import Candidate
from gangkeeper.controller.cache.index import ClusterIndex
from gangkeeper.controller.model.members import Group, GroupKey, Member
from gangkeeper.controller.model.objects import Workload
from gangkeeper.controller.planning.plans import Plan
from gangkeeper.controller.planning.preemption import Preemption, preempt
from gangkeeper.controller.planning.queue import (
    PREEMPTION_ATTEMPTS,
    Pass,
    QueuePolicy,
    Waiting,
    admission_view,
    incomplete_reason,
    plan_pass,
    queued,
)
from gangkeeper.names import DEFAULT_ACCELERATORS
from gangkeeper.plugin.closest import closest_nodes
from gangkeeper.resources import accelerator_count

POD_KINDS = frozenset({"pod", "pods", "po"})
GANG_KINDS = frozenset({"gang", "gangs", "gang.gangkeeper.io", GANGS})
EVENTS_SHOWN = 8
# Verdicts, as the answers name them.
FITS, PREEMPTS, WAITS, INCOMPLETE, PROBLEM, ADMITTED = "Fits", "Preempts", "Waits", "Incomplete", "Problem", "Admitted"


@dataclass(frozen=True)
class Planning:
    """How the controller answered for is set: its queue policy and topology labels
    (`--policy`, `--starvation-seconds`, `--zone-label`, `--rack-label`), whether it preempts
    (`--preemption`), and which resources are accelerators."""

    policy: QueuePolicy = field(default_factory=QueuePolicy)
    preemption: bool = True
    patterns: tuple[str, ...] = DEFAULT_ACCELERATORS


@dataclass(frozen=True)
class Decided:
    """One planning pass over the queue, as the controller's, and the queue in its order."""

    order: tuple[Group, ...]
    result: Pass

    def plan_of(self, key: GroupKey) -> Plan | None:
        return next((plan for group, plan in self.result.admitted if group.key == key), None)

    def preemption_of(self, key: GroupKey) -> Preemption | None:
        return next((found for group, found in self.result.preemptions if group.key == key), None)

    def waiting_of(self, key: GroupKey) -> Waiting | None:
        return next((waiting for waiting in self.result.waiting if waiting.group.key == key), None)


def decide(index: ClusterIndex, views: Iterable[GangView], planning: Planning, now: float) -> Decided:
    """The controller's planning of the groups still to be admitted (those its pass queues)."""
    queue = [admission_view(view.group) for view in views if _to_be_admitted(view)]
    candidates = index.preemption_candidates if planning.preemption else None
    result = plan_pass(queue, index.pool, index.ledger, now, planning.policy, index.occupancy, candidates)
    return Decided(tuple(queued(queue)), result)


def _to_be_admitted(view: GangView) -> bool:
    """Whether the controller's pass queues the group: no problem, under way, fewer than min count
    of its live members booked, all of them gated."""
    if view.problem or settled_phase(view) is not None:
        return False
    live = [m for m in view.group.members if not m.terminal]
    booked = [m for m in live if m.node or m.reserved_node]
    return len(booked) < view.group.min_count and all(m.gated for m in live)


# --- the questions -----------------------------------------------------------------------------


def find_group(index: ClusterIndex, views: Sequence[GangView], namespace: str,
               target: str) -> tuple[GangView, Workload | None] | None:
    """The group `target` names in the namespace — a pod (`pod/NAME`), a Gang (`gang/NAME`), or
    either or a group label (`NAME`) — and its Gang; None when it names none."""
    kind, _, name = target.rpartition("/")
    kind = kind.lower()
    in_namespace = [view for view in views if view.group.key[0] == namespace]
    if kind in POD_KINDS or not kind:
        facts = index.pods.get(f"{namespace}/{name}")
        uid = facts.member.uid if facts is not None and facts.group is not None else None
        view = next((v for v in in_namespace if any(m.uid == uid for m in v.group.members)), None)
        if view is not None:
            return view, gang_of(view, index.workloads)
    if kind in GANG_KINDS or not kind:
        gang = index.workloads.get((GANGS, namespace, name))
        if gang is not None:
            declared = [v for v in in_namespace if v.label == gang.group_name]
            view = next((v for v in declared if _part(v) and _part(v) in gang.name), next(iter(declared), None))
            if view is not None:
                return view, gang
    if not kind:
        view = next((v for v in in_namespace if name in (v.group.key[1], v.label)), None)
        if view is not None:
            return view, gang_of(view, index.workloads)
    return None


def gang_of(view: GangView, workloads: Workloads) -> Workload | None:
    """The group's Gang: the one declaring its label (a part's, for a group split in parts)."""
    namespace, part = view.group.key[0], _part(view)
    if part:
        declaring = [w for key, w in workloads.items()
                     if key[0] == GANGS and key[1] == namespace and w.group_name == view.label and part in w.name]
        if declaring:
            return min(declaring, key=lambda w: w.name)
    return gang_for(namespace, view.label, workloads)


def _part(view: GangView) -> str:
    """The part of its owner's group a group is (a JobSet stage, an MPIJob role), "" for a whole one."""
    return view.group.key[1][len(view.label) + 1:] if view.group.key[1] != view.label else ""


def why(index: ClusterIndex, views: Sequence[GangView], view: GangView, gang: Workload | None,
        events: Iterable[Mapping] | None, planning: Planning, now: float, unread: Iterable[str]) -> dict:
    """Where the group stands, why it waits in full, its place in the queue and its preemption
    options, and the Events about it (None: they could not be read)."""
    decided = decide(index, views, planning, now)
    return {"kind": "GangWhy", **group_answer(view, gang, index, decided, planning, now),
            "events": _events(events) if events is not None else None, "notRead": list(unread)}


def plan(index: ClusterIndex, views: Sequence[GangView], submitted: Collection[str], planning: Planning, now: float,
         left_out: Iterable[str] = (), warnings: Iterable[str] = (), unread: Iterable[str] = ()) -> dict:
    """For the groups of the pods `submitted` (their uids) made: as `why` says it, had they been
    created now; with the documents and pods left out, what the plan takes for granted
    (`warnings`), and what could not be read."""
    decided = decide(index, views, planning, now)
    mine = [view for view in views if any(member.uid in submitted for member in view.group.members)]
    return {"kind": "GangPlan",
            "groups": [group_answer(view, gang_of(view, index.workloads), index, decided, planning, now)
                       for view in mine],
            "leftOut": list(left_out), "warnings": list(warnings), "notRead": list(unread)}


# --- one group ---------------------------------------------------------------------------------


def group_answer(view: GangView, gang: Workload | None, index: ClusterIndex, decided: Decided, planning: Planning,
                 now: float) -> dict:
    group = view.group
    live = [member for member in group.members if not member.terminal]
    return {"namespace": group.key[0], "group": group.key[1], "gang": gang.name if gang is not None else None,
            "owner": f"{view.owner.kind} {view.owner.name}" if view.owner is not None else None,
            "foundBy": view.source, "minCount": group.min_count, "present": len(live), "priority": group.priority,
            "firstSeen": _rfc3339(group.first_seen),
            "members": [_member(member, planning.patterns) for member in group.members],
            "status": _status(gang), **_decision(view, index, decided, planning)}


def _member(member: Member, patterns: Sequence[str]) -> dict:
    return {"pod": member.name, "state": member_state(member), "node": member.node or member.reserved_node,
            "accelerators": accelerator_count([member.requests], patterns)}


def member_state(member: Member) -> str:
    """gated (nothing reserved), reserved (a node booked, still gated), released (gate removed,
    pinned, not bound yet), bound; or how it finished."""
    if member.terminal:
        return member.phase.lower()
    if member.node:
        return "bound"
    if not member.gated:
        return "released"
    return "reserved" if member.reserved_node else "gated"


def _status(gang: Workload | None) -> dict | None:
    """What the controller last wrote on the Gang, in its words."""
    if gang is None or not gang.status:
        return None
    status = gang.status
    admitted: Mapping = next((c for c in status.get("conditions") or () if c.get("type") == "Admitted"), {})
    return {"phase": status.get("phase"), "reason": status.get("reason"), "message": admitted.get("message"),
            "waitingSince": status.get("waitingSince")}


def _decision(view: GangView, index: ClusterIndex, decided: Decided, planning: Planning) -> dict:
    group = view.group
    if view.problem is not None:
        return {"verdict": PROBLEM, "constraint": view.problem[0], "reason": view.problem[1]}
    settled = settled_phase(view)
    live = [member for member in group.members if not member.terminal]
    if settled is not None:
        bound = sum(1 for m in live if m.node)
        return {"verdict": settled, "reason": f"{bound} of {len(live)} live members bound"}
    if not _to_be_admitted(view):
        counts = {state: sum(1 for m in live if member_state(m) == state) for state in ("bound", "released", "reserved")}
        return {"verdict": ADMITTED, "reason": f"admitted: {counts['bound']} bound, {counts['released']} released "
                                               f"(waiting for the scheduler), {counts['reserved']} reserved (to be "
                                               f"released)"}
    key = group.key
    if key not in {g.key for g in decided.order}:
        return {"verdict": INCOMPLETE, "reason": f"waiting for its pods: {incomplete_reason(group)}"}
    queue = _queue(key, decided)
    plan_now = decided.plan_of(key)
    if plan_now is not None:
        return {"verdict": FITS, "reason": "it fits now: the controller reserves these nodes at its next pass and "
                                           "then releases the members", "placement": _placement(plan_now),
                "queue": queue}
    preempting = decided.preemption_of(key)
    if preempting is not None:
        return {"verdict": PREEMPTS, "reason": "it fits once lower-priority work is preempted: the controller "
                                               "reserves these nodes, preempts, and releases the members once the "
                                               "victims are gone", "placement": _placement(preempting.plan),
                "queue": queue, "preemption": {"victims": _victims(preempting, index),
                                               "reason": f"taken whole, all of priority below {group.priority}"}}
    waiting = decided.waiting_of(key)
    admission = admission_view(group)
    answer: dict[str, object] = {"verdict": WAITS, "reason": waiting.reason if waiting is not None else "it waits", "queue": queue,
              "closest": closest_nodes(admission, index.pool, index.ledger, index.occupancy),
              "preemption": _preemption_options(admission, index, decided, planning)}
    if waiting is not None and waiting.no_fit is not None:
        answer["constraint"] = ", ".join(waiting.no_fit.limiting) or None
        answer["placeable"] = {"members": waiting.no_fit.placeable, "of": waiting.no_fit.needed}
    return answer


def _placement(found: Plan) -> dict:
    nodes: dict[str, list[str]] = {}
    for member, node in found.assignments:
        nodes.setdefault(node, []).append(member.name)
    return {"domain": found.domain, "nodes": [{"node": node, "pods": sorted(pods)} for node, pods in sorted(nodes.items())]}


def _queue(key: GroupKey, decided: Decided) -> dict:
    """Its place among the groups waiting to be admitted, and what the pass decides for those ahead."""
    order = [group.key for group in decided.order]
    position = order.index(key)
    ahead = [{"group": f"{k[0]}/{k[1]}", "priority": group.priority, "verdict": _verdict_in_pass(k, decided)}
             for k, group in zip(order[:position], decided.order[:position])]
    return {"position": position + 1, "of": len(order), "ahead": ahead}


def _verdict_in_pass(key: GroupKey, decided: Decided) -> str:
    if decided.plan_of(key) is not None:
        return FITS
    return PREEMPTS if decided.preemption_of(key) is not None else WAITS


def _preemption_options(group: Group, index: ClusterIndex, decided: Decided, planning: Planning) -> dict:
    """What the group could preempt at its priority, or why nothing."""
    if not planning.preemption:
        return {"victims": [], "reason": "preemption is off (the controller runs with --preemption=Never)"}
    if not group.preempts:
        return {"victims": [], "reason": "its PriorityClass says preemptionPolicy: Never: it never preempts"}
    candidates = index.preemption_candidates(group.priority)
    if not candidates:
        return {"victims": [], "reason": f"no running group or pod of priority below {group.priority} holds capacity"}
    found = preempt(group, candidates, index.pool, index.ledger, planning.policy.topology, index.occupancy)
    if found is None:
        return {"victims": [], "reason": f"taking all {len(candidates)} groups and pods of priority below "
                                         f"{group.priority} would still leave no room for it"}
    first = next(iter(decided.result.preemptions), None)
    later = (f"{first[0]} preempts first in this pass" if first is not None else
             f"at most {PREEMPTION_ATTEMPTS} groups a pass look for victims, and those ahead of it look first")
    return {"victims": _victims(found, index), "reason": f"it could take their place; {later}"}


def _victims(found: Preemption, index: ClusterIndex) -> list[dict]:
    return [_victim(candidate, index) for candidate in found.victims]


def _victim(candidate: Candidate, index: ClusterIndex) -> dict:
    view = index.view(candidate.group) if candidate.group is not None else None
    owner = view.owner if view is not None else None
    return {"name": candidate.name, "kind": "group" if candidate.group is not None else "pod",
            "owner": f"{owner.kind} {owner.name}" if owner is not None else None, "priority": candidate.priority,
            "pods": len(candidate.members), "accelerators": candidate.accelerators,
            "nodes": sorted({m.node or m.reserved_node or "" for m in candidate.members})}


def _events(events: Iterable[Mapping]) -> list[dict]:
    """The newest Events, oldest first, as `kubectl describe` lists them."""
    shown = [{"lastSeen": _event_time(event), "type": event.get("type"), "reason": event.get("reason"),
              "object": f"{(event.get('involvedObject') or {}).get('kind')}/{(event.get('involvedObject') or {}).get('name')}",
              "message": event.get("message"), "count": event.get("count") or 1} for event in events]
    return sorted(shown, key=lambda event: event["lastSeen"] or "")[-EVENTS_SHOWN:]


def _event_time(event: Mapping) -> str | None:
    return (event.get("lastTimestamp") or event.get("eventTime") or event.get("firstTimestamp")
            or (event.get("metadata") or {}).get("creationTimestamp"))


def _rfc3339(moment: float) -> str:
    return datetime.fromtimestamp(moment, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
