"""Carry out a pass's actions through `controller.kube`, one at a time, each on its own.

Pod and owner writes go first, then Gang statuses, then Events: what the scheduler and the
operators wait for is not held up behind what people read. A Conflict (409, or a failed JSON
Patch `test`) means the cache was behind: the action is dropped and the next pass, on fresher data, decides again; it is never
retried blindly. Any other failure is logged and the remaining actions still run: one bad object
never stops the loop. `--dry-run` records the decisions (audit, log) and writes nothing.

Events are core/v1 Events named after the object and a hash of its uid, reason and message, so
that the same news bumps `count` on one Event instead of piling up new ones, and an object
recreated under the same name gets Events of its own. Their `involvedObject` carries the object's
uid, as `kubectl describe` selects by it. A report goes to its Gang (or first pod) and, when it
says so (release, rollback), to each pod it names as well. A Gang the same pass creates has no uid
when the pass decides: its Event is written after the Gang's own write (Events go last), with the
uid the API answered with; if that write failed the Gang is read, and if it does not exist the
Event is left out (the audit line says what happened) rather than written about no object. A
member deleted by a rollback gets an audit line of its own, naming it: a deleted pod is on record
whatever the size of its group.
"""

import hashlib
import logging
from collections import OrderedDict
from collections.abc import Callable, Iterable
from datetime import datetime, timezone

from gangkeeper.audit import AuditLog
from gangkeeper.controller.decisions import (
    Action,
    DeleteGang,
    DeletePod,
    EvictPod,
    GangEvent,
    Involved,
    Reason,
    Release,
    Report,
    Reserve,
    ResumeOwner,
    SaveGang,
    SuspendOwner,
)
from gangkeeper.controller.kube import (
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
from gangkeeper.controller.patches import reserve_patch

log = logging.getLogger("gangkeeper.controller.actions")
COMPONENT = "gangkeeper-controller"
# Event counts remembered: enough for every group under way; an older Event that comes back is
# found by its name (AlreadyExists) and bumped.
REMEMBERED_EVENTS = 16_384


class Executor:
    """Writes actions; `written(obj)` sees every pod the API returned, so the cache can assume it."""

    def __init__(self, kube: Kube | None, audit: AuditLog, *, dry_run: bool = False,
                 written: Callable[[dict], None] = lambda obj: None,
                 clock: Callable[[], datetime] = lambda: datetime.now(timezone.utc)):
        self._kube, self._audit, self._dry_run = kube, audit, dry_run
        self._written, self._clock = written, clock
        self._event_counts: OrderedDict[str, int] = OrderedDict()
        self._gang_uids: dict[tuple[str, str], str] = {}  # Gangs written in this execute(), by (namespace, name)

    def execute(self, actions: Iterable[Action], proceed: Callable[[], bool] = lambda: True) -> int:
        """Run every action while `proceed()` (still the leader, say); return how many failed or were left."""
        failed = 0
        self._gang_uids = {}
        actions = sorted(actions, key=_urgency)
        for position, action in enumerate(actions):
            if not proceed():
                log.warning("stopped after %d of %d actions: no longer allowed to write", position, len(actions))
                return failed + len(actions) - position
            try:
                if isinstance(action, Report):
                    self._record(action)
                elif isinstance(action, DeletePod) and action.why:
                    self._record_deletion(action)
                if not self._dry_run:
                    self._write(action)
                if isinstance(action, EvictPod):  # on record once the Eviction API said yes (a budget may refuse)
                    self._record_deletion(action)
            except Conflict as error:
                log.info("%s: %s changed since it was read (%s); deciding again next pass",
                         _group(action), _target(action), error.reason or error.status)
                failed += 1
            except KubeError as error:
                log.warning("%s: %s failed: %s", _group(action), _target(action), error)
                failed += 1
            except Exception:
                log.exception("%s: %s failed unexpectedly", _group(action), _target(action))
                failed += 1
        return failed

    def _write(self, action: Action) -> None:
        namespace = action.group[0]
        if isinstance(action, Reserve):
            patch = reserve_patch(action.resource_version, action.node)
            self._written(self._kube.patch(PODS, namespace, action.pod, patch, MERGE_PATCH))
        elif isinstance(action, Release):
            self._written(self._kube.patch(PODS, namespace, action.pod, list(action.patch), JSON_PATCH))
        elif isinstance(action, DeletePod):
            self._kube.delete(PODS, namespace, action.pod, uid=action.uid)
        elif isinstance(action, EvictPod):
            self._kube.evict(namespace, action.pod, action.uid)
        elif isinstance(action, (SuspendOwner, ResumeOwner)):
            self._kube.patch(action.resource, namespace, action.name, dict(action.patch), MERGE_PATCH)
        elif isinstance(action, SaveGang):
            if action.create is not None:
                try:
                    self._kube.create(GANGS, namespace, action.create)
                except AlreadyExists:
                    pass
            saved = self._kube.patch_status(GANGS, namespace, action.name, {"status": dict(action.status)},
                                            MERGE_PATCH)
            self._gang_uids[(namespace, action.name)] = ((saved or {}).get("metadata") or {}).get("uid", "")
        elif isinstance(action, DeleteGang):
            try:
                self._kube.delete(GANGS, namespace, action.name)
            except NotFound:
                pass
        elif isinstance(action, Report):
            involved = self._with_uid(namespace, action.involved)
            if involved is not None:
                self._event(action, involved, action.message)
            if action.on_pods:
                group = "/".join(action.group)
                for pod in action.pods:
                    self._event(action, pod, f"group {group}: {action.message}")

    def _with_uid(self, namespace: str, involved: Involved) -> Involved | None:
        """`involved` with its uid: a Gang created this pass has it from its write, or else from a read."""
        if involved.uid:
            return involved
        uid = self._gang_uids.get((namespace, involved.name))
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
        evicted = isinstance(deletion, EvictPod)
        self._audit.record(GangEvent.MEMBER_DELETED, decision="evicted" if evicted else GangEvent.MEMBER_DELETED.decision,
                           reason=Reason.PREEMPTED if evicted else deletion.reason, namespace=namespace, group=group,
                           pod=deletion.pod, details={"pod_uid": deletion.uid, "why": deletion.why,
                                                      "dry_run": self._dry_run})

    def _event(self, report: Report, involved: Involved, message: str) -> None:
        namespace = report.group[0]
        api_version, kind, name, uid = involved
        digest = hashlib.sha256(f"{kind}/{name}/{uid}/{report.reason}/{message}".encode()).hexdigest()[:12]
        event_name = f"{name}.{digest}"[-253:].lstrip(".-")
        stamp = self._clock().strftime("%Y-%m-%dT%H:%M:%SZ")
        count = self._event_counts.pop(event_name, 0) + 1
        self._event_counts[event_name] = count
        if len(self._event_counts) > REMEMBERED_EVENTS:
            self._event_counts.popitem(last=False)
        if count > 1:
            self._kube.patch(EVENTS, namespace, event_name, {"count": count, "lastTimestamp": stamp}, MERGE_PATCH)
            return
        body = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": event_name, "namespace": namespace},
                "involvedObject": {"apiVersion": api_version, "kind": kind, "name": name, "namespace": namespace,
                                   "uid": uid},
                "reason": report.reason, "message": message[:1024], "type": "Warning" if report.warning
                else "Normal", "source": {"component": COMPONENT}, "firstTimestamp": stamp, "lastTimestamp": stamp,
                "count": 1}
        try:
            self._kube.create(EVENTS, namespace, body)
        except AlreadyExists:  # an Event from before a restart: bump it
            self._event_counts[event_name] = count = 2
            self._kube.patch(EVENTS, namespace, event_name, {"count": count, "lastTimestamp": stamp}, MERGE_PATCH)


def _urgency(action: Action) -> int:
    return 2 if isinstance(action, Report) else 1 if isinstance(action, (SaveGang, DeleteGang)) else 0


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
    if isinstance(action, SaveGang):
        return f"save Gang {action.name}"
    if isinstance(action, DeleteGang):
        return f"delete Gang {action.name}"
    return f"event {action.reason}"
