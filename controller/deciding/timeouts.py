"""What time alone decides in a pass: a group's schedule timeout, a released member's bind
timeout (from its release annotation, else from when this controller first saw it released),
and a group incomplete for longer than the bind timeout. Until one expires, the pass falls due
when it will (`PassState.due`): the runner wakes then rather than at its next resync."""

from gangkeeper.controller.cache.groups import GangView
from gangkeeper.controller.deciding.state import PassState
from gangkeeper.controller.model.members import Group
from gangkeeper.controller.model.objects import PodFacts


def schedule_timed_out(state: PassState, group: Group) -> bool:
    """Whether the group waited its schedule timeout out; until it has, the pass falls due when it
    will (the runner wakes then, not at its next resync, so a "20" times out after 20 s, not 30)."""
    timeout = group.schedule_timeout_seconds
    if timeout is None:
        return False
    if state.now - group.first_seen < timeout:
        state.figures.due.append(group.first_seen + timeout)
        return False
    return True


def bind_failed(state: PassState, view: GangView) -> str | None:
    """Why a released member counts as failed to bind, if one does."""
    for facts in view.pods:
        member = facts.member
        if member.terminal or member.node or member.gated or not member.reserved_node:
            continue
        if facts.unschedulable is not None:
            return f"{member.name} is Unschedulable on {member.reserved_node}: {facts.unschedulable}"
        deadline = released_at(state, facts) + state.settings.bind_timeout_seconds
        if state.now >= deadline:
            return f"{member.name} not bound to {member.reserved_node} within {state.settings.bind_timeout_seconds:g}s"
        state.figures.due.append(deadline)
    return None


def incomplete_too_long(state: PassState, view: GangView, floor: int) -> str | None:
    """Why a group holding nodes counts as failed for being incomplete too long, if it does: some
    live member bound, fewer than `floor` (its min count, or the peak a raised one is above:
    `elastic.floor`) bound, reserved or succeeded (members that finished did their part: the rest
    may run on a while), for longer than the bind timeout."""
    group = view.group
    live = [m for m in group.members if not m.terminal]
    bound = sum(1 for m in live if m.node)
    placed = sum(1 for m in live if m.node or m.reserved_node)
    succeeded = sum(1 for m in group.members if m.phase == "Succeeded")
    if bound == 0 or placed + succeeded >= floor:
        return None
    # Members gone that nothing has replaced yet (a Job pod failed, a plain pod preempted): the clock
    # starts now, to give a replacement its chance. Otherwise it starts, durably, at the newest live
    # member's creation: no later than when the replacement began to wait.
    missing = len(live) + succeeded < floor
    created = [m.created for m in live if m.created is not None]
    fallback = state.now if missing else max(created, default=state.now)
    since = min(state.memory.incomplete_since.get(group.key, fallback), state.now)
    timeout = state.settings.bind_timeout_seconds
    if state.now - since < timeout:
        state.remembered.incomplete_since[group.key] = since
        state.figures.due.append(since + timeout)
        return None
    return (f"incomplete for {state.now - since:.0f}s, longer than the bind timeout ({timeout:g}s): "
            + (f"{placed} of min count {floor} members bound or reserved" if floor == group.min_count else
               f"{placed} members bound or reserved, fewer than the {floor} it had (its min count "
               f"{group.min_count} was raised since)"))


def released_at(state: PassState, facts: PodFacts) -> float:
    """When the member was released: its annotation, else when this controller first saw it released."""
    if facts.released_at is not None:
        return facts.released_at
    return state.memory.released_at.get(facts.member.uid, state.now)
