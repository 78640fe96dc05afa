"""The JobSet controller (jobset.x-k8s.io/v1alpha2): one batch Job per replicated job replica.

Jobs are `{jobset}-{replicatedJob}-{index}`; the JobSet labels (name, UID, replicated job,
indexes, job key, restart attempt) go on the Job and on its pod template both as labels and as
annotations, so that the Job controller copies them onto every pod. The JobSet's
`replicatedJobsStatus` is derived from its Jobs as the controller's
`calculateReplicatedJobStatuses` does: a finished Job counts as succeeded (condition Complete) or
failed (condition Failed); an unfinished one as ready when its ready plus succeeded pods cover
min(parallelism, completions), as active when it has active pods, as suspended when it is.

That status gates which Jobs are created, from the status of this very reconcile:
- `dependsOn` (depends_on.go, `dependencyReachedStatus`): a replicated job's Jobs are created only
  once every replicated job it names has reached the named status, `Complete` when all its Jobs
  succeeded, `Ready` when every one is ready, failed or succeeded; and a suspended JobSet, resumed,
  resumes a replicated job's Jobs only once its dependencies are reached again, so the stages
  start over in order.
- `startupPolicyOrder: InOrder`: a replicated job's Jobs are created only once every Job of the
  ones before it is ready, failed or succeeded (`allReplicasStarted`).
The real API refuses a JobSet that sets both (a CEL rule of the CRD: "StartupPolicy and DependsOn
APIs are mutually exclusive"); given both, the emulation creates a replicated job's Jobs only when
both allow (the real controller, were it given both, would pass over a replicated job whose
dependencies are not reached and start the next one).

The JobSet completes when all its Jobs have (the default success policy). `spec.suspend` is
propagated to the Jobs as the JobSet controller does it: new Jobs are created with it, and
changing it suspends or resumes the Jobs (whose controller then deletes or recreates the pods);
the JobSet's condition `Suspended` says so (reasons `SuspendedJobs` and `ResumeJobs`). Not
modelled: failure policy and restarts (the restart attempt stays 0, and a failed Job neither fails
nor restarts the JobSet: it only counts as failed, toward a `Ready` dependency too), the JobSet
webhook (its checks of `dependsOn`: never on the first replicated job, only on earlier ones; and
its defaults on the JobSet, but for the two its Jobs show, which each Job is created with:
completion mode Indexed and the pods' restart policy OnFailure), under `InOrder` creating every
Job of a suspended JobSet at once and resuming them one replicated job at a time, the
`StartupPolicy` conditions, the headless Service and DNS hostnames, exclusive placement.
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
from sim.operators.job import INDEXED, is_job_complete, is_job_failed, sizes

IN_ORDER = "InOrder"
ON_FAILURE = "OnFailure"  # the JobSet webhook's default restart policy for a replicated job's pods
DEPENDENCY_READY, DEPENDENCY_COMPLETE = "Ready", "Complete"  # the statuses a `dependsOn` entry names
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
    pod_template.setdefault("spec", {}).setdefault("restartPolicy", ON_FAILURE)
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
    """JobSet's readiness of a Job: its ready plus succeeded pods cover min(parallelism, completions)."""
    status = job.get("status") or {}
    parallelism, completions = sizes(job)
    wanted = parallelism if completions is None else min(parallelism, completions)
    return status.get("ready", 0) + status.get("succeeded", 0) >= wanted


def replica_count(replicated: dict) -> int:
    return int(replicated.get("replicas", 1))


def all_started(status: dict, replicas: int) -> bool:
    """Every Job of a replicated job is ready, failed or succeeded: what `InOrder` waits for before
    the next replicated job (`allReplicasStarted`) and what a `Ready` dependency waits for."""
    return status["ready"] + status["failed"] + status["succeeded"] == replicas


def dependency_reached(dependency: dict, status: dict | None, replicas: int) -> bool:
    """depends_on.go's test of one dependency on the replicated job's status: `Complete` when all its
    Jobs succeeded, `Ready` when all started. Counts are compared equal to the replicas, as there: a
    replicated job has one Job per replica, never more. A replicated job with no status (a name the
    spec does not have) is never reached."""
    if status is None:
        return False
    if dependency.get("status") == DEPENDENCY_COMPLETE:
        return status["succeeded"] == replicas
    if dependency.get("status") == DEPENDENCY_READY:
        return all_started(status, replicas)
    return True


def dependencies_reached(replicated: dict, replicas: dict[str, int], statuses: dict[str, dict]) -> bool:
    """Whether every replicated job `replicated` depends on has reached the status it names."""
    return all(dependency_reached(d, statuses.get(d["name"]), replicas.get(d["name"], 0))
               for d in replicated.get("dependsOn") or ())


def missing_jobs(jobset: dict, jobs: dict[str, dict], statuses: dict[str, dict]) -> list[dict]:
    """The Jobs to create, from `statuses` (the replicated jobs' status this reconcile derived, by
    name): a replicated job's only once its dependencies are reached, and under `InOrder` only once
    every replicated job before it has all started."""
    replicated_jobs = jobset["spec"].get("replicatedJobs") or ()
    in_order = (jobset["spec"].get("startupPolicy") or {}).get("startupPolicyOrder") == IN_ORDER
    replicas = {r["name"]: replica_count(r) for r in replicated_jobs}
    global_replicas = sum(replica_count(r) for r in replicated_jobs)
    missing, global_index = [], 0
    for replicated in replicated_jobs:
        count = replica_count(replicated)
        if dependencies_reached(replicated, replicas, statuses):
            missing += [child_job(jobset, replicated, index, global_index + index, global_replicas)
                        for index in range(count) if job_name(jobset, replicated, index) not in jobs]
        global_index += count
        if in_order and not all_started(statuses[replicated["name"]], count):
            break
    return missing


def is_suspended(obj: dict) -> bool:
    return (obj.get("spec") or {}).get("suspend") is True


def is_finished(job: dict) -> bool:
    return is_job_complete(job) or is_job_failed(job)


def replicated_job_of(job: dict) -> str | None:
    return (job["metadata"].get("labels") or {}).get(JOBSET_REPLICATED_JOB_LABEL)


def suspend_switches(jobset: dict, jobs: dict[str, dict], statuses: dict[str, dict]) -> list[tuple[dict, dict]]:
    """The unfinished Jobs whose suspend switch differs from the JobSet's, with the patch that sets
    it. Suspending takes them all; resuming only those of replicated jobs whose dependencies are
    reached (`resumeJobsIfNecessary`), so that the stages of a resumed JobSet start over in order:
    the others are resumed by a later reconcile, once theirs are."""
    wanted = is_suspended(jobset)
    replicated_jobs = {r["name"]: r for r in jobset["spec"].get("replicatedJobs") or ()}
    replicas = {name: replica_count(r) for name, r in replicated_jobs.items()}

    def may_resume(job: dict) -> bool:
        replicated = replicated_jobs.get(replicated_job_of(job) or "")
        return replicated is not None and dependencies_reached(replicated, replicas, statuses)

    return [(job, {"spec": {"suspend": wanted}}) for job in jobs.values()
            if is_suspended(job) != wanted and not is_finished(job) and (wanted or may_resume(job))]


def replicated_job_status(replicated: dict, jobs: dict[str, dict]) -> dict:
    """`calculateReplicatedJobStatuses` for one replicated job: its finished Jobs count as succeeded
    or failed, the others as ready, active and suspended."""
    mine = [j for j in jobs.values() if replicated_job_of(j) == replicated["name"]]
    unfinished = [j for j in mine if not is_finished(j)]
    return {"name": replicated["name"],
            "ready": sum(job_is_ready(j) for j in unfinished),
            "succeeded": sum(is_job_complete(j) for j in mine),
            "failed": sum(is_job_failed(j) for j in mine),
            "active": sum((j.get("status") or {}).get("active", 0) > 0 for j in unfinished),
            "suspended": sum(is_suspended(j) for j in unfinished)}


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
    if all(s["succeeded"] >= replica_count(r) for s, r in zip(statuses, replicated_jobs)):
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
    statuses = {s["name"]: s for s in status["replicatedJobsStatus"]}
    return Plan(create=missing_jobs(jobset, jobs, statuses), patch=suspend_switches(jobset, jobs, statuses),
                status=status_if_changed(jobset, status))


def jobset_operator(api: ClusterAPI, **options) -> Operator:
    return Operator(api, workloads=JOBSETS, kind=JOBSET_KIND, children=JOBS, user=JOBSET_CONTROLLER,
                    reconcile=reconcile, **options)
