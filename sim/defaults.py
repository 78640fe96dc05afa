"""What the real server fills in, in the two places it does so.

`apply_defaults` runs before admission: scheme defaults and the built-in admission plugins
(ServiceAccount, DefaultTolerationSeconds; Priority, which reads PriorityClasses, is
`sim.priority`, run by the API server next), so webhooks see what the fixtures show.
`prepare_for_create` runs after mutating admission: name generation, uid, timestamps, the
initial status. Webhooks therefore see no uid or generated name on CREATE, exactly as recorded.
Objects are stored as the real server serializes them: fields a built-in type always writes
(no `omitempty`) are there even when the client left them out, e.g. an Event's `eventTime: null`.
"""

import base64
import random
import uuid
from datetime import datetime, timezone

from sim.names import CLUSTER_TRAINING_RUNTIME_KIND, TRAINER_GROUP, TRAINJOB_CONTROLLER_NAME
from sim.quantity import parse_quantity

_NOT_READY_TOLERATIONS = (
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
)
_GATED = {"type": "PodScheduled", "status": "False", "lastProbeTime": None, "reason": "SchedulingGated",
          "message": "Scheduling is blocked due to non-empty scheduling gates"}
_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # the real server's: no vowels, no look-alikes
# Kinds whose registry strategy sets no metadata.generation; every other kind served starts at 1.
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
_NO_GENERATION = ("namespaces", "nodes", "events", "leases", "resourceclaims", "resourceclaimtemplates", "secrets",
                  "configmaps")


def rfc3339(epoch_seconds: float) -> str:
    """A timestamp as the API writes it: UTC, whole seconds."""
    return datetime.fromtimestamp(epoch_seconds, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def random_suffix(length: int = 5, draw: random.Random | None = None) -> str:
    return "".join((draw or random).choices(_SUFFIX_ALPHABET, k=length))


def new_uid(draw: random.Random | None = None) -> str:
    """A version-4 UUID, as the API server gives every object; from `draw` when given (a seeded
    emulation: the same uids on every replay)."""
    return str(uuid.uuid4() if draw is None else uuid.UUID(int=draw.getrandbits(128), version=4))


def apply_defaults(resource: str, obj: dict, creating: bool) -> None:
    """Scheme defaults (every write) and, on create, the defaulting admission plugins that run before webhooks."""
    if resource == "pods":
        _default_pod_spec(obj.setdefault("spec", {}))
        if creating:
            _admit_pod_spec(obj["spec"])
    elif resource == "namespaces":
        obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
        # Set on every write, as the namespace strategy does since 1.21: webhook configurations
        # select namespaces by it (deploy/ excludes kube-system and gangkeeper's own this way).
        metadata = obj.setdefault("metadata", {})
        metadata.setdefault("labels", {})[NAMESPACE_NAME_LABEL] = metadata.get("name", "")
    elif resource == "jobs":
        _default_job_spec(obj.setdefault("spec", {}))
    elif resource == "statefulsets":
        _default_statefulset_spec(obj.setdefault("spec", {}))
    elif resource == "leaderworkersets":
        _default_leaderworkerset_spec(obj.setdefault("spec", {}))
    elif resource == "mpijobs":
        _default_mpijob_spec(obj.setdefault("spec", {}))
    elif resource == "priorityclasses":
        obj.setdefault("preemptionPolicy", "PreemptLowerPriority")
    elif resource == "events":
        _serialize_event(obj)
    elif resource == "secrets":
        _default_secret(obj)
    elif resource == "podtemplates":
        _default_pod_spec(obj.setdefault("template", {}).setdefault("spec", {}), requests_from_limits=False)
    elif resource == "trainjobs":
        _default_trainjob_spec(obj.setdefault("spec", {}))
    elif resource in ("trainingruntimes", "clustertrainingruntimes"):
        _default_training_runtime_spec(obj.setdefault("spec", {}))


def _default_secret(secret: dict) -> None:
    """`type` Opaque when unset (SetDefaults_Secret); `stringData` is write-only, merged into `data`
    base64-encoded, its keys winning, as the API's conversion does."""
    secret["type"] = secret.get("type") or "Opaque"
    string_data = secret.pop("stringData", None) or {}
    if string_data:
        secret["data"] = {**(secret.get("data") or {}),
                          **{key: base64.b64encode(str(value).encode()).decode() for key, value in string_data.items()}}


def _default_trainjob_spec(spec: dict) -> None:
    """The defaults of the TrainJob CRD's schema (kubeflow/trainer): not suspended, reconciled by
    the trainer's own controller, its runtime a ClusterTrainingRuntime."""
    spec.setdefault("suspend", False)
    spec.setdefault("managedBy", TRAINJOB_CONTROLLER_NAME)
    if isinstance(spec.get("runtimeRef"), dict):
        spec["runtimeRef"].setdefault("apiGroup", TRAINER_GROUP)
        spec["runtimeRef"].setdefault("kind", CLUSTER_TRAINING_RUNTIME_KIND)


def _default_training_runtime_spec(spec: dict) -> None:
    """The defaults of the (Cluster)TrainingRuntime CRD's schema on its JobSet template's replicated
    jobs, which the trainer copies into every JobSet it renders."""
    for replicated in ((spec.get("template") or {}).get("spec") or {}).get("replicatedJobs") or ():
        replicated.setdefault("groupName", "default")
        replicated.setdefault("replicas", 1)


def _default_pod_spec(spec: dict, *, requests_from_limits: bool = True) -> None:
    """SetDefaults_PodSpec and each container's defaults; a pod's missing requests also from its limits,
    which SetDefaults_Pod does for pods only, not for a PodTemplate's spec."""
    for key, value in (("restartPolicy", "Always"), ("terminationGracePeriodSeconds", 30),
                       ("dnsPolicy", "ClusterFirst"), ("securityContext", {}),
                       ("schedulerName", "default-scheduler"), ("enableServiceLinks", True)):
        spec.setdefault(key, value)
    for container in (spec.get("initContainers") or []) + (spec.get("containers") or []):
        _default_container(container, requests_from_limits)


def _admit_pod_spec(spec: dict) -> None:
    """The ServiceAccount and DefaultTolerationSeconds admission plugins, which act on create only."""
    spec.setdefault("serviceAccountName", "default")
    spec.setdefault("serviceAccount", spec["serviceAccountName"])
    _add_missing_tolerations(spec)


def _default_container(container: dict, requests_from_limits: bool) -> None:
    image = container.get("image", "")
    tagged = ":" in image.rsplit("/", 1)[-1] and not image.endswith(":latest")
    container.setdefault("terminationMessagePath", "/dev/termination-log")
    container.setdefault("terminationMessagePolicy", "File")
    container.setdefault("imagePullPolicy", "IfNotPresent" if tagged or "@" in image else "Always")
    for port in container.get("ports") or []:
        port.setdefault("protocol", "TCP")
    resources = container.setdefault("resources", {})
    if requests_from_limits and resources.get("limits"):
        requests = resources.setdefault("requests", {})
        for name, value in resources["limits"].items():
            requests.setdefault(name, value)


def _add_missing_tolerations(spec: dict) -> None:
    tolerations = spec.get("tolerations") or []
    for default in _NOT_READY_TOLERATIONS:
        if not any(t.get("key") == default["key"] and t.get("effect") in (None, "", "NoExecute")
                   for t in tolerations):
            tolerations.append(dict(default))
    spec["tolerations"] = tolerations


def _default_job_spec(spec: dict) -> None:
    if "completions" not in spec and "parallelism" not in spec:
        spec["completions"] = 1
    spec.setdefault("parallelism", 1)
    spec.setdefault("backoffLimit", 6)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)


def _default_statefulset_spec(spec: dict) -> None:
    """apps/v1 SetDefaults_StatefulSet, and the pod template's spec as every pod spec is defaulted."""
    spec.setdefault("replicas", 1)
    spec.setdefault("podManagementPolicy", "OrderedReady")
    spec.setdefault("revisionHistoryLimit", 10)
    strategy = spec.setdefault("updateStrategy", {})
    strategy.setdefault("type", "RollingUpdate")
    if strategy["type"] == "RollingUpdate":
        strategy.setdefault("rollingUpdate", {}).setdefault("partition", 0)
    retention = spec.setdefault("persistentVolumeClaimRetentionPolicy", {})
    retention.setdefault("whenDeleted", "Retain")
    retention.setdefault("whenScaled", "Retain")
    _default_pod_spec(spec.setdefault("template", {}).setdefault("spec", {}))


def _default_leaderworkerset_spec(spec: dict) -> None:
    """The defaults of LeaderWorkerSet's CRD schema (structural defaulting: a field is defaulted
    only where its parent object is there)."""
    spec.setdefault("replicas", 1)
    spec.setdefault("startupPolicy", "LeaderCreated")
    template = spec.get("leaderWorkerTemplate")
    if isinstance(template, dict):
        template.setdefault("size", 1)
        template.setdefault("restartPolicy", "RecreateGroupOnPodRestart")
        if isinstance(template.get("subGroupPolicy"), dict):
            template["subGroupPolicy"].setdefault("subGroupPolicyType", "LeaderWorker")
    strategy = spec.get("rolloutStrategy")
    if isinstance(strategy, dict):
        strategy.setdefault("type", "RollingUpdate")
        if isinstance(strategy.get("rollingUpdateConfiguration"), dict):
            for key, value in (("maxSurge", 0), ("maxUnavailable", 1), ("partition", 0)):
                strategy["rollingUpdateConfiguration"].setdefault(key, value)


def _default_mpijob_spec(spec: dict) -> None:
    """The defaults of the MPIJob CRD's schema (kubeflow/mpi-operator v2beta1; structural
    defaulting: `runPolicy.suspend` only where `runPolicy` is there)."""
    for key, value in (("launcherCreationPolicy", "AtStartup"), ("mpiImplementation", "OpenMPI"),
                       ("runLauncherAsWorker", False), ("slotsPerWorker", 1), ("sshAuthMountPath", "/root/.ssh")):
        spec.setdefault(key, value)
    if isinstance(spec.get("runPolicy"), dict):
        spec["runPolicy"].setdefault("suspend", False)


def _serialize_event(event: dict) -> None:
    """core/v1 Event fields without `omitempty` (or structs, which it never omits), as the server
    serializes them when unset: a zero time is null, a zero string empty, a zero struct `{}`."""
    for key, zero in (("source", {}), ("firstTimestamp", None), ("lastTimestamp", None), ("eventTime", None),
                      ("reportingComponent", ""), ("reportingInstance", "")):
        event.setdefault(key, zero)


def prepare_for_create(resource: str, obj: dict, timestamp: str, draw: random.Random | None = None) -> None:
    """Identity and initial status, given after mutating admission and before validation; the
    generated name and the uid from `draw` when given."""
    meta = obj.setdefault("metadata", {})
    if not meta.get("name") and meta.get("generateName"):
        meta["name"] = meta["generateName"] + random_suffix(draw=draw)
    meta["uid"] = new_uid(draw)
    meta["creationTimestamp"] = timestamp
    meta.pop("deletionTimestamp", None)
    meta.pop("resourceVersion", None)
    if resource not in _NO_GENERATION:
        meta["generation"] = 1
    if resource == "pods":
        obj["status"] = initial_pod_status(obj, timestamp)
    elif resource == "namespaces":
        obj["status"] = {"phase": "Active"}
    elif resource == "resourceclaims":
        obj["status"] = {}  # the strategy drops what the client sent; the struct is always serialized


def initial_pod_status(pod: dict, timestamp: str) -> dict:
    status = {"phase": "Pending"}
    if pod["spec"].get("schedulingGates"):
        status["conditions"] = [dict(_GATED, lastTransitionTime=timestamp)]
    status["qosClass"] = qos_class(pod)
    return status


def qos_class(pod: dict) -> str:
    """Guaranteed, Burstable or BestEffort, counting cpu and memory only, as the kubelet does."""
    containers = (pod["spec"].get("initContainers") or []) + (pod["spec"].get("containers") or [])
    seen, guaranteed = False, True
    for container in containers:
        resources = container.get("resources") or {}
        requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
        for name in ("cpu", "memory"):
            seen = seen or name in requests or name in limits
            if name not in limits or parse_quantity(requests.get(name, limits[name])) != parse_quantity(limits[name]):
                guaranteed = False
    if not seen:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"
