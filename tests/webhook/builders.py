"""Pods and AdmissionReviews built the way the API server sends them, so tests read as scenarios."""

import base64
import copy
import json

import jsonpatch

from gangkeeper import names
from tests import builders
from tests.recorded import ADMISSION

FIXTURES = ADMISSION
NAMESPACE = "ml-training"
OPERATOR = "system:serviceaccount:ml-training:training-operator"


def fixture(prefix: str) -> dict:
    """A recorded request by its number: {"http": {...}, "review": {...}}."""
    (path,) = FIXTURES.glob(f"{prefix}-*.json")
    return json.loads(path.read_text())


def container(name="main", gpus=0, gpu_resource="nvidia.com/gpu", cpu="4", limit_gpus=None) -> dict:
    """A training container; `limit_gpus` limits other than it requests."""
    requests, limits = {"cpu": cpu, "memory": "16Gi"}, {"cpu": cpu, "memory": "16Gi"}
    if gpus:
        requests[gpu_resource] = str(gpus)
        limits[gpu_resource] = str(gpus if limit_gpus is None else limit_gpus)
    return builders.container(name, requests=requests, limits=limits)


def pod(name="p-0", *, labels=None, annotations=None, gates=None, gpus=0, owner=None, node_name=None,
        generate_name=None, containers=None, **spec) -> dict:
    """A pod in the training namespace, as an operator sends it to admission."""
    return builders.pod(name, namespace=NAMESPACE, labels=labels, annotations=annotations,
                        owners=[owner] if owner else (), gates=gates or (), node_name=node_name,
                        generate_name=generate_name,
                        containers=containers or [container(gpus=gpus)], **spec)


def owner(kind: str, name: str, uid: str, api_version="kubeflow.org/v1") -> dict:
    return builders.owner(kind, name, uid, api_version)


def pytorchjob_pod(job="bert", role="worker", index=0, uid="6f1c7c1e-8f31-4a44-9f7e-1b2f2c8e9a01", gpus=8, **kw):
    labels = {names.KUBEFLOW_JOB_NAME_LABEL: job, names.KUBEFLOW_REPLICA_TYPE_LABEL: role,
              names.KUBEFLOW_REPLICA_INDEX_LABEL: str(index), **kw.pop("labels", {})}
    return pod(f"{job}-{role}-{index}", labels=labels, owner=owner(names.PYTORCHJOB_KIND, job, uid), gpus=gpus, **kw)


def placeholder(group="bert", attempt="1", index=0, gpus=8, **kw) -> dict:
    """A placeholder pod as the controller creates one for a waiting group: a pause container in a
    member's shape, owned by the group's Gang, with the placeholders' PriorityClass resolved by the
    API server's Priority plugin (which runs before the webhooks)."""
    labels = {names.CAPACITY_FOR_LABEL: group, names.CAPACITY_ATTEMPT_LABEL: attempt, **kw.pop("labels", {})}
    pause = {**container("pause", gpus=gpus), "image": names.PLACEHOLDER_IMAGE}
    gang = owner(names.GANG_KIND, f"{group}-x7k2p", "9d0e1f2a-3b4c-4d5e-8f60-718293a4b5c6",
                 f"{names.GANG_GROUP}/{names.GANG_VERSION}")
    return pod(f"{group}-capacity-{attempt}-{index}", labels=labels, owner=gang, containers=[pause],
               priorityClassName=names.PLACEHOLDER_PRIORITY_CLASS, priority=names.PLACEHOLDER_PRIORITY,
               preemptionPolicy="Never", **kw)


def review(obj=None, *, operation="CREATE", old=None, user=OPERATOR, uid="5d3c1a2b-0000-4000-8000-000000000001",
           kind="Pod", group="", version="v1", namespace=NAMESPACE, dry_run=False, name=None,
           sub_resource="") -> dict:
    request = {
        "uid": uid,
        "kind": {"group": group, "version": version, "kind": kind},
        "resource": {"group": group, "version": version, "resource": kind.lower() + "s"},
        "namespace": namespace,
        "operation": operation,
        "userInfo": {"username": user, "groups": ["system:authenticated"]},
        "object": obj,
        "oldObject": old,
        "dryRun": dry_run,
    }
    if sub_resource:
        request["subResource"] = sub_resource
    metadata_name = ((obj or old or {}).get("metadata") or {}).get("name")
    if name or metadata_name:
        request["name"] = name or metadata_name
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def patch_of(response: dict) -> list[dict]:
    assert response["patchType"] == "JSONPatch"
    return json.loads(base64.b64decode(response["patch"]))


def applied(obj: dict, ops: list[dict]) -> dict:
    return jsonpatch.apply_patch(copy.deepcopy(obj), ops)


def gate_names(obj: dict) -> list[str]:
    return [gate["name"] for gate in (obj.get("spec") or {}).get("schedulingGates") or ()]
