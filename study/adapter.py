"""The part of `controller.kube.Kube` that `controller.actions.Executor` calls, over the in-process API.

Study scaffolding, not product code. The controller talks to a real API server through
`controller.kube.Kube` (HTTP, retries, typed errors). On the study's virtual clock there is no
HTTP server to talk to, so this adapter hands the Executor's writes straight to the emulated
API server — which still runs every write through defaulting, admission (the gangkeeper webhook
included), the pod rules and optimistic concurrency — and turns its refusals into the typed
errors the Executor branches on, with the product's own `controller.kube.error_from`.

Only `create`, `patch`, `patch_status` and `delete` exist: the Executor uses nothing else, and
the study feeds the controller's cache from the cluster's watch events instead of list/watch.
"""

from collections.abc import Mapping
from typing import Any

from gangkeeper.controller.kube import MERGE_PATCH, Resource, check_patch, error_from
from sim.api import CONTROLLER, APIError, User
from sim.apiserver import APIServer


class InProcessKube:
    """Writes as the controller's service account; refusals raise `controller.kube` errors."""

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

    def delete(self, resource: Resource, namespace: str | None, name: str, *, uid: str | None = None,
               resource_version: str | None = None) -> dict:
        preconditions = {k: v for k, v in (("uid", uid), ("resourceVersion", resource_version)) if v}
        return self._call(self.api.delete, resource.name, name, namespace=namespace, user=self.user,
                          preconditions=preconditions or None)

    def _call(self, method, *args, **kwargs) -> dict:
        self.requests += 1
        try:
            return method(*args, **kwargs) or {}
        except APIError as error:
            raise error_from(error.code, error.status) from error
