"""A workload not yet submitted, as gangkeeper would meet it once it is.

Its operator's part (`expand`): the pods it would create from its templates, named, labelled and
owned as the operator does it, and the objects that declare its groups' sizes (the workload
itself; for an MPIJob, its launcher's Job too). Then admission's part (`admitted`): each pod gets
its priority as the API server's Priority plugin gives it (the PriorityClass it names, else the
global default), and the webhook's label, group-source annotation and gate, decided by the
webhook's own rules (`identity.classify`). The controller's grouping reads the result as it reads
every pod, so the groups and sizes `plan` shows are the ones it would find.

The API server gives every object its uid when it is created; a planned one has `UID` there, so
that a Job's group is named `<job>-new`. Kinds whose pods come from elsewhere are left out and
said so: a TrainJob's come from a (Cluster)TrainingRuntime the trainer renders (plan the JobSet
instead); a Deployment's or StatefulSet's are no gang.
"""

import copy
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from gangkeeper import integrations, names
from gangkeeper.identity import classify
from gangkeeper.integrations import (
    gang,
    job,
    jobset,
    lws,
    mpijob,
    native_pod_group,
    pytorchjob,
    raycluster,
    rayjob,
    scheduler_plugins,
    volcano,
)
from gangkeeper.integrations.kind import Resource

UID = "new"
DEFAULT_PREEMPTION = "PreemptLowerPriority"


class BadManifest(ValueError):
    """A document that cannot be planned: which one, and what to write instead."""


@dataclass(frozen=True)
class Submitted:
    """What a file would create: pods (as their operator makes them, before admission), the
    objects declaring their groups' sizes (resource name, object), the file's Namespaces and
    PriorityClasses (they would exist by then), and the documents left out, with why."""

    pods: tuple[dict, ...]
    owners: tuple[tuple[str, dict], ...]
    namespaces: tuple[dict, ...]
    priority_classes: tuple[dict, ...]
    left_out: tuple[str, ...]


Made = tuple[list[dict], list[tuple[Resource, dict]]]  # pods, and the objects declaring sizes


def expand(documents: Sequence[object], namespace: str, created: str) -> Submitted:
    """The file's workloads as their operators would create them in `namespace` (where a
    document names none) at `created` (RFC 3339)."""
    pods: list[dict] = []
    owners: list[tuple[str, dict]] = []
    namespaces, classes, left_out = [], [], []
    for number, document in enumerate(documents, 1):
        if not isinstance(document, dict) or not isinstance(document.get("kind"), str):
            raise BadManifest(f"document {number} is not a Kubernetes object: it has no kind")
        kind, metadata = document["kind"], document.get("metadata")
        if not isinstance(metadata, dict) or not (metadata.get("name") or metadata.get("generateName")):
            raise BadManifest(f"document {number} ({kind}) has no metadata.name")
        name = metadata.get("name") or metadata["generateName"]
        if kind == "Namespace":
            namespaces.append(document)
            continue
        if kind == "PriorityClass":
            classes.append(document)
            continue
        operator = _OPERATORS.get(kind)
        if operator is None or not _api_matches(document, kind):
            left_out.append(f"{kind} {name}: {_NOT_PLANNED.get(kind, 'not a workload gangkeeper gangs')}")
            continue
        obj = _with_identity(document, namespace, created)
        switch = _SWITCHES.get(kind)
        if switch is not None and switch.is_suspended(obj):
            left_out.append(f"{kind} {name}: it is suspended ({'.'.join(switch.field)}): its operator creates no "
                            f"pods until it is resumed")
            continue
        try:
            made_pods, made_owners = operator(obj)
        except (ValueError, TypeError, AttributeError, KeyError) as error:
            raise BadManifest(f"document {number} ({kind} {name}) cannot be read: {error}; write it as its "
                              f"operator's API accepts it") from None
        pods += made_pods
        owners += [(resource.name, made) for resource, made in made_owners]
    return Submitted(tuple(pods), tuple(owners), tuple(namespaces), tuple(classes), tuple(left_out))


def admitted(pod: dict, classes: Mapping[str, dict], patterns: Iterable[str]) -> tuple[dict | None, str]:
    """The pod as admission leaves it — its priority, then the webhook's label, source and gate —
    and the webhook's reason; None when the webhook leaves it alone (it is then no member)."""
    pod = copy.deepcopy(pod)
    spec, metadata = pod["spec"], pod["metadata"]
    priority_class = _priority_class(spec, classes, metadata["name"])
    if priority_class is not None:
        spec["priorityClassName"] = priority_class["metadata"]["name"]
        spec["priority"] = int(priority_class.get("value") or 0)
        spec["preemptionPolicy"] = priority_class.get("preemptionPolicy") or DEFAULT_PREEMPTION
    classification = classify(pod, namespace=metadata["namespace"], accelerator_patterns=tuple(patterns))
    identity = classification.identity
    if identity is None:
        return None, classification.reason
    metadata.setdefault("labels", {}).setdefault(names.GROUP_LABEL, identity.name)
    metadata.setdefault("annotations", {})[names.GROUP_SOURCE_ANNOTATION] = identity.source
    gates = spec.setdefault("schedulingGates", [])
    if not any(gate.get("name") == names.SCHEDULING_GATE for gate in gates):
        gates.append({"name": names.SCHEDULING_GATE})
    return pod, classification.reason


def named_priority_classes(pods: Iterable[dict]) -> set[str]:
    return {name for pod in pods if (name := pod["spec"].get("priorityClassName"))}


def _priority_class(spec: Mapping, classes: Mapping[str, dict], pod: str) -> dict | None:
    name = spec.get("priorityClassName")
    if not name:
        return next((c for _, c in sorted(classes.items()) if c.get("globalDefault") is True), None)
    if name not in classes:
        raise BadManifest(f"pod {pod}: spec.priorityClassName {name!r} names no PriorityClass, and the API server "
                          f"refuses such pods; name one of {', '.join(sorted(classes)) or 'none'} (kubectl get "
                          f"priorityclasses), or create it")
    return classes[name]


# --- the operators ---------------------------------------------------------------------------


def _with_identity(document: dict, namespace: str, created: str) -> dict:
    """The object as the API server would store it: in its namespace, named, with a uid."""
    obj = copy.deepcopy(document)
    metadata = obj["metadata"]
    metadata.setdefault("namespace", namespace)
    metadata.setdefault("name", metadata.get("generateName", ""))
    metadata.update(uid=UID, creationTimestamp=created)
    return obj


def _api_matches(document: dict, kind: str) -> bool:
    """Whether the document's apiVersion is the one the operator serves (a v1 MPIJob is another API)."""
    wanted = _API_VERSIONS.get(kind)
    return wanted is None or document.get("apiVersion") in wanted


def _owner_reference(obj: Mapping, api_version: str) -> dict:
    metadata = obj["metadata"]
    return {"apiVersion": api_version, "kind": obj["kind"], "name": metadata["name"], "uid": metadata["uid"],
            "controller": True, "blockOwnerDeletion": True}


def _pod(owner: Mapping, template: Mapping | None, name: str, labels: Mapping[str, str],
         reference: dict | None) -> dict:
    """A pod of `template` as an operator creates it: the template's labels and annotations with
    the operator's own, owned by `reference`."""
    template = template or {}
    written = template.get("metadata") or {}
    metadata = owner["metadata"]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": metadata["namespace"], "uid": f"{UID}-{metadata['namespace']}-{name}",
                         "creationTimestamp": metadata["creationTimestamp"],
                         "labels": {**(written.get("labels") or {}), **labels},
                         "annotations": dict(written.get("annotations") or {}),
                         "ownerReferences": [reference] if reference is not None else []},
            "spec": copy.deepcopy(template.get("spec") or {}), "status": {"phase": "Pending"}}


def _api_version(resource: Resource) -> str:
    return f"{resource.group}/{resource.version}" if resource.group else resource.version


def _job_pods(owner: Mapping, job_obj: Mapping, job_name: str, reference: dict, labels: Mapping[str, str]) -> list[dict]:
    """The pods a Job runs at once (min(parallelism, completions)), indexed when its completion mode is."""
    spec = job_obj.get("spec") or {}
    indexed = spec.get("completionMode") == "Indexed"
    pods = []
    for index in range(job.size(spec)):
        own = {names.JOB_NAME_LABEL: job_name, names.JOB_CONTROLLER_UID_LABEL: reference["uid"], **labels}
        if indexed:
            own[names.JOB_COMPLETION_INDEX] = str(index)
        pods.append(_pod(owner, spec.get("template"), f"{job_name}-{index}", own, reference))
    return pods


def _job(obj: dict) -> Made:
    name = obj["metadata"]["name"]
    return _job_pods(obj, obj, name, _owner_reference(obj, _api_version(job.RESOURCE)), {}), [(job.RESOURCE, obj)]


def _jobset(obj: dict) -> Made:
    """Jobs `<jobset>-<replicated job>-<index>`, each with the JobSet's labels on its pods."""
    metadata = obj["metadata"]
    pods: list[dict] = []
    replicated_jobs = (obj.get("spec") or {}).get("replicatedJobs") or ()
    global_index = 0
    for replicated in replicated_jobs:
        for index in range(int(replicated.get("replicas", 1))):
            job_name = f"{metadata['name']}-{replicated['name']}-{index}"
            reference = {"apiVersion": _api_version(job.RESOURCE), "kind": names.JOB_KIND, "name": job_name,
                         "uid": f"{UID}-{job_name}", "controller": True, "blockOwnerDeletion": True}
            labels = {names.JOBSET_NAME_LABEL: metadata["name"], names.JOBSET_UID_LABEL: metadata["uid"],
                      names.JOBSET_REPLICATED_JOB_LABEL: replicated["name"],
                      names.JOBSET_JOB_INDEX_LABEL: str(index), names.JOBSET_JOB_GLOBAL_INDEX_LABEL: str(global_index),
                      names.JOBSET_RESTART_ATTEMPT_LABEL: "0"}
            pods += _job_pods(obj, replicated.get("template") or {}, job_name, reference, labels)
            global_index += 1
    return pods, [(jobset.RESOURCE, obj)]


def _pytorchjob(obj: dict) -> Made:
    """`<job>-<replica type>-<index>` for every replica of every type."""
    name = obj["metadata"]["name"]
    reference = _owner_reference(obj, _api_version(pytorchjob.RESOURCE))
    pods = []
    for replica_type, replica in ((obj.get("spec") or {}).get("pytorchReplicaSpecs") or {}).items():
        for index in range(int(replica.get("replicas", 1))):
            labels = {names.KUBEFLOW_JOB_NAME_LABEL: name, names.KUBEFLOW_REPLICA_TYPE_LABEL: replica_type.lower(),
                      names.KUBEFLOW_REPLICA_INDEX_LABEL: str(index)}
            if replica_type.lower() == "master":
                labels[names.KUBEFLOW_JOB_ROLE_LABEL] = "master"
            pods.append(_pod(obj, replica.get("template"), f"{name}-{replica_type.lower()}-{index}", labels, reference))
    return pods, [(pytorchjob.RESOURCE, obj)]


def _mpijob(obj: dict) -> Made:
    """Workers `<job>-worker-<i>` it controls, and the launcher, whose Job `<job>-launcher` it controls."""
    name = obj["metadata"]["name"]
    replicas = (obj.get("spec") or {}).get("mpiReplicaSpecs") or {}
    reference = _owner_reference(obj, mpijob.API_VERSION)
    pods = [_pod(obj, (replicas.get("Worker") or {}).get("template"), f"{name}-worker-{index}",
                 {names.KUBEFLOW_JOB_NAME_LABEL: name, names.KUBEFLOW_JOB_ROLE_LABEL: names.MPI_WORKER}, reference)
            for index in range(mpijob.workers(obj.get("spec") or {}))]
    launcher_job = {"apiVersion": _api_version(job.RESOURCE), "kind": names.JOB_KIND,
                    "metadata": {"name": f"{name}{names.MPI_LAUNCHER_SUFFIX}", "namespace": obj["metadata"]["namespace"],
                                 "uid": f"{UID}-{name}{names.MPI_LAUNCHER_SUFFIX}",
                                 "creationTimestamp": obj["metadata"]["creationTimestamp"],
                                 "ownerReferences": [reference]},
                    "spec": {"parallelism": 1, "completions": 1}}
    launcher_reference = _owner_reference(launcher_job, _api_version(job.RESOURCE))
    pods.append(_pod(obj, (replicas.get("Launcher") or {}).get("template"), f"{name}-launcher",
                     {names.KUBEFLOW_JOB_NAME_LABEL: name, names.KUBEFLOW_JOB_ROLE_LABEL: names.MPI_LAUNCHER},
                     launcher_reference))
    return pods, [(mpijob.RESOURCE, obj), (job.RESOURCE, launcher_job)]


def _lws(obj: dict) -> Made:
    """`replicas` groups, each a leader `<lws>-<i>` (of the leader template, else the worker's)
    and `size - 1` workers `<lws>-<i>-<w>`; the template revision is `UID`."""
    metadata = obj["metadata"]
    spec = obj.get("spec") or {}
    template = spec.get("leaderWorkerTemplate") or {}
    size = int(template.get("size", 1))
    pods = []
    for group in range(int(spec.get("replicas", 1))):
        for worker in range(size):
            labels = {names.LWS_NAME_LABEL: metadata["name"], names.LWS_GROUP_INDEX_LABEL: str(group),
                      names.LWS_WORKER_INDEX_LABEL: str(worker), names.LWS_REVISION_LABEL: UID}
            written = template.get("leaderTemplate") if worker == 0 else None
            name = f"{metadata['name']}-{group}" + (f"-{worker}" if worker else "")
            pods.append(_pod(obj, written or template.get("workerTemplate"), name, labels, None))
    return pods, [(lws.RESOURCE, obj)]


def _raycluster_pods(cluster: dict, extra_labels: Mapping[str, str]) -> list[dict]:
    """The head and each worker group's replicas (held between min and max) times its hosts."""
    metadata, spec = cluster["metadata"], cluster.get("spec") or {}
    reference = _owner_reference(cluster, _api_version(raycluster.RESOURCE))
    head = {names.RAY_CLUSTER_LABEL: metadata["name"], names.RAY_NODE_TYPE_LABEL: names.RAY_HEAD,
            names.RAY_GROUP_LABEL: names.RAY_HEAD_GROUP, **extra_labels}
    pods = [_pod(cluster, (spec.get("headGroupSpec") or {}).get("template"), f"{metadata['name']}-head", head,
                 reference)]
    for group in spec.get("workerGroupSpecs") or ():
        least, most = int(group.get("minReplicas") or 0), group.get("maxReplicas")
        replicas = max(int(group.get("replicas", least)), least)
        count = (0 if group.get("suspend") is True else min(replicas, int(most)) if most is not None else replicas)
        labels = {names.RAY_CLUSTER_LABEL: metadata["name"], names.RAY_NODE_TYPE_LABEL: names.RAY_WORKER,
                  names.RAY_GROUP_LABEL: group.get("groupName", ""), **extra_labels}
        pods += [_pod(cluster, group.get("template"), f"{metadata['name']}-{group.get('groupName', '')}-worker-{i}",
                      labels, reference) for i in range(count * int(group.get("numOfHosts") or 1))]
    return pods


def _raycluster(obj: dict) -> Made:
    return _raycluster_pods(obj, {}), [(raycluster.RESOURCE, obj)]


def _rayjob(obj: dict) -> Made:
    """The RayCluster it creates from `rayClusterSpec`, owned by it; its submitter comes only once
    that cluster runs, and is no member."""
    metadata = obj["metadata"]
    cluster = {"apiVersion": _api_version(raycluster.RESOURCE), "kind": names.RAYCLUSTER_KIND,
               "metadata": {"name": f"{metadata['name']}-cluster", "namespace": metadata["namespace"],
                            "uid": UID, "creationTimestamp": metadata["creationTimestamp"],
                            "ownerReferences": [_owner_reference(obj, _api_version(rayjob.RESOURCE))]},
               "spec": (obj.get("spec") or {}).get("rayClusterSpec") or {}}
    origin = {names.RAY_ORIGINATED_FROM_CRD_LABEL: names.RAYJOB_KIND, names.RAY_ORIGINATED_FROM_NAME_LABEL: metadata["name"]}
    return _raycluster_pods(cluster, origin), [(rayjob.RESOURCE, obj), (raycluster.RESOURCE, cluster)]


def _plain_pod(obj: dict) -> Made:
    pod = copy.deepcopy(obj)
    pod["metadata"]["uid"] = f"{UID}-{pod['metadata']['namespace']}-{pod['metadata']['name']}"
    pod.setdefault("spec", {})
    pod["status"] = {"phase": "Pending"}
    return [pod], []


def _gang(obj: dict) -> Made:
    """A Gang declares a group's size, for the pods labelled into it."""
    return [], [(gang.RESOURCE, obj)]


# A PodGroup is three APIs under one kind: the apiVersion says whose.
_POD_GROUPS = {_api_version(r): r for r in (scheduler_plugins.RESOURCE, volcano.RESOURCE, native_pod_group.RESOURCE)}


def _pod_group(obj: dict) -> Made:
    """A PodGroup declares a group's size, for the pods that name it."""
    return [], [(_POD_GROUPS[obj["apiVersion"]], obj)]


_OPERATORS: dict[str, Callable[[dict], Made]] = {
    names.JOB_KIND: _job, names.JOBSET_KIND: _jobset, names.PYTORCHJOB_KIND: _pytorchjob, names.MPIJOB_KIND: _mpijob,
    names.LWS_KIND: _lws, names.RAYCLUSTER_KIND: _raycluster, names.RAYJOB_KIND: _rayjob, "Pod": _plain_pod,
    names.GANG_KIND: _gang, names.POD_GROUP_KIND: _pod_group,
}
_API_VERSIONS = {names.POD_GROUP_KIND: set(_POD_GROUPS), **{kind: {_api_version(resource)} for kind, resource in (
    (names.JOB_KIND, job.RESOURCE), (names.JOBSET_KIND, jobset.RESOURCE), (names.PYTORCHJOB_KIND, pytorchjob.RESOURCE),
    (names.MPIJOB_KIND, mpijob.RESOURCE), (names.LWS_KIND, lws.RESOURCE), (names.RAYCLUSTER_KIND, raycluster.RESOURCE),
    (names.RAYJOB_KIND, rayjob.RESOURCE), (names.GANG_KIND, gang.RESOURCE), ("Pod", Resource("", "v1", "pods", "Pod")))}}
# The suspend switch of each kind that has one: a suspended object's operator creates no pods.
_SWITCHES = {resource.kind: suspension for resource, suspension in integrations.SUSPENSIONS.values()}
_NOT_PLANNED = {
    names.TRAINJOB_KIND: "its pods come from the (Cluster)TrainingRuntime the trainer renders, which plan does not "
                         "read: plan its JobSet (kubectl get jobset NAME -o yaml, once created), or ask why",
    "Deployment": "its pods are no gang (each accelerator pod is a group of one)",
    "StatefulSet": "its pods are no gang (each accelerator pod is a group of one)",
}

