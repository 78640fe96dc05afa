"""A team: one namespace of the shared stack, with a node pool of its own, and the workloads it submits.

Every test works in its own team, so that tests stay independent on one stack: its pods carry a
nodeSelector for the team's pool (GPU nodes are commonly pooled like this), so capacity another
test holds or frees never changes what this test sees. Workloads are built as users write them;
their pod templates carry the emulation's annotations for how long training runs and how many
pods it needs (`sim.names`), which the emulated kubelet reads.
"""

from __future__ import annotations

from dataclasses import dataclass

from gangkeeper import names
from sim.api import ADMIN
from sim.apiserver import APIServer
from sim.names import DURATION_ANNOTATION, GPU, HOSTNAME_LABEL, PYTORCH_CONTAINER, WORLD_SIZE_ANNOTATION
from tests.e2e.stack import Stack

POOL_LABEL = "e2e.gangkeeper.io/pool"
IMAGE = "registry.example/train:latest"
TRAIN_SECONDS = 1.0


def pod_template(team: Team, *, gpus: int, world_size: int, container: str = "trainer",
                 restart_policy: str = "Never", labels: dict | None = None, annotations: dict | None = None) -> dict:
    resources = {"cpu": "1", "memory": "1Gi", **({GPU: str(gpus)} if gpus else {})}
    sim_annotations = {DURATION_ANNOTATION: f"{TRAIN_SECONDS:g}", WORLD_SIZE_ANNOTATION: str(world_size)}
    return {"metadata": {"labels": dict(labels or {}), "annotations": {**sim_annotations, **(annotations or {})}},
            "spec": {"restartPolicy": restart_policy, "nodeSelector": {POOL_LABEL: team.name},
                     "containers": [{"name": container, "image": IMAGE,
                                     "resources": {"requests": resources, "limits": dict(resources)}}]}}


@dataclass
class Team:
    """A namespace and its node pool on a stack: what a test submits there, and what it reads back."""

    stack: Stack
    name: str  # the namespace, and the pool's label value

    @property
    def api(self) -> APIServer:
        return self.stack.api

    # --- submitting ----------------------------------------------------------------------------

    def pytorchjob(self, name: str, *, workers: int, gpus: int) -> dict:
        """A master and `workers` workers, `gpus` GPUs each."""
        template = pod_template(self, gpus=gpus, world_size=1 + workers, container=PYTORCH_CONTAINER,
                                restart_policy="OnFailure")
        replicas = {"Master": {"replicas": 1, "restartPolicy": "OnFailure", "template": template},
                    "Worker": {"replicas": workers, "restartPolicy": "OnFailure", "template": template}}
        return self.create("pytorchjobs", {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
                                           "metadata": {"name": name}, "spec": {"pytorchReplicaSpecs": replicas}})

    def jobset(self, name: str, *, jobs: int, pods_per_job: int, gpus: int) -> dict:
        """One replicated job of `jobs` Indexed Jobs of `pods_per_job` pods."""
        job = indexed_job_spec(pod_template(self, gpus=gpus, world_size=jobs * pods_per_job), pods_per_job)
        return self.create("jobsets", {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
                                       "metadata": {"name": name},
                                       "spec": {"replicatedJobs": [{"name": "workers", "replicas": jobs,
                                                                    "template": {"spec": job}}]}})

    def indexed_job(self, name: str, *, pods: int, gpus: int) -> dict:
        spec = indexed_job_spec(pod_template(self, gpus=gpus, world_size=pods), pods)
        return self.create("jobs", {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": spec})

    def pod(self, name: str, *, gpus: int, world_size: int = 1, labels: dict | None = None,
            annotations: dict | None = None) -> dict:
        """A bare pod, as a user creates it."""
        template = pod_template(self, gpus=gpus, world_size=world_size, labels=labels, annotations=annotations)
        return self.create("pods", {"apiVersion": "v1", "kind": "Pod",
                                    "metadata": {"name": name, **template["metadata"]}, "spec": template["spec"]})

    def gang(self, name: str, *, min_count: int) -> dict:
        return self.create("gangs", {"apiVersion": f"{names.GANG_GROUP}/{names.GANG_VERSION}", "kind": names.GANG_KIND,
                                     "metadata": {"name": name}, "spec": {"minCount": min_count}})

    def native_pod_group(self, name: str, *, min_count: int) -> dict:
        return self.create("podgroups.scheduling.k8s.io", {
            "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "metadata": {"name": name},
            "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}}})

    def create(self, resource: str, manifest: dict) -> dict:
        """Create as the cluster admin; the API server's admission chain (our webhook included) applies."""
        return self.api.create(resource, manifest, namespace=self.name, user=ADMIN)

    # --- reading -------------------------------------------------------------------------------

    def pods(self) -> dict[str, dict]:
        return {pod["metadata"]["name"]: pod for pod in self.api.list("pods", namespace=self.name)}

    def pods_created(self) -> dict[str, dict]:
        """Every pod created in the namespace, as the API server stored it at creation (after admission)."""
        return self.stack.created_in(self.name)

    def gangs(self) -> dict[str, dict]:
        """Gangs by the group they declare."""
        return {(g.get("spec") or {}).get("groupName") or g["metadata"]["name"]: g
                for g in self.api.list("gangs", namespace=self.name)}

    def get(self, resource: str, name: str) -> dict:
        return self.api.get(resource, name, namespace=self.name)

    def gang_if(self, group: str, phase: str, **status) -> dict | None:
        """The Gang of `group` if its status says `phase` (and the other `status` fields given), else None."""
        gang = self.gangs().get(group)
        current = (gang or {}).get("status") or {}
        wanted = {"phase": phase, **status}
        return gang if all(current.get(key) == value for key, value in wanted.items()) else None

    def violations(self) -> list[str]:
        return [str(violation) for violation in self.stack.invariants.violations(self.name)]

    def wait_until(self, condition, what: str):
        """Wait for `condition`, failing at once when an invariant breaks in the namespace meanwhile."""
        def holds():
            broken = self.violations()
            assert not broken, f"while waiting for {what}: " + "; ".join(broken[:5])
            return condition()

        return self.stack.wait_until(holds, f"{self.name}: {what}")

    def wait_for_gang(self, group: str, phase: str, **status) -> dict:
        """The Gang of `group` once its status says `phase` (and the other `status` fields given)."""
        return self.wait_until(lambda: self.gang_if(group, phase, **status),
                               f"the Gang of {group} in phase {phase} {status or ''}")

    def wait_for_event(self, kind: str, name: str, reason: str) -> dict:
        """The Event about the object `kind`/`name` with `reason` (the controller reports on Gangs, or on pods)."""
        def event() -> dict | None:
            return next((e for e in self.api.list("events", namespace=self.name)
                         if e.get("reason") == reason and e["involvedObject"].get("kind") == kind
                         and e["involvedObject"].get("name") == name), None)

        return self.wait_until(event, f"an Event {reason} about {kind} {name}")

    def wait_for_workload(self, resource: str, name: str, condition: str) -> dict:
        """The workload once its status has `condition` True (Succeeded, Complete, Completed)."""
        return self.wait_until(lambda: has_condition(self.get(resource, name), condition),
                               f"{resource} {name} {condition}")


def has_condition(obj: dict, kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True"
               for c in (obj.get("status") or {}).get("conditions") or ())


def indexed_job_spec(template: dict, pods: int) -> dict:
    return {"parallelism": pods, "completions": pods, "completionMode": "Indexed", "backoffLimit": 0,
            "template": template}


def new_team(stack: Stack, name: str, *, nodes: int = 2, gpus_per_node: int = 4, enforced: bool = True) -> Team:
    """A namespace (labelled for enforcement unless `enforced=False`) and `nodes` Ready GPU nodes of its own."""
    labels = {names.ENFORCE_LABEL: names.ENFORCE_VALUE} if enforced else {}
    stack.api.create("namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                    "metadata": {"name": name, "labels": labels}})
    for index in range(nodes):
        allocatable = {"cpu": "32", "memory": "256Gi", "pods": "110", GPU: str(gpus_per_node)}
        stack.api.create("nodes", {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": f"{name}-{index}", "labels": {POOL_LABEL: name, HOSTNAME_LABEL: f"{name}-{index}"}},
            "status": {"capacity": dict(allocatable), "allocatable": allocatable,
                       "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}})
    return Team(stack, name)
