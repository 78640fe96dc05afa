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

`Memory` is what the controller remembers between passes and may lose on a restart: when
each group was first seen (durably approximated by its oldest member's creation), rollback
backoff, when a running group was first seen incomplete, and what was last reported (so that
Events and audit lines follow changes, not passes).
"""

import hashlib
import logging
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone

from gangkeeper import names
from gangkeeper.controller.capacity import Ledger
from gangkeeper.controller.eligibility import NodePool
from gangkeeper.controller.groups import GANGS, GangView, PodFacts, WorkloadIndex, gang_for, settled_phase
from gangkeeper.controller.index import ClusterIndex, Pending
from gangkeeper.controller.model import Group, GroupKey, Node
from gangkeeper.controller.planner import Plan, apply, plan_group
from gangkeeper.controller.queue import Order, QueuePolicy, plan_pass
from gangkeeper.resources import accelerators

log = logging.getLogger("gangkeeper.controller.reconciler")

_AFFINITY_PATH = ("affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms")


@dataclass(frozen=True)
class Settings:
    bind_timeout_seconds: float = 120.0
    policy: QueuePolicy = QueuePolicy()
    rollback_backoff_seconds: float = 30.0
    rollback_backoff_cap_seconds: float = 960.0
    accelerator_patterns: tuple[str, ...] = names.DEFAULT_ACCELERATORS
    fail_on_schedule_timeout: bool = False


@dataclass(frozen=True)
class Memory:
    first_seen: Mapping[GroupKey, float] = field(default_factory=dict)
    released_at: Mapping[str, float] = field(default_factory=dict)
    rollbacks: Mapping[GroupKey, tuple[int, float]] = field(default_factory=dict)
    reported: Mapping[tuple[GroupKey, str], str] = field(default_factory=dict)
    complete_at: Mapping[GroupKey, float] = field(default_factory=dict)
    status_written: Mapping[GroupKey, float] = field(default_factory=dict)
    incomplete_since: Mapping[GroupKey, float] = field(default_factory=dict)


# --- actions: what a pass decides; `controller.actions` carries them out ------------------

@dataclass(frozen=True)
class Reserve:
    group: GroupKey
    pod: str
    resource_version: str
    node: str


@dataclass(frozen=True)
class Release:
    group: GroupKey
    pod: str
    node: str
    patch: tuple[Mapping, ...]


@dataclass(frozen=True)
class DeletePod:
    group: GroupKey
    pod: str
    uid: str


@dataclass(frozen=True)
class Report:
    """One decision worth an audit line and an Event on `involved` (api_version, kind, name),
    and with `on_pods` one on each of `pods` too (what `kubectl describe pod` shows)."""

    group: GroupKey
    event: str
    decision: str
    reason: str
    message: str
    involved: tuple[str, str, str]
    pods: tuple[str, ...] = ()
    warning: bool = False
    on_pods: bool = False


@dataclass(frozen=True)
class DeleteGang:
    """Delete a Gang the controller created for a group without owner, now that the group is gone."""

    group: GroupKey
    name: str


@dataclass(frozen=True)
class SaveGang:
    """Create the Gang (`create` is its body) or just write its status."""

    group: GroupKey
    name: str
    status: Mapping
    create: Mapping | None = None


Action = Reserve | Release | DeletePod | Report | SaveGang | DeleteGang


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


# --- the pass ------------------------------------------------------------------------------

@dataclass
class _Pass:
    """Working state of one pass: what is decided so far, per group."""

    now: float
    settings: Settings
    memory: Memory
    workloads: WorkloadIndex
    serves_gangs: bool = True
    actions: list = field(default_factory=list)
    reasons: dict = field(default_factory=dict)    # key → (phase, reason, message)
    reported: dict = field(default_factory=dict)
    rollbacks: dict = field(default_factory=dict)
    released_after: list = field(default_factory=list)
    status_written: dict = field(default_factory=dict)
    incomplete_since: dict = field(default_factory=dict)
    due: list = field(default_factory=list)
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
        candidate = _guarded(_decide_in_flight, state, view)
        if candidate == "plan":
            queue.append(view)
        elif candidate == "extras":
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
        gang = state.workloads.get((GANGS, key[0], gang_name(key)))
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


def _decide_in_flight(state: _Pass, view: GangView) -> str | None:
    """Release, roll back or report a group already under way; say what planning it needs:
    "plan" (the queue admits its min count), "extras" (one more member at a time), or None."""
    group, key = view.group, view.group.key
    if view.problem:
        state.reasons[key] = ("Waiting", *view.problem)
        return None
    settled = settled_phase(view)
    if settled is not None:  # what the index counts for it while it is not decided again
        live = sum(1 for m in group.members if not m.terminal)
        state.reasons[key] = ((settled, "Finished", "every member has finished") if settled != "Running"
                              else ("Running", "Bound", f"{live}/{live} members bound"))
        return None
    attempts, not_before = state.rollbacks.get(key, (0, 0.0))
    if state.now < not_before:
        state.reasons[key] = ("Waiting", "BackingOff", f"rolled back {attempts}×; planning again in "
                              f"{not_before - state.now:.0f}s")
        return None
    failure = _bind_failed(state, view) or _incomplete_too_long(state, view)
    if failure:
        _roll_back(state, view, attempts, failure)
        return None
    live = [m for m in group.members if not m.terminal]
    booked = [m for m in live if m.node or m.reserved_node]
    if len(booked) < group.min_count and all(m.gated for m in live):
        return _not_admitted(state, view)
    _release(state, view)
    bound = sum(1 for m in live if m.node)
    if bound >= group.min_count:
        state.reasons[key] = ("Running", "Bound", f"{bound}/{len(live)} members bound")
    else:
        state.reasons[key] = ("Admitted", "Released", f"{bound}/{len(live)} members bound")
    return "extras" if group.waiting_members else None


def _not_admitted(state: _Pass, view: GangView) -> str | None:
    """A group still to be admitted goes to the queue, unless it timed out and timing out fails it."""
    if state.settings.fail_on_schedule_timeout and _timed_out(state, view.group):
        state.reasons[view.group.key] = ("Failed", "TimedOut", f"not admitted within "
                                         f"{view.group.schedule_timeout_seconds:g}s; given up")
        return None
    return "plan"


def _timed_out(state: _Pass, group: Group) -> bool:
    timeout = group.schedule_timeout_seconds
    return timeout is not None and state.now - group.first_seen >= timeout


def _bind_failed(state: _Pass, view: GangView) -> str | None:
    """Why a released member counts as failed to bind, if one does."""
    for facts in view.pods:
        member = facts.member
        if member.terminal or member.node or member.gated or not member.reserved_node:
            continue
        if facts.unschedulable:
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
    state.reasons[key] = ("Waiting", "RolledBack", message)
    _report(state, view, "gang.rolled_back", "rolled_back", "RolledBack", message, warning=True, force=True,
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
        if state.memory.reported.get((key, "state")) != "Released" and key in state.memory.complete_at:
            state.released_after.append(state.now - state.memory.complete_at[key])
        _report(state, view, "gang.released", "released", "Released",
                f"released {len(released)} members to their reserved nodes", pods=released, on_pods=True)


def release_patch(facts: PodFacts, node: str, released_at: float | None = None) -> tuple[Mapping, ...]:
    """Pin to `node` and remove our gate, in one JSON Patch that fails unless the pod is as read.

    The pin is added to every existing required term (terms are ORed: a pin missing from one
    would let the pod land anywhere that term allows), or as a new term when there are none.
    Only our gate is removed, by index, after a `test` that the index still names it. With
    `released_at`, the release annotation records it (the member is reserved, so it has
    annotations to add it to), and the bind timeout counts from it even after a restart.
    """
    pin = {"key": names.PIN_FIELD, "operator": "In", "values": [node]}
    ops: list[Mapping] = [{"op": "test", "path": "/metadata/resourceVersion", "value": facts.resource_version}]
    if released_at is not None:
        ops.append({"op": "add", "path": f"/metadata/annotations/{_escape(names.RELEASED_AT_ANNOTATION)}",
                    "value": _micro_time(released_at)})
    terms = facts.member.affinity_terms
    if terms:
        for index, term in enumerate(terms):
            path = f"/spec/{'/'.join(_AFFINITY_PATH)}/{index}/matchFields"
            ops.append({"op": "add", "path": f"{path}/-", "value": pin} if term.match_fields
                       else {"op": "add", "path": path, "value": [pin]})
    else:
        depth = min(facts.affinity_depth, 3)
        value: object = [{"matchFields": [pin]}]
        for key in reversed(_AFFINITY_PATH[depth + 1:]):
            value = {key: value}
        ops.append({"op": "add", "path": "/spec/" + "/".join(_AFFINITY_PATH[:depth + 1]), "value": value})
    gate = f"/spec/schedulingGates/{facts.gate_index}"
    ops += [{"op": "test", "path": f"{gate}/name", "value": names.SCHEDULING_GATE}, {"op": "remove", "path": gate}]
    return tuple(ops)


def _escape(key: str) -> str:
    """A map key as a JSON Pointer token (RFC 6901)."""
    return key.replace("~", "~0").replace("/", "~1")


# --- planning ------------------------------------------------------------------------------

def _plan(state: _Pass, queue: list[GangView], extras: list[GangView], pool: NodePool, ledger: Ledger) -> None:
    """Admit what the queue admits; then give each admitted group with members still waiting (elastic
    ones beyond min count, replacements) one more, from what is left."""
    views = {view.group.key: view for view in queue}
    for view in queue:
        state.reasons[view.group.key] = ("Waiting", *_incomplete_or_queued(view.group))
    if not queue and not extras:
        return
    result = plan_pass([_admission_view(view.group) for view in queue], pool, ledger, state.now, state.settings.policy)
    working = result.ledger  # admitted plans and the starving head's hold are counted in it
    for group, plan in result.admitted:
        _reserve(state, views[group.key], plan)
        state.reasons[group.key] = ("Admitted", "Reserved", f"{len(plan.assignments)} members reserved")
    for waiting in result.waiting:
        if waiting.no_fit is not None:
            state.reasons[waiting.group.key] = ("Waiting", "NoFit", waiting.reason)
        elif "StrictFIFO" in waiting.reason:
            state.reasons[waiting.group.key] = ("Waiting", "Queued", waiting.reason)
    if state.settings.policy.order is Order.STRICT_FIFO and any(w.no_fit for w in result.waiting):
        return  # members beyond an admitted group's min count queue behind every group, too
    for view in extras:
        member = view.group.waiting_members[0]
        plan = plan_group(replace(view.group, members=(member,), min_count=1), pool, working,
                          state.settings.policy.topology)
        if isinstance(plan, Plan):
            apply(plan, working)
            _reserve(state, view, plan)


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


def _incomplete_or_queued(group: Group) -> tuple[str, str]:
    present = sum(1 for m in group.members if not m.terminal)
    if present < group.min_count:
        return "Incomplete", f"{present}/{group.min_count} pods"
    return "Queued", f"{present}/{group.min_count} pods present, waiting for a planning pass"


def _reserve(state: _Pass, view: GangView, plan: Plan) -> None:
    by_uid = {facts.member.uid: facts for facts in view.pods}
    for member, node in plan.assignments:
        state.actions.append(Reserve(view.group.key, member.name, by_uid[member.uid].resource_version, node))
    nodes = sorted(plan.nodes)
    _report(state, view, "gang.reserved", "reserved", "Reserved",
            f"reserved {len(plan.assignments)} members on {len(nodes)} nodes: {', '.join(nodes[:10])}",
            pods=[m.name for m, _ in plan.assignments], force=True)


# --- reporting and status ------------------------------------------------------------------

_CHANNELS = ("state", "timeout")  # what `_report` deduplicates on, per group


def _report(state: _Pass, view: GangView, event: str, decision: str, reason: str, message: str, *,
            pods: Sequence[str] = (), warning: bool = False, force: bool = False, channel: str = "state",
            token: str | None = None, on_pods: bool = False) -> None:
    """A Report, unless the same was reported last time on this channel (Events follow changes)."""
    key, token = view.group.key, token or reason
    state.reported[(key, channel)] = token
    if force or state.memory.reported.get((key, channel)) != token:
        state.actions.append(Report(key, event, decision, reason, message, _involved(state, view),
                                    tuple(pods), warning, on_pods))


def _involved(state: _Pass, view: GangView) -> tuple[str, str, str]:
    """The Gang when there is (or will be) one, else the group's first pod."""
    if _keeps_gang(state, view) and (view.problem is None or _existing_gang(state, view) is not None):
        return f"{names.GANG_GROUP}/{names.GANG_VERSION}", names.GANG_KIND, _gang_name_of(state, view)
    return "v1", "Pod", view.pods[0].member.name


def _keeps_gang(state: _Pass, view: GangView) -> bool:
    """Whether the group has a Gang object: every group but a lone accelerator pod, whose state
    its Events and the audit log carry. A Gang for each lone pod would be one object per
    single-GPU pod, and its `groupName` (the pod's label) would declare a size of 1 for any
    explicit group that happens to share the name."""
    return state.serves_gangs and view.source != names.SOURCE_ACCELERATOR_POD


def _report_and_status(state: _Pass, view: GangView) -> None:
    """Events and audit lines when the group's state changed, and its Gang's status when that did.

    A waiting group is reported when the reason it waits changes (the Gang's status carries the
    details, which change with every bit of capacity freed); a problem, when its message does.
    """
    key = view.group.key
    phase, reason, message = state.reasons.get(key, ("Waiting", *_incomplete_or_queued(view.group)))
    if phase == "Waiting" and reason != "RolledBack":
        _report(state, view, "gang.waiting", "waiting", reason, message, warning=view.problem is not None,
                token=f"{reason}: {message}" if view.problem else reason)
    elif phase == "Running":
        _report(state, view, "gang.bound", "bound", "Bound", message)
    timed_out = reason == "TimedOut" or (phase == "Waiting" and _timed_out(state, view.group))
    if timed_out:
        _report(state, view, "gang.timed_out", "timed_out", "TimedOut",
                f"not admitted within {view.group.schedule_timeout_seconds:g}s"
                + ("; given up" if phase == "Failed" else "; still waiting"), warning=True, channel="timeout")
    attempts = state.rollbacks.get(key, (0, 0.0))[0]
    if not _keeps_gang(state, view):
        return
    existing = _existing_gang(state, view)
    status = gang_status(view, phase, reason, message, timed_out, attempts, state.settings.accelerator_patterns,
                         (existing.status if existing else None) or {}, state.now)
    if existing is not None and _same_status(existing.status or {}, status):
        return
    if existing is None and view.problem is not None:
        return
    if existing is not None and _only_details_changed(existing.status or {}, status) and \
            state.now - state.memory.status_written.get(key, float("-inf")) < STATUS_DETAILS_REFRESH_SECONDS:
        return
    state.status_written[key] = state.now
    state.actions.append(SaveGang(key, _gang_name_of(state, view), status,
                                  None if existing is not None else gang_body(view, _gang_name_of(state, view))))


def gang_status(view: GangView, phase: str, reason: str, message: str, timed_out: bool, attempts: int,
                patterns: Sequence[str], existing: Mapping, now: float) -> dict:
    live = [m for m in view.group.members if not m.terminal]
    wanted = [("Admitted", phase != "Waiting", reason, message)]
    if timed_out:
        wanted.append(("TimedOut", True, "TimedOut", f"not admitted within {view.group.schedule_timeout_seconds:g}s"))
    if attempts:
        wanted.append(("RolledBack", True, "RolledBack", f"rolled back {attempts} times"))
    before = {c.get("type"): c for c in existing.get("conditions") or ()}
    conditions = []
    for kind, holds, why, text in wanted:
        value = "True" if holds else "False"
        previous = before.get(kind) or {}
        since = previous.get("lastTransitionTime") if previous.get("status") == value else None
        conditions.append({"type": kind, "status": value, "reason": why, "message": text[:32768],
                           "lastTransitionTime": since or _rfc3339(now)})
    return {"phase": phase, "present": len(live), "minCount": view.group.min_count,
            "accelerators": int(sum(sum(accelerators(m.requests, patterns).values()) for m in live)),
            "conditions": conditions}


def gang_body(view: GangView, name: str) -> dict:
    metadata: dict = {"name": name, "namespace": view.group.key[0],
                      "labels": {names.MANAGED_BY_LABEL: names.MANAGED_BY_VALUE}}
    if view.owner is not None:
        metadata["ownerReferences"] = [{"apiVersion": view.owner.api_version, "kind": view.owner.kind,
                                        "name": view.owner.name, "uid": view.owner.uid}]
    return {"apiVersion": f"{names.GANG_GROUP}/{names.GANG_VERSION}", "kind": names.GANG_KIND, "metadata": metadata,
            "spec": {"minCount": view.group.min_count, "groupName": view.label}}


def gang_name(key: GroupKey) -> str:
    """A valid object name for the group: its label value when it is one, else a readable hash-suffixed form."""
    text = key[1]
    name = re.sub(r"[^a-z0-9.-]+", "-", text.lower()).strip("-.")[:240] or "group"
    return name if name == text else f"{name}-{hashlib.sha256(text.encode()).hexdigest()[:8]}"


def _gang_name_of(state: _Pass, view: GangView) -> str:
    existing = _existing_gang(state, view)
    return existing.name if existing is not None else gang_name(view.group.key)


def _existing_gang(state: _Pass, view: GangView):
    namespace = view.group.key[0]
    if view.source in (names.SOURCE_EXPLICIT, names.SOURCE_NATIVE_POD_GROUP):
        declared = gang_for(namespace, view.label, state.workloads)
        if declared is not None:
            return declared
    return state.workloads.get((GANGS, namespace, gang_name(view.group.key)))


def _same_status(current: Mapping, wanted: Mapping) -> bool:
    return {k: current.get(k) for k in wanted} == dict(wanted)


# A waiting group's details (how many placeable, how much free) change with every pod that
# starts or ends; rewriting its Gang on each would cost an API write per waiting group per
# change. Phase, counts and condition reasons are written at once; details at most this often.
STATUS_DETAILS_REFRESH_SECONDS = 30.0


def _only_details_changed(current: Mapping, wanted: Mapping) -> bool:
    """Whether the two statuses differ only in their conditions' messages."""
    def without_messages(status: Mapping) -> dict:
        conditions = [{k: v for k, v in condition.items() if k != "message"}
                      for condition in status.get("conditions") or ()]
        return {**{k: status.get(k) for k in wanted}, "conditions": conditions}

    return without_messages(current) == without_messages(wanted)


def _rfc3339(moment: float) -> str:
    return datetime.fromtimestamp(moment, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _outcome(state: _Pass, pending: Pending, index: ClusterIndex) -> Outcome:
    """What to remember: fresh entries for the groups decided, the old ones of groups left alone
    (settled, so unchanged), none for groups that are gone or, after a complete pass, undecided."""
    memory, decided = state.memory, {view.group.key for view in pending.views}

    def kept(old: Mapping, channels: Sequence[str] = ()) -> dict:
        """`old` without the groups decided or gone: a copy and O(decided) deletions, not a scan."""
        if pending.complete:
            return {}
        kept = dict(old)
        for key in decided | pending.gone:
            for entry in [(key, channel) for channel in channels] if channels else [key]:
                kept.pop(entry, None)
        return kept

    released_at = {f.member.uid: memory.released_at.get(f.member.uid, state.now)
                   for view in pending.views for f in view.pods
                   if not f.member.terminal and not f.member.node and not f.member.gated and f.member.reserved_node}
    complete_at = {view.group.key: memory.complete_at.get(view.group.key, state.now) for view in pending.views
                   if view.problem is None
                   and sum(1 for m in view.group.members if not m.terminal) >= view.group.min_count > 0}
    new_memory = Memory(
        first_seen={**kept(memory.first_seen), **{view.group.key: view.group.first_seen for view in pending.views}},
        released_at=released_at,
        rollbacks={key: value for key, value in state.rollbacks.items()
                   if key in decided or (not pending.complete and key not in pending.gone)},
        reported={**kept(memory.reported, _CHANNELS), **state.reported},
        complete_at={**kept(memory.complete_at), **complete_at},
        incomplete_since={**kept(memory.incomplete_since), **state.incomplete_since},
        status_written={**kept(memory.status_written),
                        **{key: memory.status_written[key] for key in decided if key in memory.status_written},
                        **state.status_written})
    phases = Counter(state.reasons.get(view.group.key, ("Waiting",))[0] for view in pending.views)
    phases.update(pending.settled_phases)
    return Outcome(tuple(state.actions), new_memory, dict(phases), index.reserved_accelerators,
                   tuple(state.released_after), state.rolled_back, min(state.due, default=None))


def _micro_time(moment: float) -> str:
    """Kubernetes MicroTime (RFC 3339, UTC, microseconds): a bind timeout of seconds needs better than seconds."""
    return datetime.fromtimestamp(moment, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
