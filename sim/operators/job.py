"""The batch/v1 Job controller: pods for `parallelism` and `completions`, Indexed or not.

Indexed pods are created with `generateName: {job}-{index}-` (the API server adds the random
suffix) and carry the completion index as label, annotation and `JOB_COMPLETION_INDEX` env;
NonIndexed pods use `generateName: {job}-`. Every pod carries the controller's four job labels
and is owned by the Job. Pods deleted before the Job completes are replaced.

As measured on kube-controller-manager v1.36 (tests/fixtures/kube-controller-manager-v1.36/):
a pod that goes away without having succeeded, deleted by anyone but the Job controller itself
(gated and never scheduled ones included), counts as failed (`status.failed`); once failures pass
`backoffLimit` (default 6) the Job fails (conditions `FailureTarget` and `Failed`, reason
`BackoffLimitExceeded`), its active pods are deleted and counted too, and it creates no more.
`spec.suspend: true` deletes the active pods without counting them (condition `Suspended`,
reason `JobSuspended`) and creates none; clearing it sets `Suspended` to False (`JobResumed`),
starts `startTime` again and creates the pods anew, which go through admission again. Pods never
fail in place in the emulation (no container failures), so a failure is always a pod gone. Not
modelled: the `batch.kubernetes.io/job-tracking` finalizer, pod failure policies, per-index
backoff, activeDeadlineSeconds.
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
DEFAULT_BACKOFF_LIMIT = 6
SUSPENDED = ("Suspended", "JobSuspended", "Job suspended")
RESUMED = ("Suspended", "JobResumed", "Job resumed")
BACKOFF_LIMIT_EXCEEDED = ("BackoffLimitExceeded", "Job has reached the specified backoff limit")


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
    """The pod's Ready condition is True. `status.ready` counts such pods among the active ones only
    (`countReadyPods(activePods)`): a pod being deleted is not ready, however its condition reads."""
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or ())


def job_condition(kind: str, reason: str, message: str, moment: str, status: str = "True") -> dict:
    return {"type": kind, "status": status, "reason": reason, "message": message,
            "lastProbeTime": moment, "lastTransitionTime": moment}


def job_status(job: dict, pods: dict[str, dict], failed: int, outcome: str | None, now: float) -> dict:
    """The status for `failed` pods counted so far and the Job's `outcome` (None, "Complete" or "Failed")."""
    previous = job.get("status") or {}
    moment = rfc3339(now)
    status = {"active": sum(is_active(p) for p in pods.values()),
              "terminating": sum(bool(p["metadata"].get("deletionTimestamp")) for p in pods.values()),
              "ready": sum(is_active(p) and is_ready(p) for p in pods.values()),
              "succeeded": [phase(p) for p in pods.values()].count("Succeeded"), "failed": failed,
              "uncountedTerminatedPods": {}}
    suspension, resumed = suspension_condition(job, previous, moment)
    if "startTime" in previous and not resumed:
        status["startTime"] = previous["startTime"]
    elif not is_suspended(job):
        status["startTime"] = moment  # created running, or resumed: the clock starts again
    if job["spec"].get("completionMode") == INDEXED:
        status["completedIndexes"] = compress_indexes({pod_index(p) for p in pods.values() if phase(p) == "Succeeded"})
    conditions = [suspension] if suspension else []
    if outcome == "Complete":
        conditions += [job_condition(kind, "CompletionsReached", "Reached expected number of succeeded pods", moment)
                       for kind in ("SuccessCriteriaMet", "Complete")]
        status["completionTime"] = previous.get("completionTime", moment)
    elif outcome == "Failed":
        conditions += [job_condition(kind, *BACKOFF_LIMIT_EXCEEDED, moment) for kind in ("FailureTarget", "Failed")]
    if conditions:
        status["conditions"] = keep_transition(conditions, previous.get("conditions") or [])
    return status


def suspension_condition(job: dict, previous: dict, moment: str) -> tuple[dict | None, bool]:
    """`Suspended` True while suspended, False once resumed (when it ever was); and whether it
    is resumed just now."""
    was = next((c for c in previous.get("conditions") or () if c.get("type") == SUSPENDED[0]), None)
    if is_suspended(job):
        return job_condition(*SUSPENDED, moment), False
    if was is None:
        return None, False
    if was.get("status") == "False":
        return was, False
    return job_condition(*RESUMED, moment, status="False"), True


def is_suspended(job: dict) -> bool:
    return (job.get("spec") or {}).get("suspend") is True


def backoff_limit(job: dict) -> int:
    return int(job["spec"].get("backoffLimit", DEFAULT_BACKOFF_LIMIT))


def has_condition(job: dict, kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True"
               for c in (job.get("status") or {}).get("conditions") or ())


def is_job_complete(job: dict) -> bool:
    return has_condition(job, "Complete")


def is_job_failed(job: dict) -> bool:
    return has_condition(job, "Failed")


def reconcile(job: dict, pods: dict[str, dict], now: float, lost: tuple[dict, ...] = ()) -> Plan:
    """`lost`: the Job's pods that went away, deleted by others, since the status last written."""
    failed = int((job.get("status") or {}).get("failed", 0)) + sum(phase(p) != "Succeeded" for p in lost)
    active = [p for p in pods.values() if is_active(p)]
    if is_job_complete(job) or is_job_failed(job):
        outcome = "Complete" if is_job_complete(job) else "Failed"
        return Plan(status=status_if_changed(job, job_status(job, pods, failed, outcome, now)))
    if failed > backoff_limit(job):
        failed += len(active)  # its active pods are deleted, and fail with it
        return Plan(delete=active, status=status_if_changed(job, job_status(job, pods, failed, "Failed", now)))
    if is_suspended(job):
        return Plan(delete=active, status=status_if_changed(job, job_status(job, pods, failed, None, now)))
    complete = is_complete(job, pods)
    status = status_if_changed(job, job_status(job, pods, failed, "Complete" if complete else None, now))
    return Plan(create=[] if complete else missing_pods(job, pods), status=status)


def job_operator(api: ClusterAPI, **options) -> Operator:
    return Operator(api, workloads=JOBS, kind="Job", children=PODS, user=JOB_CONTROLLER,
                    reconcile=reconcile, counts_lost=True, **options)
