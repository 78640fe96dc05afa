"""The StatefulSet controller (apps/v1), as far as its pods go: one pod per ordinal, each its own identity.

Pods are `{set}-{ordinal}`, ordinals from `spec.ordinals.start` (default 0) for `spec.replicas`,
made from the template with what the real controller adds (kubernetes pkg/controller/statefulset,
`newVersionedStatefulSetPod`): the labels `statefulset.kubernetes.io/pod-name`,
`apps.kubernetes.io/pod-index` and `controller-revision-hash`, `spec.hostname` its name and
`spec.subdomain` the set's `serviceName`, the set as its controlling owner. A pod that goes away
is created again under its name once it is gone (a terminating pod is waited for); one that
finished is deleted to be created again. `podManagementPolicy: OrderedReady` (the default) creates
an ordinal only once every lower one is Running and Ready and removes the surplus from the highest
ordinal, one at a time, only while the rest are; `Parallel` creates and removes them all at once.
The status counts them as the real controller does (`replicas` with those terminating,
`readyReplicas`, `availableReplicas`, `currentReplicas`, `updatedReplicas`, the revisions).

Not modelled: rolling updates (a pod keeps the revision it was made with; the set's revision is
its current template's hash), `minReadySeconds`, volume claim templates, ControllerRevision
objects, `persistentVolumeClaimRetentionPolicy`.
"""

import copy
import json

from gangkeeper.names import STATEFULSET_POD_INDEX_LABEL, STATEFULSET_POD_NAME_LABEL
from sim.api import ClusterAPI, service_account
from sim.names import CONTROLLER_REVISION_HASH_LABEL, PODS, STATEFULSET_API_VERSION, STATEFULSETS
from sim.operators import Operator, Plan, child_spec, owner_reference, status_if_changed, template_metadata

PARALLEL = "Parallel"
STATEFULSET_CONTROLLER = service_account("kube-system", "statefulset-controller")
# apimachinery's rand.SafeEncodeString alphabet: no vowels, no look-alikes.
_SAFE = "bcdfghjklmnpqrstvwxz2456789"


def revision(statefulset: dict) -> str:
    """`{set}-{hash}`: the set's revision, a hash of its pod template (as `controller.ComputeHash`
    names ControllerRevisions, FNV-32 written in the safe alphabet)."""
    digest = 0x811C9DC5  # FNV-32a
    for byte in json.dumps(statefulset["spec"].get("template") or {}, sort_keys=True).encode():
        digest = ((digest ^ byte) * 0x01000193) & 0xFFFFFFFF
    return f"{statefulset['metadata']['name']}-{''.join(_SAFE[ord(c) % len(_SAFE)] for c in str(digest))}"


def ordinals(statefulset: dict) -> range:
    spec = statefulset["spec"]
    start = int((spec.get("ordinals") or {}).get("start", 0))
    return range(start, start + int(spec.get("replicas", 1)))


def pod_name(statefulset: dict, ordinal: int) -> str:
    return f"{statefulset['metadata']['name']}-{ordinal}"


def stateful_pod(statefulset: dict, ordinal: int) -> dict:
    template = statefulset["spec"].get("template") or {}
    labels, annotations = template_metadata(template)
    name = pod_name(statefulset, ordinal)
    labels.update({STATEFULSET_POD_NAME_LABEL: name, STATEFULSET_POD_INDEX_LABEL: str(ordinal),
                   CONTROLLER_REVISION_HASH_LABEL: revision(statefulset)})
    spec = child_spec(template)
    spec["hostname"] = name
    if statefulset["spec"].get("serviceName"):
        spec["subdomain"] = statefulset["spec"]["serviceName"]
    metadata = {"name": name, "namespace": statefulset["metadata"]["namespace"], "labels": labels,
                "ownerReferences": [owner_reference(statefulset, STATEFULSET_API_VERSION)]}
    if annotations:
        metadata["annotations"] = copy.deepcopy(annotations)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def phase(pod: dict) -> str:
    return (pod.get("status") or {}).get("phase") or "Pending"


def terminating(pod: dict) -> bool:
    return bool(pod["metadata"].get("deletionTimestamp"))


def running_and_ready(pod: dict) -> bool:
    return phase(pod) == "Running" and any(c.get("type") == "Ready" and c.get("status") == "True"
                                           for c in (pod.get("status") or {}).get("conditions") or ())


def _ordinal(pod: dict) -> int:
    return int(pod["metadata"]["name"].rsplit("-", 1)[1])


def missing_pods(statefulset: dict, pods: dict[str, dict]) -> list[dict]:
    """The pods to create: every missing ordinal when Parallel; else the lowest missing one, once
    every lower ordinal runs and is ready."""
    parallel = statefulset["spec"].get("podManagementPolicy") == PARALLEL
    missing = []
    for ordinal in ordinals(statefulset):
        pod = pods.get(pod_name(statefulset, ordinal))
        if pod is None:
            missing.append(stateful_pod(statefulset, ordinal))
            if not parallel:
                break
        elif not parallel and not running_and_ready(pod):
            break
    return missing


def surplus_pods(statefulset: dict, pods: dict[str, dict]) -> list[dict]:
    """The pods to delete: those finished (to be created again), and those beyond the replicas,
    highest first, one at a time unless Parallel and only while the others are ready."""
    wanted = {pod_name(statefulset, ordinal) for ordinal in ordinals(statefulset)}
    live = [p for p in pods.values() if not terminating(p)]
    finished = [p for p in live if phase(p) in ("Succeeded", "Failed") and p["metadata"]["name"] in wanted]
    beyond = sorted((p for p in live if p["metadata"]["name"] not in wanted), key=_ordinal, reverse=True)
    if statefulset["spec"].get("podManagementPolicy") == PARALLEL:
        return finished + beyond
    if any(terminating(p) for p in pods.values()) or not all(running_and_ready(p) for p in live if p not in beyond):
        return finished
    return finished + beyond[:1]


def statefulset_status(statefulset: dict, pods: dict[str, dict]) -> dict:
    """StatefulSetStatus as the controller counts it; the fields it omits when zero left out."""
    current = revision(statefulset)
    ready = sum(running_and_ready(p) for p in pods.values())
    made = [p for p in pods.values() if not terminating(p)]
    counts = {"readyReplicas": ready,
              "currentReplicas": sum((p["metadata"].get("labels") or {}).get(CONTROLLER_REVISION_HASH_LABEL) == current
                                     for p in made)}
    counts["updatedReplicas"] = counts["currentReplicas"]
    status = {"observedGeneration": statefulset["metadata"].get("generation", 1), "replicas": len(pods),
              **{key: value for key, value in counts.items() if value},
              "availableReplicas": ready, "currentRevision": current, "updateRevision": current, "collisionCount": 0}
    return status


def reconcile(statefulset: dict, pods: dict[str, dict], now: float) -> Plan:
    return Plan(create=missing_pods(statefulset, pods), delete=surplus_pods(statefulset, pods),
                status=status_if_changed(statefulset, statefulset_status(statefulset, pods)))


def statefulset_operator(api: ClusterAPI, **options) -> Operator:
    return Operator(api, workloads=STATEFULSETS, kind="StatefulSet", children=PODS, user=STATEFULSET_CONTROLLER,
                    reconcile=reconcile, **options)
