"""The in-process face of the emulated API server.

The emulated kube-scheduler, kubelet and workload operators are clients of the API server like
any other: they read and write through this protocol, and every write goes through the same
pipeline as an HTTP request (defaulting, admission webhooks, the API's validation rules,
resourceVersion bumps, watch events). Only the transport is skipped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Protocol

from gangkeeper import names


@dataclass(frozen=True)
class User:
    """Who makes a request; the admission chain sends it as `userInfo`."""

    username: str
    groups: tuple[str, ...] = ("system:authenticated",)
    uid: str = ""


def service_account(namespace: str, name: str) -> User:
    """Who a service account's token authenticates as: its user name and the groups every one gets."""
    return User(f"system:serviceaccount:{namespace}:{name}",
                ("system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"))


SCHEDULER = User("system:kube-scheduler")
KUBELET = User("system:node", ("system:nodes", "system:authenticated"))
JOB_CONTROLLER = service_account("kube-system", "job-controller")
TRAINING_OPERATOR = service_account("kubeflow", "training-operator")
JOBSET_CONTROLLER = service_account("jobset-system", "jobset-controller-manager")
TRAINER_CONTROLLER = service_account("kubeflow-system", "kubeflow-trainer-controller-manager")
ADMIN = User("kubernetes-admin", ("system:masters", "system:authenticated"))
# gangkeeper's controller, as deploy/ installs it: the one user the webhook lets remove gates.
CONTROLLER = service_account(names.DEFAULT_NAMESPACE, names.CONTROLLER_SERVICE_ACCOUNT)


@dataclass(frozen=True)
class WatchEvent:
    type: str  # ADDED, MODIFIED, DELETED
    resource: str  # plural, e.g. "pods"
    object: dict = field(repr=False)


class APIError(Exception):
    """A refused request, carrying the Status body the real API server would send."""

    def __init__(self, status: dict):
        super().__init__(status.get("message", ""))
        self.status = status

    @property
    def code(self) -> int:
        return int(self.status.get("code", 500))

    @property
    def reason(self) -> str:
        return self.status.get("reason", "")


class ClusterAPI(Protocol):
    """Resources are named by plural (`pods`, `nodes`, `jobs`, `pytorchjobs`, `jobsets`, ...).

    Every method raises APIError with the real Status body when the real server would refuse.
    Objects passed in and returned are plain dicts (JSON shapes); returned objects are copies.
    """

    def create(self, resource: str, obj: dict, *, namespace: str | None = None, user: User = ADMIN) -> dict: ...

    def get(self, resource: str, name: str, *, namespace: str | None = None) -> dict: ...

    def list(self, resource: str, *, namespace: str | None = None, label_selector: str = "",
             field_selector: str = "") -> list[dict]: ...

    def patch(self, resource: str, name: str, patch: dict | list, *, namespace: str | None = None,
              patch_type: str = "application/merge-patch+json", subresource: str = "",
              user: User = ADMIN) -> dict: ...

    def delete(self, resource: str, name: str, *, namespace: str | None = None, user: User = ADMIN,
               grace_period_seconds: int | None = None) -> None:
        """A bound pod is deleted gracefully (deletionTimestamp set) unless grace_period_seconds=0."""
        ...

    def bind(self, namespace: str, name: str, node: str, *, user: User = SCHEDULER) -> None: ...

    def evict(self, namespace: str, name: str, *, grace_period_seconds: int | None = None,
              user: User = ADMIN) -> dict:
        """POST pods/NAME/eviction: the pod gets the DisruptionTarget condition and is deleted as by
        `delete` (with the grace period, when given), unless its PodDisruptionBudget allows no
        disruption (APIError 429). Returns the Status Success."""
        ...

    def subscribe(self, callback: Callable[[WatchEvent], None]) -> Callable[[], None]:
        """Call `callback` after every committed change, in commit order; returns an unsubscribe function."""
        ...
