"""One reconcile pass, decided on the cluster as the index holds it: what to write, never writing it.

A group moves through reserve → release → bound, one durable step per pass:
  - reserve: the planner admitted the group; its waiting members' nodes are written in one
    write on its Gang (`status.reservations`), or, for a group without a Gang, in each member's
    reservation annotation; they stay gated. Capacity is booked from now on: the ledger counts
    the reservations and the pins on the pods, so a restarted controller books exactly what its
    predecessor booked and nothing twice.
  - release: at least min count members hold a reservation (or are further along); every
    reserved, still-gated member gets one JSON Patch that pins it to its node, removes our gate
    and records when (`gangkeeper.io/released-at`), guarded by `test`s so that a stale cache
    gets a Conflict instead of a wrong write.
  - rollback: a released member not bound within the bind timeout, or reported Unschedulable,
    means the plan was wrong (something the model does not see). The group is taken back whole,
    without harming it, and backs off exponentially:
      - an owner with a suspend switch (Job, JobSet, TrainJob, PyTorchJob, MPIJob, RayJob,
        RayCluster) is suspended, marked on the
        owner as gangkeeper's until the backoff ends, then resumed: its operator deletes its
        pods without counting them as failed and recreates them gated. Deleting them instead
        would spend the owner's failure budget (a Job counts every pod deleted before it
        finished as failed, and fails past its backoffLimit);
      - members with another owner are deleted, for it to recreate them gated;
      - members without an owner can never be gated again, and the bound ones hold
        accelerators: they are deleted too (`Settings.rollback_ownerless`; `keep` keeps them
        and says what they hold). A group whose every member was deleted is given up (Failed),
        and its Gang, which says what to resubmit, is kept.
    Capacity stays booked until the pods are gone, so nothing else can take it before the
    rollback completes.
Once admitted, a group's other members — elastic ones beyond min count, or replacements of
members that finished, failed or were deleted (with their node, say) — are reserved one at a
time, in later passes, from what the queue leaves over, and released like the rest.

A group that lost members while running holds GPUs without making progress until replacements
are placed. When at least one of its live members is bound but fewer than min count are bound,
reserved or succeeded (the others wait with nothing reserved: capacity is short, their node is
gone), the group is incomplete; incomplete for longer than the bind timeout, it is rolled back like a
failed release (same suspension or deletions, backoff and reporting), so that what it holds goes back to the
queue and the whole group is admitted again when it fits. The clock is the controller's memory
of when it first saw the group incomplete; after a restart, the creation of the group's newest
live member (the replacement its owner recreated): durable, and no later than when the
replacement began to wait, so a restart cannot postpone the rollback.

An owner gangkeeper suspended carries who suspended it and until when (`gangkeeper.io/suspended-by`,
`gangkeeper.io/resume-at`): the pass resumes it then, whoever leads by then (a new leader finds
such owners on its first pass), and the resume removes both. An owner suspended without them, or
whose mark a user removed, or that a user resumed, is left alone: gangkeeper never resumes it,
and a group whose owner is suspended is not planned.

The bind timeout counts from the release annotation, which survives a restart or a change of
leader; only when it is missing or unreadable does it count from when this controller first saw
the member released. A group not admitted within its schedule timeout gets a TimedOut condition
and an Event, and keeps waiting unless `Settings.fail_on_schedule_timeout` gives it up (phase
Failed; its pods stay gated for their owner to clean up). A group short of members, all gated,
that gains none for `Settings.incomplete_group_seconds` is reported as stuck incomplete (a
Warning Event, a `Stuck` condition, an audit line, a metric), since it may never complete
(`controller.incomplete`).

The pass's parts are modules of their own: `decisions` (what it returns: verdicts and
actions), `patches` (the bodies of the pod writes), `gangs` (which Gang, its name and status)
and `memory` (what it remembers for the next pass, and may lose on a restart).
"""

import enum
import logging
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone

from gangkeeper import integrations, names
from gangkeeper.controller import gangs, incomplete
from gangkeeper.controller.decisions import (
    Action,
    DeleteGang,
    DeletePod,
    EvictPod,
    GangEvent,
    Involved,
    Phase,
    Reason,
    Release,
    Report,
    Reserve,
    ReserveGroup,
    ResumeOwner,
    SaveGang,
    SuspendOwner,
    Verdict,
)
from gangkeeper.controller.groups import GangView, PodFacts, Workload, WorkloadIndex, WorkloadKey, settled_phase
from gangkeeper.controller.index import ClusterIndex, Pending
from gangkeeper.controller.memory import Arrival, Channel, HeldOwner, Memory, News, Room, after_pass
from gangkeeper.controller.model import Group, GroupKey, Member, Node
from gangkeeper.controller.patches import release_patch
from gangkeeper.controller.planner import Plan, apply, plan_group
from gangkeeper.controller.preemption import Preemption
from gangkeeper.controller.queue import Order, QueuePolicy, Waiting, plan_pass
from gangkeeper.resources import accelerator_count, accelerators
from gangkeeper.wording import first_of

log = logging.getLogger("gangkeeper.controller.reconciler")
NAMED = 10  # members a message names at most
# How long a preemptor waits before taking again a victim that still stands and is not on its way
# out (its suspension lost a conflict, its eviction was refused): the Eviction API's Retry-After.
RETAKE_SECONDS = 10.0


class Preempting(enum.StrEnum):
    """Whether a group that does not fit may take the place of lower-priority work (`--preemption`)."""

    LOWER_PRIORITY = "LowerPriority"  # Kubernetes' own default for pods
    NEVER = "Never"


class Ownerless(enum.StrEnum):
    """What a rollback does with members no owner would recreate (`--rollback-ownerless`)."""

    DELETE = "delete"  # every one, bound or not: none can be gated again, the bound ones hold accelerators
    KEEP = "keep"      # none: the bound ones keep what they hold until someone deletes them


@dataclass(frozen=True)
class Settings:
    bind_timeout_seconds: float = 120.0
    policy: QueuePolicy = QueuePolicy()
    rollback_backoff_seconds: float = 30.0
    rollback_backoff_cap_seconds: float = 960.0
    accelerator_patterns: tuple[str, ...] = names.DEFAULT_ACCELERATORS
    fail_on_schedule_timeout: bool = False
    rollback_ownerless: Ownerless = Ownerless.DELETE
    preemption: Preempting = Preempting.LOWER_PRIORITY
    # A gated group short of members that gains none for this long is reported (`controller.incomplete`).
    incomplete_group_seconds: float = 300.0


@dataclass(frozen=True)
class Outcome:
    actions: tuple[Action, ...]
    memory: Memory
    phases: Mapping[str, int]
    reserved_accelerators: int
    released_after: tuple[tuple[GroupKey, float], ...]  # (group, seconds from complete) of each first release
    rollbacks: int
    # The earliest moment a decision falls due by time alone (a bind or incomplete timeout): the
    # runner wakes then rather than at its next resync, so a timeout is acted on when it expires.
    next_due: float | None = None
    preemptions: Mapping[str, int] = field(default_factory=dict)  # victims by how they were taken
    # What the metrics read by namespace. A pass decides only the groups under way or changed, so
    # counting every group by namespace takes keeping, from pass to pass, the phase of each group
    # decided (`decided_phases`) and forgetting those gone; a `complete` pass decided every group.
    decided_phases: Mapping[GroupKey, str] = field(default_factory=dict)
    gone: frozenset[GroupKey] = frozenset()
    complete: bool = False
    # (group, seconds from first seen) of each group whose wait this pass's release ended.
    waited: tuple[tuple[GroupKey, float], ...] = ()
    # The accelerators the live members of waiting groups request, by (namespace, resource), and
    # how long the longest-waiting group of each namespace has waited so far. Waiting groups are
    # under way, so each pass decides all of them: these are whole.
    waiting_accelerators: Mapping[tuple[str, str], float] = field(default_factory=dict)
    longest_wait: Mapping[str, float] = field(default_factory=dict)
    # Seconds from complete to seen bound (min count of its members), of each group this pass first
    # saw running since it was last complete: the latency the scheduler's users see.
    bound_after: tuple[float, ...] = ()
    # Groups stuck incomplete (`controller.incomplete`), by namespace: each such group is under way,
    # so each pass decides all of them and this is whole.
    stuck_incomplete: Mapping[str, int] = field(default_factory=dict)


class Planning(enum.Enum):
    """What a group under way still needs from this pass's planning."""

    NONE = enum.auto()
    ADMISSION = enum.auto()  # the queue admits its min count, or not
    EXTRAS = enum.auto()     # admitted: one more of its waiting members, from what the queue leaves


# --- the pass ------------------------------------------------------------------------------

@dataclass
class _Pass:
    """Working state of one pass: what is decided so far, per group."""

    now: float
    settings: Settings
    memory: Memory
    workloads: WorkloadIndex
    serves_gangs: bool = True
    actions: list[Action] = field(default_factory=list)
    verdicts: dict[GroupKey, Verdict] = field(default_factory=dict)
    reported: dict[tuple[GroupKey, Channel], News] = field(default_factory=dict)
    rollbacks: dict[GroupKey, tuple[int, float]] = field(default_factory=dict)
    released_after: list[tuple[GroupKey, float]] = field(default_factory=list)
    bound_after: list[float] = field(default_factory=list)
    status_written: dict[GroupKey, float] = field(default_factory=dict)
    incomplete_since: dict[GroupKey, float] = field(default_factory=dict)
    arrivals: dict[GroupKey, Arrival] = field(default_factory=dict)  # of gated groups short of members
    stuck: Counter = field(default_factory=Counter)  # namespace → groups stuck incomplete
    due: list[float] = field(default_factory=list)
    rolled_back: set[GroupKey] = field(default_factory=set)
    held: dict[WorkloadKey, HeldOwner] = field(default_factory=dict)
    given_up: dict[GroupKey, frozenset[str]] = field(default_factory=dict)
    preemptions: Counter = field(default_factory=Counter)
    preempting: dict[GroupKey, Room] = field(default_factory=dict)
    preempted: dict[GroupKey, str] = field(default_factory=dict)  # what took each victim's place, this pass
    decided: frozenset[GroupKey] = frozenset()  # the groups this pass decides (the pending views)
    index: ClusterIndex | None = None  # whether a reserved member's node is free yet, its victims gone
    # Where each group's Gang is (`_gang`), found once: the pass asks for every group's twice, and
    # the workloads do not change while it decides.
    places: dict[GroupKey, tuple[GangView, gangs.GangPlace | None]] = field(default_factory=dict)


def reconcile(pods: Sequence[PodFacts], workloads: WorkloadIndex, nodes: Sequence[Node], memory: Memory,
              now: float, settings: Settings = Settings(), *, index: ClusterIndex | None = None) -> Outcome:
    """Decide one pass on whole lists of pods, workloads and nodes, or on an incremental `index`.

    Given an `index` (fed by informers, see `controller.index`), `pods`, `workloads` and `nodes`
    are not read (pass them empty) and the pass costs O(groups under way + objects changed since
    the last one); it moves the index on (`ClusterIndex.pending`). Without one, an index of the
    lists is built first: O(pods), and every group is decided.
    """
    if index is None:
        index = ClusterIndex.build(pods, workloads, nodes, settings.accelerator_patterns)
    pending = index.pending(memory.first_seen, now)
    state = _Pass(now, settings, memory, index.workloads, index.serves_gangs, rollbacks=dict(memory.rollbacks),
                  index=index)
    state.decided = frozenset(view.group.key for view in pending.views)
    _held_owners(state, pending)
    queue, extras = [], []
    for view in pending.views:
        planning = _guarded(_decide_in_flight, state, view)
        if planning is Planning.ADMISSION:
            queue.append(view)
        elif planning is Planning.EXTRAS:
            extras.append(view)
    _plan(state, queue, extras, index)
    for view in pending.views:
        _guarded(_report_and_status, state, view)
    gone = _gone(pending, memory)
    state.actions.extend(_disposed_gangs(state, gone))
    _remember_given_up(state, pending, gone)
    return _outcome(state, pending, index)


def _gone(pending: Pending, memory: Memory) -> set[GroupKey]:
    """Groups whose last pod went since the last pass: those the index saw go and, when the pass
    decided every group (a fresh index knows no history), those remembered but not seen now."""
    gone = set(pending.gone)
    if pending.complete:
        gone |= set(memory.first_seen) - {view.group.key for view in pending.views}
    return gone


def _disposed_gangs(state: _Pass, gone: Iterable[GroupKey]) -> list[DeleteGang]:
    """The Gangs of groups whose pods are all gone, when nothing else would ever delete them: ours
    (not a user's declaration) and without owner (an owned one is garbage-collected with it). The
    Gang of a group given up, whose pods a rollback deleted, stays: it says what to resubmit."""
    deletions = []
    for key in gone:
        if key in state.memory.given_up or key in state.given_up:
            continue
        gang = gangs.ownerless_gang(key, state.workloads)
        if gang is not None and gang.disposable:
            deletions.append(DeleteGang(key, gang.name))
    return deletions


def _guarded(decide, state: _Pass, view: GangView):
    """One group's decision; a group that breaks it is logged and skipped, never the whole pass."""
    try:
        return decide(state, view)
    except Exception:
        log.exception("%s: no decision this pass", view.group)
        return None


def _decide_in_flight(state: _Pass, view: GangView) -> Planning:
    """Release, roll back or report a group already under way; say what planning it still needs."""
    group, key = view.group, view.group.key
    if view.problem:
        state.verdicts[key] = Verdict(Phase.WAITING, *view.problem)
        return Planning.NONE
    # Before the settled phase: the bound members of a group given up or suspended are going
    # (terminating), not running.
    given_up = _still_given_up(state, view)
    if given_up is not None:
        state.verdicts[key] = given_up
        return Planning.NONE
    owner = _owner(state, view)
    if owner is not None and owner[1].suspend.suspended:
        state.verdicts[key] = Verdict(Phase.WAITING, Reason.SUSPENDED, _suspended(owner[1]))
        return Planning.NONE
    settled = settled_phase(view)
    if settled is not None:  # what the index counts for it while it is not decided again
        phase, live = Phase(settled), sum(1 for m in group.members if not m.terminal)
        state.verdicts[key] = (Verdict(phase, Reason.FINISHED, _finished(view)) if phase is not Phase.RUNNING
                               else Verdict(phase, Reason.BOUND, f"{live}/{live} members bound"))
        return Planning.NONE
    attempts, not_before = state.rollbacks.get(key, (0, 0.0))
    if state.now < not_before:
        state.verdicts[key] = Verdict(Phase.WAITING, Reason.BACKING_OFF, f"rolled back {attempts}×; planning again in "
                                      f"{not_before - state.now:.0f}s")
        return Planning.NONE
    failure = _bind_failed(state, view)
    if failure is None:
        failure = _incomplete_too_long(state, view)
    if failure is not None:
        _roll_back(state, view, owner, attempts, failure)
        return Planning.NONE
    live = [m for m in group.members if not m.terminal]
    booked = [m for m in live if m.node or m.reserved_node]
    if len(booked) < group.min_count and all(m.gated for m in live):
        return _not_admitted(state, view)
    if _waiting_for_room(state, view):
        return Planning.NONE
    _release(state, view)
    bound = sum(1 for m in live if m.node)
    if bound >= group.min_count:
        state.verdicts[key] = Verdict(Phase.RUNNING, Reason.BOUND, f"{bound}/{len(live)} members bound")
    else:
        state.verdicts[key] = Verdict(Phase.ADMITTED, Reason.RELEASED, f"{bound}/{len(live)} members bound")
    return Planning.EXTRAS if group.waiting_members else Planning.NONE


def _finished(view: GangView) -> str:
    """Why a group that ended did: its owner ended (its operator may have deleted members), or every member did."""
    if view.finished is not None and view.owner is not None:
        return f"{view.owner.kind} {view.owner.name} {view.finished.lower()}"
    return "every member has finished"


def _not_admitted(state: _Pass, view: GangView) -> Planning:
    """A group still to be admitted goes to the queue, unless it timed out and timing out fails it."""
    if state.settings.fail_on_schedule_timeout and _timed_out(state, view.group):
        state.verdicts[view.group.key] = Verdict(Phase.FAILED, Reason.TIMED_OUT, f"not admitted within "
                                                 f"{view.group.schedule_timeout_seconds:g}s; given up")
        return Planning.NONE
    return Planning.ADMISSION


def _timed_out(state: _Pass, group: Group) -> bool:
    """Whether the group waited its schedule timeout out; until it has, the pass falls due when it
    will (the runner wakes then, not at its next resync, so a "20" times out after 20 s, not 30)."""
    timeout = group.schedule_timeout_seconds
    if timeout is None:
        return False
    if state.now - group.first_seen < timeout:
        state.due.append(group.first_seen + timeout)
        return False
    return True


def _bind_failed(state: _Pass, view: GangView) -> str | None:
    """Why a released member counts as failed to bind, if one does."""
    for facts in view.pods:
        member = facts.member
        if member.terminal or member.node or member.gated or not member.reserved_node:
            continue
        if facts.unschedulable is not None:
            return f"{member.name} is Unschedulable on {member.reserved_node}: {facts.unschedulable}"
        deadline = _released_at(state, facts) + state.settings.bind_timeout_seconds
        if state.now >= deadline:
            return f"{member.name} not bound to {member.reserved_node} within {state.settings.bind_timeout_seconds:g}s"
        state.due.append(deadline)
    return None


def _incomplete_too_long(state: _Pass, view: GangView) -> str | None:
    """Why a group holding nodes counts as failed for being incomplete too long, if it does: some
    live member bound, fewer than min count bound, reserved or succeeded (members that finished
    did their part: the rest may run on a while), for longer than the bind timeout."""
    group = view.group
    live = [m for m in group.members if not m.terminal]
    bound = sum(1 for m in live if m.node)
    placed = sum(1 for m in live if m.node or m.reserved_node)
    succeeded = sum(1 for m in group.members if m.phase == "Succeeded")
    if bound == 0 or placed + succeeded >= group.min_count:
        return None
    # Members gone that nothing has replaced yet (a Job pod failed, a plain pod preempted): the clock
    # starts now, to give a replacement its chance. Otherwise it starts, durably, at the newest live
    # member's creation: no later than when the replacement began to wait.
    missing = len(live) + succeeded < group.min_count
    created = [m.created for m in live if m.created is not None]
    fallback = state.now if missing else max(created, default=state.now)
    since = min(state.memory.incomplete_since.get(group.key, fallback), state.now)
    timeout = state.settings.bind_timeout_seconds
    if state.now - since < timeout:
        state.incomplete_since[group.key] = since
        state.due.append(since + timeout)
        return None
    return (f"incomplete for {state.now - since:.0f}s, longer than the bind timeout ({timeout:g}s): "
            f"{placed} of min count {group.min_count} members bound or reserved")


def _released_at(state: _Pass, facts: PodFacts) -> float:
    """When the member was released: its annotation, else when this controller first saw it released."""
    if facts.released_at is not None:
        return facts.released_at
    return state.memory.released_at.get(facts.member.uid, state.now)


# --- rollback --------------------------------------------------------------------------------

def _roll_back(state: _Pass, view: GangView, owner: tuple[WorkloadKey, Workload] | None, attempts: int,
               why: str) -> None:
    """Take the group back whole (module docstring): suspend its owner when it has a switch, else
    delete its members; then back off."""
    key = view.group.key
    delay = min(state.settings.rollback_backoff_cap_seconds, state.settings.rollback_backoff_seconds * 2 ** attempts)
    state.rolled_back.add(key)
    live = [f for f in view.pods if not f.member.terminal]
    if owner is not None:
        until = math.ceil(state.now + delay)
        state.rollbacks[key] = (attempts + 1, until)
        message = _suspend_owner(state, key, owner, attempts + 1, until, why, f"rolled back {attempts + 1}×")
        verdict = Verdict(Phase.WAITING, Reason.ROLLED_BACK, message)
    else:
        verdict = _delete_members(state, view, live, delay, why)
        given_up = verdict.reason is Reason.MEMBERS_DELETED  # nothing comes back to wait for: no backoff
        state.rollbacks[key] = (attempts + 1, state.now if given_up else state.now + delay)
    state.verdicts[key] = verdict
    _report(state, view, GangEvent.ROLLED_BACK, Reason.ROLLED_BACK, verdict.message, warning=True, force=True,
            pods=[f.member.name for f in live], on_pods=True)


def _owner(state: _Pass, view: GangView) -> tuple[WorkloadKey, Workload] | None:
    """The group's owner when its kind has a suspend switch and it is the owner the group names (uid);
    the owner's own owner when that one's switch is the one that sticks (a TrainJob's JobSet)."""
    integration = integrations.BY_SOURCE.get(view.source)
    if view.owner is None or integration is None or integration.suspension is None or not integration.owns_pods:
        return None
    key = (integration.resource.name, view.group.key[0], view.owner.name)
    workload = state.workloads.get(key)
    if workload is not None and workload.uid == view.owner.uid and workload.switch is not None:
        resource, name, uid = workload.switch  # its own owner's switch is the one that sticks
        key = (resource, view.group.key[0], name)
        workload = state.workloads.get(key)
        if workload is None or workload.uid != uid:
            return None
    elif workload is None or workload.uid != view.owner.uid:
        return None
    return (key, workload) if workload.suspend is not None else None


def _suspend_owner(state: _Pass, group: GroupKey, owner: tuple[WorkloadKey, Workload], attempts: int, until: float,
                   why: str, cause: str) -> str:
    """Suspend the owner until `until`; `cause` says why in a few words (`rolled back 2×`, `preempted`)."""
    key, workload = owner
    integration = integrations.BY_RESOURCE[key[0]]
    stamp = _rfc3339(until)
    switch = workload.suspend
    state.actions.append(SuspendOwner(group, integration.resource, workload.name,
                                      integration.suspension.suspending(switch.resource_version, stamp)))
    state.held[key] = HeldOwner(workload.uid, group, attempts, switch.resource_version)
    message = (f"{why}; suspended {workload.kind} {workload.name} until {stamp} ({cause}): its "
               f"operator deletes its pods without counting them as failed, and recreates them gated when "
               f"gangkeeper resumes it")
    state.actions.append(Report(group, GangEvent.SUSPENDED, Reason.SUSPENDED,
                                f"gangkeeper suspended this {workload.kind} until {stamp} ({cause}) to take its group "
                                f"{group[1]} back whole: {why}", _about(workload), warning=True))
    return message


def _delete_members(state: _Pass, view: GangView, live: list[PodFacts], delay: float, why: str) -> Verdict:
    """Delete the members an owner recreates and, unless told to keep them, those none would."""
    key, label = view.group.key, view.label
    owned = [f.member for f in live if f.owner is not None and f.owner.kind != "Pod"]
    ownerless = [f.member for f in live if f.owner is None]
    delete = state.settings.rollback_ownerless is Ownerless.DELETE
    deleted = owned + (ownerless if delete else [])
    state.actions += [DeletePod(key, m.name, m.uid, why) for m in deleted]
    parts = [why]
    if owned:
        parts.append(f"deleted {len(owned)} members for their owner to recreate them gated")
    if ownerless:
        bound = [m for m in ownerless if m.node]
        held = _accelerators(state, bound)
        listed = _named(ownerless)
        if delete:
            parts.append(f"deleted {len(ownerless)} members no owner recreates ({len(bound)} bound, holding {held} "
                         f"accelerators): resubmit them (label {names.GROUP_LABEL}={label}): {listed}")
        else:
            parts.append(f"kept {len(ownerless)} members no owner recreates (--rollback-ownerless=keep): "
                         f"{len(bound)} bound, holding {held} accelerators the group cannot use until it is "
                         f"complete; delete them to free those: {listed}")
    if delete and ownerless and not owned:
        state.given_up[key] = frozenset(m.uid for m in deleted)
        return Verdict(Phase.FAILED, Reason.MEMBERS_DELETED, "; ".join(parts))
    parts.append(f"planning again in {delay:.0f}s")
    return Verdict(Phase.WAITING, Reason.ROLLED_BACK, "; ".join(parts))


# --- preemption ------------------------------------------------------------------------------

def _preempt(state: _Pass, view: GangView, preemption: Preemption, view_of) -> None:
    """Book the room for the preemptor at once (its reservations, on top of the victims, so that
    nothing else takes it) and take its victims, whole and without harm: a group's owner with a
    suspend switch is suspended (resumed after the rollback backoff: its pods come back gated and
    queue again, its failure count untouched), any other group's members are deleted, a lone pod
    is evicted. The preemptor is released once its nodes are free (`_release`)."""
    group = view.group
    _reserve(state, view, preemption.plan)
    victims = {f"{m.namespace}/{m.name}": (m.uid, victim.group) for victim in preemption.victims for m in victim.members}
    state.preempting[group.key] = Room(state.now, victims, state.now)
    taken = ", ".join(victim.name for victim in preemption.victims[:NAMED])
    message = (f"{len(preemption.plan.assignments)} members reserved; preempting {len(preemption.victims)} of lower "
               f"priority ({taken}); released once they are gone")
    state.verdicts[group.key] = Verdict(Phase.ADMITTED, Reason.PREEMPTING, message)
    _report(state, view, GangEvent.PREEMPTING, Reason.PREEMPTING, message, force=True)
    for victim in preemption.victims:
        why = f"preempted by {group} (priority {group.priority}, above its {victim.priority})"
        victim_view = view_of(victim.group) if victim.group is not None else None
        if victim_view is None:
            _evict(state, victim.members[0], why)
        else:
            _preempt_group(state, victim_view, why)


def _preempt_group(state: _Pass, view: GangView, why: str) -> None:
    key = view.group.key
    live = [f for f in view.pods if not f.member.terminal]
    owner = _owner(state, view)
    if owner is not None and owner[1].suspend.suspended:  # suspended already (by a user, say): its pods go
        message = f"{why}; {owner[1].kind} {owner[1].name} is suspended already: its pods are going"
    elif owner is not None:
        message = _suspend_victim(state, key, owner, why)
        state.preemptions["suspended"] += 1
    else:
        _delete_victims(state, key, live, why)
        state.given_up[key] = frozenset(f.member.uid for f in live)  # its Gang stays, saying what to resubmit
        message = (f"{why}; deleted its {len(live)} members ({_accelerators(state, [f.member for f in live])} "
                   f"accelerators): resubmit them (label {names.GROUP_LABEL}={view.label}): "
                   f"{_named([f.member for f in live])}")
        state.preemptions["deleted"] += 1
    state.verdicts[key] = verdict = Verdict(Phase.WAITING, Reason.PREEMPTED, message)
    _report(state, view, GangEvent.PREEMPTED, Reason.PREEMPTED, message, warning=True, force=True,
            pods=[f.member.name for f in live], on_pods=True)
    state.preempted[key] = f"{why} at {_rfc3339(state.now)}"
    if key not in state.decided:  # a running group the pass does not decide: its Gang says it now
        _save_status(state, view, verdict, False, state.preempted[key], now=True)


def _evict(state: _Pass, pod: Member, why: str) -> None:
    key = (pod.namespace, pod.name)
    state.actions.append(EvictPod(key, pod.name, pod.uid, why))
    state.actions.append(Report(key, GangEvent.PREEMPTED, Reason.PREEMPTED, f"{why}: evicted through the Eviction "
                                f"API", Involved("v1", "Pod", pod.name, pod.uid), warning=True))
    state.preemptions["evicted"] += 1


def _take_again(state: _Pass, preemptor: Group, standing: Sequence[tuple[PodFacts, GroupKey | None]]) -> None:
    """Send again the writes that take the victims still standing and not on their way out: the
    first ones were refused or lost (a suspension's conflict, an eviction a budget refused at the
    time). Counted and reported once, when first taken; the owner's suspension is reported again."""
    why = f"preempted by {preemptor} (priority {preemptor.priority}); taken again: the last write did not take"
    groups = {}
    for facts, victim in standing:
        if facts.member.terminating:
            continue
        if victim is None:
            state.actions.append(EvictPod((facts.member.namespace, facts.member.name), facts.member.name,
                                          facts.member.uid, why))
        else:
            groups.setdefault(victim, []).append(facts)
    for victim, pods in groups.items():
        view = state.index.view(victim) if state.index is not None else None
        owner = _owner(state, view) if view is not None else None
        if owner is not None and not owner[1].suspend.suspended:
            _suspend_victim(state, victim, owner, why)
        elif owner is None:
            _delete_victims(state, victim, pods, why)


def _suspend_victim(state: _Pass, key: GroupKey, owner: tuple[WorkloadKey, Workload], why: str) -> str:
    """Suspend a victim group's owner until the rollback backoff ends: resumed then, its pods come
    back gated and queue again."""
    attempts = state.rollbacks.get(key, (0, 0.0))[0]
    until = math.ceil(state.now + state.settings.rollback_backoff_seconds)
    return _suspend_owner(state, key, owner, attempts, until, why, "preempted")


def _delete_victims(state: _Pass, key: GroupKey, pods: Iterable[PodFacts], why: str) -> None:
    state.actions += [DeletePod(key, f.member.name, f.member.uid, why, Reason.PREEMPTED) for f in pods]


def _still_given_up(state: _Pass, view: GangView) -> Verdict | None:
    """A group given up stays Failed while the pods the rollback deleted go; a new member (the
    group resubmitted) makes it a group like any other again."""
    deleted = state.memory.given_up.get(view.group.key)
    if deleted is None or not {m.uid for m in view.group.members if not m.terminal} <= deleted:
        return None
    state.given_up[view.group.key] = deleted
    return Verdict(Phase.FAILED, Reason.MEMBERS_DELETED, "every member was deleted (rolled back or preempted); "
                   f"resubmit them (label {names.GROUP_LABEL}={view.label})")


def _remember_given_up(state: _Pass, pending: Pending, gone: set[GroupKey]) -> None:
    """Given-up groups not decided this pass, and not gone, are still given up."""
    decided = {view.group.key for view in pending.views}
    for key, deleted in state.memory.given_up.items():
        if key not in decided and key not in gone:
            state.given_up.setdefault(key, deleted)


def _held_owners(state: _Pass, pending: Pending) -> None:
    """The owners this controller suspended: resume those whose backoff is over; keep their groups'
    backoff count while their pods are gone; forget those gangkeeper no longer holds (module docstring).

    A pass that decides every group (a new leadership term) also finds the owners marked as held
    by gangkeeper on the owners themselves: what a predecessor suspended is resumed on time.
    """
    known = dict(state.memory.held)
    if pending.complete:
        for key, workload in state.workloads.items():
            if workload.suspend is not None and workload.suspend.held and key not in known:
                known[key] = HeldOwner(workload.uid, None, 0, workload.suspend.resource_version)
    decided = {view.group.key for view in pending.views}
    for key, entry in known.items():
        workload = state.workloads.get(key)
        if workload is None or workload.uid != entry.uid or workload.suspend is None:
            continue  # gone: forgotten
        switch = workload.suspend
        if switch.held:
            _resume_when_due(state, key, workload, entry)
        elif switch.resource_version == entry.resource_version:
            state.held[key] = entry  # our suspension, still on its way
        elif entry.group is not None and entry.group not in decided:
            state.held[key] = entry  # left alone; its group's backoff count kept until its pods are back
            state.rollbacks[entry.group] = (entry.attempts, state.now)
        elif entry.group is not None:
            state.rollbacks[entry.group] = (entry.attempts, state.now)  # resumed: its group is planned again


def _resume_when_due(state: _Pass, key: WorkloadKey, workload: Workload, entry: HeldOwner) -> None:
    """Resume a held owner once the time on it has come (at once when someone made it unreadable).
    The patch goes every pass until the cache shows it resumed (a duplicate fails its resourceVersion
    precondition, a lost one is sent again); it is reported once."""
    switch = workload.suspend
    group = entry.group or (workload.namespace, workload.name)
    if entry.group is not None:
        state.rollbacks.setdefault(entry.group, (entry.attempts, switch.resume_at or state.now))
    due = switch.resume_at if switch.resume_at is not None else state.now
    if state.now < due:
        state.held[key] = entry
        state.due.append(due)
        return
    integration = integrations.BY_RESOURCE[key[0]]
    state.actions.append(ResumeOwner(group, integration.resource, workload.name,
                                     integration.suspension.resuming(switch.resource_version)))
    state.held[key] = replace(entry, resumed=True)
    if not entry.resumed:
        state.actions.append(Report(group, GangEvent.RESUMED, Reason.RESUMED,
                                    f"gangkeeper resumed this {workload.kind}, which it had suspended to roll back "
                                    f"its group: its pods come back gated", _about(workload)))


def _suspended(workload: Workload) -> str:
    switch = workload.suspend
    if switch.held:
        until = f"until {_rfc3339(switch.resume_at)}" if switch.resume_at is not None else "until the next pass"
        return (f"{workload.kind} {workload.name} is suspended by gangkeeper {until}: its pods go, and come back "
                f"gated when it is resumed")
    return (f"{workload.kind} {workload.name} is suspended, not by gangkeeper: nothing of the group is planned "
            f"until it is resumed")


def _accelerators(state: _Pass, members: Iterable[Member]) -> int:
    return accelerator_count((m.requests for m in members), state.settings.accelerator_patterns)


def _accelerators_asked(state: _Pass, requests: Mapping) -> list[tuple[str, float]]:
    """The accelerators in a set of requests, as the metrics count them."""
    return [(resource, float(amount))
            for resource, amount in accelerators(requests, state.settings.accelerator_patterns).items()]


def _named(members: Sequence[Member]) -> str:
    return first_of(sorted(m.name for m in members), NAMED)


def _rfc3339(moment: float) -> str:
    return datetime.fromtimestamp(moment, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _waiting_for_room(state: _Pass, view: GangView) -> bool:
    """Whether reserved members wait to be released because the work their group preempted is
    still there: a victim's pod not gone (a terminating pod keeps its node, its devices, its ports
    and its place in its neighbours' pod rules), or their nodes over-committed in the ledger (the
    victims of a preemption decided before a restart). A victim that stands and is not on its way
    out is taken again every `RETAKE_SECONDS`. They wait at most the bind timeout; if the room is
    lost by then, they are released anyway, fail to bind and the group is rolled back to plan
    again, rather than wait forever."""
    key = view.group.key
    room = state.memory.preempting.get(key) or state.preempting.get(key)
    standing = _standing(state, room)
    crowded = sorted({m.reserved_node for m in view.group.members if m.gated and m.reserved_node and not m.terminal
                      and any(value < 0 for value in state.index.ledger.free(m.reserved_node).values())})
    if not crowded and not standing:
        return False
    since, sent = (room.since, room.sent) if room is not None else (state.now, state.now)
    timeout = state.settings.bind_timeout_seconds
    if state.now - since >= timeout:
        return False
    if state.now - sent >= RETAKE_SECONDS and any(not facts.member.terminating for facts, _ in standing):
        _take_again(state, view.group, standing)
        sent = state.now
    state.preempting[key] = Room(since, room.victims if room is not None else {}, sent)
    state.due += [since + timeout] + ([sent + RETAKE_SECONDS] if standing else [])
    left = f"at most {timeout - (state.now - since):.0f}s more"
    if standing:
        pods = sorted(f"{facts.member.namespace}/{facts.member.name}" for facts, _ in standing)
        message = f"reserved; waiting for {len(pods)} preempted pods to go: {first_of(pods, NAMED)} ({left})"
    else:
        message = f"reserved; waiting for the pods still on {', '.join(crowded[:NAMED])} to go ({left})"
    state.verdicts[key] = Verdict(Phase.ADMITTED, Reason.PREEMPTING, message)
    return True


def _standing(state: _Pass, room: Room | None) -> list[tuple[PodFacts, GroupKey | None]]:
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


def _release(state: _Pass, view: GangView) -> None:
    released = []
    for facts in view.pods:
        member = facts.member
        if member.gated and member.reserved_node and not member.terminal and facts.gate_index is not None:
            state.actions.append(Release(view.group.key, member.name, member.reserved_node,
                                         release_patch(facts, member.reserved_node, state.now), view.label,
                                         facts.resource_version))
            released.append(member.name)
    if released:
        key = view.group.key
        if state.memory.reported.get((key, Channel.STATE)) != News(Reason.RELEASED) and key in state.memory.complete_at:
            state.released_after.append((key, state.now - state.memory.complete_at[key]))
        _report(state, view, GangEvent.RELEASED, Reason.RELEASED,
                f"released {len(released)} members to their reserved nodes", pods=released, on_pods=True)


# --- planning ------------------------------------------------------------------------------

def _plan(state: _Pass, queue: list[GangView], extras: list[GangView], index: ClusterIndex) -> None:
    """Admit what the queue admits, and take lower-priority work's place for a group that does not
    fit when preemption is on; then give each admitted group with members still waiting (elastic
    ones beyond min count, replacements) one more, from what is left."""
    pool = index.pool
    views = {view.group.key: view for view in queue}
    for view in queue:
        state.verdicts[view.group.key] = _incomplete_or_queued(view.group)
    if not queue and not extras:
        return
    candidates = index.preemption_candidates if state.settings.preemption is Preempting.LOWER_PRIORITY else None
    result = plan_pass([_admission_view(view.group) for view in queue], pool, index.ledger, state.now,
                       state.settings.policy, index.occupancy, candidates, basis=index.version, last=index.planned)
    index.planned = result.planned
    working, around = result.ledger, result.occupancy  # admitted plans and the starving head's hold are counted in them
    for group, plan in result.admitted:
        _reserve(state, views[group.key], plan)
        state.verdicts[group.key] = Verdict(Phase.ADMITTED, Reason.RESERVED, f"{len(plan.assignments)} members reserved")
    for group, preemption in result.preemptions:
        _preempt(state, views[group.key], preemption, index.view)
    for waiting in result.waiting:
        if waiting.no_fit is not None:
            state.verdicts[waiting.group.key] = Verdict(Phase.WAITING, Reason.NO_FIT, waiting.reason)
        elif _behind_the_head(waiting):
            state.verdicts[waiting.group.key] = Verdict(Phase.WAITING, Reason.QUEUED, waiting.reason)
    if state.settings.policy.order is Order.STRICT_FIFO and any(w.no_fit is not None for w in result.waiting):
        return  # members beyond an admitted group's min count queue behind every group, too
    for view in extras:
        member = view.group.waiting_members[0]
        # With the members that hold their nodes, whose domains a topology rule keeps it to.
        booked = tuple(m for m in view.group.members if not m.waiting and not m.terminal and (m.node or m.reserved_node))
        plan = plan_group(replace(view.group, members=(*booked, member), min_count=1), pool, working,
                          state.settings.policy.topology, around)
        if isinstance(plan, Plan):
            apply(plan, working, around, pool)
            _reserve(state, view, plan)


def _behind_the_head(waiting: Waiting) -> bool:
    """Whether the queue left a complete group unplanned: under StrictFIFO, every group behind the
    first that does not fit waits, unplanned. A group not complete never entered the queue, and
    keeps the verdict that says what it lacks."""
    return waiting.no_fit is None and waiting.group.complete


def _admission_view(group: Group) -> Group:
    """The members the queue should place: min count of them, counting those already reserved.

    An elastic group is admitted with its min count; the rest follow one at a time.
    """
    live = [m for m in group.members if not m.terminal]
    if len(live) <= group.min_count:
        return group
    booked = [m for m in live if not m.waiting]
    waiting = [m for m in live if m.waiting]
    return replace(group, members=tuple(booked + waiting[:max(0, group.min_count - len(booked))]))


def _incomplete_or_queued(group: Group) -> Verdict:
    """A waiting group's verdict before the queue has its say: members missing, or waiting its turn."""
    present = sum(1 for m in group.members if not m.terminal)
    if present < group.min_count:
        return Verdict(Phase.WAITING, Reason.INCOMPLETE, f"{present}/{group.min_count} pods")
    return Verdict(Phase.WAITING, Reason.QUEUED, f"{present}/{group.min_count} pods present, waiting for a planning pass")


def _reserve(state: _Pass, view: GangView, plan: Plan) -> None:
    """Book the plan: in one write on the group's Gang when it has one and the plan fits there,
    else on each member (its reservation annotation, guarded by the resourceVersion read)."""
    place = _gang(state, view) if state.index.keeps_gang_reservations else None
    patch = gangs.reservations_patch(view, plan.assignments, place.existing) if place is not None else None
    if patch is not None:
        state.actions.append(ReserveGroup(view.group.key, place.name, patch,
                                          None if place.existing is not None else gangs.gang_body(view, place.name)))
    else:
        by_uid = {facts.member.uid: facts for facts in view.pods}
        for member, node in plan.assignments:
            state.actions.append(Reserve(view.group.key, member.name, by_uid[member.uid].resource_version, node))
    nodes = sorted(plan.nodes)
    _report(state, view, GangEvent.RESERVED, Reason.RESERVED,
            f"reserved {len(plan.assignments)} members on {len(nodes)} nodes: {', '.join(nodes[:10])}",
            pods=[m.name for m, _ in plan.assignments], force=True)


# --- reporting and status ------------------------------------------------------------------

def _report(state: _Pass, view: GangView, event: GangEvent, reason: Reason | str, message: str, *,
            pods: Sequence[str] = (), warning: bool = False, force: bool = False, channel: Channel = Channel.STATE,
            news: News | None = None, on_pods: bool = False) -> None:
    """A Report, unless the same news was reported last time on this channel (Events follow changes)."""
    key = view.group.key
    news = news if news is not None else News(reason)
    state.reported[(key, channel)] = news
    if force or state.memory.reported.get((key, channel)) != news:
        uids = {facts.member.name: facts.member.uid for facts in view.pods} if pods else {}
        state.actions.append(Report(key, event, reason, message, _involved(state, view),
                                    tuple(Involved("v1", "Pod", pod, uids.get(pod, "")) for pod in pods), warning,
                                    on_pods))


def _involved(state: _Pass, view: GangView) -> Involved:
    """The Gang when there is (or will be) one, else the group's first pod. A Gang this pass
    creates has no uid yet: the executor learns it when it writes the Gang (`controller.actions`)."""
    place = _gang(state, view)
    if place is not None and (view.problem is None or place.existing is not None):
        return Involved(gangs.API_VERSION, names.GANG_KIND, place.name,
                        place.existing.uid if place.existing is not None else "")
    first = view.pods[0].member
    return Involved("v1", "Pod", first.name, first.uid)


def _about(workload: Workload) -> Involved:
    """An owner or a Gang, as the Event on it names it."""
    return Involved(workload.api_version, workload.kind, workload.name, workload.uid)


def _gang(state: _Pass, view: GangView) -> gangs.GangPlace | None:
    """Where the group's Gang is or goes, when it keeps one."""
    found = state.places.get(view.group.key)
    if found is not None and found[0] is view:
        return found[1]
    place = gangs.find_gang(view, state.workloads) if gangs.keeps_gang(view, state.serves_gangs) else None
    state.places[view.group.key] = (view, place)
    return place


def _verdict(state: _Pass, view: GangView) -> Verdict:
    """The group's verdict; one whose decision broke (`_guarded`) waits, as far as anyone can tell."""
    return state.verdicts.get(view.group.key) or _incomplete_or_queued(view.group)


def _report_and_status(state: _Pass, view: GangView) -> None:
    """Events and audit lines when the group's state changed, and its Gang's status when that did.

    A waiting group is reported when the reason it waits changes (the Gang's status carries the
    details, which change with every bit of capacity freed); a problem, when its message does.
    """
    key, verdict = view.group.key, _verdict(state, view)
    if verdict.phase is Phase.WAITING and verdict.reason is not Reason.ROLLED_BACK:  # a rollback was reported
        problem = view.problem is not None
        _report(state, view, GangEvent.WAITING, verdict.reason, verdict.message, warning=problem,
                news=News(verdict.reason, verdict.message if problem else None))
    elif verdict.phase is Phase.RUNNING:
        if key in state.memory.complete_at and state.memory.reported.get((key, Channel.STATE)) != News(Reason.BOUND):
            state.bound_after.append(state.now - state.memory.complete_at[key])  # first seen bound since complete
        _report(state, view, GangEvent.BOUND, Reason.BOUND, verdict.message)
    timed_out = verdict.reason is Reason.TIMED_OUT or (verdict.phase is Phase.WAITING and _timed_out(state, view.group))
    if timed_out:
        _report(state, view, GangEvent.TIMED_OUT, Reason.TIMED_OUT,
                f"not admitted within {view.group.schedule_timeout_seconds:g}s"
                + ("; given up" if verdict.phase is Phase.FAILED else "; still waiting"),
                warning=True, channel=Channel.TIMEOUT)
    stuck = None
    if verdict.phase is Phase.WAITING and verdict.reason is Reason.INCOMPLETE:
        stuck = _stuck_incomplete(state, view)
    _save_status(state, view, verdict, timed_out, state.preempted.get(key), stuck=stuck)


def _stuck_incomplete(state: _Pass, view: GangView) -> str | None:
    """What to say of a gated group short of members when no new one arrived for the set time
    (`controller.incomplete`): a Warning Event on its Gang and on each of its pods, and an audit
    line, once when it becomes stuck and again only when what it says changes. None while members
    still arrive; the pass then falls due when the set time will have passed."""
    key, threshold = view.group.key, state.settings.incomplete_group_seconds
    arrival = incomplete.last_arrival(view.group, state.memory.arrivals.get(key), key in state.memory.first_seen,
                                      state.now)
    state.arrivals[key] = arrival
    if not incomplete.stuck(arrival, state.now, threshold):
        state.due.append(arrival.since + threshold)
        return None
    message = incomplete.message(view, threshold)
    state.stuck[key[0]] += 1
    _report(state, view, GangEvent.STUCK, Reason.INCOMPLETE_GROUP, message, warning=True,
            channel=Channel.INCOMPLETE, news=News(Reason.INCOMPLETE_GROUP, message),
            pods=[facts.member.name for facts in view.pods if not facts.member.terminal], on_pods=True)
    return message


def _save_status(state: _Pass, view: GangView, verdict: Verdict, timed_out: bool, preempted: str | None = None,
                 *, now: bool = False, stuck: str | None = None) -> None:
    """Write the group's Gang status when it changed (or `now`, when the change must show at once);
    `stuck` says what a group stuck incomplete waits for."""
    key = view.group.key
    place = _gang(state, view)
    if place is None or (place.existing is None and view.problem is not None):
        return
    current = (place.existing.status if place.existing is not None else None) or {}
    attempts = state.rollbacks.get(key, (0, 0.0))[0]
    rollback = verdict.message if key in state.rolled_back else None
    status = gangs.gang_status(view, verdict, timed_out, attempts, state.settings.accelerator_patterns, current,
                               state.now, rollback, preempted, stuck)
    if place.existing is not None and not now:
        due = gangs.status_due(current, status, state.memory.status_written.get(key), state.now)
        if due is None or due > state.now:
            state.due += [due] if due is not None else []  # the pass then writes the details
            return
    state.status_written[key] = state.now
    state.actions.append(SaveGang(key, place.name, status,
                                  None if place.existing is not None else gangs.gang_body(view, place.name)))


def _outcome(state: _Pass, pending: Pending, index: ClusterIndex) -> Outcome:
    memory = replace(after_pass(state.memory, pending, state.now, rollbacks=state.rollbacks, reported=state.reported,
                                incomplete_since=state.incomplete_since, status_written=state.status_written,
                                arrivals=state.arrivals),
                     held=state.held, given_up=state.given_up, preempting=state.preempting)
    decided = {view.group.key: _verdict(state, view).phase for view in pending.views}
    phases = Counter(phase.value for phase in decided.values())
    phases.update(pending.settled_phases)
    released = {action.group for action in state.actions if isinstance(action, Release)}
    waited, demand, longest = [], Counter(), {}
    asked: dict[int, tuple[Mapping, list[tuple[str, float]]]] = {}  # by requests mapping: members share theirs
    for view in pending.views:
        group, namespace = view.group, view.group.key[0]
        waiting = decided[group.key] is Phase.WAITING
        if not waiting and group.key not in released:
            continue
        live = [member for member in group.members if not member.terminal]
        # A group's wait ends with its first release: none of its members released before (extras
        # and replacements come later), nor reported released (a release whose writes failed is sent again).
        if (group.key in released and all(member.gated for member in live)
                and state.memory.reported.get((group.key, Channel.STATE)) != News(Reason.RELEASED)):
            waited.append((group.key, max(state.now - group.first_seen, 0.0)))
        if waiting:
            longest[namespace] = max(longest.get(namespace, 0.0), state.now - group.first_seen)
            for member in live:
                entry = asked.get(id(member.requests))
                if entry is None:  # the mapping is kept with it: no other takes its id meanwhile
                    entry = asked[id(member.requests)] = (member.requests, _accelerators_asked(state, member.requests))
                for resource, amount in entry[1]:
                    demand[namespace, resource] += amount
    return Outcome(tuple(state.actions), memory, dict(phases), index.reserved_accelerators,
                   tuple(state.released_after), len(state.rolled_back), min(state.due, default=None),
                   dict(state.preemptions), decided_phases={key: phase.value for key, phase in decided.items()},
                   gone=pending.gone, complete=pending.complete, waited=tuple(waited),
                   waiting_accelerators=dict(demand), longest_wait=longest, bound_after=tuple(state.bound_after),
                   stuck_incomplete=dict(state.stuck))
