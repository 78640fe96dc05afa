"""Every object the emulation serves is one a real API server could serve.

Workloads run to completion first, on the emulated API server with the product in it: the real
webhook (deploy/base's webhook configurations) gates the pods of an enforced namespace and the real
controller (`study.policies.GangkeeperController`: its reconcile and Executor on the virtual clock)
reserves, ungates and reports them — Gangs it creates and a Gang a user declared, Events — while
the emulated scheduler, kubelet and PyTorchJob, JobSet and Job operators do the rest. Beside them,
in a namespace gangkeeper leaves alone: a server pod still running, a pod whose gate a stand-in
removes, one left gated, one too big for any node, one being deleted; PodGroups of both APIs; and
the controller's leader-election Lease, written over HTTP by `controller.leader.LeaderElector`.
A TrainJob runs to completion in a namespace of its own, on a TrainingRuntime copied from the torch
runtime kubeflow/trainer ships, beside the two ClusterTrainingRuntimes it ships. The MPI
operator's pi example runs to completion in an enforced namespace of its own, its Gang ending
Succeeded once its operator has deleted the workers its launcher no longer needs. In another
namespace, pods use devices (`resource.k8s.io/v1`): a DeviceClass that also serves
`example.com/gpu`, a ResourceSlice per node, a ResourceClaimTemplate and a shared ResourceClaim;
the resourceclaim controller makes claims from the template, the scheduler allocates and reserves
them, and the claim of a pod that finished is deallocated and deleted. In one more, the emulated
cluster-autoscaler serves ProvisioningRequests on PodTemplates: one provisioned on a node it adds
to its tainted node group and consumed by a pod, one larger than the group's max, one whose
template is missing.

Then every kind the emulated API serves is listed over HTTP, and:
- the built-in kinds (core/v1, batch/v1, coordination.k8s.io/v1, admissionregistration.k8s.io/v1,
  scheduling.k8s.io/v1beta1, resource.k8s.io/v1) are deserialized into the official client's typed models
  (`kubernetes` 37: `ApiClient().deserialize(text, "V1PodList", ...)`, which refuses a missing
  required field or a wrong type) and validated against the Kubernetes 1.37 OpenAPI schema with
  `kubernetes-validate` (strict: no field the API does not define);
- Gangs are validated against the openAPIV3Schema of deploy/base/crd-gangs.yaml, and TrainJobs,
  (Cluster)TrainingRuntimes, RayClusters, RayJobs, MPIJobs and ProvisioningRequests against the
  real CRDs of tests/fixtures/ecosystem/crds (their metadata against the 1.37 ObjectMeta schema),
  with unknown fields refused as the API server prunes them (tests/crds.py) and timestamps checked
  as RFC 3339;
- LeaderWorkerSets (one started LeaderCreated, one LeaderReady, run by the emulated LWS and
  StatefulSet controllers with LWS's webhooks) are validated against the openAPIV3Schema of LWS's
  own CRD (tests/fixtures/ecosystem/crds/), as LWS's example manifest is, pruned as for Gangs;
- PyTorchJobs, JobSets and scheduler-plugins PodGroups have no schema shipped with either
  package: their metadata is validated against the 1.37 ObjectMeta schema and the status the
  emulated operators write against schemas written here from the upstream Go types (Kubeflow
  training operator `kubeflow.org/v1` `JobStatus`, common_types.go; JobSet `v1alpha2`
  `JobSetStatus`, jobset_types.go, whose conditions are metav1.Conditions of the 1.37 schema; no
  status for PodGroups, which nothing in the emulation writes). Their specs are the test's own
  input and are not checked beyond being objects.
Last, the fields the real server and kubelet always write are checked to be there with real
values (container and image IDs, pod and host IPs, transition times, Event zero values,
`metadata.generation` only on the kinds that have one).
"""

import copy
import ipaddress
import json
import re
import urllib.request
from pathlib import Path

import jsonschema
import kubernetes
import kubernetes_validate
import pydantic
import pytest
import yaml

from gangkeeper import names
from gangkeeper.controller.leader import LeaderElector
from gangkeeper.controller.reading.kube import Kube
from sim.api import ADMIN
from sim.apiserver import APIServer
from sim.clock import VirtualClock
from sim.cluster import emulated_cluster
from sim.deployed import install_webhook_configurations
from sim.kubelet import image_status
from sim.names import DURATION_ANNOTATION
from sim.server import RunningServer
from sim.spec import load, submissions
from study.policies import WEBHOOK_SERVICE, GangkeeperController, WebhookInProcess
from tests import builders
from tests.crds import ecosystem_crd, resource_schema
from tests.recorded import FIXTURES
from tests.sim_cluster.served_schemas import (
    CUSTOM_SCHEMAS,
    ECOSYSTEM_SCHEMAS,
    KUBERNETES,
    OBJECT_META,
    PYTORCHJOB,
    gang_schema,
    lws_schema,
    validator,
)

TOKEN = "admin-token"
ENFORCED, PLAIN, DEVICES, TRAINING, RAY, HPC = "ml", "apps", "dra", "research", "ray", "hpc"
CAPACITY = "capacity"
POOL = {"example.com/pool": "provisioned"}  # the node group's nodes only: only pods that ask for it go there
WORKLOADS = f"""
nodes: [{{count: 3, gpusPerNode: 8}}]
nodeGroups:
  - {{name: provisioned, max: 2, provisioningSeconds: 30, gpusPerNode: 8, labels: {POOL},
     taints: [{{key: example.com/pool, value: provisioned, effect: NoSchedule}}]}}
workloads:
  - {{kind: PyTorchJob, name: pt, namespace: {ENFORCED}, size: 2, durationSeconds: 60}}
  - {{kind: JobSet, name: js, namespace: {ENFORCED}, size: 2, podsPerJob: 1, durationSeconds: 60}}
  - {{kind: Job, name: ij, namespace: {ENFORCED}, size: 2, durationSeconds: 60}}
  - {{kind: Pod, name: plain, namespace: {ENFORCED}, size: 2, durationSeconds: 60}}
  - {{kind: Pod, name: gx, namespace: {ENFORCED}, size: 2, durationSeconds: 60}}
  - {{kind: Pod, name: pg, namespace: {ENFORCED}, size: 2, durationSeconds: 60}}
"""
ECOSYSTEM = Path(__file__).resolve().parents[1] / "fixtures" / "ecosystem"
LWS_EXAMPLE = ECOSYSTEM / "examples" / "leaderworkerset.yaml"
# The official client's list type of every built-in kind served, by the emulation's resource name.
TYPED_LISTS = {
    "namespaces": "V1NamespaceList",
    "nodes": "V1NodeList",
    "pods": "V1PodList",
    "events": "CoreV1EventList",
    "leases": "V1LeaseList",
    "mutatingwebhookconfigurations": "V1MutatingWebhookConfigurationList",
    "validatingwebhookconfigurations": "V1ValidatingWebhookConfigurationList",
    "jobs": "V1JobList",
    "statefulsets": "V1StatefulSetList",
    "poddisruptionbudgets": "V1PodDisruptionBudgetList",
    "priorityclasses": "V1PriorityClassList",
    "podgroups.scheduling.k8s.io": "V1beta1PodGroupList",
    "deviceclasses": "V1DeviceClassList",
    "resourceslices": "V1ResourceSliceList",
    "resourceclaims": "V1ResourceClaimList",
    "resourceclaimtemplates": "V1ResourceClaimTemplateList",
    "persistentvolumes": "V1PersistentVolumeList",
    "persistentvolumeclaims": "V1PersistentVolumeClaimList",
    "secrets": "V1SecretList",
    "configmaps": "V1ConfigMapList",
    "podtemplates": "V1PodTemplateList",
}
CUSTOM = ("pytorchjobs", "jobsets", "leaderworkersets", "gangs", "podgroups", "trainjobs", "trainingruntimes",
          "clustertrainingruntimes", "rayclusters", "rayjobs", "mpijobs", "provisioningrequests")
WITHOUT_GENERATION = ("namespaces", "nodes", "events", "leases", "resourceclaims",
                      "resourceclaimtemplates", "secrets", "configmaps")  # their registry strategies set none
CONTAINER_STATUS_FIELDS = {"name", "image", "imageID", "containerID", "ready", "started", "restartCount", "state",
                           "lastState"}

# --- the cluster, run and read back -----------------------------------------------------------


def pod(name: str, *, gates: tuple[str, ...] = (), gpus: int = 1, duration: float | None = None) -> dict:
    annotations = {DURATION_ANNOTATION: f"{duration:g}"} if duration else {}
    main = builders.container(image="busybox:1.36", limits={"cpu": "1", "memory": "1Gi", builders.GPU: str(gpus)})
    return builders.pod(name, namespace=None, annotations=annotations, gates=gates, containers=[main])


def declared_elsewhere(manifest: dict) -> dict:
    """Pods `gx` take their size from a Gang, pods `pg` from a scheduler-plugins PodGroup."""
    group = (manifest["metadata"].get("labels") or {}).get(names.GROUP_LABEL)
    if group not in ("gx", "pg"):
        return manifest
    manifest = copy.deepcopy(manifest)
    del manifest["metadata"]["annotations"][names.MIN_COUNT_ANNOTATION]
    if group == "pg":
        manifest["metadata"]["labels"] = {names.PLUGINS_POD_GROUP_LABEL: "pg"}
    return manifest


GPU_CLASS = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu.example.com"},
             "spec": {"extendedResourceName": "example.com/gpu",
                      "selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}]}}
ONE_GPU = {"devices": {"requests": [{"name": "gpu", "exactly": {
    "deviceClassName": "gpu.example.com", "allocationMode": "ExactCount", "count": 1,
    "selectors": [{"cel": {"expression": "device.capacity['gpu.example.com'].memory.compareTo(quantity('40Gi')) >= 0"}}]}}]}}


def gpu_slice(node: str) -> dict:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{node}-gpu.example.com"},
            "spec": {"driver": "gpu.example.com", "nodeName": node,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": f"gpu-{i}", "attributes": {"model": {"string": "h100"}},
                                  "capacity": {"memory": {"value": "80Gi"}}} for i in range(2)]}}


def device_pod(name: str, *, claim: dict | None = None, extended: bool = False, duration: float | None = None) -> dict:
    manifest = pod(name, gpus=0, duration=duration)
    container = manifest["spec"]["containers"][0]
    if extended:
        container["resources"]["limits"]["example.com/gpu"] = "1"
    if claim is not None:
        manifest["spec"]["resourceClaims"] = [dict(claim, name="gpu")]
        container["resources"]["claims"] = [{"name": "gpu"}]
    return manifest


def run_devices(api: APIServer) -> None:
    api.create("namespaces", {"metadata": {"name": DEVICES}})
    api.create("deviceclasses", GPU_CLASS)
    for node in api.list("nodes"):
        api.create("resourceslices", gpu_slice(node["metadata"]["name"]))
    api.create("resourceclaimtemplates", {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                                          "metadata": {"name": "one-gpu"}, "spec": {"spec": ONE_GPU}}, namespace=DEVICES)
    api.create("resourceclaims", {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                                  "metadata": {"name": "shared"}, "spec": ONE_GPU}, namespace=DEVICES)
    api.create("persistentvolumes", {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "data"},
                                     "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                                              "local": {"path": "/data"}, "nodeAffinity": {"required": {
                                                  "nodeSelectorTerms": [{"matchExpressions": [{
                                                      "key": "kubernetes.io/hostname", "operator": "Exists"}]}]}}}})
    api.create("persistentvolumeclaims", {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                                          "metadata": {"name": "data"},
                                          "spec": {"accessModes": ["ReadWriteOnce"], "volumeName": "data",
                                                   "resources": {"requests": {"storage": "1Gi"}}}}, namespace=DEVICES)
    for manifest in (device_pod("claimed", claim={"resourceClaimTemplateName": "one-gpu"}),
                     device_pod("finished", claim={"resourceClaimTemplateName": "one-gpu"}, duration=30),
                     device_pod("sharer-0", claim={"resourceClaimName": "shared"}),
                     device_pod("sharer-1", claim={"resourceClaimName": "shared"}),
                     device_pod("extended", extended=True)):
        api.create("pods", manifest, namespace=DEVICES)


def run_trainjob(api: APIServer) -> None:
    """The runtimes kubeflow/trainer ships, and a TrainJob of two nodes on a namespaced copy of the
    torch one whose pods train for 60 seconds."""
    api.create("namespaces", {"metadata": {"name": TRAINING}})
    runtimes = {name: yaml.safe_load((FIXTURES / "ecosystem" / "examples" / f"trainer-runtime-{name}.yaml").read_text())
                for name in ("torch-distributed", "torchtune-llama3.2-1b")}
    for runtime in runtimes.values():
        api.create("clustertrainingruntimes", runtime)
    timed = copy.deepcopy(runtimes["torch-distributed"])
    timed["kind"] = "TrainingRuntime"
    timed["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["metadata"] = {
        "annotations": {DURATION_ANNOTATION: "60"}}
    api.create("trainingruntimes", timed, namespace=TRAINING)
    api.create("trainjobs", {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
                             "metadata": {"name": "mnist"},
                             "spec": {"runtimeRef": {"kind": "TrainingRuntime", "name": "torch-distributed"},
                                      "trainer": {"numNodes": 2}}}, namespace=TRAINING)


def run_rayjob(api: APIServer) -> None:
    """KubeRay's RayJob example (with the ConfigMap of its code), whose submitter runs the job for 30
    seconds, and its RayCluster example."""
    api.create("namespaces", {"metadata": {"name": RAY}})
    rayjob, code = yaml.safe_load_all((FIXTURES / "ecosystem" / "examples" / "rayjob.yaml").read_text())
    api.create("configmaps", code, namespace=RAY)
    rayjob["spec"]["submitterPodTemplate"] = {"metadata": {"annotations": {DURATION_ANNOTATION: "30"}}, "spec": {
        "restartPolicy": "Never", "containers": [{"name": "submitter", "image": "rayproject/ray:2.52.0"}]}}
    api.create("rayjobs", rayjob, namespace=RAY)
    api.create("rayclusters", yaml.safe_load((FIXTURES / "ecosystem" / "examples" / "raycluster.yaml").read_text()),
               namespace=RAY)


def run_mpijob(api: APIServer) -> None:
    """The MPI operator's pi example in an enforced namespace, its workers asking for a GPU each, its
    launcher running `mpirun` for 30 seconds."""
    api.create("namespaces", {"metadata": {"name": HPC, "labels": {names.ENFORCE_LABEL: names.ENFORCE_VALUE}}})
    mpijob = yaml.safe_load((FIXTURES / "ecosystem" / "examples" / "mpijob-pi.yaml").read_text())
    specs = mpijob["spec"]["mpiReplicaSpecs"]
    specs["Worker"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = 1
    specs["Launcher"]["template"]["metadata"] = {"annotations": {DURATION_ANNOTATION: "30"}}
    api.create("mpijobs", mpijob, namespace=HPC)


def run_provisioning(api: APIServer) -> None:
    """ProvisioningRequests of 2 one-GPU pods of the node group's shape: one provisioned and then
    consumed by a pod, one of 3 × 8 GPUs on a group of 2 nodes at most, one naming no template."""
    api.create("namespaces", {"metadata": {"name": CAPACITY}})
    tolerate = [{"key": "example.com/pool", "operator": "Equal", "value": "provisioned", "effect": "NoSchedule"}]
    for name, gpus in (("one-gpu", 1), ("eight-gpus", 8)):
        api.create("podtemplates", {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": name},
                                    "template": {"spec": {**pod(name, gpus=gpus)["spec"], "nodeSelector": POOL,
                                                          "tolerations": tolerate}}}, namespace=CAPACITY)
    for name, template, count in (("booked", "one-gpu", 2), ("too-large", "eight-gpus", 3), ("orphan", "absent", 1)):
        api.create("provisioningrequests", {
            "apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest", "metadata": {"name": name},
            "spec": {"provisioningClassName": "best-effort-atomic-scale-up.autoscaling.x-k8s.io",
                     "podSets": [{"podTemplateRef": {"name": template}, "count": count}]}}, namespace=CAPACITY)
    for index in range(2):
        consumer = pod(f"consumer-{index}")
        consumer["metadata"]["annotations"] = {
            "autoscaling.x-k8s.io/consume-provisioning-request": "booked",
            "autoscaling.x-k8s.io/provisioning-class-name": "best-effort-atomic-scale-up.autoscaling.x-k8s.io"}
        consumer["spec"].update(nodeSelector=POOL, tolerations=tolerate)
        api.create("pods", consumer, namespace=CAPACITY)


def run_workloads(api: APIServer, clock: VirtualClock) -> None:
    api.create("namespaces", {"metadata": {"name": ENFORCED, "labels": {names.ENFORCE_LABEL: names.ENFORCE_VALUE}}})
    for namespace in (PLAIN, names.DEFAULT_NAMESPACE):
        api.create("namespaces", {"metadata": {"name": namespace}})
    api.create("gangs", {"apiVersion": "gangkeeper.io/v1alpha1", "kind": "Gang", "metadata": {"name": "gx"},
                         "spec": {"minCount": 2}}, namespace=ENFORCED)
    api.create("podgroups", {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
                             "metadata": {"name": "pg"}, "spec": {"minMember": 2}}, namespace=ENFORCED)
    api.create("podgroups.scheduling.k8s.io", {
        "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "metadata": {"name": "npg"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}}}, namespace=PLAIN)
    spec = load(WORKLOADS)
    cluster = emulated_cluster(api, clock, spec={**spec, "workloads": []},
                               extra=[GangkeeperController(api, clock=clock.now)])
    start = clock.now()
    run_devices(api)
    run_trainjob(api)
    run_rayjob(api)
    run_mpijob(api)
    run_provisioning(api)
    for submission in submissions(spec):
        api.create(submission.resource, declared_elsewhere(submission.manifest), namespace=ENFORCED)
    for manifest in (pod("server"), pod("leaving"), pod("parked", gates=("example.com/hold",)),
                     pod("held", gates=("example.com/hold",), duration=30),
                     pod("too-big", gates=("example.com/hold",), gpus=64)):
        api.create("pods", manifest, namespace=PLAIN)
    api.create("secrets", {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",  # as certs install
                           "metadata": {"name": names.WEBHOOK_TLS_SECRET},
                           "data": {"tls.crt": "Y3J0", "tls.key": "a2V5", "ca.crt": "Y2E="}},
               namespace=names.DEFAULT_NAMESPACE)
    api.create("secrets", {"metadata": {"name": "opaque"}, "stringData": {"token": "t"}}, namespace=PLAIN)
    api.create("poddisruptionbudgets", {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                                        "metadata": {"name": "server"},
                                        "spec": {"minAvailable": 1, "selector": {}}}, namespace=PLAIN)
    for startup_policy in ("LeaderCreated", "LeaderReady"):
        api.create("leaderworkersets", leaderworkerset(startup_policy), namespace=ENFORCED)
    cluster.run_until(start + 10)
    for name in ("held", "too-big"):  # a stand-in for whoever owns the gate
        api.patch("pods", name, [{"op": "remove", "path": "/spec/schedulingGates"}], namespace=PLAIN,
                  patch_type="application/json-patch+json")
    cluster.run_until(start + 600)
    api.delete("pods", "leaving", namespace=PLAIN)  # graceful: still there, being deleted
    cluster.close()


def leaderworkerset(startup_policy: str) -> dict:
    """LWS's example with one group of a leader and a worker, each asking for a GPU."""
    lws = yaml.safe_load(LWS_EXAMPLE.read_text())
    lws["metadata"]["name"] = f"lws-{startup_policy.lower()}"
    lws["spec"].update(replicas=1, startupPolicy=startup_policy)
    lws["spec"]["leaderWorkerTemplate"]["size"] = 2
    lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["resources"]["limits"][
        "nvidia.com/gpu"] = "1"
    return lws


def list_path(api: APIServer, resource: str) -> str:
    kind = api.kind(resource)
    return f"/apis/{kind.group}/{kind.version}/{kind.plural}" if kind.group else f"/api/{kind.version}/{kind.plural}"


@pytest.fixture(scope="module")
def served() -> dict[str, str]:
    """The list of every kind the emulated API serves, as JSON text read over HTTP, by resource name."""
    clock = VirtualClock()
    api = APIServer(clock=clock.now, native_pod_groups=True, webhook_services={WEBHOOK_SERVICE: WebhookInProcess()})
    install_webhook_configurations(api)
    run_workloads(api, clock)
    with RunningServer(api, tokens={TOKEN: ADMIN}) as server:
        configuration = kubernetes.client.Configuration()
        configuration.host, configuration.api_key = server.url, {"authorization": f"Bearer {TOKEN}"}
        elector = LeaderElector(Kube(kubernetes.client.ApiClient(configuration)), names.DEFAULT_NAMESPACE,
                                "gangkeeper-controller", "gangkeeper-controller-0_test")
        elector.step()  # creates the Lease
        elector.step()  # renews it
        lists = {}
        for resource in (api.resource_name(kind) for kind in api.kinds.kinds if kind.plural != "bindings"):
            request = urllib.request.Request(server.url + list_path(api, resource),
                                             headers={"Authorization": f"Bearer {TOKEN}"})
            with urllib.request.urlopen(request, timeout=10) as answer:
                lists[resource] = answer.read().decode()
    return lists


def items(served: dict[str, str], resource: str) -> list[dict]:
    """The objects of a list, each with the list's apiVersion and its kind."""
    listed = json.loads(served[resource])
    kind = listed["kind"].removesuffix("List")
    return [{"apiVersion": listed["apiVersion"], "kind": kind, **item} for item in listed["items"]]


def pods(served: dict[str, str], namespace: str) -> dict[str, dict]:
    return {p["metadata"]["name"]: p for p in items(served, "pods") if p["metadata"]["namespace"] == namespace}


def condition(obj: dict, kind: str) -> dict:
    return next(c for c in obj["status"]["conditions"] if c["type"] == kind)


# --- the run ----------------------------------------------------------------------------------

def test_every_kind_served_is_read_back_after_its_workloads_ran_to_completion(served):
    assert set(served) == set(TYPED_LISTS) | set(CUSTOM)
    assert all(items(served, resource) for resource in served), "every kind has objects to check"
    enforced = {name: p for name, p in pods(served, ENFORCED).items()
                if names.LWS_NAME_LABEL not in p["metadata"]["labels"]}
    assert len(enforced) == 12 and {p["status"]["phase"] for p in enforced.values()} == {"Succeeded"}
    servers = {name: p["status"]["phase"] for name, p in pods(served, ENFORCED).items() if name not in enforced}
    assert servers == {f"lws-{policy}{pod}": "Running" for policy in ("leadercreated", "leaderready")
                       for pod in ("-0", "-0-1")}
    assert all(condition(lws, "Available")["status"] == "True" for lws in items(served, "leaderworkersets"))
    assert all(condition(job, "Succeeded")["status"] == "True" for job in items(served, "pytorchjobs"))
    assert all(job["status"]["terminalState"] == "Completed" for job in items(served, "jobsets"))
    assert all(condition(job, "Complete")["status"] == "True" for job in items(served, "jobs"))
    assert all(condition(job, "Complete")["status"] == "True" for job in items(served, "trainjobs"))
    assert {job["status"]["jobDeploymentStatus"] for job in items(served, "rayjobs")} == {"Complete"}
    assert {cluster["status"]["state"] for cluster in items(served, "rayclusters")} == {"ready"}
    assert all(condition(job, "Succeeded")["status"] == "True" for job in items(served, "mpijobs"))
    assert {g["metadata"]["name"] for g in items(served, "gangs")} >= {"gx", "pg", "plain"}
    phases = {((g["metadata"].get("ownerReferences") or [{}])[0].get("kind"), g["status"]["phase"])
              for g in items(served, "gangs")}
    assert {phase for owner, phase in phases if owner != "LeaderWorkerSet"} == {"Succeeded"}
    assert {phase for owner, phase in phases if owner == "LeaderWorkerSet"} == {"Running"}
    assert {e["involvedObject"]["kind"] for e in items(served, "events")} >= {"Pod", "Gang"}
    phases = {name: (p["status"]["phase"], bool(p["metadata"].get("deletionTimestamp")))
              for name, p in pods(served, PLAIN).items()}
    assert phases == {"server": ("Running", False), "leaving": ("Running", True), "parked": ("Pending", False),
                      "held": ("Succeeded", False), "too-big": ("Pending", False)}
    [lease] = items(served, "leases")
    assert lease["spec"]["holderIdentity"] == "gangkeeper-controller-0_test"
    provisioned = {r["metadata"]["name"]: [(c["type"], c["status"], c["reason"]) for c in r["status"]["conditions"]]
                   for r in items(served, "provisioningrequests")}
    assert provisioned == {
        "booked": [("Accepted", "True", "Accepted"), ("Provisioned", "True", "CapacityIsProvisioned"),
                   ("BookingExpired", "True", "CapacityBookingConsumed")],
        "too-large": [("Accepted", "True", "Accepted"), ("Provisioned", "False", "CapacityIsNotFound")],
        "orphan": [("Failed", "True", "FailedToCreatePods")]}
    assert {name: (p["spec"]["nodeName"], p["status"]["phase"]) for name, p in pods(served, CAPACITY).items()} == {
        "consumer-0": ("provisioned-0", "Running"), "consumer-1": ("provisioned-0", "Running")}


# --- built-in kinds: the official client's typed models and the API's schema --------------------

@pytest.mark.parametrize("resource", sorted(TYPED_LISTS))
def test_built_in_kinds_deserialize_into_the_official_clients_typed_models(served, resource):
    listed = kubernetes.client.ApiClient().deserialize(served[resource], TYPED_LISTS[resource], "application/json")
    assert [item.metadata.name for item in listed.items] == [o["metadata"]["name"] for o in items(served, resource)]


@pytest.mark.parametrize("resource", sorted(TYPED_LISTS))
def test_built_in_kinds_are_valid_by_the_api_schema(served, resource):
    for obj in items(served, resource):
        assert kubernetes_validate.validate(obj, KUBERNETES, strict=True) == KUBERNETES, obj["metadata"]["name"]


# --- custom resources ------------------------------------------------------------------------

def test_gangs_are_valid_by_their_crd_schema(served):
    gangs = validator(gang_schema())
    for gang in items(served, "gangs"):
        gangs.validate(gang)


@pytest.mark.parametrize("resource", sorted(ECOSYSTEM_SCHEMAS))
def test_trainer_resources_are_valid_by_their_real_crd_schemas(served, resource):
    name, version = ECOSYSTEM_SCHEMAS[resource]
    schema = validator(resource_schema(ecosystem_crd(name), version, OBJECT_META))
    for obj in items(served, resource):
        schema.validate(obj)


def test_leaderworkersets_are_valid_by_their_crd_schema_as_is_lws_example(served):
    schema = validator(lws_schema())
    for lws in items(served, "leaderworkersets"):
        schema.validate(lws)
    schema.validate(yaml.safe_load(LWS_EXAMPLE.read_text()))


@pytest.mark.parametrize("resource", sorted(CUSTOM_SCHEMAS))
def test_other_custom_resources_have_valid_metadata_and_the_status_their_operators_write(served, resource):
    schema = validator(CUSTOM_SCHEMAS[resource])
    for obj in items(served, resource):
        schema.validate(obj)


def test_the_checks_refuse_what_the_real_api_would_not_serve(served):
    """The checks can fail: a container status without imageID, a field the API does not know, a
    timestamp that is not one, a PyTorchJob replica count that is not a number, a claim's allocated
    device without its pool."""
    running = copy.deepcopy(pods(served, PLAIN)["server"])
    del running["status"]["containerStatuses"][0]["imageID"]
    with pytest.raises(pydantic.ValidationError, match="imageID"):
        kubernetes.client.ApiClient().deserialize(json.dumps(running), "V1Pod", "application/json")
    with pytest.raises(kubernetes_validate.ValidationError, match="imageID"):
        kubernetes_validate.validate(running, KUBERNETES, strict=True)
    gang = copy.deepcopy(items(served, "gangs")[0])
    gang["status"]["conditions"][0]["lastTransitionTime"] = "yesterday"
    with pytest.raises(jsonschema.ValidationError, match="date-time"):
        validator(gang_schema()).validate(gang)
    gang = dict(copy.deepcopy(items(served, "gangs")[0]), extra={})
    with pytest.raises(jsonschema.ValidationError, match="extra"):
        validator(gang_schema()).validate(gang)
    lws = copy.deepcopy(items(served, "leaderworkersets")[0])
    lws["status"]["conditions"][0]["reason"] = ""
    with pytest.raises(jsonschema.ValidationError, match="reason"):
        validator(lws_schema()).validate(lws)
    lws = copy.deepcopy(items(served, "leaderworkersets")[0])
    lws["status"]["groups"] = 1
    with pytest.raises(jsonschema.ValidationError, match="groups"):
        validator(lws_schema()).validate(lws)
    job = copy.deepcopy(items(served, "pytorchjobs")[0])
    job["status"]["replicaStatuses"]["Master"]["succeeded"] = "1"
    with pytest.raises(jsonschema.ValidationError):
        validator(PYTORCHJOB).validate(job)
    job = copy.deepcopy(items(served, "pytorchjobs")[0])
    job["metadata"]["uid"] = 7
    with pytest.raises(jsonschema.ValidationError):
        validator(PYTORCHJOB).validate(job)
    claim = copy.deepcopy(next(c for c in items(served, "resourceclaims") if c["status"].get("allocation")))
    del claim["status"]["allocation"]["devices"]["results"][0]["pool"]
    with pytest.raises(kubernetes_validate.ValidationError, match="pool"):
        kubernetes_validate.validate(claim, KUBERNETES, strict=True)


# --- what the real server and kubelet always write --------------------------------------------

def test_devices_are_allocated_reserved_and_released_as_the_real_control_plane_does(served):
    device_pods = pods(served, DEVICES)
    assert {name: p["status"]["phase"] for name, p in device_pods.items()} == {
        "claimed": "Running", "finished": "Succeeded", "sharer-0": "Running", "sharer-1": "Running",
        "extended": "Running"}
    claims = {c["metadata"]["name"]: c for c in items(served, "resourceclaims")}
    [(claimed, status)] = [(s["resourceClaimName"], s) for s in device_pods["claimed"]["status"]["resourceClaimStatuses"]]
    special = device_pods["extended"]["status"]["extendedResourceClaimStatus"]
    assert special["requestMappings"] == [{"containerName": "main", "resourceName": "example.com/gpu",
                                           "requestName": "container-0-request-1"}]
    assert set(claims) == {claimed, "shared", special["resourceClaimName"]}, "the finished pod's claim is gone"
    reserved = {name: [r["name"] for r in c["status"]["reservedFor"]] for name, c in claims.items()}
    assert reserved == {claimed: ["claimed"], "shared": ["sharer-0", "sharer-1"],
                        special["resourceClaimName"]: ["extended"]}
    devices = [(r["pool"], r["device"]) for c in claims.values() for r in c["status"]["allocation"]["devices"]["results"]]
    assert len(set(devices)) == 3
    for name, c in claims.items():
        [node] = c["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"]
        assert all(device_pods[p]["spec"]["nodeName"] == node for p in reserved[name])
        assert c["metadata"]["finalizers"] == ["resource.kubernetes.io/delete-protection"]


def test_started_pods_have_the_status_the_real_kubelet_writes(served):
    started = [p for namespace in (ENFORCED, PLAIN) for p in pods(served, namespace).values()
               if p["status"]["phase"] in ("Running", "Succeeded")]
    assert len(started) == 19  # 12 finished and 4 LeaderWorkerSet pods in ml; in apps a server, one leaving, one done
    for p in started:
        status = p["status"]
        assert status["hostIPs"] == [{"ip": status["hostIP"]}] and status["podIPs"] == [{"ip": status["podIP"]}]
        assert ipaddress.ip_address(status["hostIP"]).is_private and ipaddress.ip_address(status["podIP"]).is_private
        assert status["qosClass"] and status["startTime"]
        scheduled = condition(p, "PodScheduled")
        assert scheduled["status"] == "True" and scheduled["lastTransitionTime"] < status["startTime"], \
            "the kubelet keeps the scheduler's transition time"
        for container in status["containerStatuses"]:
            assert set(container) == CONTAINER_STATUS_FIELDS
            repository = container["image"].rsplit(":", 1)[0]
            assert re.fullmatch(r"[a-z0-9.-]+\.[a-z]+/[a-z0-9./-]+:[\w.-]+", container["image"])
            assert re.fullmatch(re.escape(repository) + r"@sha256:[0-9a-f]{64}", container["imageID"])
            assert re.fullmatch(r"containerd://[0-9a-f]{64}", container["containerID"])
            assert container["lastState"] == {} and container["restartCount"] == 0
            running = status["phase"] == "Running"
            assert container["ready"] is container["started"] is running
            assert set(container["state"]) == {"running" if running else "terminated"}
            if not running:
                assert container["state"]["terminated"]["containerID"] == container["containerID"]
    assert len({p["status"]["podIP"] for p in started}) == len(started), "every pod has its own IP"
    hosts = {p["spec"]["nodeName"]: p["status"]["hostIP"] for p in started}
    assert all(hosts[p["spec"]["nodeName"]] == p["status"]["hostIP"] for p in started)
    assert len(set(hosts.values())) == len(hosts), "every node has its own IP"


def test_finished_pods_keep_their_addresses_and_their_conditions_turn_as_the_kubelets_do(served):
    held = pods(served, PLAIN)["held"]
    assert held["status"]["podIP"] and held["status"]["hostIP"]
    conditions = {c["type"]: c for c in held["status"]["conditions"]}
    assert {kind: (c["status"], c.get("reason")) for kind, c in conditions.items()} == {
        "PodReadyToStartContainers": ("False", None), "Initialized": ("True", None),
        "Ready": ("False", "PodCompleted"), "ContainersReady": ("False", "PodCompleted"),
        "PodScheduled": ("True", None)}
    finished = held["status"]["containerStatuses"][0]["state"]["terminated"]["finishedAt"]
    assert conditions["Initialized"]["lastTransitionTime"] == held["status"]["startTime"] < finished
    assert conditions["Ready"]["lastTransitionTime"] == finished


def test_an_unschedulable_pod_keeps_the_transition_time_of_its_gated_condition(served):
    too_big = pods(served, PLAIN)["too-big"]
    scheduled = condition(too_big, "PodScheduled")
    assert (scheduled["status"], scheduled["reason"]) == ("False", "Unschedulable")
    assert scheduled["lastTransitionTime"] == too_big["metadata"]["creationTimestamp"]
    assert (condition(pods(served, PLAIN)["parked"], "PodScheduled")["reason"]) == "SchedulingGated"


def test_events_carry_the_fields_core_v1_always_serializes(served):
    for event in items(served, "events"):
        assert (event["eventTime"], event["reportingComponent"], event["reportingInstance"]) == (None, "", "")
        assert event["source"] == {"component": "gangkeeper-controller"}
        assert event["firstTimestamp"] and event["lastTimestamp"]


def test_only_the_kinds_whose_strategy_sets_a_generation_have_one(served):
    for resource in served:
        numbered = [obj["metadata"].get("generation", 0) >= 1 for obj in items(served, resource)]
        assert not any(numbered) if resource in WITHOUT_GENERATION else all(numbered), resource


@pytest.mark.parametrize(("image", "reported", "repository"), [
    ("busybox", "docker.io/library/busybox:latest", "docker.io/library/busybox"),
    ("busybox:1.36", "docker.io/library/busybox:1.36", "docker.io/library/busybox"),
    ("team/app:v2", "docker.io/team/app:v2", "docker.io/team/app"),
    ("registry.example/train:latest", "registry.example/train:latest", "registry.example/train"),
    ("localhost:5000/app", "localhost:5000/app:latest", "localhost:5000/app"),
])
def test_image_references_are_qualified_as_containerd_reports_them(image, reported, repository):
    name, image_id = image_status(image)
    assert name == reported
    assert re.fullmatch(re.escape(repository) + r"@sha256:[0-9a-f]{64}", image_id)
    assert image_status(image) == (name, image_id), "the same image has the same ID"


def test_an_image_named_by_digest_keeps_its_digest():
    digest = "sha256:" + "a" * 64
    assert image_status(f"busybox@{digest}") == (f"docker.io/library/busybox@{digest}",
                                                f"docker.io/library/busybox@{digest}")
