"""The Kubeflow training operator's PyTorchJob controller (kubeflow.org/v1), pods only.

Pods are `{job}-master-0` and `{job}-worker-{i}`, labelled and owned as the training operator
does it, with the rendezvous env (MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK) in the `pytorch`
container. A deleted pod is recreated until the job has succeeded: when the master succeeds,
or, without a master, when every worker has. A pod whose index is beyond its role's `replicas`
(the job scaled down) is deleted. `spec.runPolicy.suspend` deletes the job's pods and
creates none (condition `Suspended`, reason `PyTorchJobSuspended`, `Running` False); clearing it
sets `Suspended` to False (`PyTorchJobResumed`), starts `startTime` again and recreates the pods,
which go through admission again.

An elastic job (`spec.elasticPolicy`, training-operator v1.9 `pkg/controller.v1/pytorch/elastic.go`)
runs torchrun's elastic rendezvous: every pod gets `PET_RDZV_ENDPOINT` (`rdzvHost`, else
`{job}-worker-0`, and `rdzvPort`, else the workers' `pytorchjob-port`), `PET_RDZV_BACKEND`
(`rdzvBackend`, else c10d), `PET_NNODES` `MIN:MAX` (a bound left out is the other one, both left
out the workers' replicas, as the operator's in-memory defaults fill them in), and
`PET_MAX_RESTARTS` and `PET_RDZV_ID` when given; the master's env (MASTER_ADDR, WORLD_SIZE, RANK)
only when the job has a master. torchrun trains while at least MIN nodes are in its rendezvous,
so the emulated run (`sim.training`) makes progress with MIN pods running. Without a master the
job has succeeded once any worker has. Not modelled: the headless Services, the HPA an elastic
job's `metrics` make (scale it by editing `Worker.replicas`), `rdzvConf`, `standalone`,
`nProcPerNode`, cleanPodPolicy, failures and backoff.
"""

from gangkeeper.names import (
    KUBEFLOW_JOB_NAME_LABEL,
    KUBEFLOW_JOB_ROLE_LABEL,
    KUBEFLOW_OPERATOR_NAME_LABEL,
    KUBEFLOW_REPLICA_INDEX_LABEL,
    KUBEFLOW_REPLICA_TYPE_LABEL,
    PYTORCHJOB_KIND,
)
from sim.api import TRAINING_OPERATOR, ClusterAPI
from sim.clock import rfc3339
from sim.names import (
    PODS,
    PYTORCH_CONTAINER,
    PYTORCH_DEFAULT_PORT,
    PYTORCH_PORT_NAME,
    PYTORCHJOB_API_VERSION,
    PYTORCHJOB_OPERATOR_NAME,
    PYTORCHJOBS,
)
from sim.operators import (
    Operator,
    Plan,
    child_spec,
    condition,
    keep_transition,
    owner_reference,
    status_if_changed,
    template_metadata,
)

MASTER = "Master"
WORKER = "Worker"


def replica_types(job: dict) -> list[str]:
    """Master first, as ranks are numbered from the master."""
    specs = job["spec"].get("pytorchReplicaSpecs") or {}
    return sorted(specs, key=lambda kind: (kind != MASTER, kind))


def rendezvous(job: dict) -> tuple[str, int, int]:
    """(MASTER_ADDR, MASTER_PORT, WORLD_SIZE) of a job."""
    specs = job["spec"]["pytorchReplicaSpecs"]
    first = replica_types(job)[0]
    world = sum(int(spec.get("replicas", 1)) for spec in specs.values())
    return f"{job['metadata']['name']}-{first.lower()}-0", port_of(job, first), world


def pod_name(job: dict, kind: str, index: int) -> str:
    return f"{job['metadata']['name']}-{kind.lower()}-{index}"


def elastic_env(job: dict) -> list[tuple[str, str]]:
    """The elastic rendezvous env of every pod of an elastic job (module docstring); none for another."""
    policy = job["spec"].get("elasticPolicy")
    if policy is None:
        return []
    least, most = policy.get("minReplicas"), policy.get("maxReplicas")
    if least is None and most is None:
        least = most = int(job["spec"]["pytorchReplicaSpecs"][WORKER].get("replicas", 1))
    least, most = (least if least is not None else most), (most if most is not None else least)
    host = policy.get("rdzvHost") or pod_name(job, WORKER, 0)
    env = [("PET_RDZV_ENDPOINT", f"{host}:{policy.get('rdzvPort') or port_of(job, WORKER)}"),
           ("PET_RDZV_BACKEND", policy.get("rdzvBackend") or "c10d"), ("PET_NNODES", f"{least}:{most}")]
    if policy.get("maxRestarts") is not None:
        env.append(("PET_MAX_RESTARTS", str(policy["maxRestarts"])))
    if policy.get("rdzvId"):
        env.append(("PET_RDZV_ID", policy["rdzvId"]))
    return env


def port_of(job: dict, kind: str) -> int:
    """The `pytorchjob-port` of a role's `pytorch` container, else the default the operator gives it."""
    template = job["spec"]["pytorchReplicaSpecs"][kind].get("template") or {}
    for container in (template.get("spec") or {}).get("containers") or ():
        for declared in container.get("ports") or ():
            if container.get("name") == PYTORCH_CONTAINER and declared.get("name") == PYTORCH_PORT_NAME:
                return declared["containerPort"]
    return PYTORCH_DEFAULT_PORT


def missing_pods(job: dict, existing: dict[str, dict]) -> list[dict]:
    """The pods of the job not in `existing`, in rank order."""
    address, port, world = rendezvous(job)
    elastic = elastic_env(job)
    with_master = MASTER in replica_types(job) or not elastic
    specs = job["spec"]["pytorchReplicaSpecs"]
    pods, rank = [], 0
    for kind in replica_types(job):
        for index in range(int(specs[kind].get("replicas", 1))):
            if pod_name(job, kind, index) not in existing:
                master = [("MASTER_PORT", str(port)), ("MASTER_ADDR", address), ("WORLD_SIZE", str(world)),
                          ("RANK", str(rank))] if with_master else []
                pods.append(replica_pod(job, kind, index, [*master, ("PYTHONUNBUFFERED", "1"), *elastic]))
            rank += 1
    return pods


def beyond_replicas(job: dict, pods: dict[str, dict]) -> list[dict]:
    """Live pods whose index is beyond their role's `replicas`: the job was scaled down."""
    specs = job["spec"]["pytorchReplicaSpecs"]
    wanted = {kind.lower(): int(spec.get("replicas", 1)) for kind, spec in specs.items()}
    found = []
    for pod in pods.values():
        labels = pod["metadata"].get("labels") or {}
        index = labels.get(KUBEFLOW_REPLICA_INDEX_LABEL, "")
        kind = labels.get(KUBEFLOW_REPLICA_TYPE_LABEL)
        if (not pod["metadata"].get("deletionTimestamp") and index.isdigit() and kind is not None
                and int(index) >= wanted.get(kind, 0)):
            found.append(pod)
    return found


def replica_pod(job: dict, kind: str, index: int, env: list[tuple[str, str]]) -> dict:
    replica = job["spec"]["pytorchReplicaSpecs"][kind]
    template = replica.get("template") or {}
    labels, annotations = template_metadata(template)
    labels.update({
        KUBEFLOW_JOB_NAME_LABEL: job["metadata"]["name"],
        KUBEFLOW_OPERATOR_NAME_LABEL: PYTORCHJOB_OPERATOR_NAME,
        KUBEFLOW_REPLICA_INDEX_LABEL: str(index),
        KUBEFLOW_REPLICA_TYPE_LABEL: kind.lower(),
    })
    if kind == MASTER:
        labels[KUBEFLOW_JOB_ROLE_LABEL] = "master"
    spec = child_spec(template)
    spec["restartPolicy"] = replica.get("restartPolicy") or spec.get("restartPolicy") or "OnFailure"
    for container in spec.get("containers") or ():
        if container.get("name") == PYTORCH_CONTAINER:
            container["env"] = list(container.get("env") or ()) + [{"name": n, "value": v} for n, v in env]
    metadata = {"name": pod_name(job, kind, index),
                "namespace": job["metadata"]["namespace"], "labels": labels,
                "ownerReferences": [owner_reference(job, PYTORCHJOB_API_VERSION)]}
    if annotations:
        metadata["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def replica_counts(pods: dict[str, dict], kind: str) -> dict[str, int]:
    counts = {"active": 0, "succeeded": 0, "failed": 0}
    for pod in pods.values():
        if pod["metadata"].get("labels", {}).get(KUBEFLOW_REPLICA_TYPE_LABEL) == kind.lower():
            phase = (pod.get("status") or {}).get("phase")
            key = {"Running": "active", "Succeeded": "succeeded", "Failed": "failed"}.get(phase)
            if key:
                counts[key] += 1
    return counts


def job_status(job: dict, pods: dict[str, dict], now: float) -> dict:
    """Created, then Running once the first replica type (master) runs, Succeeded when it has
    succeeded in full (an elastic job without a master: when any worker has). Succeeded is final, as in the training operator: pods removed afterwards
    (a deleted node's, by the pod garbage collector) neither take it back nor run the job again.
    Suspended while `runPolicy.suspend` says so (see the module docstring)."""
    previous = job.get("status") or {}
    before = {c.get("type"): c for c in previous.get("conditions") or ()}
    moment = rfc3339(now)
    name = job["metadata"]["name"]
    specs = job["spec"]["pytorchReplicaSpecs"]
    counts = {kind: replica_counts(pods, kind) for kind in replica_types(job)}
    leader = replica_types(job)[0]
    needed = 1 if leader != MASTER and job["spec"].get("elasticPolicy") is not None else \
        int(specs[leader].get("replicas", 1))
    succeeded = is_succeeded(job) or counts[leader]["succeeded"] >= needed
    suspended = is_suspended(job) and not succeeded
    resumed = not suspended and (before.get("Suspended") or {}).get("status") == "True"
    conditions = [condition("Created", "PyTorchJobCreated", f"PyTorchJob {name} is created.", moment)]
    if suspended and "Running" in before:
        conditions.append(condition("Running", "PyTorchJobSuspended", f"PyTorchJob {name} is suspended.", moment,
                                    "False"))
    elif counts[leader]["active"] or succeeded:
        conditions.append(condition("Running", "PyTorchJobRunning", f"PyTorchJob {name} is running.", moment,
                                    "False" if succeeded else "True"))
    if suspended:
        conditions.append(condition("Suspended", "PyTorchJobSuspended", f"PyTorchJob {name} is suspended.", moment))
    elif "Suspended" in before:
        conditions.append(condition("Suspended", "PyTorchJobResumed", f"PyTorchJob {name} is resumed.", moment,
                                    "False"))
    if succeeded:
        conditions.append(condition("Succeeded", "PyTorchJobSucceeded",
                                    f"PyTorchJob {name} is successfully completed.", moment))
    status = {"conditions": keep_transition(conditions, previous.get("conditions") or []),
              "replicaStatuses": counts}
    if "startTime" in previous and not resumed:
        status["startTime"] = previous["startTime"]
    elif not suspended:
        status["startTime"] = moment  # created running, or resumed: the clock starts again
    if succeeded:
        status["completionTime"] = previous.get("completionTime", moment)
    return status


def is_suspended(job: dict) -> bool:
    return ((job.get("spec") or {}).get("runPolicy") or {}).get("suspend") is True


def is_succeeded(job: dict) -> bool:
    return any(c.get("type") == "Succeeded" and c.get("status") == "True"
               for c in (job.get("status") or {}).get("conditions") or ())


def reconcile(job: dict, pods: dict[str, dict], now: float) -> Plan:
    status = job_status(job, pods, now)
    if is_succeeded(job) or is_succeeded({"status": status}):
        return Plan(status=status_if_changed(job, status))
    if is_suspended(job):
        live = [p for p in pods.values() if not p["metadata"].get("deletionTimestamp")]
        return Plan(delete=live, status=status_if_changed(job, status))
    return Plan(create=missing_pods(job, pods), delete=beyond_replicas(job, pods), status=status_if_changed(job, status))


def pytorchjob_operator(api: ClusterAPI, **options) -> Operator:
    return Operator(api, workloads=PYTORCHJOBS, kind=PYTORCHJOB_KIND, children=PODS, user=TRAINING_OPERATOR,
                    reconcile=reconcile, **options)
