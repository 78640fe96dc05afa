"""The JobSet controller (jobset.x-k8s.io/v1alpha2): one batch Job per replicated job replica.

Jobs are `{jobset}-{replicatedJob}-{index}`; the JobSet labels (name, UID, replicated job,
indexes, job key, restart attempt) go on the Job and on its pod template both as labels and as
annotations, so that the Job controller copies them onto every pod. Under
`startupPolicyOrder: InOrder` the Jobs of a replicated job are created only once every Job of
the ones before it is ready. The JobSet completes when all its Jobs have (the default success
policy). `spec.suspend` is propagated to the Jobs as the JobSet controller does it: new Jobs are
created with it, and changing it suspends or resumes every Job (whose controller then deletes or
recreates the pods); the JobSet's condition `Suspended` says so (reasons `SuspendedJobs` and
`ResumeJobs`). Not modelled: failure policy and restarts (the restart attempt stays 0), the
headless Service and DNS hostnames, exclusive placement.
"""

import hashlib

from gangkeeper.names import (
    JOBSET_GLOBAL_REPLICAS_LABEL,
    JOBSET_JOB_GLOBAL_INDEX_LABEL,
    JOBSET_JOB_INDEX_LABEL,
    JOBSET_JOB_KEY_LABEL,
    JOBSET_KIND,
    JOBSET_NAME_LABEL,
    JOBSET_REPLICATED_JOB_LABEL,
    JOBSET_REPLICATED_JOB_REPLICAS_LABEL,
    JOBSET_RESTART_ATTEMPT_LABEL,
    JOBSET_UID_LABEL,
)
from sim.api import JOBSET_CONTROLLER, ClusterAPI
from sim.clock import rfc3339
from sim.names import JOB_API_VERSION, JOBS, JOBSET_API_VERSION, JOBSET_JOB_RESTART_ATTEMPT_LABEL, JOBSETS
from sim.operators import (
    Operator,
    Plan,
    child_spec,
    keep_transition,
    owner_reference,
    status_if_changed,
    template_metadata,
)
from sim.operators.job import INDEXED, is_job_complete, sizes

IN_ORDER = "InOrder"
SUSPENDED = ("SuspendedJobs", "jobset is suspended")
RESUMED = ("ResumeJobs", "jobset is resumed")


def job_name(jobset: dict, replicated: dict, index: int) -> str:
    return f"{jobset['metadata']['name']}-{replicated['name']}-{index}"


def job_key(namespace: str, name: str) -> str:
    """JobSet's job hash key: SHA-1 of `namespace/name`."""
    return hashlib.sha1(f"{namespace}/{name}".encode()).hexdigest()


def jobset_labels(jobset: dict, replicated: dict, index: int, global_index: int, global_replicas: int) -> dict:
    metadata = jobset["metadata"]
    attempt = str((jobset.get("status") or {}).get("restarts", 0))
    return {
        JOBSET_NAME_LABEL: metadata["name"],
        JOBSET_UID_LABEL: metadata["uid"],
        JOBSET_REPLICATED_JOB_LABEL: replicated["name"],
        JOBSET_REPLICATED_JOB_REPLICAS_LABEL: str(replicated.get("replicas", 1)),
        JOBSET_JOB_INDEX_LABEL: str(index),
        JOBSET_JOB_GLOBAL_INDEX_LABEL: str(global_index),
        JOBSET_GLOBAL_REPLICAS_LABEL: str(global_replicas),
        JOBSET_JOB_KEY_LABEL: job_key(metadata["namespace"], job_name(jobset, replicated, index)),
        JOBSET_RESTART_ATTEMPT_LABEL: attempt,
        JOBSET_JOB_RESTART_ATTEMPT_LABEL: attempt,
    }


def child_job(jobset: dict, replicated: dict, index: int, global_index: int, global_replicas: int) -> dict:
    template = replicated.get("template") or {}
    ours = jobset_labels(jobset, replicated, index, global_index, global_replicas)
    labels, annotations = template_metadata(template)
    spec = child_spec(template)
    spec.setdefault("completionMode", INDEXED)
    pod_template = spec.setdefault("template", {})
    pod_labels, pod_annotations = template_metadata(pod_template)
    pod_template["metadata"] = {**(pod_template.get("metadata") or {}),
                                "labels": {**pod_labels, **ours}, "annotations": {**pod_annotations, **ours}}
    spec["suspend"] = is_suspended(jobset)
    return {"apiVersion": JOB_API_VERSION, "kind": "Job",
            "metadata": {"name": job_name(jobset, replicated, index), "namespace": jobset["metadata"]["namespace"],
                         "labels": {**labels, **ours}, "annotations": {**annotations, **ours},
                         "ownerReferences": [owner_reference(jobset, JOBSET_API_VERSION)]},
            "spec": spec}


def job_is_ready(job: dict) -> bool:
    """JobSet's readiness of a Job: ready plus succeeded pods cover its parallelism."""
    status = job.get("status") or {}
    parallelism, completions = sizes(job)
    wanted = parallelism if completions is None else min(parallelism, completions)
    return status.get("ready", 0) + status.get("succeeded", 0) >= wanted


def missing_jobs(jobset: dict, jobs: dict[str, dict]) -> list[dict]:
    replicated_jobs = jobset["spec"].get("replicatedJobs") or ()
    in_order = (jobset["spec"].get("startupPolicy") or {}).get("startupPolicyOrder") == IN_ORDER
    global_replicas = sum(int(r.get("replicas", 1)) for r in replicated_jobs)
    missing, global_index = [], 0
    for replicated in replicated_jobs:
        names = [job_name(jobset, replicated, i) for i in range(int(replicated.get("replicas", 1)))]
        for index, name in enumerate(names):
            if name not in jobs:
                missing.append(child_job(jobset, replicated, index, global_index + index, global_replicas))
        global_index += len(names)
        if in_order and not all(name in jobs and job_is_ready(jobs[name]) for name in names):
            break
    return missing


def is_suspended(obj: dict) -> bool:
    return (obj.get("spec") or {}).get("suspend") is True


def suspend_switches(jobset: dict, jobs: dict[str, dict]) -> list[tuple[dict, dict]]:
    """The Jobs whose suspend switch differs from the JobSet's, with the patch that sets it."""
    wanted = is_suspended(jobset)
    return [(job, {"spec": {"suspend": wanted}}) for job in jobs.values()
            if is_suspended(job) != wanted and not is_job_complete(job)]


def replicated_job_status(replicated: dict, jobs: dict[str, dict]) -> dict:
    mine = [j for j in jobs.values()
            if (j["metadata"].get("labels") or {}).get(JOBSET_REPLICATED_JOB_LABEL) == replicated["name"]]
    return {"name": replicated["name"],
            "ready": sum(job_is_ready(j) and not is_job_complete(j) for j in mine),
            "succeeded": sum(is_job_complete(j) for j in mine),
            "failed": 0,
            "active": sum((j.get("status") or {}).get("active", 0) > 0 for j in mine),
            "suspended": sum(is_suspended(j) for j in mine)}


def jobset_status(jobset: dict, jobs: dict[str, dict], now: float) -> dict:
    previous = jobset.get("status") or {}
    replicated_jobs = jobset["spec"].get("replicatedJobs") or ()
    statuses = [replicated_job_status(r, jobs) for r in replicated_jobs]
    status = {"restarts": previous.get("restarts", 0), "replicatedJobsStatus": statuses}
    moment = rfc3339(now)
    conditions = []
    was = next((c for c in previous.get("conditions") or () if c.get("type") == "Suspended"), None)
    if is_suspended(jobset) or was is not None:
        reason, message = SUSPENDED if is_suspended(jobset) else RESUMED
        conditions.append({"type": "Suspended", "status": "True" if is_suspended(jobset) else "False",
                           "reason": reason, "message": message, "lastTransitionTime": moment})
    if all(s["succeeded"] >= int(r.get("replicas", 1)) for s, r in zip(statuses, replicated_jobs)):
        conditions.append({"type": "Completed", "status": "True", "reason": "AllJobsCompleted",
                           "message": "jobset completed successfully", "lastTransitionTime": moment})
        status["terminalState"] = "Completed"
    if conditions:
        status["conditions"] = keep_transition(conditions, previous.get("conditions") or [])
    return status


def reconcile(jobset: dict, jobs: dict[str, dict], now: float) -> Plan:
    status = jobset_status(jobset, jobs, now)
    if (jobset.get("status") or {}).get("terminalState") or status.get("terminalState"):
        return Plan(status=status_if_changed(jobset, status))
    return Plan(create=missing_jobs(jobset, jobs), patch=suspend_switches(jobset, jobs),
                status=status_if_changed(jobset, status))


def jobset_operator(api: ClusterAPI, **options) -> Operator:
    return Operator(api, workloads=JOBSETS, kind=JOBSET_KIND, children=JOBS, user=JOBSET_CONTROLLER,
                    reconcile=reconcile, **options)
