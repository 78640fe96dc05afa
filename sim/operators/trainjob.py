"""The Kubeflow Trainer v2 controller (trainer.kubeflow.org/v1alpha1): a TrainJob and its runtime
rendered into one JobSet, which the JobSet controller then runs.

As kubeflow/trainer does it (`pkg/controller/trainjob_controller.go`, `pkg/runtime/core`, and the
`jobset`, `torch` and `plainml` plugins of `pkg/runtime/framework/plugins`):

- The runtime is `spec.runtimeRef`: a ClusterTrainingRuntime (the default kind) or a
  TrainingRuntime in the TrainJob's namespace. The controller reads it when it first renders the
  TrainJob and keeps a snapshot of it (a ConfigMap `<name>-runtime-snapshot`; here in memory, which
  no one else reads), so a runtime changed or deleted afterwards changes nothing
  for TrainJobs already rendered. Runtimes are not watched.
- The JobSet has the TrainJob's name and namespace, is controlled by it, carries the labels and
  annotations of the runtime's `spec.template.metadata`, and its spec is the runtime template's
  spec with: every replicated job's parallelism and completions set to its pod count (the
  `trainer` step's `mlPolicy.numNodes`, overridden by `spec.trainer.numNodes`; any other job's own
  parallelism, 1 when unset); the steps (label `trainer.kubeflow.org/trainjob-ancestor-step` on a
  replicated job's template, not on its pod template) run one Job each; the trainer step's `node`
  container takes `spec.trainer`'s image, command, args and env, and `resourcesPerNode` merged
  into its resources name by name, and under `mlPolicy.torch` the torchrun env (`PET_*`) and the
  rendezvous port; an initializer's container takes `spec.initializer`'s storage URI, env and
  secret; and `suspend` is the TrainJob's.
- The JobSet is written only while it is missing or either side is suspended: a running JobSet is
  left alone. So the TrainJob's `spec.suspend` is the switch that sticks: a JobSet suspended or
  resumed on its own is set back to it (of that re-apply, only `suspend` is modelled).
- Status: `Suspended` (reasons `Suspended` and `Resumed`) while or once the TrainJob was
  suspended; `Complete` and `Failed` copied from the JobSet's `Completed` and `Failed` conditions
  (their reason, message and transition time); `jobsStatus` from the JobSet's
  `replicatedJobsStatus`. There is no `Created` condition (kubeflow/trainer#2621 removed it). A
  finished TrainJob's JobSet is never written again.
- A runtime that does not exist gives no JobSet and no condition: the real controller records a
  Warning Event (`TrainJobResourcesCreationFailed`, not emulated) and retries with backoff; here
  after the operator's retry delay. A `runtimeRef` of a kind the trainer does not serve gets
  nothing: the real controller's `Failed` condition (`TrainingRuntimeNotSupported`) is never
  written, as it then dereferences the missing runtime, and its webhook refuses such TrainJobs.
- A TrainJob whose `spec.managedBy` names another controller is left alone.

Not modelled: `runtimePatches`, `activeDeadlineSeconds`, `podGroupPolicy` (coscheduling and Volcano
PodGroups), the MPI, JAX, XGBoost and Flux policies' own env, launchers and Secrets, torchtune's
command rewriting, `trainerStatus`, the runtime deprecation warning, and the trainer's admission
webhooks.
"""

import copy
import math

from gangkeeper.names import TRAINER_ANCESTOR_STEP_LABEL, TRAINER_INITIALIZER_STEPS
from sim.api import TRAINER_CONTROLLER, ClusterAPI, WatchEvent
from sim.clock import rfc3339
from sim.names import (
    CLUSTER_TRAINING_RUNTIME_KIND,
    CLUSTER_TRAINING_RUNTIMES,
    JOBSET_API_VERSION,
    JOBSETS,
    TRAINER_API_VERSION,
    TRAINER_GROUP,
    TRAINER_NODE,
    TRAINER_PORT,
    TRAINING_RUNTIME_KIND,
    TRAINING_RUNTIMES,
    TRAINJOB_CONTROLLER_NAME,
    TRAINJOB_KIND,
    TRAINJOBS,
)
from sim.operators import Operator, Plan, owner_reference, status_if_changed
from sim.quantity import parse_quantity

TRAINER_STEP = "trainer"
RUNTIME_RESOURCES = {TRAINING_RUNTIME_KIND: TRAINING_RUNTIMES, CLUSTER_TRAINING_RUNTIME_KIND: CLUSTER_TRAINING_RUNTIMES}
STORAGE_URI_ENV = "STORAGE_URI"
# The Job controller's completion index, which torchrun takes as the node's rank.
COMPLETION_INDEX_FIELD = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
SUSPENDED = ("Suspended", "TrainJob is suspended")
RESUMED = ("Resumed", "TrainJob is resumed")
# The JobSet's terminal conditions and the TrainJob's that mirror them.
TERMINAL_CONDITIONS = (("Completed", "Complete"), ("Failed", "Failed"))
CONDITION_FIELDS = ("type", "status", "observedGeneration", "lastTransitionTime", "reason", "message")


# --- the runtime a TrainJob refers to ------------------------------------------------------------

def runtime_reference(trainjob: dict) -> tuple[str, str, str] | None:
    """(resource, namespace, name) of the TrainJob's runtime; None for a kind the trainer does not serve.
    A TrainingRuntime is looked up in the TrainJob's namespace, a ClusterTrainingRuntime cluster-wide."""
    ref = trainjob["spec"].get("runtimeRef") or {}
    kind = ref.get("kind", CLUSTER_TRAINING_RUNTIME_KIND)
    if ref.get("apiGroup", TRAINER_GROUP) != TRAINER_GROUP or kind not in RUNTIME_RESOURCES:
        return None
    namespace = trainjob["metadata"]["namespace"] if kind == TRAINING_RUNTIME_KIND else ""
    return RUNTIME_RESOURCES[kind], namespace, ref.get("name", "")


class Runtimes:
    """The (Cluster)TrainingRuntimes the operator has seen, fed by its watch."""

    def __init__(self):
        self.known: dict[tuple[str, str, str], dict] = {}

    def observe(self, event: WatchEvent) -> None:
        metadata = event.object["metadata"]
        namespace = metadata.get("namespace", "") if event.resource == TRAINING_RUNTIMES else ""
        key = (event.resource, namespace, metadata["name"])
        if event.type == "DELETED":
            self.known.pop(key, None)
        else:
            self.known[key] = event.object

    def get(self, reference: tuple[str, str, str]) -> dict | None:
        return self.known.get(reference)


# --- rendering the JobSet --------------------------------------------------------------------------

def step_of(replicated: dict) -> str | None:
    """The TrainJob step a replicated job runs, from the label on its Job template."""
    return (((replicated.get("template") or {}).get("metadata") or {}).get("labels") or {}).get(
        TRAINER_ANCESTOR_STEP_LABEL)


def pod_count(replicated: dict, ml_policy: dict | None, trainer: dict | None) -> int:
    """Pods of one replicated job's Job: its parallelism (at least 1), or for the trainer step the
    runtime's `mlPolicy.numNodes`, which the TrainJob's `numNodes` overrides as it is (under every
    policy but MPI's, whose launcher may count as a node)."""
    job_spec = (replicated.get("template") or {}).get("spec") or {}
    trains = step_of(replicated) == TRAINER_STEP
    count = int(job_spec.get("parallelism", 1))
    if trains and ml_policy is not None:
        count = int(ml_policy.get("numNodes", 1))
    count = max(count, 1)
    if trains and (trainer or {}).get("numNodes") is not None and "mpi" not in (ml_policy or {}):
        count = int(trainer["numNodes"])
    return count


def upsert(items: list[dict], new: dict, same) -> list[dict]:
    """`apply.Upsert*`: replace the first item `same` as the new one, else append it."""
    for position, item in enumerate(items):
        if same(item, new):
            return items[:position] + [new] + items[position + 1:]
    return items + [new]


def same_name(a: dict, b: dict) -> bool:
    return a.get("name") == b.get("name")


def same_port(a: dict, b: dict) -> bool:
    """The trainer's match for ports: the same number, or the same name (two unnamed ports alike)."""
    return a.get("containerPort") == b.get("containerPort") or a.get("name") == b.get("name")


def with_env(container: dict, env: list[dict]) -> None:
    merged = list(container.get("env") or ())
    for variable in env:
        merged = upsert(merged, variable, same_name)
    if merged:
        container["env"] = merged


def merged_resources(base: dict, override: dict) -> dict:
    """`resourcesPerNode` over the runtime's resources: limits and requests resource by resource,
    claims by name (the trainer's strategic merge)."""
    merged = copy.deepcopy(base)
    for field in ("limits", "requests"):
        if override.get(field):
            merged[field] = {**(base.get(field) or {}), **override[field]}
    for claim in override.get("claims") or ():
        merged["claims"] = upsert(list(merged.get("claims") or ()), claim, same_name)
    return merged


def accelerators_per_node(resources: dict) -> int:
    """`runtime.GetNumGPUPerNode`: the amount of the first resource named like a GPU among the
    requests, else among the limits."""
    for field in ("requests", "limits"):
        amounts = [amount for name, amount in (resources.get(field) or {}).items() if "gpu" in name.lower()]
        if amounts and (count := math.ceil(parse_quantity(amounts[0]))):
            return count
    return 0


def cpus_per_node(resources: dict) -> int:
    for field in ("requests", "limits"):
        amount = (resources.get(field) or {}).get("cpu")
        if amount is not None and parse_quantity(amount):
            return math.ceil(parse_quantity(amount))
    return 0


def procs_per_node(trainer: dict, resources: dict) -> str:
    """`PET_NPROC_PER_NODE`: the TrainJob's `numProcPerNode`; else `auto` (one per GPU) with GPUs,
    and one per CPU without."""
    if trainer.get("numProcPerNode") is not None:
        return str(trainer["numProcPerNode"])
    if accelerators_per_node(resources):
        return "auto"
    return str(max(1, cpus_per_node(resources)))


def torchrun_env(trainjob: dict, nodes: int, resources: dict) -> list[dict]:
    """The torch plugin's env: the rendezvous of `nodes` pods at the first `node` pod's hostname."""
    name = trainjob["metadata"]["name"]
    return [{"name": "PET_NNODES", "value": str(nodes)},
            {"name": "PET_NPROC_PER_NODE", "value": procs_per_node(trainjob["spec"]["trainer"], resources)},
            {"name": "PET_NODE_RANK", "valueFrom": {"fieldRef": {"fieldPath": COMPLETION_INDEX_FIELD}}},
            {"name": "PET_MASTER_ADDR", "value": f"{name}-{TRAINER_NODE}-0-0.{name}"},
            {"name": "PET_MASTER_PORT", "value": str(TRAINER_PORT)}]


def containers_of(replicated: dict) -> list[dict]:
    """The containers of a replicated job's pod template, to read or to shape in place."""
    job_spec = (replicated.get("template") or {}).get("spec") or {}
    return ((job_spec.get("template") or {}).get("spec") or {}).get("containers") or []


def runtime_node_resources(replicated_jobs: list[dict]) -> dict:
    """The `node` container's resources in the runtime, which `resourcesPerNode` replaces."""
    for replicated in replicated_jobs:
        if replicated.get("name") == TRAINER_NODE or step_of(replicated) == TRAINER_STEP:
            for container in containers_of(replicated):
                if container.get("name") == TRAINER_NODE and container.get("resources") is not None:
                    return container["resources"]
    return {}


def named(replicated: dict, name: str) -> dict | None:
    return next((c for c in containers_of(replicated) if c.get("name") == name), None)


def shape_trainer(replicated: dict, trainjob: dict, ml_policy: dict | None, nodes: int, node_resources: dict) -> None:
    """The trainer step's `node` container, as the TrainJob's `spec.trainer` shapes it. The trainer
    merges `resourcesPerNode` only under an ML policy, and adds torchrun's env and port only under
    the torch one; without a `spec.trainer` it changes nothing."""
    trainer, node = trainjob["spec"].get("trainer"), named(replicated, TRAINER_NODE)
    if trainer is None or node is None:
        return
    if ml_policy is not None and trainer.get("resourcesPerNode") is not None:
        node["resources"] = merged_resources(node.get("resources") or {}, trainer["resourcesPerNode"])
    for field in ("image", "command", "args"):
        if trainer.get(field) is not None:
            node[field] = copy.deepcopy(trainer[field])
    with_env(node, copy.deepcopy(trainer.get("env") or []))
    if (ml_policy or {}).get("torch") is not None:
        per_node = trainer["resourcesPerNode"] if trainer.get("resourcesPerNode") is not None else node_resources
        with_env(node, torchrun_env(trainjob, nodes, per_node))
        node["ports"] = upsert(list(node.get("ports") or ()), {"containerPort": TRAINER_PORT}, same_port)


def shape_initializer(replicated: dict, step: str, trainjob: dict) -> None:
    """An initializer's container (named as its step), given what `spec.initializer` says to fetch."""
    source = (trainjob["spec"].get("initializer") or {}).get("dataset" if step == "dataset-initializer" else "model")
    container = named(replicated, step)
    if source is None or container is None:
        return
    env = [{"name": STORAGE_URI_ENV, "value": source["storageUri"]}] if source.get("storageUri") else []
    with_env(container, env + copy.deepcopy(source.get("env") or []))
    if source.get("secretRef"):
        container["envFrom"] = list(container.get("envFrom") or ()) + [{"secretRef": {"name": source["secretRef"]["name"]}}]


def render_jobset(trainjob: dict, runtime: dict) -> dict:
    """The JobSet the trainer applies for a TrainJob on its runtime (see the module docstring)."""
    template = copy.deepcopy(runtime["spec"].get("template") or {})
    ml_policy = runtime["spec"].get("mlPolicy")
    spec = template.get("spec") or {}
    replicated_jobs = spec.get("replicatedJobs") or []
    node_resources = copy.deepcopy(runtime_node_resources(replicated_jobs))
    for replicated in replicated_jobs:
        count = pod_count(replicated, ml_policy, trainjob["spec"].get("trainer"))
        job_spec = replicated.setdefault("template", {}).setdefault("spec", {})
        job_spec["parallelism"] = job_spec["completions"] = count
        step = step_of(replicated)
        if step == TRAINER_STEP:
            replicated["replicas"] = 1
            shape_trainer(replicated, trainjob, ml_policy, count, node_resources)
        elif step in TRAINER_INITIALIZER_STEPS:
            replicated["replicas"] = 1
            shape_initializer(replicated, step, trainjob)
    if "suspend" in trainjob["spec"]:
        spec["suspend"] = trainjob["spec"]["suspend"]
    metadata = {"name": trainjob["metadata"]["name"], "namespace": trainjob["metadata"]["namespace"],
                "ownerReferences": [owner_reference(trainjob, TRAINER_API_VERSION)]}
    for field in ("labels", "annotations"):
        if (template.get("metadata") or {}).get(field):
            metadata[field] = template["metadata"][field]
    return {"apiVersion": JOBSET_API_VERSION, "kind": "JobSet", "metadata": metadata, "spec": spec}


# --- status ---------------------------------------------------------------------------------------

def is_suspended(obj: dict) -> bool:
    return (obj.get("spec") or {}).get("suspend") is True


def true_condition(obj: dict, kind: str) -> dict | None:
    return next((c for c in (obj.get("status") or {}).get("conditions") or ()
                 if c.get("type") == kind and c.get("status") == "True"), None)


def is_finished(trainjob: dict) -> bool:
    return any(true_condition(trainjob, kind) for _, kind in TERMINAL_CONDITIONS)


def set_condition(conditions: list[dict], new: dict, now_text: str) -> list[dict]:
    """`meta.SetStatusCondition`: a condition is added, or updated in place; its transition time
    moves only when its status changes (to the new condition's own time, if it has one)."""
    conditions = [dict(c) for c in conditions]
    old = next((c for c in conditions if c["type"] == new["type"]), None)
    if old is None:
        return conditions + [{**new, "lastTransitionTime": new.get("lastTransitionTime") or now_text}]
    if old["status"] != new["status"]:
        old["status"], old["lastTransitionTime"] = new["status"], new.get("lastTransitionTime") or now_text
    old["reason"], old["message"] = new["reason"], new["message"]
    old.pop("observedGeneration", None)
    if new.get("observedGeneration"):  # omitted when zero
        old["observedGeneration"] = new["observedGeneration"]
    return conditions


def with_suspension(trainjob: dict, conditions: list[dict], now_text: str) -> list[dict]:
    """`Suspended` True while suspended; turned False (`Resumed`) once resumed; absent if never suspended."""
    if is_suspended(trainjob):
        (reason, message), status = SUSPENDED, "True"
    elif any(c["type"] == "Suspended" and c["status"] == "True" for c in conditions):
        (reason, message), status = RESUMED, "False"
    else:
        return conditions
    return set_condition(conditions, {"type": "Suspended", "status": status, "reason": reason, "message": message},
                         now_text)


def jobs_status(jobset: dict) -> list[dict]:
    return [{"name": s["name"], **{key: s.get(key, 0) for key in ("ready", "succeeded", "failed", "active",
                                                                     "suspended")}}
            for s in (jobset.get("status") or {}).get("replicatedJobsStatus") or ()]


def trainjob_status(trainjob: dict, jobset: dict | None, now: float) -> dict:
    """The status the trainer writes; without the JobSet only `Suspended` can change (the real
    controller's read of the JobSet fails, and it writes what it has)."""
    status = copy.deepcopy(trainjob.get("status") or {})
    moment = rfc3339(now)
    conditions = with_suspension(trainjob, status.get("conditions") or [], moment)
    if jobset is not None:
        for theirs, ours in TERMINAL_CONDITIONS:
            found = true_condition(jobset, theirs)
            if found is not None:
                copied = {key: found[key] for key in CONDITION_FIELDS if key in found}
                conditions = set_condition(conditions, {**copied, "type": ours}, moment)
        status.pop("jobsStatus", None)
        if jobs := jobs_status(jobset):
            status["jobsStatus"] = jobs
    if conditions:
        status["conditions"] = conditions
    return status


# --- reconcile ------------------------------------------------------------------------------------

def suspend_switch(trainjob: dict, jobset: dict) -> list[tuple[dict, dict]]:
    """The JobSet's `suspend` set back to the TrainJob's. The trainer re-applies the JobSet only
    while one of them is suspended, which is exactly when the two can differ."""
    wanted = is_suspended(trainjob)
    return [] if is_suspended(jobset) == wanted else [(jobset, {"spec": {"suspend": wanted}})]


def reconcile(trainjob: dict, runtime: dict | None, jobsets: dict[str, dict], now: float) -> Plan:
    """The trainer's reconcile of one TrainJob, given its runtime (None: not found) and the JobSets it controls."""
    if (trainjob["spec"].get("managedBy") or TRAINJOB_CONTROLLER_NAME) != TRAINJOB_CONTROLLER_NAME:
        return Plan()
    if runtime_reference(trainjob) is None:
        return Plan()
    jobset = jobsets.get(trainjob["metadata"]["name"])
    status = status_if_changed(trainjob, trainjob_status(trainjob, jobset, now))
    if is_finished(trainjob):
        return Plan(status=status)
    if jobset is None and runtime is None:
        return Plan(status=status, retry=True)
    if jobset is None:
        return Plan(create=[render_jobset(trainjob, runtime)], status=status)
    return Plan(patch=suspend_switch(trainjob, jobset), status=status)


class TrainJobOperator(Operator):
    """The shared loop over TrainJobs and their JobSets, which also watches the runtimes to read
    them: a runtime's event wakes no TrainJob (the real controller does not watch them; one
    waiting for its runtime is retried)."""

    def __init__(self, api: ClusterAPI, **options):
        super().__init__(api, workloads=TRAINJOBS, kind=TRAINJOB_KIND, children=JOBSETS, user=TRAINER_CONTROLLER,
                         reconcile=self.reconcile_with_runtime, **options)
        self.runtimes = Runtimes()
        self.snapshots: dict[str, dict] = {}  # TrainJob UID → the runtime it was first rendered from
        self.resources = (*self.resources, TRAINING_RUNTIMES, CLUSTER_TRAINING_RUNTIMES)

    def observe(self, event: WatchEvent, now: float) -> None:
        if event.resource in (TRAINING_RUNTIMES, CLUSTER_TRAINING_RUNTIMES):
            self.runtimes.observe(event)
            return
        if event.resource == TRAINJOBS and event.type == "DELETED":
            self.snapshots.pop(event.object["metadata"]["uid"], None)
        super().observe(event, now)

    def runtime_of(self, trainjob: dict) -> dict | None:
        """The snapshot of the TrainJob's runtime, taken the first time it is found."""
        uid = trainjob["metadata"]["uid"]
        if uid not in self.snapshots and (reference := runtime_reference(trainjob)) is not None:
            if (found := self.runtimes.get(reference)) is not None:
                self.snapshots[uid] = found
        return self.snapshots.get(uid)

    def reconcile_with_runtime(self, trainjob: dict, jobsets: dict[str, dict], now: float) -> Plan:
        return reconcile(trainjob, self.runtime_of(trainjob), jobsets, now)


def trainjob_operator(api: ClusterAPI, **options) -> TrainJobOperator:
    return TrainJobOperator(api, **options)
