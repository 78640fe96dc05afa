"""Emulated workload operators: PyTorchJob (Kubeflow training operator), MPIJob (Kubeflow MPI
operator), TrainJob (Kubeflow Trainer), JobSet, batch Job, StatefulSet, LeaderWorkerSet (whose
two controllers are two of these loops: `sim.operators.lws`) and KubeRay's RayCluster and RayJob
(`sim.operators.ray`). A RayJob's children are of two resources, its RayCluster and its submitter
Job, and an MPIJob's too, its workers and its launcher Job: `other_children`.

Each operator is a reconcile function — pure: the workload and the children it owns in, the
children to create, delete or patch and the status to write out — driven by the `Operator` loop
below, which keeps the informer cache (workloads, and children by owner UID), remembers what it
has just created (the controllers' "expectations", so that a child is not created twice before
its watch event arrives) and retries refused creates, and reconciles that could not finish
(`Plan.retry`), after a delay rather than in a loop. An operator that counts lost children (the
Job controller) is also told which children went away without it deleting them (`lost`), until
the status that counts them is written.

Every operator whose workload has a suspend switch honours it as the real one does: suspending deletes
(or suspends) the children without counting them as failed, resuming creates them again.

Children of workloads reconciled in the same step are created round-robin, one per workload
in turn: the real operators reconcile jobs on parallel workers, so pods of jobs submitted
together reach the API server interleaved. That interleaving is what deadlocks two jobs on
the stock scheduler.
"""

import copy
import itertools
from dataclasses import dataclass, field
from typing import Callable

from sim.api import APIError, ClusterAPI, User, WatchEvent

DEFAULT_RETRY_SECONDS = 5.0


@dataclass
class Plan:
    """What one reconcile wants done: children to create, to delete (not counted as lost) and to
    patch (child, merge patch), and the new status if it changed. `retry`: the reconcile could not
    finish for want of something no watch will announce (the real controller returned an error
    and is requeued), so it runs again after the retry delay."""

    create: list[dict] = field(default_factory=list)
    status: dict | None = None
    delete: list[dict] = field(default_factory=list)
    patch: list[tuple[dict, dict]] = field(default_factory=list)
    retry: bool = False


# (workload, its children by name, now) → Plan; an operator that counts lost children takes them
# as the keyword `lost` too.
Reconcile = Callable[..., Plan]


def owner_reference(obj: dict, api_version: str) -> dict:
    return {"apiVersion": api_version, "kind": obj["kind"], "name": obj["metadata"]["name"],
            "uid": obj["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}


def controller_uid(obj: dict, kind: str) -> str | None:
    for reference in obj["metadata"].get("ownerReferences") or ():
        if reference.get("controller") and reference.get("kind") == kind:
            return reference.get("uid")
    return None


def status_if_changed(workload: dict, status: dict) -> dict | None:
    return None if (workload.get("status") or {}) == status else status


def condition(kind: str, reason: str, message: str, now_text: str, status: str = "True") -> dict:
    return {"type": kind, "status": status, "reason": reason, "message": message,
            "lastUpdateTime": now_text, "lastTransitionTime": now_text}


def keep_transition(conditions: list[dict], previous: list[dict]) -> list[dict]:
    """Keep the timestamps of conditions whose status did not change, so that a reconcile with
    nothing new writes nothing."""
    before = {c["type"]: c for c in previous}
    kept = []
    for new in conditions:
        old = before.get(new["type"])
        kept.append(old if old and old.get("status") == new["status"] and old.get("reason") == new["reason"]
                    else new)
    return kept


def template_metadata(template: dict) -> tuple[dict, dict]:
    metadata = template.get("metadata") or {}
    return dict(metadata.get("labels") or {}), dict(metadata.get("annotations") or {})


def child_spec(template: dict) -> dict:
    return copy.deepcopy(template.get("spec") or {})


class Operator:
    """The watch-and-reconcile loop shared by the operators, over any ClusterAPI."""

    def __init__(self, api: ClusterAPI, *, workloads: str, kind: str, children: str, user: User,
                 reconcile: Reconcile, retry_seconds: float = DEFAULT_RETRY_SECONDS, counts_lost: bool = False,
                 other_children: dict[str, str] | None = None):
        """`other_children`: kind → resource of children of other resources than `children` (a
        RayJob's RayCluster and Job); they are handed to `reconcile` with the others, by name."""
        self.api = api
        self.child_kinds = dict(other_children or {})
        self.counts_lost = counts_lost
        self.deleting: set[str] = set()  # UIDs of children this operator deleted: not lost
        self.lost: dict[str, list[dict]] = {}  # owner UID → children gone without us, not yet counted
        self.workload_resource = workloads
        self.kind = kind
        self.child_resource = children
        self.user = user
        self.reconcile = reconcile
        self.retry_seconds = retry_seconds
        self.resources = (workloads, children, *self.child_kinds.values())
        self.workloads: dict[str, dict] = {}  # by UID
        self.children: dict[str, dict[str, dict]] = {}  # owner UID → child name → child
        self.dirty: dict[str, None] = {}  # ordered set of workload UIDs
        self.retry_at: dict[str, float] = {}

    def observe(self, event: WatchEvent, now: float) -> None:
        if event.resource == self.workload_resource:
            uid = event.object["metadata"]["uid"]
            if event.type == "DELETED":
                self.workloads.pop(uid, None)
                self.children.pop(uid, None)
                self.lost.pop(uid, None)
                return
            self.workloads[uid] = event.object
            self.dirty[uid] = None
        elif event.resource == self.child_resource or event.resource in self.child_kinds.values():
            owner = controller_uid(event.object, self.kind)
            if owner is None:
                return
            children = self.children.setdefault(owner, {})
            if event.type == "DELETED":
                children.pop(event.object["metadata"]["name"], None)
                uid = event.object["metadata"].get("uid")
                if uid in self.deleting:
                    self.deleting.discard(uid)
                elif self.counts_lost:
                    self.lost.setdefault(owner, []).append(event.object)
            else:
                children[event.object["metadata"]["name"]] = event.object
            self.dirty[owner] = None

    def step(self, now: float) -> bool:
        due = [uid for uid, moment in self.retry_at.items() if moment <= now]
        for uid in due:
            del self.retry_at[uid]
            self.dirty[uid] = None
        plans = {}
        for uid in list(self.dirty):
            workload = self.workloads.get(uid)
            if workload is not None:
                children = self.children.get(uid, {})
                plans[uid] = (self.reconcile(workload, children, now, lost=tuple(self.lost.get(uid, ())))
                              if self.counts_lost else self.reconcile(workload, children, now))
        self.dirty.clear()
        wrote = self._create_interleaved(plans, now)
        for uid, plan in plans.items():
            wrote |= self._delete(uid, plan.delete, now) | self._patch(uid, plan.patch, now)
            if plan.retry:
                self.retry_at.setdefault(uid, now + self.retry_seconds)
            if plan.status is None or self._write_status(uid, plan.status, now):
                self.lost.pop(uid, None)  # counted in the status written, or nothing to count
                wrote |= plan.status is not None
        return wrote

    def next_due(self) -> float | None:
        return min(self.retry_at.values(), default=None)

    def resource_of(self, child: dict) -> str:
        return self.child_kinds.get(child.get("kind", ""), self.child_resource)

    def _create_interleaved(self, plans: dict[str, Plan], now: float) -> bool:
        wrote = False
        queues = [[(uid, child) for child in plan.create] for uid, plan in plans.items()]
        for uid, child in (item for turn in itertools.zip_longest(*queues) for item in turn if item):
            if uid in self.retry_at:
                continue
            try:
                created = self.api.create(self.resource_of(child), child, namespace=child["metadata"]["namespace"],
                                          user=self.user)
            except APIError as error:
                if error.code != 409:  # AlreadyExists: the watch event is on its way
                    self.retry_at[uid] = now + self.retry_seconds
                continue
            self.children.setdefault(uid, {})[created["metadata"]["name"]] = created
            wrote = True
        return wrote

    def _delete(self, uid: str, children: list[dict], now: float) -> bool:
        wrote = False
        for child in children:
            metadata = child["metadata"]
            self.deleting.add(metadata["uid"])
            try:
                self.api.delete(self.resource_of(child), metadata["name"], namespace=metadata.get("namespace"),
                                user=self.user)
            except APIError as error:
                self.deleting.discard(metadata["uid"])
                if error.code != 404:  # already gone
                    self.retry_at[uid] = now + self.retry_seconds
                continue
            wrote = True
        return wrote

    def _patch(self, uid: str, patches: list[tuple[dict, dict]], now: float) -> bool:
        wrote = False
        for child, patch in patches:
            metadata = child["metadata"]
            try:
                patched = self.api.patch(self.resource_of(child), metadata["name"], patch,
                                         namespace=metadata.get("namespace"), user=self.user)
            except APIError:
                self.retry_at[uid] = now + self.retry_seconds
                continue
            self.children.setdefault(uid, {})[metadata["name"]] = patched
            wrote = True
        return wrote

    def _write_status(self, uid: str, status: dict, now: float) -> bool:
        workload = self.workloads[uid]
        try:
            self.workloads[uid] = self.api.patch(
                self.workload_resource, workload["metadata"]["name"], {"status": status},
                namespace=workload["metadata"].get("namespace"), subresource="status", user=self.user)
        except APIError:
            self.retry_at[uid] = now + self.retry_seconds
            return False
        return True
