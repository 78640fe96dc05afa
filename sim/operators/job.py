"""The batch/v1 Job controller: pods for `parallelism` and `completions`, Indexed or not.

Indexed pods are created with `generateName: {job}-{index}-` (the API server adds the random
suffix) and carry the completion index as label, annotation and `JOB_COMPLETION_INDEX` env;
NonIndexed pods use `generateName: {job}-`. Every pod carries the controller's four job labels
and is owned by the Job. Pods deleted before the Job completes are replaced. Not modelled: the
`batch.kubernetes.io/job-tracking` finalizer, backoffLimit and failure policies, suspend.
"""

from gangkeeper.names import JOB_COMPLETION_INDEX, JOB_CONTROLLER_UID_LABEL, JOB_NAME_LABEL
from sim.api import JOB_CONTROLLER, ClusterAPI
from sim.clock import rfc3339
from sim.names import (
    JOB_API_VERSION,
    JOB_COMPLETION_INDEX_ENV,
    JOB_CONTROLLER_UID_LEGACY_LABEL,
    JOB_NAME_LEGACY_LABEL,
    JOBS,
    PODS,
)
from sim.operators import (
    Operator,
    Plan,
    child_spec,
    keep_transition,
    owner_reference,
    status_if_changed,
    template_metadata,
)

INDEXED = "Indexed"


def sizes(job: dict) -> tuple[int, int | None]:
    """(parallelism, completions) with the API server's defaults; completions None is a work queue."""
    spec = job["spec"]
    parallelism = int(spec.get("parallelism", 1))
    completions = spec.get("completions")
    if completions is None and "parallelism" not in spec:
        completions = 1
    return parallelism, None if completions is None else int(completions)


def phase(pod: dict) -> str:
    return (pod.get("status") or {}).get("phase") or "Pending"


def is_active(pod: dict) -> bool:
    """Not finished and not terminating: a terminating pod is replaced at once (the default
    podReplacementPolicy, TerminatingOrFailed)."""
    return phase(pod) not in ("Succeeded", "Failed") and not pod["metadata"].get("deletionTimestamp")


def pod_index(pod: dict) -> int | None:
    value = (pod["metadata"].get("annotations") or {}).get(JOB_COMPLETION_INDEX)
    return int(value) if value is not None else None


def job_pod(job: dict, index: int | None) -> dict:
    template = job["spec"].get("template") or {}
    labels, annotations = template_metadata(template)
    name, uid = job["metadata"]["name"], job["metadata"]["uid"]
    labels.update({JOB_CONTROLLER_UID_LABEL: uid, JOB_NAME_LABEL: name,
                   JOB_CONTROLLER_UID_LEGACY_LABEL: uid, JOB_NAME_LEGACY_LABEL: name})
    spec = child_spec(template)
    prefix = f"{name}-"
    if index is not None:
        prefix = f"{name}-{index}-"
        labels[JOB_COMPLETION_INDEX] = annotations[JOB_COMPLETION_INDEX] = str(index)
        for container in spec.get("containers") or ():
            container["env"] = list(container.get("env") or ()) + [{
                "name": JOB_COMPLETION_INDEX_ENV,
                "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{JOB_COMPLETION_INDEX}']"}}}]
    metadata = {"generateName": prefix, "namespace": job["metadata"]["namespace"], "labels": labels,
                "ownerReferences": [owner_reference(job, JOB_API_VERSION)]}
    if annotations:
        metadata["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def missing_pods(job: dict, pods: dict[str, dict]) -> list[dict]:
    """Pods to create so that `parallelism` run, never more than the completions still needed."""
    parallelism, completions = sizes(job)
    active = [p for p in pods.values() if is_active(p)]
    succeeded = [p for p in pods.values() if phase(p) == "Succeeded"]
    room = parallelism - len(active)
    if job["spec"].get("completionMode") == INDEXED:
        taken = {pod_index(p) for p in active + succeeded}
        return [job_pod(job, i) for i in range(completions or 0) if i not in taken][:max(room, 0)]
    if completions is None:
        return [] if succeeded else [job_pod(job, None) for _ in range(room)]
    wanted = min(parallelism, completions - len(succeeded)) - len(active)
    return [job_pod(job, None) for _ in range(max(wanted, 0))]


def is_complete(job: dict, pods: dict[str, dict]) -> bool:
    _, completions = sizes(job)
    succeeded = [p for p in pods.values() if phase(p) == "Succeeded"]
    if job["spec"].get("completionMode") == INDEXED:
        return len({pod_index(p) for p in succeeded}) >= (completions or 0)
    if completions is None:
        return bool(succeeded) and all(phase(p) in ("Succeeded", "Failed") for p in pods.values())
    return len(succeeded) >= completions


def compress_indexes(indexes: set[int]) -> str:
    """`0-3,5`: how the Job status lists completed indexes."""
    ranges: list[list[int]] = []
    for index in sorted(indexes):
        if ranges and index == ranges[-1][1] + 1:
            ranges[-1][1] = index
        else:
            ranges.append([index, index])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in ranges)


def is_ready(pod: dict) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or ())


def job_status(job: dict, pods: dict[str, dict], complete: bool, now: float) -> dict:
    previous = job.get("status") or {}
    moment = rfc3339(now)
    phases = [phase(p) for p in pods.values()]
    status = {"startTime": previous.get("startTime", moment),
              "active": sum(is_active(p) for p in pods.values()),
              "terminating": sum(bool(p["metadata"].get("deletionTimestamp")) for p in pods.values()),
              "ready": sum(is_ready(p) and phase(p) == "Running" for p in pods.values()),
              "succeeded": phases.count("Succeeded"), "failed": phases.count("Failed"),
              "uncountedTerminatedPods": {}}
    if job["spec"].get("completionMode") == INDEXED:
        status["completedIndexes"] = compress_indexes({pod_index(p) for p in pods.values() if phase(p) == "Succeeded"})
    if complete:
        conditions = [{"type": kind, "status": "True", "reason": "CompletionsReached",
                       "message": "Reached expected number of succeeded pods",
                       "lastProbeTime": moment, "lastTransitionTime": moment}
                      for kind in ("SuccessCriteriaMet", "Complete")]
        status["conditions"] = keep_transition(conditions, previous.get("conditions") or [])
        status["completionTime"] = previous.get("completionTime", moment)
    return status


def is_job_complete(job: dict) -> bool:
    return any(c.get("type") == "Complete" and c.get("status") == "True"
               for c in (job.get("status") or {}).get("conditions") or ())


def reconcile(job: dict, pods: dict[str, dict], now: float) -> Plan:
    complete = is_job_complete(job) or is_complete(job, pods)
    status = status_if_changed(job, job_status(job, pods, complete, now))
    return Plan(create=[] if complete else missing_pods(job, pods), status=status)


def job_operator(api: ClusterAPI, **options) -> Operator:
    return Operator(api, workloads=JOBS, kind="Job", children=PODS, user=JOB_CONTROLLER,
                    reconcile=reconcile, **options)
