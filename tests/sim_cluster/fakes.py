"""A minimal in-memory ClusterAPI for testing the cluster components alone.

Only what the components rely on: objects with uid, resourceVersion and creationTimestamp (from
the test's clock), `generateName`, pod defaulting of phase, schedulerName and of each container's
missing requests from its limits (what the scheduler reads is requests only), an optional
`admit(obj)` hook run on create (a stand-in for the mutating webhook), merge and JSON patches
(the status subresource changes status only; the main resource everything else), graceful
deletion of bound pods (as the API server does: marked, then removed by the kubelet), binding that
refuses bound and gated pods, and watch callbacks in commit order. Every request is recorded
with its user. The real emulated API server replaces it in the integration tests.
"""

from __future__ import annotations

import pickle
import random
import threading
from typing import Callable

import jsonpatch

from sim.api import ADMIN, SCHEDULER, APIError, User, WatchEvent
from sim.clock import Clock, rfc3339
from sim.patching import apply_merge_patch

CLUSTER_SCOPED = ("nodes", "namespaces")
SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def error(code: int, reason: str, message: str) -> APIError:
    return APIError({"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message,
                     "reason": reason, "code": code})


def clone(obj: dict) -> dict:
    """A deep copy, the fast way (objects are JSON shapes)."""
    return pickle.loads(pickle.dumps(obj, pickle.HIGHEST_PROTOCOL))


class FakeAPI:
    def __init__(self, clock: Clock, admit: Callable[[dict], dict] | None = None, seed: int = 0):
        self.clock = clock
        self.admit = admit
        self.objects: dict[tuple[str, str, str], dict] = {}
        self.version = 0
        self.subscribers: list[Callable[[WatchEvent], None]] = []
        self.requests: list[tuple[str, str, str, str]] = []  # (verb, resource, name, username)
        self.random = random.Random(seed)
        self.lock = threading.RLock()

    def _key(self, resource: str, name: str, namespace: str | None) -> tuple[str, str, str]:
        return resource, "" if resource in CLUSTER_SCOPED else (namespace or ""), name

    def _commit(self, kind: str, resource: str, key, obj: dict) -> dict:
        self.version += 1
        obj["metadata"]["resourceVersion"] = str(self.version)
        if kind == "DELETED":
            self.objects.pop(key, None)
        else:
            self.objects[key] = obj
        for callback in list(self.subscribers):
            callback(WatchEvent(kind, resource, clone(obj)))
        return clone(obj)

    def _get(self, resource: str, name: str, namespace: str | None) -> tuple[tuple, dict]:
        key = self._key(resource, name, namespace)
        if key not in self.objects:
            raise error(404, "NotFound", f'{resource} "{name}" not found')
        return key, clone(self.objects[key])

    def create(self, resource: str, obj: dict, *, namespace: str | None = None, user: User = ADMIN) -> dict:
        with self.lock:
            obj = clone(obj)
            metadata = obj.setdefault("metadata", {})
            if not metadata.get("name") and metadata.get("generateName"):
                metadata["name"] = metadata["generateName"] + "".join(self.random.choices(SUFFIX_ALPHABET, k=5))
            if resource not in CLUSTER_SCOPED:
                metadata["namespace"] = namespace or metadata.get("namespace") or "default"
            self.requests.append(("create", resource, metadata["name"], user.username))
            key = self._key(resource, metadata["name"], metadata.get("namespace"))
            if key in self.objects:
                raise error(409, "AlreadyExists", f'{resource} "{metadata["name"]}" already exists')
            metadata.update(uid=f"uid-{self.version + 1}", creationTimestamp=rfc3339(self.clock.now()))
            if resource == "pods":
                obj["spec"].setdefault("schedulerName", "default-scheduler")
                obj.setdefault("status", {}).setdefault("phase", "Pending")
                for container in (obj["spec"].get("initContainers") or []) + (obj["spec"].get("containers") or []):
                    limits = (container.get("resources") or {}).get("limits") or {}
                    if limits:
                        container["resources"]["requests"] = {**limits, **(container["resources"].get("requests") or {})}
            if self.admit is not None:
                obj = self.admit(obj)
            return self._commit("ADDED", resource, key, obj)

    def get(self, resource: str, name: str, *, namespace: str | None = None) -> dict:
        with self.lock:
            return self._get(resource, name, namespace)[1]

    def list(self, resource: str, *, namespace: str | None = None, label_selector: str = "",
             field_selector: str = "") -> list[dict]:
        wanted = dict(pair.split("=", 1) for pair in label_selector.split(",") if pair)
        with self.lock:
            return [clone(obj) for (kind, ns, _), obj in self.objects.items()
                    if kind == resource and (namespace is None or ns == namespace)
                    and all((obj["metadata"].get("labels") or {}).get(k) == v for k, v in wanted.items())]

    def patch(self, resource: str, name: str, patch: dict | list, *, namespace: str | None = None,
              patch_type: str = "application/merge-patch+json", subresource: str = "",
              user: User = ADMIN) -> dict:
        with self.lock:
            self.requests.append(("patch" + (f"/{subresource}" if subresource else ""), resource, name,
                                  user.username))
            key, current = self._get(resource, name, namespace)
            if patch_type == "application/json-patch+json":
                changed = jsonpatch.apply_patch(current, patch)
            else:
                changed = apply_merge_patch(current, patch)
            if subresource == "status":
                changed = {**current, "status": changed.get("status", {})}
            else:
                changed["status"] = current.get("status", {})
            return self._commit("MODIFIED", resource, key, changed)

    def delete(self, resource: str, name: str, *, namespace: str | None = None, user: User = ADMIN,
               grace_period_seconds: int | None = None) -> None:
        """A bound, non-terminal pod is only marked (deletionTimestamp) unless the grace period is
        0: the kubelet removes it once its containers stop. Everything else goes at once."""
        with self.lock:
            self.requests.append(("delete", resource, name, user.username))
            key, current = self._get(resource, name, namespace)
            grace = current.get("spec", {}).get("terminationGracePeriodSeconds", 30)
            grace = grace if grace_period_seconds is None else grace_period_seconds
            running = resource == "pods" and current["spec"].get("nodeName") and \
                current["status"].get("phase") not in ("Succeeded", "Failed")
            if running and grace > 0:
                if not current["metadata"].get("deletionTimestamp"):
                    current["metadata"].update(deletionTimestamp=rfc3339(self.clock.now() + grace),
                                               deletionGracePeriodSeconds=grace)
                    self._commit("MODIFIED", resource, key, current)
                return
            self._commit("DELETED", resource, key, current)

    def bind(self, namespace: str, name: str, node: str, *, user: User = SCHEDULER) -> None:
        with self.lock:
            self.requests.append(("bind", "pods", name, user.username))
            key, pod = self._get("pods", name, namespace)
            if pod["spec"].get("nodeName"):
                raise error(409, "Conflict", f'Operation cannot be fulfilled on pods/binding "{name}": pod {name} '
                                             f'is already assigned to node "{pod["spec"]["nodeName"]}"')
            if pod["spec"].get("schedulingGates"):
                raise error(400, "BadRequest", f"pod {name} has non-empty .spec.schedulingGates")
            pod["spec"]["nodeName"] = node
            conditions = [c for c in pod["status"].get("conditions") or () if c.get("type") != "PodScheduled"]
            pod["status"]["conditions"] = conditions + [{"type": "PodScheduled", "status": "True"}]
            self._commit("MODIFIED", "pods", key, pod)

    def subscribe(self, callback: Callable[[WatchEvent], None]) -> Callable[[], None]:
        with self.lock:
            self.subscribers.append(callback)
        return lambda: self.subscribers.remove(callback)
