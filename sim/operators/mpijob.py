"""The emulated MPI operator's MPIJob controller (kubeflow/mpi-operator v2beta1,
pkg/controller/mpi_job_controller.go), as far as gangkeeper's groups depend on it.

Workers: a pod per replica, `<mpijob>-worker-<i>`, controlled by the MPIJob and labelled with the
operator's name, the MPIJob's, role `worker` and the replica index (one more under
`runLauncherAsWorker`, whose launcher is rank 0); hostname its name, subdomain the MPIJob's (its
Service), restart policy the worker replica's (`Never` by default), `sshd -De` when the template
runs nothing. Workers beyond the replicas are deleted, missing ones created. Launcher: a Job
`<mpijob>-launcher` controlled by the MPIJob and labelled `app: <mpijob>`, whose one pod comes
from the Launcher template with role `launcher` (rank 0 under `runLauncherAsWorker`, its GPUs
hidden otherwise), restart policy `OnFailure` by default, and the run policy's
`ttlSecondsAfterFinished`, `activeDeadlineSeconds` and `backoffLimit`. Under
`launcherCreationPolicy: AtStartup` (the default) the Job is created with the workers; under
`WaitForWorkersReady` once every worker is Ready.

`runPolicy.suspend` deletes the workers and suspends the launcher Job (created suspended when it
was not there yet), whose pod the Job controller deletes without counting it as failed; cleared,
the Job is resumed and the workers created again. Status, as `updateMPIJobStatus` writes it:
`Created`; `Running` once the launcher's pod runs (the Job's `ready` count: this operator reads no
pod of its Jobs) and every worker runs; `Suspended` True while suspended, False once resumed
(`startTime` restarted); `Succeeded` when the launcher Job completes and `Failed` when it fails,
each with `completionTime` and `Running` turned False; per replica type the active, succeeded and
failed counts. Once it has ended, `cleanPodPolicy` deletes workers: `Running` those pending or
running, `All` every one, `None` (the operator's default, though the CRD's description says
Running) none; a suspension deletes them under `None` too. Not modelled: the Service, the
ConfigMap (hostfile), the SSH Secret and their volumes, the MPI implementations' environment,
validation, `managedBy`, PodGroups, workers failing or evicted.
"""

import copy

from gangkeeper.names import (
    KUBEFLOW_JOB_NAME_LABEL,
    KUBEFLOW_JOB_ROLE_LABEL,
    KUBEFLOW_OPERATOR_NAME_LABEL,
    KUBEFLOW_REPLICA_INDEX_LABEL,
    MPI_LAUNCHER,
    MPI_LAUNCHER_SUFFIX,
    MPI_WAIT_FOR_WORKERS_READY,
    MPI_WORKER,
    MPIJOB_KIND,
)
from sim.api import ClusterAPI, service_account
from sim.clock import rfc3339
from sim.names import JOB_API_VERSION, JOBS, MPI_OPERATOR_NAME, MPIJOB_API_VERSION, MPIJOBS, PODS
from sim.operators import Operator, Plan, child_spec, condition, owner_reference, status_if_changed, template_metadata
from sim.operators.job import is_job_complete, is_job_failed, is_ready, phase
from sim.quantity import canonical

MPI_OPERATOR = service_account("mpi-operator", "mpi-operator")
WORKER_SUFFIX = "-worker"
ROLE_ENV = "K_MPI_JOB_ROLE"
# Unset for a launcher that is no rank, so that it uses no GPU it may have been given.
NVIDIA_DISABLED_ENV = ("NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES")
DEFAULT_RESTART_POLICY = {MPI_WORKER: "Never", MPI_LAUNCHER: "OnFailure"}
ENDS = ("Succeeded", "Failed")
RUN_POLICY_ON_JOB = ("ttlSecondsAfterFinished", "activeDeadlineSeconds", "backoffLimit")


# --- the spec, read with the operator's defaults ------------------------------------------------

def run_policy(mpijob: dict) -> dict:
    return mpijob["spec"].get("runPolicy") or {}


def is_suspended(mpijob: dict) -> bool:
    return run_policy(mpijob).get("suspend") is True


def clean_pod_policy(mpijob: dict) -> str:
    return run_policy(mpijob).get("cleanPodPolicy") or "None"


def replica(mpijob: dict, role: str) -> dict:
    return (mpijob["spec"].get("mpiReplicaSpecs") or {}).get(role.capitalize()) or {}


def worker_replicas(mpijob: dict) -> int:
    return int(replica(mpijob, MPI_WORKER).get("replicas") or 0)


def runs_launcher_as_worker(mpijob: dict) -> bool:
    return mpijob["spec"].get("runLauncherAsWorker") is True


def worker_name(mpijob: dict, index: int) -> str:
    return f"{mpijob['metadata']['name']}{WORKER_SUFFIX}-{index}"


def launcher_name(mpijob: dict) -> str:
    return f"{mpijob['metadata']['name']}{MPI_LAUNCHER_SUFFIX}"


# --- what it creates ----------------------------------------------------------------------------

def role_template(mpijob: dict, role: str) -> tuple[dict, dict, dict]:
    """(labels, annotations, spec) of a role's pods: its template with the operator's labels, restart
    policy and role."""
    template = replica(mpijob, role).get("template") or {}
    labels, annotations = template_metadata(template)
    labels.update({KUBEFLOW_OPERATOR_NAME_LABEL: MPI_OPERATOR_NAME, KUBEFLOW_JOB_NAME_LABEL: mpijob["metadata"]["name"],
                   KUBEFLOW_JOB_ROLE_LABEL: role})
    spec = child_spec(template)
    for container in [*(spec.get("initContainers") or ()), *spec["containers"]]:
        for key in ("limits", "requests"):
            amounts = (container.get("resources") or {}).get(key)
            if amounts:
                container["resources"][key] = {name: as_quantity(value) for name, value in amounts.items()}
    restart = replica(mpijob, role).get("restartPolicy") or DEFAULT_RESTART_POLICY[role]
    spec["restartPolicy"] = "Never" if restart == "ExitCode" else restart
    spec["subdomain"] = mpijob["metadata"]["name"]
    container = spec["containers"][0]
    container["env"] = [*(container.get("env") or ()), {"name": ROLE_ENV, "value": role}]
    return labels, annotations, spec


def worker_pod(mpijob: dict, index: int) -> dict:
    labels, annotations, spec = role_template(mpijob, MPI_WORKER)
    labels[KUBEFLOW_REPLICA_INDEX_LABEL] = str(index + runs_launcher_as_worker(mpijob))
    name, namespace = worker_name(mpijob, index), mpijob["metadata"]["namespace"]
    spec["hostname"] = name
    dns = spec.setdefault("dnsConfig", {})
    dns["searches"] = [*(dns.get("searches") or ()), f"{mpijob['metadata']['name']}.{namespace}.svc.cluster.local"]
    container = spec["containers"][0]
    if not container.get("command") and not container.get("args"):
        container["command"] = ["/usr/sbin/sshd", "-De"]
    metadata = {"name": name, "namespace": namespace, "labels": labels,
                "ownerReferences": [owner_reference(mpijob, MPIJOB_API_VERSION)]}
    if annotations:
        metadata["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def launcher_job(mpijob: dict) -> dict:
    labels, annotations, spec = role_template(mpijob, MPI_LAUNCHER)
    if runs_launcher_as_worker(mpijob):
        labels[KUBEFLOW_REPLICA_INDEX_LABEL] = "0"
    else:
        spec["containers"][0]["env"] += [{"name": name} for name in NVIDIA_DISABLED_ENV]
    spec["hostname"] = launcher_name(mpijob)
    template = {"metadata": {"labels": labels, **({"annotations": annotations} if annotations else {})}, "spec": spec}
    job_spec = {key: run_policy(mpijob)[key] for key in RUN_POLICY_ON_JOB if key in run_policy(mpijob)}
    job_spec["template"] = template
    if is_suspended(mpijob):
        job_spec["suspend"] = True
    metadata = {"name": launcher_name(mpijob), "namespace": mpijob["metadata"]["namespace"],
                "labels": {"app": mpijob["metadata"]["name"]},
                "ownerReferences": [owner_reference(mpijob, MPIJOB_API_VERSION)]}
    return {"apiVersion": JOB_API_VERSION, "kind": "Job", "metadata": metadata, "spec": job_spec}


def as_quantity(value: object) -> object:
    """A quantity as the operator writes it: the CRD keeps a number as written (`cpu: 1`), the
    operator decodes the template into Go types, which write every quantity as a string."""
    return canonical(value) if isinstance(value, int | float) else value


# --- status -----------------------------------------------------------------------------------

def set_condition(conditions: list[dict], kind: str, status: str, reason: str, message: str,
                  moment: str) -> list[dict]:
    """`updateMPIJobConditions`: unchanged while the type holds that status for that reason; the
    transition time kept while the status stays; an end (Succeeded, Failed) turns Running and
    Failed False."""
    current = next((c for c in conditions if c["type"] == kind), None)
    if current is not None and current["status"] == status and current.get("reason") == reason:
        return conditions
    new = condition(kind, reason, message, moment, status)
    if current is not None and current["status"] == status:
        new["lastTransitionTime"] = current["lastTransitionTime"]
    kept = [{**c, "status": "False"} if kind in ENDS and c["type"] in ("Running", "Failed") else c
            for c in conditions if c["type"] != kind]
    return kept + [new]


def has_condition(status: dict, kind: str) -> bool:
    return any(c["type"] == kind and c["status"] == "True" for c in status.get("conditions") or ())


def has_ended(status: dict) -> bool:
    """Succeeded or Failed, with the completion time the operator writes with it: it then only cleans up."""
    return any(has_condition(status, end) for end in ENDS) and bool(status.get("completionTime"))


def counts(**numbers: int) -> dict:
    """A replica status: its counts, zero ones left out as the operator's JSON omits them."""
    return {key: value for key, value in numbers.items() if value}


def replica_statuses(mpijob: dict, status: dict, launcher: dict | None, workers: list[dict], moment: str) -> None:
    """The launcher's from its Job, ending the MPIJob when the Job has; the workers' from their pods."""
    statuses = status.setdefault("replicaStatuses", {})
    name = f"{mpijob['metadata']['namespace']}/{mpijob['metadata']['name']}"
    if launcher is not None:
        job_status = launcher.get("status") or {}
        failed = int(job_status.get("failed", 0))
        if is_job_complete(launcher):
            statuses["Launcher"] = counts(succeeded=1, failed=failed)
            status.setdefault("completionTime", job_status.get("completionTime") or moment)
            status["conditions"] = set_condition(status["conditions"], "Succeeded", "True", "MPIJobSucceeded",
                                                 f"MPIJob {name} successfully completed.", moment)
        elif is_job_failed(launcher):
            statuses["Launcher"] = counts(failed=failed)
            status.setdefault("completionTime", moment)
            cause = next(c for c in job_status["conditions"] if c["type"] == "Failed")
            status["conditions"] = set_condition(status["conditions"], "Failed", "True",
                                                 cause.get("reason") or "MPIJobFailed",
                                                 cause.get("message") or f"MPIJob {name} has failed", moment)
        else:
            statuses["Launcher"] = counts(active=int(job_status.get("ready", 0)), failed=failed)
    phases = [phase(pod) for pod in workers]
    statuses["Worker"] = counts(active=phases.count("Running"), succeeded=phases.count("Succeeded"),
                                failed=phases.count("Failed"))


def running_condition(mpijob: dict, status: dict, launcher: dict | None, workers: list[dict], moment: str) -> None:
    name = f"{mpijob['metadata']['namespace']}/{mpijob['metadata']['name']}"
    conditions = status["conditions"]
    if is_suspended(mpijob):
        status["conditions"] = set_condition(conditions, "Running", "False", "MPIJobSuspended",
                                             f"MPIJob {name} is suspended.", moment)
    elif any(has_condition(status, end) for end in ENDS):
        if not any(c["type"] == "Running" for c in conditions):
            status["conditions"] = conditions + [condition(
                "Running", "MPIJobRunning", f"MPIJob {name} is finished but Running condition was never set.",
                status.get("completionTime") or moment, "False")]
    elif (launcher is not None and int((launcher.get("status") or {}).get("ready", 0)) >= 1
          and all(phase(pod) == "Running" for pod in workers)):
        status["conditions"] = set_condition(conditions, "Running", "True", "MPIJobRunning",
                                             f"MPIJob {name} is running.", moment)


def suspension_condition(mpijob: dict, status: dict, moment: str) -> None:
    """Suspended True while suspended; False once resumed, which starts `startTime` again."""
    conditions = status["conditions"]
    if is_suspended(mpijob):
        status["conditions"] = set_condition(conditions, "Suspended", "True", "MPIJobSuspended", "MPIJob suspended",
                                             moment)
    elif any(c["type"] == "Suspended" for c in conditions):
        status["conditions"] = set_condition(conditions, "Suspended", "False", "MPIJobResumed", "MPIJob resumed",
                                             moment)
        if status["conditions"] is not conditions:
            status["startTime"] = moment


# --- the reconcile ------------------------------------------------------------------------------

def cleaned_up(mpijob: dict, workers: list[dict]) -> list[dict]:
    """The workers `deleteWorkerPods` deletes: under cleanPodPolicy Running only those pending or
    running, else every one; none already on its way out."""
    keep_finished = clean_pod_policy(mpijob) == "Running"
    return [pod for pod in workers if not pod["metadata"].get("deletionTimestamp")
            and not (keep_finished and phase(pod) in ENDS)]


def reconcile(mpijob: dict, children: dict[str, dict], now: float) -> Plan:
    """One `syncHandler`: the workers and the launcher Job brought to the spec, the status written when it changed."""
    status = copy.deepcopy(mpijob.get("status") or {})
    moment = rfc3339(now)
    if not status.get("conditions"):
        name = f"{mpijob['metadata']['namespace']}/{mpijob['metadata']['name']}"
        status["conditions"] = [condition("Created", "MPIJobCreated", f"MPIJob {name} is created.", moment)]
    workers = [pod for pod in children.values() if pod.get("kind") == "Pod"]
    if has_ended(status):
        if clean_pod_policy(mpijob) not in ("All", "Running"):
            return Plan()
        status.setdefault("replicaStatuses", {})["Worker"] = {}
        return Plan(delete=cleaned_up(mpijob, workers), status=replacing(mpijob, status))
    suspended = is_suspended(mpijob)
    if not status.get("startTime") and not suspended:
        status["startTime"] = moment
    launcher = children.get(launcher_name(mpijob))
    plan = Plan()
    current: list[dict] = []
    if launcher is None or not (is_job_complete(launcher) or is_job_failed(launcher)):
        if not suspended:
            current, plan.create, plan.delete = wanted_workers(mpijob, children)
        waits = mpijob["spec"].get("launcherCreationPolicy") == MPI_WAIT_FOR_WORKERS_READY
        if launcher is None and not (waits and not all(is_ready(pod) for pod in current)):
            plan.create.append(launcher_job(mpijob))
    if launcher is not None and (launcher["spec"].get("suspend") is True) != suspended:
        plan.patch.append((launcher, {"spec": {"suspend": suspended}}))
    if suspended:
        plan.delete += cleaned_up(mpijob, workers)
    suspension_condition(mpijob, status, moment)
    replica_statuses(mpijob, status, launcher, current, moment)
    running_condition(mpijob, status, launcher, current, moment)
    plan.status = replacing(mpijob, status)
    return plan


def replacing(mpijob: dict, status: dict) -> dict | None:
    """The status write that leaves exactly `status` (None when it is there already): the operator
    replaces the status (UpdateStatus), and a count that fell to zero leaves its replica status,
    which a merge patch of the new one alone would keep."""
    return None if status_if_changed(mpijob, status) is None else _nulled(mpijob.get("status") or {}, status)


def _nulled(before: dict, after: dict) -> dict:
    out = dict(after)
    for key, value in before.items():
        if key not in after:
            out[key] = None
        elif isinstance(value, dict) and isinstance(after[key], dict):
            out[key] = _nulled(value, after[key])
    return out


def wanted_workers(mpijob: dict, children: dict[str, dict]) -> tuple[list[dict], list[dict], list[dict]]:
    """`getOrCreateWorker`: the workers of every replica (existing, or made now), those to create,
    and those beyond the replicas, to delete."""
    replicas = worker_replicas(mpijob)
    wanted = {worker_name(mpijob, index): index for index in range(replicas)}
    beyond = [pod for name, pod in children.items() if pod.get("kind") == "Pod" and name not in wanted
              and not pod["metadata"].get("deletionTimestamp")]
    created = [worker_pod(mpijob, index) for name, index in wanted.items() if name not in children]
    current = [children.get(name) or next(pod for pod in created if pod["metadata"]["name"] == name)
               for name in wanted]
    return current, created, beyond


def mpijob_operator(api: ClusterAPI, **options) -> Operator:
    return Operator(api, workloads=MPIJOBS, kind=MPIJOB_KIND, children=PODS, user=MPI_OPERATOR, reconcile=reconcile,
                    other_children={"Job": JOBS}, **options)
