"""The emulated KubeRay operator (ray-project/kuberay, ray-operator/controllers/ray): its RayCluster
and RayJob controllers, as far as gangkeeper's groups depend on them.

RayCluster (raycluster_controller.go): a head pod (`<cluster>-head-` generated) and, per worker
group, `replicas` (held between `minReplicas` and `maxReplicas`) times `numOfHosts` worker pods
(`<cluster>-<group>-worker-` generated), all labelled `ray.io/cluster`, `ray.io/node-type`,
`ray.io/group` (`headgroup` for the head) and controlled by the cluster. Pods beyond a group's
count are deleted, missing ones created; a finished or leaving pod is no longer counted. A group's
`suspend` runs none of its pods; the cluster's `spec.suspend` deletes every pod and creates none.
`status.state` is `ready` once the head and every desired worker are Running and Ready,
`suspended` once suspended with no pod left. The Ray autoscaler, health checks, services and
upgrade strategies are not emulated.

RayJob (rayjob_controller.go), `K8sJobMode` only: its `jobDeploymentStatus` goes from New (no
`jobDeploymentStatus`) to Initializing (it creates a RayCluster `<rayjob>-<5 characters>` it
controls, from `rayClusterSpec`), to Running once the cluster is `ready` (it creates the
submitter Job, named after the RayJob, from `submitterPodTemplate` or KubeRay's default,
labelled with the RayJob it originates from), to Complete (`jobStatus` SUCCEEDED) or Failed
when the Job is. `suspend` moves an Initializing or Running RayJob to Suspending, which deletes
its cluster and Job, then to Suspended, which clears what named them (`rayClusterName`,
`jobId`, `dashboardURL`, `rayClusterStatus`, `reason`, `message`) and `jobStatus`; cleared, the
RayJob goes back to New and starts anew with a new cluster and a new `startTime`. The status is
written whole, as KubeRay's status update writes it: a field left empty is omitted, and the
times the RayJob `succeeded` and `failed` are written with every status from the first (0, and
one more each time it completes or fails: a suspension counts as neither). KubeRay refuses
`suspend` on a RayJob with `shutdownAfterJobFinishes: false`: it fails validation for good
(ValidationFailed). With `shutdownAfterJobFinishes` the cluster is deleted once the RayJob
finished (`ttlSecondsAfterFinished` is not waited for). The Ray job itself is the submitter
pod's run; retries (`backoffLimit`) are not emulated.
"""

import copy
import hashlib

from gangkeeper import names
from sim.api import ClusterAPI, service_account
from sim.clock import rfc3339
from sim.names import JOB_API_VERSION, JOBS, PODS
from sim.operators import Operator, Plan, child_spec, owner_reference, status_if_changed, template_metadata
from sim.operators.job import is_job_complete, is_job_failed, is_ready

RAYCLUSTERS, RAYJOBS = names.RAYCLUSTER_API[2], names.RAYJOB_API[2]
RAY_API_VERSION = f"{names.RAYCLUSTER_API[0]}/{names.RAYCLUSTER_API[1]}"
KUBERAY_OPERATOR = service_account("ray-system", "kuberay-operator")
CREATED_BY = {"app.kubernetes.io/created-by": "kuberay-operator"}
SUBMITTER_CONTAINER = "ray-job-submitter"
DASHBOARD_PORT = 8265
# What a suspended RayJob's status no longer says: its cluster and Ray job are gone.
CLEARED_ON_SUSPENSION = ("rayClusterName", "rayClusterStatus", "dashboardURL", "jobId", "message", "reason")
_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # k8s.io/apimachinery rand.String's


# --- RayCluster -----------------------------------------------------------------------------------

def is_suspended(obj: dict) -> bool:
    return (obj.get("spec") or {}).get("suspend") is True


def desired_workers(group: dict) -> int:
    """`GetWorkerGroupDesiredReplicas`: replicas held between min and max, times hosts; none when suspended."""
    if group.get("suspend") is True:
        return 0
    least, most = int(group.get("minReplicas") or 0), group.get("maxReplicas")
    replicas = max(int(group.get("replicas", least)), least)
    if most is not None:
        replicas = min(replicas, int(most))
    return replicas * int(group.get("numOfHosts") or 1)


def is_live(pod: dict) -> bool:
    """Counted by the controller: neither finished nor on its way out."""
    return ((pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
            and not pod["metadata"].get("deletionTimestamp"))


def ray_pod(cluster: dict, node_type: str, group: str, template: dict) -> dict:
    """A head or worker pod from its group's template, with the labels KubeRay adds (`labelPod`)."""
    labels, annotations = template_metadata(template)
    name = cluster["metadata"]["name"]
    labels.update({names.RAY_CLUSTER_LABEL: name, names.RAY_NODE_TYPE_LABEL: node_type, names.RAY_GROUP_LABEL: group,
                   "ray.io/is-ray-node": "yes", "ray.io/identifier": f"{name}-{node_type}",
                   "app.kubernetes.io/name": "kuberay", **CREATED_BY})
    prefix = name if node_type == names.RAY_HEAD else f"{name}-{group}"
    metadata = {"generateName": f"{prefix[:50]}-{node_type}-", "namespace": cluster["metadata"]["namespace"],
                "labels": labels, "ownerReferences": [owner_reference(cluster, RAY_API_VERSION)]}
    if annotations:
        metadata["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": child_spec(template)}


def pods_of(pods: dict[str, dict], group: str) -> list[dict]:
    return sorted((pod for pod in pods.values() if is_live(pod)
                   and (pod["metadata"].get("labels") or {}).get(names.RAY_GROUP_LABEL) == group),
                  key=lambda pod: pod["metadata"]["name"])


def wanted_groups(cluster: dict) -> list[tuple[str, str, dict, int]]:
    """(node type, group, template, pods wanted) for the head and each worker group; none when suspended."""
    spec = cluster.get("spec") or {}
    suspended = is_suspended(cluster)
    head = (names.RAY_HEAD, names.RAY_HEAD_GROUP, (spec.get("headGroupSpec") or {}).get("template") or {},
            0 if suspended else 1)
    return [head] + [(names.RAY_WORKER, group.get("groupName", ""), group.get("template") or {},
                      0 if suspended else desired_workers(group)) for group in spec.get("workerGroupSpecs") or ()]


def cluster_state(cluster: dict, pods: dict[str, dict]) -> str:
    running = [pod for pod in pods.values() if is_live(pod)]
    if is_suspended(cluster):
        return "suspended" if not running else (cluster.get("status") or {}).get("state", "")
    wanted = sum(count for *_, count in wanted_groups(cluster))
    ready = [pod for pod in running if (pod.get("status") or {}).get("phase") == "Running" and is_ready(pod)]
    return "ready" if len(ready) == len(running) == wanted else (cluster.get("status") or {}).get("state", "")


def cluster_status(cluster: dict, pods: dict[str, dict]) -> dict:
    groups = [group for group in (cluster.get("spec") or {}).get("workerGroupSpecs") or ()]
    workers = [pod for pod in pods.values() if is_live(pod)
               and (pod["metadata"].get("labels") or {}).get(names.RAY_NODE_TYPE_LABEL) == names.RAY_WORKER]
    ready = sum(1 for pod in workers if is_ready(pod))
    status = {"desiredWorkerReplicas": sum(desired_workers(group) for group in groups),
              "minWorkerReplicas": sum(int(g.get("minReplicas") or 0) * int(g.get("numOfHosts") or 1) for g in groups),
              "maxWorkerReplicas": sum(int(g.get("maxReplicas") or 0) * int(g.get("numOfHosts") or 1) for g in groups),
              "readyWorkerReplicas": ready, "availableWorkerReplicas": ready}
    heads = pods_of(pods, names.RAY_HEAD_GROUP)
    if heads:
        status["head"] = {"podName": heads[0]["metadata"]["name"]}
    state = cluster_state(cluster, pods)
    if state:
        status["state"] = state
    return status


def reconcile_cluster(cluster: dict, pods: dict[str, dict], now: float) -> Plan:
    """Each group brought to its count, oldest pods kept; the status written when it changed."""
    create, delete = [], []
    for node_type, group, template, wanted in wanted_groups(cluster):
        have = pods_of(pods, group)
        create += [ray_pod(cluster, node_type, group, template) for _ in range(wanted - len(have))]
        delete += have[wanted:]
    return Plan(create=create, delete=delete, status=status_if_changed(cluster, cluster_status(cluster, pods)))


# --- RayJob ---------------------------------------------------------------------------------------

def suffix(rayjob: dict, salt: str) -> str:
    """5 characters of rand.String's alphabet, drawn from the RayJob's UID (and `salt`, one per start)."""
    digest = hashlib.sha256(f"{rayjob['metadata']['uid']}/{salt}".encode()).digest()
    return "".join(_SUFFIX_ALPHABET[byte % len(_SUFFIX_ALPHABET)] for byte in digest[:5])


def render_cluster(rayjob: dict, name: str) -> dict:
    """The RayCluster a RayJob runs on, controlled by it and labelled with where it originates."""
    metadata = {"name": name, "namespace": rayjob["metadata"]["namespace"], "labels": originated_from(rayjob),
                "ownerReferences": [owner_reference(rayjob, RAY_API_VERSION)]}
    return {"apiVersion": RAY_API_VERSION, "kind": names.RAYCLUSTER_KIND, "metadata": metadata,
            "spec": copy.deepcopy(rayjob["spec"].get("rayClusterSpec") or {})}


def originated_from(rayjob: dict) -> dict:
    return {names.RAY_ORIGINATED_FROM_NAME_LABEL: rayjob["metadata"]["name"],
            names.RAY_ORIGINATED_FROM_CRD_LABEL: names.RAYJOB_KIND, **CREATED_BY}


def submitter_template(rayjob: dict, cluster: dict) -> dict:
    """`submitterPodTemplate`, or KubeRay's default (the head's image, 500m CPU); its first
    container told where the dashboard is and which job to submit; labelled with the RayJob."""
    template = copy.deepcopy(rayjob["spec"].get("submitterPodTemplate") or {})
    if not template:
        head = cluster["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
        template = {"spec": {"restartPolicy": "Never", "containers": [{
            "name": SUBMITTER_CONTAINER, "image": head.get("image", ""),
            "resources": {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "500m", "memory": "200Mi"}}}]}}
    container = template["spec"]["containers"][0]
    status = rayjob.get("status") or {}
    if not container.get("command"):
        container["command"] = ["/bin/bash", "-ce", "--"]
        container["args"] = [f"ray job submit --address http://{status.get('dashboardURL', '')} "
                             f"--submission-id {status.get('jobId', '')} -- {rayjob['spec'].get('entrypoint', '')}"]
    container["env"] = [*(container.get("env") or ()), {"name": "PYTHONUNBUFFERED", "value": "1"},
                        {"name": "RAY_DASHBOARD_ADDRESS", "value": status.get("dashboardURL", "")},
                        {"name": "RAY_JOB_SUBMISSION_ID", "value": status.get("jobId", "")}]
    metadata = template.setdefault("metadata", {})
    metadata["labels"] = {**(metadata.get("labels") or {}), **originated_from(rayjob)}
    return template


def submitter_job(rayjob: dict, cluster: dict) -> dict:
    backoff = (rayjob["spec"].get("submitterConfig") or {}).get("backoffLimit", 2)
    metadata = {"name": rayjob["metadata"]["name"], "namespace": rayjob["metadata"]["namespace"],
                "labels": originated_from(rayjob), "ownerReferences": [owner_reference(rayjob, RAY_API_VERSION)]}
    return {"apiVersion": JOB_API_VERSION, "kind": "Job", "metadata": metadata,
            "spec": {"backoffLimit": backoff, "template": submitter_template(rayjob, cluster)}}


def children_of(rayjob: dict, children: dict[str, dict]) -> tuple[dict | None, dict | None]:
    """Its RayCluster (the one its status names) and its submitter Job, when they exist."""
    cluster_name = (rayjob.get("status") or {}).get("rayClusterName")
    cluster = children.get(cluster_name) if cluster_name else None
    job = next((child for child in children.values() if child.get("kind") == "Job"), None)
    return (cluster if cluster is not None and cluster.get("kind") == names.RAYCLUSTER_KIND else None), job


def validation_error(rayjob: dict) -> str | None:
    spec = rayjob["spec"]
    if spec.get("suspend") is True and spec.get("shutdownAfterJobFinishes") is not True:
        return ("The RayJob spec is invalid: a RayJob with shutdownAfterJobFinishes set to false is not allowed "
                "to be suspended")
    return None


def reconcile_rayjob(rayjob: dict, children: dict[str, dict], now: float) -> Plan:
    """One step of the RayJob's deployment status, as the RayJob controller's switch takes it; its
    status written whole (`status_write`)."""
    plan = deployment_step(rayjob, children, now)
    if plan.status is not None:
        plan.status = status_write(rayjob, plan.status)
    return plan


def deployment_step(rayjob: dict, children: dict[str, dict], now: float) -> Plan:
    """What the RayJob controller does from the deployment status it finds, and the status it then has."""
    status = copy.deepcopy(rayjob.get("status") or {})
    deployment = status.get("jobDeploymentStatus", "")
    cluster, job = children_of(rayjob, children)
    suspend = rayjob["spec"].get("suspend") is True
    if deployment in ("Complete", "Failed", "ValidationFailed"):
        finished = cluster is not None and rayjob["spec"].get("shutdownAfterJobFinishes") is True
        return Plan(delete=[cluster] if finished else [])
    if (error := validation_error(rayjob)) is not None:
        status.update(jobDeploymentStatus="ValidationFailed", reason="ValidationFailed", message=error)
        return Plan(status=status)
    if deployment == "Suspending" or suspend and deployment in ("", "Initializing", "Running"):
        return suspending(status, cluster, job)  # once begun, a suspension is carried through
    if deployment == "Suspended":  # resumed: back to New, for a new start
        return Plan() if suspend else Plan(status=counted({**status, "jobDeploymentStatus": "", "jobStatus": ""}))
    if deployment == "":
        return initializing(rayjob, status, now)
    return running(rayjob, status, cluster, job, now)


def counted(status: dict, *, succeeded: bool = False, failed: bool = False) -> dict:
    """`checkBackoffLimitAndUpdateStatusIfNeeded`: the times the RayJob succeeded and failed, 0
    until it first does, one more when this status completes or fails it."""
    return {**status, "succeeded": status.get("succeeded", 0) + succeeded, "failed": status.get("failed", 0) + failed}


def status_write(rayjob: dict, status: dict) -> dict | None:
    """The merge patch that makes the RayJob's status `status`, as KubeRay's whole status update
    does (its fields are `omitempty`: one left empty is removed); None when nothing changes."""
    wanted = {key: value for key, value in status.items() if value not in ("", None, {})}
    current = rayjob.get("status") or {}
    if wanted == current:
        return None
    return {**wanted, **{key: None for key in current if key not in wanted}}


def suspending(status: dict, cluster: dict | None, job: dict | None) -> Plan:
    """Delete its cluster and submitter; Suspended once both are gone, what named them cleared."""
    gone = [child for child in (cluster, job) if child is not None]
    if not gone:
        kept = {key: value for key, value in status.items() if key not in CLEARED_ON_SUSPENSION}
        return Plan(status=counted({**kept, "jobDeploymentStatus": "Suspended", "jobStatus": ""}))
    moving = status.get("jobDeploymentStatus") != "Suspending"
    return Plan(delete=gone, status=counted({**status, "jobDeploymentStatus": "Suspending"}) if moving else None)


def initializing(rayjob: dict, status: dict, now: float) -> Plan:
    """A new start: a cluster name and job id of its own, the cluster created."""
    salt = str(int(now * 1000))
    name = f"{rayjob['metadata']['name'][:50]}-{suffix(rayjob, salt)}"
    status.update(jobDeploymentStatus="Initializing", jobStatus="", rayClusterName=name,
                  jobId=f"{rayjob['metadata']['name']}-{suffix(rayjob, 'job/' + salt)}",
                  dashboardURL=f"{name}-head-svc.{rayjob['metadata']['namespace']}.svc.cluster.local:{DASHBOARD_PORT}",
                  startTime=rfc3339(now))
    return Plan(create=[render_cluster(rayjob, name)], status=counted(status))


def running(rayjob: dict, status: dict, cluster: dict | None, job: dict | None, now: float) -> Plan:
    """Initializing until its cluster is ready, then Running its submitter until the Job finishes."""
    if cluster is None:
        return Plan(create=[render_cluster(rayjob, status["rayClusterName"])])
    if cluster.get("status"):
        status["rayClusterStatus"] = copy.deepcopy(cluster["status"])
    create = []
    if status["jobDeploymentStatus"] == "Initializing" and (cluster.get("status") or {}).get("state") == "ready":
        status.update(jobDeploymentStatus="Running", jobStatus="RUNNING")
        create = [submitter_job(rayjob, cluster)] if job is None else []
    elif job is not None and (is_job_complete(job) or is_job_failed(job)):
        succeeded = is_job_complete(job)
        status.update(jobDeploymentStatus="Complete" if succeeded else "Failed",
                      jobStatus="SUCCEEDED" if succeeded else "FAILED", endTime=rfc3339(now))
        return Plan(status=counted(status, succeeded=succeeded, failed=not succeeded))
    return Plan(create=create, status=counted(status))


def raycluster_operator(api: ClusterAPI, **options) -> Operator:
    return Operator(api, workloads=RAYCLUSTERS, kind=names.RAYCLUSTER_KIND, children=PODS, user=KUBERAY_OPERATOR,
                    reconcile=reconcile_cluster, **options)


def rayjob_operator(api: ClusterAPI, **options) -> Operator:
    return Operator(api, workloads=RAYJOBS, kind=names.RAYJOB_KIND, children=RAYCLUSTERS, user=KUBERAY_OPERATOR,
                    reconcile=reconcile_rayjob, other_children={"Job": JOBS}, **options)
