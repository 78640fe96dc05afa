"""Carry out a pass's actions through `controller.reading.kube`, in parallel where they are independent.

Pod and owner writes (and a group's reservations, one write on its Gang) go first, then Gang
statuses, then Events: what the scheduler and the operators wait for is not held up behind what
people read, and an Event about a Gang created this pass names the uid the Gang's write was
answered with. Pod and owner writes are one wave and Gang
statuses the next, each once the one before has been answered. Within a wave the writes are
independent (a pass reserves, releases, deletes or suspends each object at most once, and never
releases what it reserves), so up to `concurrency` of them are in flight at once over the
client's pool of kept-alive connections; writes to the same object (a pod, an owner, a Gang, the
Events of one object) still go out one after the other, in the pass's order. Every write keeps
its guard: the reserve patch's resourceVersion, the release patch's `test`s, the delete's uid
(a Gang's reservations are the leader's alone to write, on the status subresource). The
guarantee does not rest on the order within a wave: a group is released only by a pass that
finds every member's reservation already stored, so reservations are durable before any member
is released however the writes interleave (docs/design.md, "Release, binding and
rollback").

Events are written in the background, as client-go's event recorder writes them: the pass does
not wait for them (a release of 256 members is 257 Events, which would otherwise hold up the next
pass and the next group), at most `EVENT_WRITERS` at once, so that they never take the place of
the next pass's pod writes. At most `PENDING_EVENTS` wait; beyond that an Event is dropped and the
log says how many (the audit line, written at once, is the record). With `concurrency` 1 nothing
is in the background: every write is sent from the calling thread, in the pass's order, and
Events are written before `execute` returns (what the studies use, for runs that repeat).

Before a group's members are released, the executor asks the API server (one request, metadata
alone) for their resourceVersions: a group any of whose members changed since the pass read it
is not released by this pass, so that a member the cache had not yet seen deleted and created
again cannot leave the rest released without it (`_without_stale_releases`).

`execute` hands back what it did not do and what it learned (`Executed`): how many actions failed
or were left, the groups whose releases it held back (`deciding.outcome.carried_out` takes them
into the pass's outcome and the memory), and what the API server can do, as the pass was decided
with it (`deciding.capabilities`) and as the answers showed it: a Gang that comes back without
the reservations written on it has a CRD of an older version, which prunes them.

A Conflict (409, or a failed JSON Patch `test`) means the cache was behind: the action is
dropped and the next pass, on fresher data, decides again; it is never retried blindly. Any other
failure is logged and the remaining actions still run: one bad object never stops the loop.
`--dry-run` records the decisions (audit, log) and writes nothing. Audit lines are written by the
calling thread in the pass's order, before the writes (an eviction's once the Eviction API said
yes), and so are the API's answers handed to `written`; `proceed()` (still the leader) is asked
before the pass's decisions go on record and before each write is sent, and a write it stops is
counted as left.

Events are core/v1 Events named after the object and a hash of its uid, reason and message, so
that the same news bumps `count` on one Event instead of piling up new ones, and an object
recreated under the same name gets Events of its own. Their `involvedObject` carries the object's
uid, as `kubectl describe` selects by it. A report goes to its Gang (or first pod) and, when it
says so (release, rollback), to each pod it names as well. A Gang the same pass creates has no uid
when the pass decides: its Event is written after the Gang's own write, with the uid the API
answered with; if that write failed the Gang is read, and if it does not exist the Event is left
out (the audit line says what happened) rather than written about no object. A member deleted by
a rollback gets an audit line of its own, naming it: a deleted pod is on record whatever the size
of its group.

A member told something on itself (`TellPod`: why it waits, that it was released) gets its Event
with the others, named and counted the same way; it has no audit line (its group's decision has
one), and the Event telling it of a release that is held back is left out with the release.
"""

import hashlib
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from functools import partial
from itertools import groupby

from gangkeeper import names
from gangkeeper.audit import AuditLog
from gangkeeper.controller.deciding.capabilities import ApiCapabilities
from gangkeeper.controller.deciding.decisions import (
    EVENT_MESSAGE_MAX,
    Action,
    CreateObject,
    DeleteGang,
    DeleteObject,
    DeletePod,
    EvictPod,
    GangEvent,
    Involved,
    Reason,
    Release,
    Report,
    Reserve,
    ReserveGroup,
    ResumeOwner,
    SaveGang,
    SuspendOwner,
    TellPod,
)
from gangkeeper.controller.deciding.patches import reserve_patch
from gangkeeper.controller.model.members import GroupKey
from gangkeeper.controller.reading.kube import (
    EVENTS,
    GANGS,
    JSON_PATCH,
    MERGE_PATCH,
    PODS,
    AlreadyExists,
    Conflict,
    Kube,
    KubeError,
    NotFound,
)
from gangkeeper.wording import first_of

log = logging.getLogger("gangkeeper.controller.actions")
COMPONENT = "gangkeeper-controller"
# Event counts remembered: enough for every group under way; an older Event that comes back is
# found by its name (AlreadyExists) and bumped.
REMEMBERED_EVENTS = 16_384
# Writes in flight at once (`--concurrent-writes`): what a pass of a 256-member group needs to be
# quick, well below the client's pool of 32 connections and any API server's inflight limits.
CONCURRENT_WRITES = 16
EVENT_WRITERS = 4  # Events in flight at once, in the background
PENDING_EVENTS = 4_096  # Event writes waiting at most; client-go's recorder keeps 1,000


@dataclass(frozen=True)
class _Write:
    """One request of an action: `send()` makes it and returns the API's answer."""

    action: int  # the action's position in the pass's order
    target: str  # the object written: writes to one object go out in order
    send: Callable[[], dict | None]


@dataclass(frozen=True)
class Executed:
    """What carrying out a pass did not do, and what the API server was found able to do."""

    capabilities: ApiCapabilities  # for the next pass
    failed: int = 0  # actions that failed or were left (no longer allowed to write)
    held: frozenset[GroupKey] = frozenset()  # groups whose releases were held back: a member changed


class _Left(Exception):
    """`proceed()` said no before the write was sent."""


class Executor:
    """Writes actions; `written(obj)` sees every pod reserved or released and every Gang whose
    reservations were written, as the API returned them, so the cache can assume them.

    `concurrency` is how many writes may be in flight at once; 1 sends them one after the other
    from the calling thread, in the pass's order (what the studies use, for runs that repeat).
    """

    def __init__(self, kube: Kube, audit: AuditLog, *, dry_run: bool = False,
                 written: Callable[[dict], None] = lambda obj: None,
                 clock: Callable[[], datetime] = lambda: datetime.now(timezone.utc), concurrency: int = 1):
        self._kube, self._audit, self._dry_run = kube, audit, dry_run
        self._written, self._clock = written, clock
        self._event_counts: OrderedDict[str, int] = OrderedDict()
        self._counting = threading.Lock()  # event counts are bumped by the writing threads
        self._gang_uids: dict[tuple[str, str], str] = {}  # Gangs written in this execute(), by (namespace, name)
        self._pool = self._events = None
        if concurrency > 1:
            self._pool = ThreadPoolExecutor(concurrency, thread_name_prefix="gangkeeper-write")
            self._events = ThreadPoolExecutor(EVENT_WRITERS, thread_name_prefix="gangkeeper-event")
        self._pending = threading.BoundedSemaphore(PENDING_EVENTS)  # a place for each Event write waiting
        self._queued: set[Future] = set()  # Event writes handed to the writers and not done

    def drain(self) -> None:
        """Wait until every Event handed to the writers has been written (or has failed)."""
        wait(list(self._queued))

    def close(self) -> None:
        """Stop the writing threads, after the writes under way; Events not yet begun are dropped
        (an API server that is gone must not hold up the process's exit)."""
        if self._pool is not None:
            self._pool.shutdown()
        if self._events is not None:
            self._events.shutdown(cancel_futures=True)

    def execute(self, actions: Iterable[Action], capabilities: ApiCapabilities = ApiCapabilities(),
                proceed: Callable[[], bool] = lambda: True) -> Executed:
        """Run every action while `proceed()` (still the leader, say); say what was not done and
        what the API server can do, `capabilities` being what the pass was decided with.

        The pass's decisions go on record first, while `proceed()` holds, before any of their
        writes is sent (an eviction once the Eviction API said yes): a leader that steps down
        part-way has put on record every decision it began to carry out, and nothing after its
        term. A pass begun when writing is no longer allowed records and sends nothing."""
        self._gang_uids = {}
        ordered = sorted(actions, key=_urgency)
        if ordered and not proceed():
            return Executed(capabilities, _stopped(len(ordered), len(ordered)))
        held: frozenset[GroupKey] = frozenset()
        if not self._dry_run:
            ordered, held = self._without_stale_releases(ordered)
            if ordered and not proceed():  # the check took time: ask again before anything goes on record
                return Executed(capabilities, _stopped(len(ordered), len(ordered)), held)
        for action in ordered:
            if isinstance(action, Report):
                self._record(action)
            elif isinstance(action, DeletePod) and action.why:
                self._record_deletion(action)
        failed, left = 0, 0
        pruned: list[ReserveGroup] = []  # reservations whose Gang came back without them
        for _, numbered in groupby(enumerate(ordered), key=lambda numbered: _urgency(numbered[1])):
            wave = list(numbered)
            if left:
                left += len(wave)
                continue
            wave_failed, wave_left = self._run_wave(wave, proceed, pruned)
            failed, left = failed + wave_failed, left + wave_left
        if left:
            _stopped(left, len(ordered))
        return Executed(_learned(capabilities, pruned), failed + left, held)

    def _without_stale_releases(self, ordered: list[Action]) -> tuple[list[Action], frozenset[GroupKey]]:
        """The actions without the releases, and the report of them, of a group any of whose
        members changed since the pass read it, and those groups; one request a group to the API
        server, not its cache.

        A member deleted and created again just before the reservation (its cache a little behind)
        would be reserved as the pod it was, on its Gang, and its release would fail while the
        others' went through: part of the group released, its new pod unreserved. So a group is
        released only when every member's resourceVersion is still the one its release patch tests."""
        releases: dict[tuple[str, str], list[Release]] = {}
        for action in ordered:
            if isinstance(action, Release):
                releases.setdefault(action.group, []).append(action)
        if not releases:
            return ordered, frozenset()
        checked = (map if self._pool is None or len(releases) == 1 else self._pool.map)(
            lambda item: (item[0], self._unchanged(*item)), releases.items())
        stale = frozenset(group for group, unchanged in checked if not unchanged)
        return [action for action in ordered if action.group not in stale or not (
            isinstance(action, Release) or (isinstance(action, Report) and action.event is GangEvent.RELEASED)
            or (isinstance(action, TellPod) and action.reason is Reason.RELEASED))], stale

    def _unchanged(self, group: tuple[str, str], members: list[Release]) -> bool:
        try:
            current = self._kube.resource_versions(PODS, group[0], f"{names.GROUP_LABEL}={members[0].label}")
        except KubeError as error:
            log.warning("%s: its members could not be checked before their release (%s); releasing next pass",
                        "/".join(group), error)
            return False
        except Exception:  # a bug: logged with its traceback, and the rest of the pass goes on
            log.exception("%s: its members could not be checked before their release; releasing next pass",
                          "/".join(group))
            return False
        changed = sorted(member.pod for member in members if current.get(member.pod) != member.resource_version)
        if changed:
            log.info("%s: %s changed since the pass read them (updated, or deleted and created again): none of "
                     "the group is released until the cache has caught up", "/".join(group), first_of(changed, 5))
        return not changed

    def _run_wave(self, wave: list[tuple[int, Action]], proceed: Callable[[], bool],
                  pruned: list[ReserveGroup]) -> tuple[int, int]:
        """Write and account for one wave; (failed, left) actions. Events in the background count
        in neither: their failures are logged. Reservations whose Gang came back without them go
        to `pruned`."""
        if self._dry_run:
            for _, action in wave:
                if isinstance(action, EvictPod):
                    self._record_deletion(action)
            return 0, 0
        writes = self._writes(wave)
        if self._events is not None and all(isinstance(action, (Report, TellPod)) for _, action in wave):
            self._in_background(self._events, dict(wave), writes, proceed)
            return 0, 0
        actions = dict(wave)
        errors: dict[int, BaseException] = {}
        for write, answer in self._send(writes, proceed):
            if isinstance(answer, BaseException):
                errors.setdefault(write.action, answer)
            elif isinstance(answer, dict) and isinstance(action := actions[write.action], (Reserve, ReserveGroup,
                                                                                            Release)):
                if isinstance(action, ReserveGroup) and not _stored(action, answer):
                    pruned.append(action)
                self._written(answer)
        failed = left = 0
        for position, action in wave:
            error = errors.get(position)
            if error is None:
                if isinstance(action, EvictPod):  # on record once the Eviction API said yes (a budget may refuse)
                    self._record_deletion(action)
            elif isinstance(error, _Left):
                left += 1
            else:
                _log_failure(action, error)
                failed += 1
        return failed, left

    def _send(self, writes: list[_Write], proceed: Callable[[], bool]) -> list[tuple[_Write, object]]:
        """Each write with the API's answer or the error it raised, in the order given; the writes
        to one target one after the other, the targets side by side."""
        chains = _chains(writes)
        if self._pool is None or len(chains) == 1:
            done = [_run_chain(chain, proceed) for chain in chains]
        else:
            done = list(self._pool.map(lambda chain: _run_chain(chain, proceed), chains))
        answered = {id(write): answer for chain in done for write, answer in chain}
        return [(write, answered[id(write)]) for write in writes]

    def _in_background(self, events: ThreadPoolExecutor, reports: dict[int, Action], writes: list[_Write],
                       proceed: Callable[[], bool]) -> None:
        """Hand the Event writes to the Event writers and return; drop those beyond `PENDING_EVENTS`."""
        dropped = 0
        for chain in _chains(writes):
            if not self._pending.acquire(blocking=False):
                dropped += len(chain)
                continue

            def run(chain: list[_Write] = chain) -> None:
                try:
                    for write, answer in _run_chain(chain, proceed):
                        if isinstance(answer, BaseException) and not isinstance(answer, _Left):
                            _log_failure(reports[write.action], answer)
                finally:
                    self._pending.release()

            queued = events.submit(run)
            self._queued.add(queued)
            queued.add_done_callback(self._queued.discard)
        if dropped:
            log.warning("dropped %d Events: %d are waiting to be written already (their decisions are in the audit "
                        "log)", dropped, PENDING_EVENTS)

    def _writes(self, wave: list[tuple[int, Action]]) -> list[_Write]:
        writes = []
        for position, action in wave:
            namespace = action.group[0]
            if isinstance(action, Report):
                writes.append(_Write(position, _events_of(namespace, action.involved),
                                     partial(self._report_on_group, action, self._gang_uids)))
                if action.on_pods:
                    message = f"{_whose(action)}: {action.message}"
                    writes += [_Write(position, _events_of(namespace, pod), partial(
                        self._event, namespace, pod, action.reason, message, action.warning)) for pod in action.pods]
            elif isinstance(action, TellPod):
                writes.append(_Write(position, _events_of(namespace, action.pod), partial(
                    self._event, namespace, action.pod, action.reason, action.message, action.warning)))
            else:
                writes.append(_Write(position, _target_of(action), partial(self._write, action)))
        return writes

    def _write(self, action: Action) -> dict | None:
        """One action's request (a Gang's two, create and status, go together); the API's answer."""
        namespace = action.group[0]
        if isinstance(action, Reserve):
            patch = reserve_patch(action.resource_version, action.node)
            return self._kube.patch(PODS, namespace, action.pod, patch, MERGE_PATCH)
        if isinstance(action, ReserveGroup):
            self._create_gang(namespace, action.create)
            return self._kube.patch_status(GANGS, namespace, action.name,
                                           {"status": {"reservations": dict(action.reservations)}}, MERGE_PATCH)
        if isinstance(action, Release):
            return self._kube.patch(PODS, namespace, action.pod, list(action.patch), JSON_PATCH)
        if isinstance(action, DeletePod):
            return self._kube.delete(PODS, namespace, action.pod, uid=action.uid)
        if isinstance(action, EvictPod):
            return self._kube.evict(namespace, action.pod, action.uid)
        if isinstance(action, (SuspendOwner, ResumeOwner)):
            return self._kube.patch(action.resource, namespace, action.name, dict(action.patch), MERGE_PATCH)
        if isinstance(action, SaveGang):
            self._create_gang(namespace, action.create)
            saved = self._kube.patch_status(GANGS, namespace, action.name, {"status": dict(action.status)},
                                            MERGE_PATCH)
            self._gang_uids[(namespace, action.name)] = ((saved or {}).get("metadata") or {}).get("uid", "")
            return saved
        if isinstance(action, DeleteGang):
            try:
                return self._kube.delete(GANGS, namespace, action.name)
            except NotFound:
                return None
        if isinstance(action, CreateObject):
            try:
                return self._kube.create(action.resource, namespace, dict(action.body))
            except AlreadyExists:
                return None
        if isinstance(action, DeleteObject):
            try:
                return self._kube.delete(action.resource, namespace, action.name, uid=action.uid or None)
            except NotFound:
                return None
        raise TypeError(f"no write for {type(action).__name__}")

    def _create_gang(self, namespace: str, body: Mapping | None) -> None:
        """Create the Gang a pass found none of (None: it has one), unless it exists by now."""
        if body is not None:
            try:
                self._kube.create(GANGS, namespace, dict(body))
            except AlreadyExists:
                pass

    def _report_on_group(self, report: Report, gang_uids: dict[tuple[str, str], str]) -> None:
        involved = self._with_uid(report.group[0], report.involved, gang_uids)
        if involved is not None:
            self._event(report.group[0], involved, report.reason, report.message, report.warning)

    def _with_uid(self, namespace: str, involved: Involved, gang_uids: dict[tuple[str, str], str]) -> Involved | None:
        """`involved` with its uid: a Gang created by the pass (`gang_uids`, from its writes) has it
        from its write, or else from a read."""
        if involved.uid:
            return involved
        uid = gang_uids.get((namespace, involved.name))
        if uid is None:  # not written this pass (its write failed): read it
            try:
                uid = self._kube.get(GANGS, namespace, involved.name)["metadata"].get("uid", "")
            except NotFound:
                uid = ""
        if not uid:
            log.info("%s/%s: no Event on %s %s, which does not exist", namespace, involved.name, involved.kind,
                     involved.name)
            return None
        return involved._replace(uid=uid)

    def _record(self, report: Report) -> None:
        namespace, group = report.group
        self._audit.record(report.event, decision=report.event.decision, reason=report.reason, namespace=namespace,
                           group=group, details={"message": report.message, "pods": [pod.name for pod in report.pods[:16]],
                                                 "dry_run": self._dry_run})
        # The audit line is the record (stdout, or --audit-file); at INFO the log would say it a second time.
        log.debug("%s/%s %s: %s %s", namespace, group, report.event, report.reason, report.message)

    def _record_deletion(self, deletion: DeletePod | EvictPod) -> None:
        namespace, group = deletion.group
        decision, reason = (("evicted", Reason.PREEMPTED) if isinstance(deletion, EvictPod)
                            else (GangEvent.MEMBER_DELETED.decision, deletion.reason))
        self._audit.record(GangEvent.MEMBER_DELETED, decision=decision, reason=reason, namespace=namespace, group=group,
                           pod=deletion.pod, details={"pod_uid": deletion.uid, "why": deletion.why,
                                                      "dry_run": self._dry_run})

    def _event(self, namespace: str, involved: Involved, reason: str, message: str, warning: bool) -> None:
        api_version, kind, name, uid = involved
        digest = hashlib.sha256(f"{kind}/{name}/{uid}/{reason}/{message}".encode()).hexdigest()[:12]
        event_name = f"{name}.{digest}"[-253:].lstrip(".-")
        stamp = self._clock().strftime("%Y-%m-%dT%H:%M:%SZ")
        count = self._count(event_name)
        if count > 1:
            self._kube.patch(EVENTS, namespace, event_name, {"count": count, "lastTimestamp": stamp}, MERGE_PATCH)
            return
        body = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": event_name, "namespace": namespace},
                "involvedObject": {"apiVersion": api_version, "kind": kind, "name": name, "namespace": namespace,
                                   "uid": uid},
                "reason": reason, "message": message[:EVENT_MESSAGE_MAX], "type": "Warning" if warning else "Normal",
                "source": {"component": COMPONENT}, "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1}
        try:
            self._kube.create(EVENTS, namespace, body)
        except AlreadyExists:  # an Event from before a restart: bump it
            count = self._count(event_name, at_least=2)
            self._kube.patch(EVENTS, namespace, event_name, {"count": count, "lastTimestamp": stamp}, MERGE_PATCH)

    def _count(self, event_name: str, at_least: int = 1) -> int:
        """The count an Event reaches with this news (the oldest remembered are forgotten)."""
        with self._counting:
            count = max(self._event_counts.pop(event_name, 0) + 1, at_least)
            self._event_counts[event_name] = count
            if len(self._event_counts) > REMEMBERED_EVENTS:
                self._event_counts.popitem(last=False)
            return count


def _stopped(left: int, of: int) -> int:
    """Say that `left` of the pass's `of` actions were left unsent, no longer leading; return `left`."""
    log.warning("stopped with %d of %d actions left: no longer allowed to write", left, of)
    return left


def _learned(capabilities: ApiCapabilities, pruned: list[ReserveGroup]) -> ApiCapabilities:
    """`capabilities` with what the answers to reservations showed: a Gang that came back without
    the reservations written on it has a CRD of an older version (said once, when it is news)."""
    if not pruned or not capabilities.keeps_gang_reservations:
        return capabilities
    log.error("%s: Gang %s came back without the reservations written on it: its CRD is of an older "
              "version, whose schema prunes status.reservations. Groups are reserved on each member "
              "until the controller restarts; apply this version's CRD (docs/operations.md, \"Upgrade\") before it "
              "does", "/".join(pruned[0].group), pruned[0].name)
    return replace(capabilities, keeps_gang_reservations=False)


def _stored(action: ReserveGroup, answer: object) -> bool:
    """Whether the Gang the API answered with holds every reservation the action wrote."""
    status = (answer.get("status") if isinstance(answer, dict) else None) or {}
    held = status.get("reservations") if isinstance(status, dict) else None
    held = held if isinstance(held, dict) else {}
    return all(held.get(pod) == entry for pod, entry in action.reservations.items() if entry is not None)


def _chains(writes: list[_Write]) -> list[list[_Write]]:
    """The writes by the object they write, each object's in the order given."""
    chains: dict[str, list[_Write]] = {}
    for write in writes:
        chains.setdefault(write.target, []).append(write)
    return list(chains.values())


def _run_chain(chain: list[_Write], proceed: Callable[[], bool]) -> list[tuple[_Write, object]]:
    """Send one object's writes one after the other: each with its answer, or the error it raised
    (`_Left` for one `proceed()` stopped)."""
    answers: list[tuple[_Write, object]] = []
    for write in chain:
        try:
            if not proceed():
                raise _Left()
            answers.append((write, write.send()))
        except Exception as error:
            answers.append((write, error))
    return answers


def _whose(report: Report) -> str:
    """Whose news a member's copy of its group's report is: its Gang by the name `kubectl get gang`
    takes, else its group (no Gang: a pod reported on)."""
    involved = report.involved
    return f"gang {involved.name}" if involved.kind == "Gang" else f"group {'/'.join(report.group)}"


def _urgency(action: Action) -> int:
    return 2 if isinstance(action, (Report, TellPod)) else 1 if isinstance(action, (SaveGang, DeleteGang)) else 0


def _target_of(action: Action) -> str:
    """The object an action writes, as one key per object across kinds."""
    namespace = action.group[0]
    if isinstance(action, (Reserve, Release, DeletePod, EvictPod)):
        return f"pods/{namespace}/{action.pod}"
    if isinstance(action, (SuspendOwner, ResumeOwner)):
        return f"{action.resource.name}/{namespace}/{action.name}"
    if isinstance(action, (ReserveGroup, SaveGang, DeleteGang)):
        return f"{GANGS.name}/{namespace}/{action.name}"
    if isinstance(action, CreateObject) and action.resource.plural != PODS.plural:
        # A group's PodTemplates, then the ProvisioningRequest naming them: one after the other.
        return f"capacity/{namespace}/{action.group[1]}"
    if isinstance(action, CreateObject):
        return f"{PODS.name}/{namespace}/{action.body['metadata']['name']}"
    if isinstance(action, DeleteObject):
        return f"{action.resource.name}/{namespace}/{action.name}"
    raise TypeError(f"{type(action).__name__} writes no object of its own")


def _events_of(namespace: str, involved: Involved) -> str:
    return f"{EVENTS.name}/{namespace}/{involved.kind}/{involved.name}"


def _log_failure(action: Action, error: BaseException) -> None:
    if isinstance(error, Conflict):
        log.info("%s: %s changed since it was read (%s); deciding again next pass",
                 _group(action), _target(action), error.reason or error.status)
    elif isinstance(error, KubeError):
        log.warning("%s: %s failed: %s", _group(action), _target(action), error)
    else:
        log.error("%s: %s failed unexpectedly", _group(action), _target(action), exc_info=error)


def _group(action: Action) -> str:
    return "/".join(action.group)


def _target(action: Action) -> str:
    if isinstance(action, (Reserve, Release, DeletePod)):
        return f"{type(action).__name__.lower()} pod {action.pod}"
    if isinstance(action, EvictPod):
        return f"evict pod {action.pod}"
    if isinstance(action, SuspendOwner):
        return f"suspend {action.resource.kind} {action.name}"
    if isinstance(action, ResumeOwner):
        return f"resume {action.resource.kind} {action.name}"
    if isinstance(action, ReserveGroup):
        return f"reserve {len(action.reservations)} members on Gang {action.name}"
    if isinstance(action, SaveGang):
        return f"save Gang {action.name}"
    if isinstance(action, DeleteGang):
        return f"delete Gang {action.name}"
    if isinstance(action, CreateObject):
        return f"create {action.resource.kind} {action.body['metadata']['name']}"
    if isinstance(action, DeleteObject):
        return f"delete {action.resource.kind} {action.name}"
    if isinstance(action, TellPod):
        return f"event {action.reason} on pod {action.pod.name}"
    return f"event {action.reason}"
