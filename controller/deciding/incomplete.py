"""Groups that never complete: noticed, and said in words a user can act on.

Workload controllers create pods in stages: an initializer that must finish before the trainers
are created, a launcher created only once the workers are Ready. A group declared larger than
what its owner creates before the group runs keeps its present members gated forever, and
nothing else would say so: gangkeeper made that deadlock, so gangkeeper reports it, whatever the
kind (docs/design.md, "Queue").

A group is *stuck incomplete* when fewer of its members are present (live) than its min count,
every present one is still gated, and no new member has arrived for `Settings.incomplete_group_seconds`
or longer. The reconcile pass asks only about groups whose verdict is `Incomplete` (so a complete
group waiting for capacity, a group backing off, suspended or with a declaration problem is never
one), and reports them (`reporting.stuck_incomplete`).

The clock (`last_arrival`) is the controller's, passed into the pass, never read here: when the
group last gained a member (a uid not seen before), remembered for the leadership term
(`memory.Arrival`). A group the term has not seen yet (a new group, or any group after a
restart or a change of leader) counts from its newest live member's creation: durable, and for
a group seen as it appears, its first sight. A group seen before that has just become short of
members (one of a complete group's pods deleted) counts from now: its owner gets the set time to
replace it.

While it is short of members, before it is stuck, its Gang and its members say what it waits for
in one sentence (`waiting_for_members`), `Waiting for 1 more pod of group half (1 of 2 present;
gangkeeper.io/min-count=2)`: how many more, and the declaration that set the size.

The words (`message`) say nothing that changes from one pass to the next (no running duration):
the Event on the Gang is written once when the group becomes stuck and again only when what it
says changes (a member gone), and an Event with the same words after a restart bumps the count
of the one before rather than adding another.
"""

from gangkeeper import names
from gangkeeper.controller.cache.groups import GangView
from gangkeeper.controller.deciding.memory import Arrival
from gangkeeper.controller.model.members import Group

DOCS_SECTION = "docs/configuration.md, \"A group that never completes\""


def last_arrival(group: Group, remembered: Arrival | None, seen_before: bool, now: float) -> Arrival:
    """When the group last gained a member, as of `now` (module docstring): `remembered` from
    the last pass when there is one; `seen_before` says whether this term saw the group before."""
    live = frozenset(member.uid for member in group.members if not member.terminal)
    if remembered is not None:
        return Arrival(now if live - remembered.members else remembered.since, live)
    if seen_before:
        return Arrival(now, live)
    created = [m.created for m in group.members if not m.terminal and m.created is not None]
    return Arrival(min(max(created, default=now), now), live)


def stuck(arrival: Arrival, now: float, threshold: float) -> bool:
    """Whether no member arrived for `threshold` seconds or longer (the pass falls due at
    `arrival.since + threshold` until then)."""
    return now - arrival.since >= threshold


def message(view: GangView, threshold: float) -> str:
    """What the Event and the Gang's condition say: how many are there and missing, which owner
    or label they wait for, where the size came from, and what to do."""
    group = view.group
    present = sum(1 for member in group.members if not member.terminal)
    missing = group.min_count - present
    waited_for = (f"of {view.owner.kind} {view.owner.name}" if view.owner is not None
                  else f"labelled {names.GROUP_LABEL}={view.label}")
    declared = " and ".join(view.declared_by) or "its declaration"
    return (f"{present} of {group.min_count} pods present; no new pod for {duration(threshold)} or more: waiting "
            f"for {missing} more {'pod' if missing == 1 else 'pods'} {waited_for} (size {group.min_count} from "
            f"{declared}). If its owner creates the rest only after these run, the group is declared too large: "
            f'see {DOCS_SECTION}')


def waiting_for_members(view: GangView, name: str, ours: bool = False) -> str:
    """What a group short of members waits for, named `name` (its Gang's, else its label): the
    words of its Gang's condition and of its members' Events (`controller.deciding.telling`).
    `ours`: its Gang is one the controller created, whose size echoes the group's declaration."""
    group = view.group
    present = sum(1 for member in group.members if not member.terminal)
    missing = group.min_count - present
    return (f"Waiting for {missing} more {'pod' if missing == 1 else 'pods'} of group {name} ({present} of "
            f"{group.min_count} present; {declaration(view, f'Gang {name}' if ours else None)})")


def declaration(view: GangView, echo: str | None = None) -> str:
    """Where the group's size came from: `gangkeeper.io/min-count=2` for the annotation, `size 8 from
    Job train` for an owner (or a Gang, a PodGroup) that declares it; `echo` is a declaration that
    only repeats the others (the Gang the controller created), left out when there are others."""
    declared = [who for who in view.declared_by if who != echo] or list(view.declared_by)
    found = [who.removeprefix("annotation ") if who.startswith("annotation ") else
             f"size {view.group.min_count} from {who}" for who in declared]
    return ", ".join(found) or f"size {view.group.min_count}"


def duration(seconds: float) -> str:
    """`5m`, `1h`, `90s`: whole hours or minutes when the time is a whole number of them."""
    whole = int(seconds)
    if whole != seconds or whole % 60:
        return f"{seconds:g}s"
    return f"{whole // 3600}h" if whole % 3600 == 0 else f"{whole // 60}m"
