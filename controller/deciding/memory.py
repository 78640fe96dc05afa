"""What the controller remembers between passes, and may lose on a restart.

Nothing here is needed for safety: reservations, release times and group ages are read back
from the pods (docs/design.md, "Failure and restart"). Memory holds when each group was first
seen (durably approximated by its oldest member's creation), rollback backoff, when a running
group was first seen incomplete, when a gated group still short of members last gained one (to
notice one that never completes: `controller.deciding.incomplete`), when a member was first seen released
(for a release annotation someone removed), when a group was first seen complete (to measure how
soon it was released), when a Gang's status was last written, what was last reported (so that Events and audit
lines follow changes, not passes), how many members each running group has placed and had at most
(`Strength`, kept on its Gang too: `controller.deciding.elastic`), what each gated member was last told on
itself (`Told`: `controller.deciding.telling`), the owners this controller suspended to roll their groups
back (`HeldOwner`) and the groups a rollback gave up. What is durable of a suspension is on the
owner (docs/design.md, "Release, binding and rollback"): a new leader finds it there, and only
its backoff count starts again.
"""

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from gangkeeper.controller.cache.index import Pending
from gangkeeper.controller.deciding.decisions import Reason
from gangkeeper.controller.model.members import GroupKey
from gangkeeper.controller.model.objects import WorkloadKey


class Channel(enum.Enum):
    """What a group's reports are deduplicated on, apart: where it stands, and its schedule timeout."""

    STATE = enum.auto()
    TIMEOUT = enum.auto()
    INCOMPLETE = enum.auto()  # stuck incomplete, no new member arriving (`controller.deciding.incomplete`)
    CAPACITY = enum.auto()  # what the autoscaler answered to what was asked for it (`controller.deciding.provisioning`)
    DEGRADED = enum.auto()  # a running group with fewer members than it had, and its recovery (`controller.deciding.elastic`)


@dataclass(frozen=True, slots=True)
class News:
    """What was last reported on a channel: the reason, and the message when a new one is news too
    (a problem's, which says what to fix; a waiting group's changes with every bit of capacity freed)."""

    reason: Reason | str
    message: str | None = None


class Told(NamedTuple):
    """What a member was last told on itself (`controller.deciding.telling`), and when: the reason,
    and what else makes it news: the constraint a group that does not fit is short of, a problem's
    message, the node a member was released to. A tuple: one is looked at for every waiting
    member, every pass."""

    reason: Reason | str
    detail: str = ""
    at: float = 0.0

    def same(self, other: "Told") -> bool:
        """Whether `other` says the same, whenever it was said."""
        return self.reason == other.reason and self.detail == other.detail


@dataclass(frozen=True, slots=True)
class HeldOwner:
    """An owner suspended to roll a group back: its uid, the group (None when found on the owner
    after a restart), how often the group was rolled back, and the resourceVersion the suspension
    was decided on. While the cache shows that version, a write decided on
    it may still be on its way; once the owner moved on and is no longer held by gangkeeper (it
    was resumed, by us or a user, or a user took gangkeeper's mark off), it is left alone, and
    forgotten once its group is decided again (so the group's backoff count outlives the
    suspension, during which its pods are gone)."""

    uid: str
    group: GroupKey | None
    attempts: int
    resource_version: str
    resumed: bool = False  # a resume was sent (it is reported once, and sent again until it shows)


@dataclass(frozen=True, slots=True)
class Arrival:
    """When a group still short of members, all of them gated, last gained one (the controller's
    clock), and the uids of its live members then: a uid not among them is a new member."""

    since: float
    members: frozenset[str]


@dataclass(frozen=True, slots=True)
class Strength:
    """A running group's members placed now (bound or reserved, with those that succeeded) and the
    most it has had placed at once since it was admitted (`controller.deciding.elastic`)."""

    placed: int
    peak: int

    @property
    def degraded(self) -> bool:
        return self.placed < self.peak


@dataclass(frozen=True, slots=True)
class Room:
    """The room a preemption booked for a group on top of its victims: since when, the victims'
    pod), and when the writes that take them were last sent (they are sent again while a victim
    stands that is not on its way out: a suspension refused with a conflict, an eviction refused).
    `extras` are the victims taken alone, a running group's members beyond its min count: deleted
    again, never their group's owner suspended."""

    since: float
    victims: Mapping[str, tuple[str, GroupKey | None]]
    sent: float
    extras: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Asking:
    """A group's placeholders (`controller.deciding.provisioning`): the attempt they belong to, and
    when to ask again once they were taken back unbound (0: not taken back)."""

    attempt: int
    retry_at: float


@dataclass(frozen=True)
class Memory:
    first_seen: Mapping[GroupKey, float] = field(default_factory=dict)
    released_at: Mapping[str, float] = field(default_factory=dict)
    rollbacks: Mapping[GroupKey, tuple[int, float]] = field(default_factory=dict)
    reported: Mapping[tuple[GroupKey, Channel], News] = field(default_factory=dict)
    complete_at: Mapping[GroupKey, float] = field(default_factory=dict)
    status_written: Mapping[GroupKey, float] = field(default_factory=dict)
    incomplete_since: Mapping[GroupKey, float] = field(default_factory=dict)
    # Gated groups short of members: when each last gained one (`controller.deciding.incomplete`).
    arrivals: Mapping[GroupKey, Arrival] = field(default_factory=dict)
    held: Mapping[WorkloadKey, HeldOwner] = field(default_factory=dict)
    # Groups a rollback gave up (every member deleted, none to recreate them), by the uids
    # deleted: they stay Failed while those pods go, and their Gang is kept when they are gone.
    given_up: Mapping[GroupKey, frozenset[str]] = field(default_factory=dict)
    # Groups reserved where the work they preempted still holds capacity: the room they wait for.
    preempting: Mapping[GroupKey, Room] = field(default_factory=dict)
    # Groups asking an autoscaler for capacity with placeholders: which attempt, when to ask again.
    capacity: Mapping[GroupKey, Asking] = field(default_factory=dict)
    # Running groups: their members placed, and the most they had (`controller.deciding.elastic`).
    strengths: Mapping[GroupKey, Strength] = field(default_factory=dict)
    # What each member was last told on itself, by group and pod uid (`controller.deciding.telling`).
    told: Mapping[GroupKey, Mapping[str, Told]] = field(default_factory=dict)
    # Children of a tree reserved while their tree is not: since when (`controller.deciding.trees`).
    waiting_for_tree: Mapping[GroupKey, float] = field(default_factory=dict)


def unreported(memory: Memory, groups: Iterable[GroupKey]) -> Memory:
    """`memory` as if the groups' state had not been reported, nor their members told they were
    released: their releases were held back (`outcome.carried_out`), and the pass that releases
    them must say so."""
    held = set(groups)
    told = dict(memory.told)
    for key in held & told.keys():
        told[key] = {uid: said for uid, said in told[key].items() if said.reason is not Reason.RELEASED}
    return replace(memory, reported={key: news for key, news in memory.reported.items()
                                     if not (key[0] in held and key[1] is Channel.STATE)}, told=told)


def after_pass(memory: Memory, pending: Pending, now: float, *, rollbacks: Mapping[GroupKey, tuple[int, float]],
               reported: Mapping[tuple[GroupKey, Channel], News], incomplete_since: Mapping[GroupKey, float],
               status_written: Mapping[GroupKey, float], arrivals: Mapping[GroupKey, Arrival],
               strengths: Mapping[GroupKey, Strength], told: Mapping[GroupKey, Mapping[str, Told]],
               waiting_for_tree: Mapping[GroupKey, float]) -> Memory:
    """What to remember after a pass that decided `pending` and learned the rest: fresh entries for
    the groups decided, the old ones of groups left alone (settled, so unchanged), none for groups
    that are gone or, after a complete pass, undecided."""
    decided = {view.group.key for view in pending.views}

    def kept(old: Mapping, channels: tuple[Channel, ...] = ()) -> dict:
        """`old` without the groups decided or gone: a copy and O(decided) deletions, not a scan."""
        if pending.complete:
            return {}
        kept = dict(old)
        for key in decided | pending.gone:
            for entry in [(key, channel) for channel in channels] if channels else [key]:
                kept.pop(entry, None)
        return kept

    released_at = {f.member.uid: memory.released_at.get(f.member.uid, now)
                   for view in pending.views for f in view.pods
                   if not f.member.terminal and not f.member.node and not f.member.gated and f.member.reserved_node}
    complete_at = {view.group.key: memory.complete_at.get(view.group.key, now) for view in pending.views
                   if view.problem is None
                   and sum(1 for m in view.group.members if not m.terminal) >= view.group.min_count > 0}
    return Memory(
        first_seen={**kept(memory.first_seen), **{view.group.key: view.group.first_seen for view in pending.views}},
        released_at=released_at,
        rollbacks={key: value for key, value in rollbacks.items()
                   if key in decided or (not pending.complete and key not in pending.gone)},
        reported={**kept(memory.reported, tuple(Channel)), **reported},
        complete_at={**kept(memory.complete_at), **complete_at},
        incomplete_since={**kept(memory.incomplete_since), **incomplete_since},
        arrivals={**kept(memory.arrivals), **arrivals},
        strengths={**kept(memory.strengths), **strengths},
        told={**kept(memory.told), **told},
        waiting_for_tree={**kept(memory.waiting_for_tree), **waiting_for_tree},
        status_written={**kept(memory.status_written),
                        **{key: memory.status_written[key] for key in decided if key in memory.status_written},
                        **status_written})
