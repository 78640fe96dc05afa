"""A running group that loses members degrades rather than collapses (docs/design.md, "Elastic
groups").

A running group's strength (`memory.Strength`) is how many of its members are placed now (live
ones bound or reserved, and those that succeeded: they did their part) and its peak, the most it
has had placed at once since it was admitted, never more than its owner runs at once
(`Group.max_count`: an elastic job its autoscaler scaled down lost nothing). Fewer placed than
its peak is *degraded*: members lost to a node drained or failed, to the stock scheduler's
preemption, to a group of higher priority taking its elastic extras (`planning.preemption`).

It keeps running, without a rollback, while its members placed stay at or above its min count;
below it, it is rolled back (`timeouts.incomplete_too_long`), unless it has lost nothing since
its peak: a min count raised above what runs never touches the members running (it is what the
group's next admission needs), while one lowered holds at once (`floor`).

The peak is remembered from pass to pass and kept on the group's Gang (`status.peak`), so that a
restarted controller knows it. A group with nothing placed any more has none: its next
admission starts afresh. One whose peak is not known (no Gang, a Gang CRD that prunes the
field) is judged by its min count alone.
"""

from collections.abc import Mapping

from gangkeeper.controller.deciding.memory import Memory, Strength
from gangkeeper.controller.model.members import Group


def placed(group: Group) -> int:
    """Members placed: live ones bound or reserved, and those that succeeded."""
    return sum(1 for m in group.members if m.phase == "Succeeded" or (not m.terminal and (m.node or m.reserved_node)))


def previous_peak(memory: Memory, group: Group, gang_status: Mapping | None) -> int | None:
    """The group's peak as the last pass left it, else as its Gang keeps it; None when unknown."""
    remembered = memory.strengths.get(group.key)
    if remembered is not None:
        return remembered.peak
    kept = (gang_status or {}).get("peak")
    return kept if isinstance(kept, int) and not isinstance(kept, bool) and kept > 0 else None


def strength(group: Group, previous: int | None) -> Strength | None:
    """Its members placed now and its peak; None when no live member is placed (nothing runs)."""
    if not any(not m.terminal and (m.node or m.reserved_node) for m in group.members):
        return None
    now = placed(group)
    peak = max(previous or 0, now)
    return Strength(now, peak if group.max_count is None else min(peak, group.max_count))


def floor(group: Group, previous: int | None) -> int:
    """The members placed below which a running group is rolled back: its min count, or its peak
    when its min count was raised above that (below it, it has lost members)."""
    return group.min_count if previous is None else min(group.min_count, previous)


def condition_message(found: Strength, group: Group) -> str:
    """`6/8 members, min 4`: the Degraded condition's words."""
    return f"{found.placed}/{found.peak} members, min {group.min_count}"
