"""A group taking the place of lower-priority work (`planning.preemption` chose the victims): its
room booked at once, on top of the victims, which are taken whole and without harm (a group's
owner suspended, any other group's members deleted, a lone pod evicted); its members released
once the victims are gone, or at the latest when the bind timeout says the room was lost.

A running group's elastic extras, its members beyond its min count, are taken alone: deleted,
each pod by its uid, while the group runs on. Deleting is how an elastic job shrinks (torchrun
carries on with the nodes left, at or above its minimum, and its operator recreates the pod,
gated, to wait for room again), but it is still taking a user's pod: it is said loudly, a
Warning Event on the group's Gang and on each pod taken and an audit line per pod."""

import math
from collections.abc import Callable, Iterable, Sequence

from gangkeeper import names
from gangkeeper.controller.cache.groups import GangView
from gangkeeper.controller.cache.holders import Candidate
from gangkeeper.controller.deciding.booking import reserve
from gangkeeper.controller.deciding.decisions import (
    DeletePod,
    EvictPod,
    GangEvent,
    Involved,
    Phase,
    Reason,
    Report,
    Verdict,
)
from gangkeeper.controller.deciding.memory import Channel, Room
from gangkeeper.controller.deciding.reporting import report, save_status
from gangkeeper.controller.deciding.rollback import SuspendableOwner, owner_of, suspend_owner
from gangkeeper.controller.deciding.state import NAMED, PassState, accelerators_held, named, rfc3339
from gangkeeper.controller.model.members import Group, GroupKey, Member
from gangkeeper.controller.model.objects import PodFacts
from gangkeeper.controller.planning.preemption import Preemption
from gangkeeper.wording import first_of

# How long a preemptor waits before taking again a victim that still stands and is not on its way
# out (its suspension lost a conflict, its eviction was refused): the Eviction API's Retry-After.
RETAKE_SECONDS = 10.0


def preempt(state: PassState, view: GangView, preemption: Preemption,
            view_of: Callable[[GroupKey], GangView | None]) -> None:
    """Book the room for the preemptor at once (its reservations, on top of the victims, so that
    nothing else takes it) and take its victims, whole and without harm: a group's owner with a
    suspend switch is suspended (resumed after the rollback backoff: its pods come back gated and
    queue again, its failure count untouched), any other group's members are deleted, a lone pod
    is evicted. The preemptor is released once its nodes are free (`release`)."""
    group = view.group
    reserve(state, view, preemption.plan)
    victims = {f"{m.namespace}/{m.name}": (m.uid, victim.group) for victim in preemption.victims for m in victim.members}
    whole = {key for victim in preemption.victims if not victim.extra for key in (victim.group, *victim.together)}
    extras: dict[GroupKey, list[Member]] = {}
    for victim in preemption.victims:
        if victim.extra and victim.group is not None and victim.group not in whole:
            extras.setdefault(victim.group, []).extend(victim.members)
    alone = frozenset(f"{m.namespace}/{m.name}" for members in extras.values() for m in members)
    state.remembered.preempting[group.key] = Room(state.now, victims, state.now, alone)
    taken = first_of([_named(victim, view_of) for victim in preemption.victims], NAMED)
    pods = sum(len(victim.members) for victim in preemption.victims)
    message = (f"{len(preemption.plan.assignments)} members reserved; preempting {len(preemption.victims)} of lower "
               f"priority, {pods} {'pod' if pods == 1 else 'pods'} ({taken}); released once they are gone")
    state.verdicts[group.key] = Verdict(Phase.ADMITTED, Reason.PREEMPTING, message)
    report(state, view, GangEvent.PREEMPTING, Reason.PREEMPTING, message, force=True)
    for victim in preemption.victims:
        if victim.extra:
            continue
        why = f"preempted by {group} (priority {group.priority}, above its {victim.priority})"
        victim_view = view_of(victim.group) if victim.group is not None else None
        if victim_view is None:
            _evict(state, victim.members[0], why)
            continue
        for whole_view in (victim_view, *(view_of(key) for key in victim.together)):  # a tree is taken whole
            if whole_view is not None:
                _preempt_group(state, whole_view, why)
    for key, members in extras.items():
        victim_view = view_of(key)
        if victim_view is not None:
            why = f"preempted by {group} (priority {group.priority}, above its {victim_view.group.priority})"
            _take_extras(state, victim_view, members, why)


def _named(victim: Candidate, view_of: Callable[[GroupKey], GangView | None]) -> str:
    """A victim as its owner names it (`Job filler`) when it is a whole group with one."""
    view = view_of(victim.group) if victim.group is not None and not victim.extra else None
    return f"{view.owner.kind} {view.owner.name}" if view is not None and view.owner is not None else victim.name


def _preempt_group(state: PassState, view: GangView, why: str) -> None:
    key = view.group.key
    live = [f for f in view.pods if not f.member.terminal]
    owner = owner_of(state, view)
    if owner is not None and owner.switch.suspended:  # suspended already (by a user, say): its pods go
        message = f"{why}; {owner.workload.kind} {owner.workload.name} is suspended already: its pods are going"
    elif owner is not None:
        message = _suspend_victim(state, key, owner, why)
        state.figures.preemptions["suspended"] += 1
    else:
        _delete_victims(state, key, live, why)
        # Its Gang stays, saying what to resubmit.
        state.remembered.given_up[key] = frozenset(f.member.uid for f in live)
        message = (f"{why}; deleted its {len(live)} members ({accelerators_held(state, [f.member for f in live])} "
                   f"accelerators): resubmit them (label {names.GROUP_LABEL}={view.label}): "
                   f"{named([f.member for f in live])}")
        state.figures.preemptions["deleted"] += 1
    state.verdicts[key] = verdict = Verdict(Phase.WAITING, Reason.PREEMPTED, message)
    report(state, view, GangEvent.PREEMPTED, Reason.PREEMPTED, message, warning=True, force=True,
           pods=[f.member.name for f in live], on_pods=True)
    state.preempted[key] = f"{why} at {rfc3339(state.now)}"
    if key not in state.decided:  # a running group the pass does not decide: its Gang says it now
        save_status(state, view, verdict, False, state.preempted[key], now=True)


def _take_extras(state: PassState, view: GangView, extras: Sequence[Member], why: str) -> None:
    """Delete a running group's elastic extras (module docstring), loudly: the group keeps running
    with the rest, at or above its min count."""
    key, group = view.group.key, view.group
    _delete_extras(state, key, extras, why)
    state.figures.preemptions["extras"] += len(extras)
    left = sum(1 for m in group.members if not m.terminal and (m.node or m.reserved_node)) - len(extras)
    again = (f"{view.owner.kind} {view.owner.name} recreates them, gated, and they wait for room"
             if view.owner is not None else "nothing recreates them")
    message = (f"{why}: took {len(extras)} elastic extras, members beyond its min count {group.min_count}, the last in "
               f"its order: {named(extras)} ({accelerators_held(state, extras)} accelerators); deleted: {again}; "
               f"it keeps running with {left} members placed")
    report(state, view, GangEvent.PREEMPTED, Reason.EXTRAS_PREEMPTED, message, warning=True, force=True,
           channel=Channel.DEGRADED, pods=[m.name for m in extras], on_pods=True)


def _delete_extras(state: PassState, key: GroupKey, extras: Iterable[Member], why: str) -> None:
    state.actions += [DeletePod(key, m.name, m.uid, f"{why}: an elastic extra, beyond its group's min count",
                                Reason.EXTRAS_PREEMPTED) for m in extras]


def _evict(state: PassState, pod: Member, why: str) -> None:
    key = (pod.namespace, pod.name)
    state.actions.append(EvictPod(key, pod.name, pod.uid, why))
    state.actions.append(Report(key, GangEvent.PREEMPTED, Reason.PREEMPTED, f"{why}: evicted through the Eviction "
                                f"API", Involved("v1", "Pod", pod.name, pod.uid), warning=True))
    state.figures.preemptions["evicted"] += 1


def _take_again(state: PassState, preemptor: Group, standing: Sequence[tuple[PodFacts, GroupKey | None]],
                extras: frozenset[str]) -> None:
    """Send again the writes that take the victims still standing and not on their way out: the
    first ones were refused or lost (a suspension's conflict, an eviction a budget refused at the
    time). Counted and reported once, when first taken; the owner's suspension is reported again.
    `extras` are the victims taken alone, deleted again."""
    why = f"preempted by {preemptor} (priority {preemptor.priority}); taken again: the last write did not take"
    groups: dict[GroupKey, list[PodFacts]] = {}
    for facts, victim in standing:
        if facts.member.terminating:
            continue
        if victim is not None and f"{facts.member.namespace}/{facts.member.name}" in extras:
            _delete_extras(state, victim, [facts.member], why)
        elif victim is None:
            state.actions.append(EvictPod((facts.member.namespace, facts.member.name), facts.member.name,
                                          facts.member.uid, why))
        else:
            groups.setdefault(victim, []).append(facts)
    for victim, pods in groups.items():
        view = state.index.view(victim)
        owner = owner_of(state, view) if view is not None else None
        if owner is not None and not owner.switch.suspended:
            _suspend_victim(state, victim, owner, why)
        elif owner is None:
            _delete_victims(state, victim, pods, why)


def _suspend_victim(state: PassState, key: GroupKey, owner: SuspendableOwner, why: str) -> str:
    """Suspend a victim group's owner until the rollback backoff ends: resumed then, its pods come
    back gated and queue again."""
    attempts = state.remembered.rollbacks.get(key, (0, 0.0))[0]
    until = math.ceil(state.now + state.settings.rollback_backoff_seconds)
    return suspend_owner(state, key, owner, attempts, until, why, "preempted")


def _delete_victims(state: PassState, key: GroupKey, pods: Iterable[PodFacts], why: str) -> None:
    state.actions += [DeletePod(key, f.member.name, f.member.uid, why, Reason.PREEMPTED) for f in pods]


def waiting_for_room(state: PassState, view: GangView) -> bool:
    """Whether reserved members wait to be released because the work their group preempted is
    still there: a victim's pod not gone (a terminating pod keeps its node, its devices, its ports
    and its place in its neighbours' pod rules), or their nodes over-committed in the ledger (the
    victims of a preemption decided before a restart). A victim that stands and is not on its way
    out is taken again every `RETAKE_SECONDS`. They wait at most the bind timeout; if the room is
    lost by then, they are released anyway, fail to bind and the group is rolled back to plan
    again, rather than wait forever."""
    key = view.group.key
    room = state.memory.preempting.get(key) or state.remembered.preempting.get(key)
    standing = _standing(state, room)
    crowded = sorted({m.reserved_node for m in view.group.members if m.gated and m.reserved_node and not m.terminal
                      and any(value < 0 for value in state.index.ledger.free(m.reserved_node).values())})
    if not crowded and not standing:
        return False
    since, sent = (room.since, room.sent) if room is not None else (state.now, state.now)
    timeout = state.settings.bind_timeout_seconds
    if state.now - since >= timeout:
        return False
    extras = room.extras if room is not None else frozenset()
    if state.now - sent >= RETAKE_SECONDS and any(not facts.member.terminating for facts, _ in standing):
        _take_again(state, view.group, standing, extras)
        sent = state.now
    state.remembered.preempting[key] = Room(since, room.victims if room is not None else {}, sent, extras)
    state.figures.due += [since + timeout] + ([sent + RETAKE_SECONDS] if standing else [])
    left = f"at most {timeout - (state.now - since):.0f}s more"
    if standing:
        pods = sorted(f"{facts.member.namespace}/{facts.member.name}" for facts, _ in standing)
        message = f"reserved; waiting for {len(pods)} preempted pods to go: {first_of(pods, NAMED)} ({left})"
    else:
        message = f"reserved; waiting for the pods still on {', '.join(crowded[:NAMED])} to go ({left})"
    state.verdicts[key] = Verdict(Phase.ADMITTED, Reason.PREEMPTING, message)
    return True


def _standing(state: PassState, room: Room | None) -> list[tuple[PodFacts, GroupKey | None]]:
    """The victims' pods still there and not finished (the same pods: a pod recreated under the
    name is another one), with the victim group of each."""
    if room is None:
        return []
    found = []
    for key, (uid, victim) in room.victims.items():
        facts = state.index.pods.get(key)
        if facts is not None and facts.member.uid == uid and not facts.member.terminal:
            found.append((facts, victim))
    return found
