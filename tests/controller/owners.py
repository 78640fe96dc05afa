"""Owners in the stand-in API (tests/controller/world.py): workloads at a resourceVersion that take
merge patches guarded by it, and a stand-in Job controller that deletes a suspended Job's pods and
creates them, gated, while it runs."""

import copy

from gangkeeper import names
from gangkeeper.controller.cache.groups import JOBS
from gangkeeper.controller.deciding.decisions import ResumeOwner, SuspendOwner
from gangkeeper.identity import to_label_value
from tests.controller.world import CREATED, NS, World, member_object

BACKOFF = 30.0  # the rollback backoff the owners' tests set


def merged(target: dict, patch: dict) -> dict:
    """`patch` applied to `target` as a JSON merge patch (RFC 7386): null removes a key."""
    out = copy.deepcopy(target)
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merged(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


class Owners(World):
    """The stand-in API, with owners at a resourceVersion that take guarded merge patches."""

    def put_workload(self, resource: str, obj: dict) -> None:
        self.rv += 1
        obj = copy.deepcopy(obj)
        obj.setdefault("metadata", {})["resourceVersion"] = str(self.rv)
        super().put_workload(resource, obj)

    def apply(self, actions) -> None:
        for action in actions:
            if isinstance(action, (SuspendOwner, ResumeOwner)):
                self.patch_owner(action.resource.name, action.name, action.patch)
        super().apply([a for a in actions if not isinstance(a, (SuspendOwner, ResumeOwner))])

    def patch_owner(self, resource: str, name: str, patch: dict) -> None:
        current = self.workloads[(resource, NS, name)]
        wanted = patch.get("metadata", {}).get("resourceVersion")
        if wanted and wanted != current["metadata"]["resourceVersion"]:
            self.conflicts += 1
            return
        self.put_workload(resource, merged(current, patch))

    def owner(self, resource: str, name: str) -> dict:
        return self.workloads[(resource, NS, name)]

    def refuse(self, name: str, why: str = "0/2 nodes are available: 2 Insufficient nvidia.com/gpu.") -> None:
        """The scheduler's verdict on a released member: it does not fit on the node it is pinned to."""
        pod = self.pods[f"{NS}/{name}"]
        pod["status"]["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                        "message": why}]
        self._store(pod)

    def bind_one(self, name: str) -> None:
        pod = self.pods[f"{NS}/{name}"]
        pod["spec"]["nodeName"] = self.reserved_node(name)
        pod["status"]["phase"] = "Running"
        self._store(pod)


class JobController:
    """What the Job controller does as far as a rollback goes: `parallelism` gated pods while the
    Job runs, none while it is suspended (deleted without counting them: they are never DeletePods)."""

    def __init__(self, world: Owners, name: str = "train", parallelism: int = 2, priority: int | None = None):
        self.world, self.name, self.created, self.priority = world, name, 0, priority
        world.put_workload(JOBS, {"metadata": {"name": name}, "spec": {"parallelism": parallelism}})

    @property
    def job(self) -> dict:
        return self.world.owner(JOBS, self.name)

    @property
    def group(self) -> str:
        return to_label_value(f"{self.name}-{self.job['metadata']['uid']}")

    def pods(self) -> list[str]:
        return [key for key, pod in self.world.pods.items()
                if pod["metadata"].get("labels", {}).get(names.GROUP_LABEL) == self.group]

    def sync(self) -> None:
        if self.job["spec"].get("suspend"):
            for key in self.pods():
                self.world.delete(key)
            return
        for _ in range(self.job["spec"]["parallelism"] - len(self.pods())):
            self.world.add(member_object(f"{self.name}-{self.created}", group=self.group, source=names.SOURCE_JOB,
                                         owner=("Job", self.name), gpus=8, created=CREATED, priority=self.priority))
            self.created += 1
