"""The controller's I/O over the in-process API: its writes, and its informers fed from watch events.

Study scaffolding, not product code. The controller talks to a real API server through
`controller.reading.kube.Kube` (HTTP, retries, typed errors) and watches it with `controller.reading.informer.
Informer` threads. On the study's virtual clock there is no HTTP server to talk to and no thread
may run on its own, so:

- `InProcessKube` hands the Executor's writes straight to the emulated API server — which still
  runs every write through defaulting, admission (the gangkeeper webhook included), the pod rules
  and optimistic concurrency — and turns its refusals into the typed errors the Executor branches
  on, with the product's own `controller.reading.kube.error_from`. Only `create`, `patch`, `patch_status`,
  `delete`, `evict` and `resource_versions` exist: the Executor uses nothing else.
- `FedInformer` stands in for an `Informer`: the emulated cluster's loop hands it each watch event
  (`observe`), and it does with it what the informer does with a watch event — the controller's
  transform, the informer's `Cache`, the controller's callbacks.
"""

from collections.abc import Callable, Mapping
from typing import Any

from gangkeeper.controller.reading.informer import Cache, Hooks, Transform, apply_event
from gangkeeper.controller.reading.kube import MERGE_PATCH, Resource, check_patch, error_from, eviction
from gangkeeper.controller.reading.shapes import Reading
from sim.api import CONTROLLER, APIError, User, WatchEvent
from sim.apiserver import APIServer


class InProcessKube:
    """Writes as the controller's service account; refusals raise `controller.reading.kube` errors."""

    def __init__(self, api: APIServer, user: User = CONTROLLER):
        self.api, self.user = api, user
        self.requests = 0

    def create(self, resource: Resource, namespace: str | None, body: Mapping) -> dict:
        return self._call(self.api.create, resource.name, dict(body), namespace=namespace, user=self.user)

    def patch(self, resource: Resource, namespace: str | None, name: str, body: Any,
              patch_type: str = MERGE_PATCH, *, subresource: str = "") -> dict:
        # The same guard as Kube.patch: the wrong body for the patch type is a bug, not a refusal.
        check_patch(body, patch_type)
        return self._call(self.api.patch, resource.name, name, body, namespace=namespace, patch_type=patch_type,
                          subresource=subresource, user=self.user)

    def patch_status(self, resource: Resource, namespace: str | None, name: str, body: Any,
                     patch_type: str = MERGE_PATCH) -> dict:
        return self.patch(resource, namespace, name, body, patch_type, subresource="status")

    def resource_versions(self, resource: Resource, namespace: str | None, label_selector: str) -> dict[str, str]:
        self.requests += 1
        objects, _ = self.api.select(self.api.kind(resource.name), namespace, label_selector)
        return {obj["metadata"]["name"]: str(obj["metadata"].get("resourceVersion", "")) for obj in objects}

    def delete(self, resource: Resource, namespace: str | None, name: str, *, uid: str | None = None,
               resource_version: str | None = None) -> dict:
        preconditions = {k: v for k, v in (("uid", uid), ("resourceVersion", resource_version)) if v}
        return self._call(self.api.delete, resource.name, name, namespace=namespace, user=self.user,
                          preconditions=preconditions or None)

    def evict(self, namespace: str, name: str, uid: str) -> dict:
        """The Eviction API for this very pod (`uid`), with the body `Kube.evict` posts."""
        return self._call(self.api.create_eviction, namespace, name, eviction(namespace, name, uid), user=self.user)

    def _call(self, method, *args, **kwargs) -> dict:
        self.requests += 1
        try:
            return method(*args, **kwargs) or {}
        except APIError as error:
            raise error_from(error.code, error.status) from error


_LABEL_KEY_CHARACTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./")


class FedInformer:
    """One resource's informer, fed by `observe(event)` instead of list and watch.

    Made by the controller with `Informer`'s keyword arguments (`hooks` is accepted and has nothing
    to report: no watch is ever restarted here; nor has `reading`: the objects arrive as dicts, not
    JSON; nor has `keeps_unserved`: what is served stays served). A label selector is one label
    key: the objects that carry it (the controller's own ProvisioningRequests). Synced from the start: the
    emulated cluster hands its components every object that exists as an ADDED event first, as the
    initial list would. A resource the emulated API server does not serve is switched off, as the
    informer does: `served` False, nothing cached, `watched_as` None.
    """

    def __init__(self, api: APIServer, resource: Resource, transform: Transform, *, namespace: str | None = None,
                 reading: Reading | None = None, hooks: Hooks | None = None, on_change: Callable[[str], None],
                 on_object: Callable[[str, Any], None], keeps_unserved: bool = False, label_selector: str = ""):
        if label_selector and not set(label_selector) <= _LABEL_KEY_CHARACTERS:
            raise ValueError(f"label selector {label_selector!r}: only one label key (the label exists) is fed here")
        kind = api.kinds.by_path(resource.group, resource.version, resource.plural)
        self._label = label_selector
        self.resource, self.served, self.has_synced = resource, kind is not None, True
        self.watched_as = None if kind is None else api.resource_name(kind)  # the emulation's name of it
        self.cache = Cache(on_object)
        self._transform, self._namespace, self._on_change = transform, namespace, on_change

    def start(self) -> "FedInformer":
        return self

    def stop(self) -> None:
        return None

    def observe(self, event: WatchEvent) -> None:
        """What `Informer` does with one watch event (`controller.reading.informer.apply_event`)."""
        obj = event.object
        if self._namespace is not None and obj["metadata"].get("namespace") != self._namespace:
            return
        if self._label and self._label not in (obj["metadata"].get("labels") or {}):
            return
        if apply_event(self.cache, self._transform, event.type, obj):
            self._on_change(self.resource.name)
