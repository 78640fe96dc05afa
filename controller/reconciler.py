"""One reconcile pass, decided on the cluster as the index holds it: what to write, never writing it.

A group moves through reserve → release → bound, one durable step per pass:
  - reserve: the planner admitted the group; each waiting member gets the reservation
    annotation (it stays gated). Capacity is booked from now on: the ledger counts reservations
    and pins found on the pods, so a restarted controller books exactly what its predecessor
    booked and nothing twice.
  - release: at least min count members hold a reservation (or are further along); every
    reserved, still-gated member gets one JSON Patch that pins it to its node, removes our gate
    and records when (`gangkeeper.io/released-at`), guarded by `test`s so that a stale cache
    gets a Conflict instead of a wrong write.
  - rollback: a released member not bound within the bind timeout, or reported Unschedulable,
    means the plan was wrong (something the model does not see). All members that have an
    owner are deleted so the owner recreates them gated; the group then backs off
    exponentially. Capacity stays booked until the pods are gone, so nothing else can take it
    before the rollback completes. Pods without an owner are reported, never deleted.
Once admitted, a group's other members — elastic ones beyond min count, or replacements of
members that finished, failed or were deleted (with their node, say) — are reserved one at a
time, in later passes, from what the queue leaves over, and released like the rest.

A group that lost members while running holds GPUs without making progress until replacements
are placed. When at least one of its live members is bound but fewer than min count are bound,
reserved or succeeded (the others wait with nothing reserved: capacity is short, their node is
gone), the group is incomplete; incomplete for longer than the bind timeout, it is rolled back like a
failed release (same deletions, backoff and reporting), so that what it holds goes back to the
queue and the whole group is admitted again when it fits. The clock is the controller's memory
of when it first saw the group incomplete; after a restart, the creation of the group's newest
live member (the replacement its owner recreated): durable, and no later than when the
replacement began to wait, so a restart cannot postpone the rollback.

The bind timeout counts from the release annotation, which survives a restart or a change of
leader; only when it is missing or unreadable does it count from when this controller first saw
the member released. A group not admitted within its schedule timeout gets a TimedOut condition
and an Event, and keeps waiting unless `Settings.fail_on_schedule_timeout` gives it up (phase
Failed; its pods stay gated for their owner to clean up).

The pass's parts are modules of their own: `decisions` (what it returns: verdicts and
actions), `patches` (the bodies of the pod writes), `gangs` (which Gang, its name and status)
and `memory` (what it remembers for the next pass, and may lose on a restart).
"""

import enum
import logging
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from gangkeeper import names
from gangkeeper.controller import gangs
from gangkeeper.controller.capacity import Ledger
from gangkeeper.controller.decisions import (
    Action,
    DeleteGang,
    DeletePod,
    GangEvent,
    Phase,
    Reason,
    Release,
    Report,
    Reserve,
    SaveGang,
    Verdict,
)
from gangkeeper.controller.eligibility import NodePool
from gangkeeper.controller.groups import GangView, PodFacts, WorkloadIndex, settled_phase
from gangkeeper.controller.index import ClusterIndex, Pending
from gangkeeper.controller.memory import Channel, Memory, News, after_pass
from gangkeeper.controller.model import Group, GroupKey, Node
from gangkeeper.controller.patches import release_patch
from gangkeeper.controller.planner import Plan, apply, plan_group
from gangkeeper.controller.queue import Order, QueuePolicy, Waiting, plan_pass

log = logging.getLogger("gangkeeper.controller.reconciler")


@dataclass(frozen=True)
class Settings:
    bind_timeout_seconds: float = 120.0
    policy: QueuePolicy = QueuePolicy()
    rollback_backoff_seconds: float = 30.0
    rollback_backoff_cap_seconds: float = 960.0
    accelerator_patterns: tuple[str, ...] = names.DEFAULT_ACCELERATORS
    fail_on_schedule_timeout: bool = False


@dataclass(frozen=True)
class Outcome:
    actions: tuple[Action, ...]
    memory: Memory
    phases: Mapping[str, int]
    reserved_accelerators: int
    released_after: tuple[float, ...]
    rollbacks: int
    # The earliest moment a decision falls due by time alone (a bind or incomplete timeout): the
    # runner wakes then rather than at its next resync, so a timeout is acted on when it expires.
    next_due: float | None = None


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
    released_after: list[float] = field(default_factory=list)
    status_written: dict[GroupKey, float] = field(default_factory=dict)
    incomplete_since: dict[GroupKey, float] = field(default_factory=dict)
    due: list[float] = field(default_factory=list)
    rolled_back: int = 0


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
    state = _Pass(now, settings, memory, index.workloads, index.serves_gangs, rollbacks=dict(memory.rollbacks))
    queue, extras = [], []
    for view in pending.views:
        planning = _guarded(_decide_in_flight, state, view)
        if planning is Planning.ADMISSION:
            queue.append(view)
        elif planning is Planning.EXTRAS:
            extras.append(view)
    _plan(state, queue, extras, index.pool, index.ledger)
    for view in pending.views:
        _guarded(_report_and_status, state, view)
    state.actions.extend(_disposed_gangs(state, _gone(pending, memory)))
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
    (not a user's declaration) and without owner (an owned one is garbage-collected with it)."""
    deletions = []
    for key in gone:
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
    settled = settled_phase(view)
    if settled is not None:  # what the index counts for it while it is not decided again
        phase, live = Phase(settled), sum(1 for m in group.members if not m.terminal)
        state.verdicts[key] = (Verdict(phase, Reason.FINISHED, "every member has finished") if phase is not Phase.RUNNING
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
        _roll_back(state, view, attempts, failure)
        return Planning.NONE
    live = [m for m in group.members if not m.terminal]
    booked = [m for m in live if m.node or m.reserved_node]
    if len(booked) < group.min_count and all(m.gated for m in live):
        return _not_admitted(state, view)
    _release(state, view)
    bound = sum(1 for m in live if m.node)
    if bound >= group.min_count:
        state.verdicts[key] = Verdict(Phase.RUNNING, Reason.BOUND, f"{bound}/{len(live)} members bound")
    else:
        state.verdicts[key] = Verdict(Phase.ADMITTED, Reason.RELEASED, f"{bound}/{len(live)} members bound")
    return Planning.EXTRAS if group.waiting_members else Planning.NONE


def _not_admitted(state: _Pass, view: GangView) -> Planning:
    """A group still to be admitted goes to the queue, unless it timed out and timing out fails it."""
    if state.settings.fail_on_schedule_timeout and _timed_out(state, view.group):
        state.verdicts[view.group.key] = Verdict(Phase.FAILED, Reason.TIMED_OUT, f"not admitted within "
                                                 f"{view.group.schedule_timeout_seconds:g}s; given up")
        return Planning.NONE
    return Planning.ADMISSION


def _timed_out(state: _Pass, group: Group) -> bool:
    timeout = group.schedule_timeout_seconds
    return timeout is not None and state.now - group.first_seen >= timeout


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
    created = [m.created for m in live if m.created is not None]
    since = min(state.memory.incomplete_since.get(group.key, max(created, default=state.now)), state.now)
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


def _roll_back(state: _Pass, view: GangView, attempts: int, why: str) -> None:
    key = view.group.key
    owned = [f.member for f in view.pods if f.owner is not None and f.owner.kind != "Pod"]
    lone = sorted(f.member.name for f in view.pods if f.owner is None)
    delay = min(state.settings.rollback_backoff_cap_seconds, state.settings.rollback_backoff_seconds * 2 ** attempts)
    state.rollbacks[key] = (attempts + 1, state.now + delay)
    state.actions += [DeletePod(key, m.name, m.uid) for m in owned if not m.terminal]
    state.rolled_back += 1
    message = f"{why}; deleted {len(owned)} members, planning again in {delay:.0f}s"
    if lone:
        message += f"; not deleted, no owner to recreate them: {', '.join(lone[:10])}"
    state.verdicts[key] = Verdict(Phase.WAITING, Reason.ROLLED_BACK, message)
    _report(state, view, GangEvent.ROLLED_BACK, Reason.ROLLED_BACK, message, warning=True, force=True,
            pods=[m.name for m in owned] + lone, on_pods=True)


def _release(state: _Pass, view: GangView) -> None:
    released = []
    for facts in view.pods:
        member = facts.member
        if member.gated and member.reserved_node and not member.terminal and facts.gate_index is not None:
            state.actions.append(Release(view.group.key, member.name, member.reserved_node,
                                         release_patch(facts, member.reserved_node, state.now)))
            released.append(member.name)
    if released:
        key = view.group.key
        if state.memory.reported.get((key, Channel.STATE)) != News(Reason.RELEASED) and key in state.memory.complete_at:
            state.released_after.append(state.now - state.memory.complete_at[key])
        _report(state, view, GangEvent.RELEASED, Reason.RELEASED,
                f"released {len(released)} members to their reserved nodes", pods=released, on_pods=True)


# --- planning ------------------------------------------------------------------------------

def _plan(state: _Pass, queue: list[GangView], extras: list[GangView], pool: NodePool, ledger: Ledger) -> None:
    """Admit what the queue admits; then give each admitted group with members still waiting (elastic
    ones beyond min count, replacements) one more, from what is left."""
    views = {view.group.key: view for view in queue}
    for view in queue:
        state.verdicts[view.group.key] = _incomplete_or_queued(view.group)
    if not queue and not extras:
        return
    result = plan_pass([_admission_view(view.group) for view in queue], pool, ledger, state.now, state.settings.policy)
    working = result.ledger  # admitted plans and the starving head's hold are counted in it
    for group, plan in result.admitted:
        _reserve(state, views[group.key], plan)
        state.verdicts[group.key] = Verdict(Phase.ADMITTED, Reason.RESERVED, f"{len(plan.assignments)} members reserved")
    for waiting in result.waiting:
        if waiting.no_fit is not None:
            state.verdicts[waiting.group.key] = Verdict(Phase.WAITING, Reason.NO_FIT, waiting.reason)
        elif _behind_the_head(waiting):
            state.verdicts[waiting.group.key] = Verdict(Phase.WAITING, Reason.QUEUED, waiting.reason)
    if state.settings.policy.order is Order.STRICT_FIFO and any(w.no_fit is not None for w in result.waiting):
        return  # members beyond an admitted group's min count queue behind every group, too
    for view in extras:
        member = view.group.waiting_members[0]
        plan = plan_group(replace(view.group, members=(member,), min_count=1), pool, working,
                          state.settings.policy.topology)
        if isinstance(plan, Plan):
            apply(plan, working)
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
        state.actions.append(Report(key, event, reason, message, _involved(state, view), tuple(pods), warning,
                                    on_pods))


def _involved(state: _Pass, view: GangView) -> tuple[str, str, str]:
    """The Gang when there is (or will be) one, else the group's first pod."""
    place = _gang(state, view)
    if place is not None and (view.problem is None or place.existing is not None):
        return gangs.API_VERSION, names.GANG_KIND, place.name
    return "v1", "Pod", view.pods[0].member.name


def _gang(state: _Pass, view: GangView) -> gangs.GangPlace | None:
    """Where the group's Gang is or goes, when it keeps one."""
    if not gangs.keeps_gang(view, state.serves_gangs):
        return None
    return gangs.find_gang(view, state.workloads)


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
        _report(state, view, GangEvent.BOUND, Reason.BOUND, verdict.message)
    timed_out = verdict.reason is Reason.TIMED_OUT or (verdict.phase is Phase.WAITING and _timed_out(state, view.group))
    if timed_out:
        _report(state, view, GangEvent.TIMED_OUT, Reason.TIMED_OUT,
                f"not admitted within {view.group.schedule_timeout_seconds:g}s"
                + ("; given up" if verdict.phase is Phase.FAILED else "; still waiting"),
                warning=True, channel=Channel.TIMEOUT)
    place = _gang(state, view)
    if place is None or (place.existing is None and view.problem is not None):
        return
    current = (place.existing.status if place.existing is not None else None) or {}
    attempts = state.rollbacks.get(key, (0, 0.0))[0]
    status = gangs.gang_status(view, verdict, timed_out, attempts, state.settings.accelerator_patterns, current,
                               state.now)
    if place.existing is not None and not gangs.status_due(current, status, state.memory.status_written.get(key),
                                                           state.now):
        return
    state.status_written[key] = state.now
    state.actions.append(SaveGang(key, place.name, status,
                                  None if place.existing is not None else gangs.gang_body(view, place.name)))


def _outcome(state: _Pass, pending: Pending, index: ClusterIndex) -> Outcome:
    memory = after_pass(state.memory, pending, state.now, rollbacks=state.rollbacks, reported=state.reported,
                        incomplete_since=state.incomplete_since, status_written=state.status_written)
    phases = Counter(_verdict(state, view).phase.value for view in pending.views)
    phases.update(pending.settled_phases)
    return Outcome(tuple(state.actions), memory, dict(phases), index.reserved_accelerators,
                   tuple(state.released_after), state.rolled_back, min(state.due, default=None))
