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
time, in later passes, from what the queue leaves over, and released like the rest; never more
than its owner's maximum at once (`Group.max_count`).

A group that lost members while running keeps running, degraded, while at least its min count
stay placed (`deciding.elastic`). Below that it holds GPUs without making progress until
replacements are placed: when at least one of its live members is bound but fewer than min count
(or than its peak, when its min count was raised since: `elastic.floor`) are bound, reserved or
succeeded (the others wait with nothing reserved: capacity is short, their node is gone), the
group is incomplete; incomplete for longer than the bind timeout, it is rolled back like a
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
(`deciding.incomplete`).

The groups of a tree of Gangs (`deciding.trees`) are queued, released, preempted and rolled
back as one.

This module is the pass itself: which groups it decides, what each still needs, the queue's
admissions. Its parts are modules of their own: `state` (its working state), `timeouts` (what
time alone decides), `booking` (reserve, then release), `rollback`, `elastic` (a running group's
strength), `preempting` (taking
lower-priority work's place), `resuming` (the owners it suspended), `reporting` (Events, audit
lines, the Gang's status), `telling` (an Event on each member: why it waits, that it was
released); what it returns, `outcome` with `decisions` (verdicts and actions),
`patches` (the bodies of the pod writes), `gangs` (which Gang, its name and status) and `memory`
(what it remembers for the next pass, and may lose on a restart); how it decides, `settings`.
"""

import enum
import logging
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Set
from dataclasses import replace
from typing import TypeVar

from gangkeeper.controller.cache.groups import GangView, settled_phase
from gangkeeper.controller.cache.index import ClusterIndex, Pending
from gangkeeper.controller.deciding import elastic, gangs, telling, trees
from gangkeeper.controller.deciding.booking import release, reserve
from gangkeeper.controller.deciding.capabilities import ApiCapabilities
from gangkeeper.controller.deciding.decisions import DeleteGang, Phase, Reason, Release, Verdict
from gangkeeper.controller.deciding.memory import Channel, Memory, News, after_pass
from gangkeeper.controller.deciding.outcome import Outcome
from gangkeeper.controller.deciding.preempting import preempt, waiting_for_room
from gangkeeper.controller.deciding.provisioning import ask_for_capacity, gang_of, place_provided, take_back_unclaimed
from gangkeeper.controller.deciding.reporting import gang_status_of, incomplete_or_queued, report_and_status, verdict_of
from gangkeeper.controller.deciding.resuming import held_owners, suspended
from gangkeeper.controller.deciding.rollback import owner_of, remember_given_up, roll_back, still_given_up
from gangkeeper.controller.deciding.settings import Preempting, Settings
from gangkeeper.controller.deciding.state import PassState, Remembered, accelerators_asked
from gangkeeper.controller.deciding.timeouts import bind_failed, incomplete_too_long, schedule_timed_out
from gangkeeper.controller.model.members import GroupKey
from gangkeeper.controller.planning.planner import apply, plan_group
from gangkeeper.controller.planning.plans import Plan
from gangkeeper.controller.planning.queue import Order, Planned, Waiting, plan_pass
from gangkeeper.controller.planning.trees import Tree, held
from gangkeeper.controller.reading.informer import uncollected

log = logging.getLogger("gangkeeper.controller.reconciler")
Decided = TypeVar("Decided")  # what one group's decision returns (`_guarded`)


class Planning(enum.Enum):
    """What a group under way still needs from this pass's planning."""

    NONE = enum.auto()
    ADMISSION = enum.auto()  # the queue admits its min count, or not
    EXTRAS = enum.auto()     # admitted: one more of its waiting members, from what the queue leaves


def reconcile(index: ClusterIndex, memory: Memory, now: float, settings: Settings = Settings(),
              capabilities: ApiCapabilities = ApiCapabilities()) -> Outcome:
    """Decide one pass on the cluster as `index` holds it, with what the last pass remembered and
    what the API server can do; move the index on (`ClusterIndex.pending`).

    An index fed by informers (`controller.cache.index`) costs O(groups under way + objects changed
    since the last pass); a fresh one (`ClusterIndex.build`, a restart) has every group decided.

    The cyclic garbage collector is held off meanwhile (`informer.uncollected`): a pass plans on
    copies of the ledger and the occupancy, containers of an entry per node and per pod that
    reference counting frees when the pass ends, and that each collection during the pass would
    read through (a third of a pass at 65,000 nodes); what the pass leaves is collected after it.
    """
    with uncollected():
        return _reconcile(index, memory, now, settings, capabilities)


def _reconcile(index: ClusterIndex, memory: Memory, now: float, settings: Settings,
               capabilities: ApiCapabilities) -> Outcome:
    pending = index.pending(memory.first_seen, now)
    state = PassState(now, settings, memory, index.workloads, index, capabilities,
                      remembered=Remembered(rollbacks=dict(memory.rollbacks)))
    state.decided = frozenset(view.group.key for view in pending.views)
    held_owners(state, pending)
    queue, extras = [], []
    for view in pending.views:
        planning = _guarded(_decide_in_flight, state, view)
        if planning is Planning.ADMISSION:
            queue.append(view)
        elif planning is Planning.EXTRAS:
            extras.append(view)
    trees.roll_back_together(state, pending.views)
    rolled_back = state.figures.rolled_back
    _plan(state, [v for v in queue if v.group.key not in rolled_back],
          [v for v in extras if v.group.key not in rolled_back], index)
    trees.make_parents(state, pending.views)
    for view in pending.views:
        _guarded(ask_for_capacity, state, view)
    if pending.complete and state.index.asked:
        take_back_unclaimed(state, {gang.uid for view in pending.views if (gang := gang_of(state, view)) is not None})
    for view in pending.views:
        _guarded(report_and_status, state, view)
    for root in trees.decided_trees(state, pending.views):
        trees.save_parent_status(state, root)
    telling.tell_chosen(state)
    gone = _gone(pending, memory)
    state.actions.extend(_disposed_gangs(state, gone))
    remember_given_up(state, pending, gone)
    return _outcome(state, pending, index)


def _gone(pending: Pending, memory: Memory) -> set[GroupKey]:
    """Groups whose last pod went since the last pass: those the index saw go and, when the pass
    decided every group (a fresh index knows no history), those remembered but not seen now."""
    gone = set(pending.gone)
    if pending.complete:
        gone |= set(memory.first_seen) - {view.group.key for view in pending.views}
    return gone


def _disposed_gangs(state: PassState, gone: Iterable[GroupKey]) -> list[DeleteGang]:
    """The Gangs of groups whose pods are all gone, when nothing else would ever delete them: ours
    (not a user's declaration) and without owner (an owned one is garbage-collected with it). The
    Gang of a group given up, whose pods a rollback deleted, stays: it says what to resubmit."""
    deletions = []
    for key in gone:
        if key in state.memory.given_up or key in state.remembered.given_up:
            continue
        gang = gangs.ownerless_gang(key, state.workloads)
        if gang is not None and gang.disposable:
            deletions.append(DeleteGang(key, gang.name))
    return deletions


def _guarded(decide: Callable[[PassState, GangView], Decided], state: PassState, view: GangView) -> Decided | None:
    """One group's decision; a group that breaks it is logged and skipped, never the whole pass."""
    try:
        return decide(state, view)
    except Exception:
        log.exception("%s: no decision this pass", view.group)
        return None


def _decide_in_flight(state: PassState, view: GangView) -> Planning:
    """Release, roll back or report a group already under way; say what planning it still needs."""
    group, key = view.group, view.group.key
    if view.problem:
        state.verdicts[key] = Verdict(Phase.WAITING, *view.problem)
        return Planning.NONE
    # Before the settled phase: the bound members of a group given up or suspended are going
    # (terminating), not running.
    given_up = still_given_up(state, view)
    if given_up is not None:
        state.verdicts[key] = given_up
        return Planning.NONE
    owner = owner_of(state, view)
    if owner is not None and owner.switch.suspended:
        state.verdicts[key] = Verdict(Phase.WAITING, Reason.SUSPENDED, suspended(owner))
        return Planning.NONE
    settled = settled_phase(view)
    if settled is not None:  # what the index counts for it while it is not decided again
        phase, present = Phase(settled), sum(1 for m in group.members if not m.terminal)
        state.verdicts[key] = (Verdict(phase, Reason.FINISHED, _finished(view)) if phase is not Phase.RUNNING
                               else Verdict(phase, Reason.BOUND, f"{present}/{present} members bound"))
        return Planning.NONE
    attempts, not_before = state.remembered.rollbacks.get(key, (0, 0.0))
    if state.now < not_before:
        state.verdicts[key] = Verdict(Phase.WAITING, Reason.BACKING_OFF, f"rolled back {attempts}×; planning again in "
                                      f"{not_before - state.now:.0f}s")
        return Planning.NONE
    floor = elastic.floor(group, elastic.previous_peak(state.memory, group, gang_status_of(state, view)))
    failure = bind_failed(state, view)
    if failure is None:
        failure = incomplete_too_long(state, view, floor)
    if failure is not None:
        roll_back(state, view, owner, attempts, failure)
        return Planning.NONE
    live = [m for m in group.members if not m.terminal]
    booked = [m for m in live if m.node or m.reserved_node]
    if len(booked) < group.min_count and all(m.gated for m in live):
        return _not_admitted(state, view)
    if waiting_for_room(state, view):
        return Planning.NONE
    if not trees.released_together(state, view):  # reserved before the rest of its tree (a write failed)
        failure = trees.waited_too_long(state, view)
        if failure is None:
            return Planning.ADMISSION
        roll_back(state, view, owner, attempts, failure)
        return Planning.NONE
    release(state, view)
    bound = sum(1 for m in live if m.node)
    held_back = len(live) - group.max_count if group.max_count is not None and len(live) > group.max_count else 0
    beyond = f"; {held_back} beyond its maximum {group.max_count} stay gated" if held_back else ""
    if bound >= floor:
        state.verdicts[key] = Verdict(Phase.RUNNING, Reason.BOUND, f"{bound}/{len(live)} members bound{beyond}")
    else:
        state.verdicts[key] = Verdict(Phase.ADMITTED, Reason.RELEASED, f"{bound}/{len(live)} members bound{beyond}")
    below_max = group.max_count is None or len(booked) < group.max_count
    return Planning.EXTRAS if group.waiting_members and below_max else Planning.NONE


def _finished(view: GangView) -> str:
    """Why a group that ended did: its owner ended (its operator may have deleted members), or every member did."""
    if view.finished is not None and view.owner is not None:
        return f"{view.owner.kind} {view.owner.name} {view.finished.lower()}"
    return "every member has finished"


def _not_admitted(state: PassState, view: GangView) -> Planning:
    """A group still to be admitted goes to the queue, unless it timed out and timing out fails it."""
    if state.settings.fail_on_schedule_timeout and schedule_timed_out(state, view.group):
        state.verdicts[view.group.key] = Verdict(Phase.FAILED, Reason.TIMED_OUT, f"not admitted within "
                                                 f"{view.group.schedule_timeout_seconds:g}s; given up")
        return Planning.NONE
    return Planning.ADMISSION


def _plan(state: PassState, queue: list[GangView], extras: list[GangView], index: ClusterIndex) -> None:
    """Admit what the queue admits, and take lower-priority work's place for a group that does not
    fit when preemption is on; then give each admitted group with members still waiting (elastic
    ones beyond min count, replacements) one more, from what is left."""
    pool = index.pool
    for view in queue:
        state.verdicts[view.group.key] = incomplete_or_queued(state, view)
    if not queue and not extras:
        return
    candidates = index.preemption_candidates if state.settings.preemption is Preempting.LOWER_PRIORITY else None
    provided = place_provided(state, queue, pool, index.ledger, index.occupancy)
    if provided is None:
        units, views = trees.units(state, queue)
        result = plan_pass(units, pool, index.ledger, state.now,
                           state.settings.policy, index.occupancy, candidates, basis=index.version,
                           last=index.planned if isinstance(index.planned, Planned) else None)
        index.planned = result.planned
    else:  # planned on what the groups placed first left: nothing of the last pass's answers holds
        queue, ledger, occupancy = provided
        units, views = trees.units(state, queue)
        result = plan_pass(units, pool, ledger, state.now, state.settings.policy, occupancy, candidates)
        index.planned = None
    working, around = result.ledger, result.occupancy  # admitted plans and the starving head's hold are counted in them
    for unit, plan in result.admitted:
        if isinstance(unit, Tree):
            _reserve_tree(state, unit, plan, views, {view.group.key for view in queue})
            continue
        reserve(state, views[unit.key], plan)
        state.verdicts[unit.key] = Verdict(Phase.ADMITTED, Reason.RESERVED, f"{len(plan.assignments)} members reserved")
    for unit, preemption in result.preemptions:
        if isinstance(unit, Tree):
            trees.preempt_tree(state, unit, preemption, views, index.view)
        else:
            preempt(state, views[unit.key], preemption, index.view)
    for waiting in result.waiting:
        if isinstance(waiting.group, Tree):
            _tree_waits(state, waiting.group, waiting, {view.group.key for view in queue})
        elif waiting.no_fit is not None:
            state.no_fits[waiting.group.key] = waiting.no_fit
            state.verdicts[waiting.group.key] = Verdict(Phase.WAITING, Reason.NO_FIT, waiting.reason)
        elif _behind_the_head(waiting):
            state.verdicts[waiting.group.key] = Verdict(Phase.WAITING, Reason.QUEUED, waiting.reason)
    if state.settings.policy.order is Order.STRICT_FIFO and any(w.no_fit is not None for w in result.waiting):
        return  # members beyond an admitted group's min count queue behind every group, too
    for view in extras:
        member = view.group.waiting_members[0]
        # With the members that hold their nodes, whose domains a topology rule keeps it to.
        booked = tuple(m for m in view.group.members if not m.waiting and not m.terminal and (m.node or m.reserved_node))
        extra = plan_group(replace(view.group, members=(*booked, member), min_count=1), pool, working,
                           state.settings.policy.topology, around, trees.confinement(state, view, pool))
        if isinstance(extra, Plan):
            apply(extra, working, around, pool)
            reserve(state, view, extra)


def _reserve_tree(state: PassState, tree: Tree, plan: Plan, views: Mapping[GroupKey, GangView],
                  queued: Set[GroupKey]) -> None:
    """Book each child's part of the tree's plan on the child (its Gang); a queued child held already says so."""
    parts = trees.parts(tree, plan)
    for group in trees.groups_of(tree):
        view = views.get(group.key)
        if view is None:
            continue
        part = parts.get(group.key)
        if part:
            reserve(state, view, Plan(group.key, tuple(part), plan.domain))
            state.verdicts[group.key] = Verdict(Phase.ADMITTED, Reason.RESERVED,
                                                f"{len(part)} members reserved with tree {tree.name}")
        elif held(group) and group.key in queued:
            state.verdicts[group.key] = Verdict(Phase.ADMITTED, Reason.RESERVED, f"reserved with tree {tree.name}")


def _tree_waits(state: PassState, tree: Tree, waiting: Waiting, queued: Set[GroupKey]) -> None:
    """Every queued child of a tree left waiting says why (the tree's reason); one reserved already waits for the rest."""
    for group in trees.groups_of(tree):
        if group.key not in queued:
            continue
        if held(group):
            state.verdicts[group.key] = Verdict(Phase.ADMITTED, Reason.WITH_TREE,
                                                f"reserved; released once tree {tree.name} is: {waiting.reason}")
        elif waiting.no_fit is not None:
            state.verdicts[group.key] = Verdict(Phase.WAITING, Reason.NO_FIT, waiting.reason)
        elif group.complete:
            state.verdicts[group.key] = Verdict(Phase.WAITING, Reason.QUEUED, f"tree {tree.name}: {waiting.reason}")


def _behind_the_head(waiting: Waiting) -> bool:
    """Whether the queue left a complete group unplanned: under StrictFIFO, every group behind the
    first that does not fit waits, unplanned. A group not complete never entered the queue, and
    keeps the verdict that says what it lacks."""
    return waiting.no_fit is None and waiting.group.complete


def _outcome(state: PassState, pending: Pending, index: ClusterIndex) -> Outcome:
    learned = state.remembered
    memory = replace(after_pass(state.memory, pending, state.now, rollbacks=learned.rollbacks,
                                reported=learned.reported, incomplete_since=learned.incomplete_since,
                                status_written=learned.status_written, arrivals=learned.arrivals,
                                strengths=learned.strengths, told=learned.told,
                                waiting_for_tree=learned.waiting_for_tree),
                     held=learned.held, given_up=learned.given_up, preempting=learned.preempting,
                     capacity=learned.capacity)
    decided = {view.group.key: verdict_of(state, view).phase for view in pending.views}
    phases = Counter(phase.value for phase in decided.values())
    phases.update(pending.settled_phases)
    released = {action.group for action in state.actions if isinstance(action, Release)}
    waited: list[tuple[GroupKey, float]] = []
    demand: defaultdict[tuple[str, str], float] = defaultdict(float)
    longest: dict[str, float] = {}
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
                    entry = asked[id(member.requests)] = (member.requests, accelerators_asked(state, member.requests))
                for resource, amount in entry[1]:
                    demand[namespace, resource] += amount
    figures = state.figures
    return Outcome(tuple(state.actions), memory, dict(phases), index.reserved_accelerators,
                   tuple(figures.released_after), len(figures.rolled_back), min(figures.due, default=None),
                   dict(figures.preemptions), decided_phases={key: phase.value for key, phase in decided.items()},
                   gone=pending.gone, complete=pending.complete, waited=tuple(waited),
                   waiting_accelerators=dict(demand), longest_wait=longest, bound_after=tuple(figures.bound_after),
                   stuck_incomplete=dict(figures.stuck), capacity_asked=tuple(figures.capacity_asked),
                   capacity_came=tuple(figures.capacity_came), capacity_failed=dict(figures.capacity_failed),
                   degraded=dict(Counter(key[0] for key, found in memory.strengths.items() if found.degraded)))
