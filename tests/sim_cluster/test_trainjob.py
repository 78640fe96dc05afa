"""The emulated Kubeflow Trainer on the emulated API server, beside the scheduler, kubelet and the
JobSet and Job controllers, on the virtual clock, in a namespace gangkeeper does not enforce.

The runtimes are the ones kubeflow/trainer ships (tests/fixtures/ecosystem/examples/); a training
run's length is the emulation's duration annotation on the pod template of a copy of one. What
the emulation serves for TrainJobs, their runtimes and their JobSets is held to the real CRDs
(tests/fixtures/ecosystem/crds/), read with tests/crds.py.
"""

import copy

import jsonschema
import pytest
import yaml

from sim.api import ADMIN
from sim.cluster import Cluster, emulated_cluster
from sim.names import DURATION_ANNOTATION
from sim.operators import DEFAULT_RETRY_SECONDS
from sim.operators.trainjob import TrainJobOperator, trainjob_operator
from sim.spec import load
from study.policies import gangkeeper_api
from tests.crds import defaulted, ecosystem_crd, openapi_schema, resource_schema
from tests.recorded import FIXTURES
from tests.sim_cluster.served_schemas import ECOSYSTEM_SCHEMAS, OBJECT_META, validator

NS = "research"
EXAMPLES = FIXTURES / "ecosystem" / "examples"
TRAINER = "trainer.kubeflow.org"
SCHEMAS = {**ECOSYSTEM_SCHEMAS, "jobsets": ("jobset.x-k8s.io_jobsets", "v1alpha2")}
TWO_NODES = "nodes: [{count: 2, gpusPerNode: 8}]"


@pytest.fixture
def api(clock):
    api, _ = gangkeeper_api(clock.now)  # gangkeeper's webhooks installed; this namespace is not enforced
    api.create("namespaces", {"metadata": {"name": NS}})
    return api


def cluster_of(api, clock, nodes: str = TWO_NODES):
    return emulated_cluster(api, clock, spec=load(nodes))


def shipped(name: str) -> dict:
    """`torch-distributed` or `torchtune-llama3.2-1b`, as kubeflow/trainer ships it."""
    return yaml.safe_load((EXAMPLES / f"trainer-runtime-{name}.yaml").read_text())


def timed(runtime: dict, seconds: float, *, name: str | None = None, kind: str | None = None) -> dict:
    """A copy of a runtime whose trainer pods train for `seconds` (and renamed, or of the other kind)."""
    runtime = copy.deepcopy(runtime)
    if name:
        runtime["metadata"]["name"] = name
    if kind:
        runtime["kind"] = kind
    for replicated in runtime["spec"]["template"]["spec"]["replicatedJobs"]:
        replicated["template"]["spec"]["template"]["metadata"] = {
            "annotations": {DURATION_ANNOTATION: f"{seconds:g}"}}
    return runtime


def trainjob(name: str, runtime: str, *, kind: str | None = None, suspend: bool | None = None, **trainer) -> dict:
    """A TrainJob as a user writes it: only what differs from the CRD's defaults."""
    spec: dict = {"runtimeRef": {"name": runtime, **({"kind": kind} if kind else {})}}
    if suspend is not None:
        spec["suspend"] = suspend
    if trainer:
        spec["trainer"] = trainer
    return {"apiVersion": f"{TRAINER}/v1alpha1", "kind": "TrainJob", "metadata": {"name": name}, "spec": spec}


def get(api, name: str) -> dict:
    return api.get("trainjobs", name, namespace=NS)


def conditions(obj: dict) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in (obj.get("status") or {}).get("conditions") or ()}


def pods_of(api, trainjob_name: str) -> list[dict]:
    return api.list("pods", namespace=NS, label_selector=f"jobset.sigs.k8s.io/jobset-name={trainjob_name}")


def env(pod: dict) -> dict:
    return {e["name"]: e.get("value") for e in pod["spec"]["containers"][0].get("env") or ()}


def valid(resource: str, obj: dict) -> dict:
    name, version = SCHEMAS[resource]
    validator(resource_schema(ecosystem_crd(name), version, OBJECT_META)).validate(obj)
    return obj


def test_a_trainjob_on_the_torch_distributed_runtime_runs_its_two_nodes_to_complete(api, clock):
    cluster = cluster_of(api, clock)
    api.create("clustertrainingruntimes", timed(shipped("torch-distributed"), 60))
    api.create("trainjobs", trainjob("mnist", "torch-distributed", numNodes=2), namespace=NS)
    start = clock.now()
    assert cluster.run_until_idle(start + 3600)

    done = valid("trainjobs", get(api, "mnist"))
    assert conditions(done) == {"Complete": ("True", "AllJobsCompleted")}
    assert done["status"]["jobsStatus"] == [{"name": "node", "ready": 0, "succeeded": 1, "failed": 0, "active": 0,
                                             "suspended": 0}]
    jobset = valid("jobsets", api.get("jobsets", "mnist", namespace=NS))
    assert jobset["status"]["terminalState"] == "Completed"
    assert jobset["metadata"]["ownerReferences"][0]["uid"] == done["metadata"]["uid"]
    pods = pods_of(api, "mnist")
    assert sorted(p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"] for p in pods) == ["0", "1"]
    assert all(p["status"]["phase"] == "Succeeded" and not p["spec"].get("schedulingGates") for p in pods)
    assert all(env(p)["PET_NNODES"] == "2" and env(p)["PET_MASTER_ADDR"] == "mnist-node-0-0.mnist" for p in pods)
    finished = max(p["status"]["containerStatuses"][0]["state"]["terminated"]["finishedAt"] for p in pods)
    assert done["status"]["conditions"][0]["lastTransitionTime"] >= finished


def test_a_trainjobs_nodes_train_only_together_as_torchrun_waits_for_all_of_them(api, clock):
    """One GPU for two one-GPU nodes: the first runs and waits for the second, which never comes."""
    cluster = cluster_of(api, clock, "nodes: [{count: 1, gpusPerNode: 1}]")
    api.create("clustertrainingruntimes", timed(shipped("torch-distributed"), 60))
    api.create("trainjobs", trainjob("mnist", "torch-distributed", numNodes=2,
                                     resourcesPerNode={"limits": {"nvidia.com/gpu": "1"}}), namespace=NS)
    cluster.run_until(clock.now() + 600)
    assert sorted(p["status"]["phase"] for p in pods_of(api, "mnist")) == ["Pending", "Running"]
    assert conditions(get(api, "mnist")) == {}


def test_what_is_served_for_trainjobs_and_the_shipped_runtimes_is_valid_by_the_real_crds(api, clock):
    """The two shipped runtimes, a namespaced runtime, a TrainJob on each (one suspended, one run
    to completion), and the JobSets rendered for them, with the statuses the operators wrote."""
    cluster = cluster_of(api, clock)
    for name in ("torch-distributed", "torchtune-llama3.2-1b"):
        api.create("clustertrainingruntimes", shipped(name))
    api.create("trainingruntimes", timed(shipped("torch-distributed"), 60, kind="TrainingRuntime"), namespace=NS)
    api.create("trainjobs", trainjob("on-torch", "torch-distributed", numNodes=2, numProcPerNode=4,
                                     resourcesPerNode={"limits": {"nvidia.com/gpu": "4"}},
                                     env=[{"name": "EPOCHS", "value": "3"}]), namespace=NS)
    api.create("trainjobs", trainjob("on-torchtune", "torchtune-llama3.2-1b", suspend=True), namespace=NS)
    api.create("trainjobs", trainjob("on-namespaced", "torch-distributed", kind="TrainingRuntime"), namespace=NS)
    cluster.run_until(clock.now() + 600)

    served = {resource: api.list(resource, namespace=None) for resource in SCHEMAS}
    assert len(served["clustertrainingruntimes"]) == 2 and len(served["trainingruntimes"]) == 1
    assert sorted(j["metadata"]["name"] for j in served["jobsets"]) == ["on-namespaced", "on-torch", "on-torchtune"]
    for resource, objects in served.items():
        for obj in objects:
            valid(resource, obj)
    trainjobs = {j["metadata"]["name"]: j for j in served["trainjobs"]}
    assert conditions(trainjobs["on-torchtune"]) == {"Suspended": ("True", "Suspended")}
    assert conditions(trainjobs["on-namespaced"]) == {"Complete": ("True", "AllJobsCompleted")}
    assert [s["active"] for s in trainjobs["on-torch"]["status"]["jobsStatus"]] == [1]


def test_the_checks_refuse_what_the_real_api_would_not_serve(api, clock):
    """A misspelt field, a condition without its message, a JobSet with a replicated job unnamed."""
    cluster = cluster_of(api, clock)
    api.create("clustertrainingruntimes", shipped("torch-distributed"))
    api.create("trainjobs", trainjob("mnist", "torch-distributed", suspend=True), namespace=NS)
    cluster.settle()
    misspelt = get(api, "mnist")
    misspelt["spec"]["trainer"] = {"numNode": 2}
    with pytest.raises(jsonschema.ValidationError, match="numNode"):
        valid("trainjobs", misspelt)
    unexplained = get(api, "mnist")
    del unexplained["status"]["conditions"][0]["message"]
    with pytest.raises(jsonschema.ValidationError, match="message"):
        valid("trainjobs", unexplained)
    unnamed = api.get("jobsets", "mnist", namespace=NS)
    del unnamed["spec"]["replicatedJobs"][0]["name"]
    with pytest.raises(jsonschema.ValidationError, match="name"):
        valid("jobsets", unnamed)


@pytest.mark.parametrize(("resource", "manifest"), [
    ("trainjobs", trainjob("mnist", "torch-distributed")),
    ("clustertrainingruntimes", shipped("torch-distributed")),
    ("clustertrainingruntimes", shipped("torchtune-llama3.2-1b")),
    ("trainingruntimes", timed(shipped("torchtune-llama3.2-1b"), 60, kind="TrainingRuntime")),
])
def test_the_served_objects_carry_their_crds_defaults(api, resource, manifest):
    name, version = SCHEMAS[resource]
    stored = api.create(resource, manifest, namespace=NS)
    assert stored["spec"] == defaulted(openapi_schema(ecosystem_crd(name), version), manifest)["spec"]


def test_a_trainjob_created_before_its_runtime_waits_for_a_retry_to_find_it(api, clock):
    """The trainer does not watch runtimes: the TrainJob finds its runtime when it is next retried."""
    cluster = cluster_of(api, clock)
    api.create("trainjobs", trainjob("mnist", "torch-distributed"), namespace=NS)
    cluster.settle()
    assert api.list("jobsets", namespace=NS) == [] and "status" not in get(api, "mnist")
    api.create("clustertrainingruntimes", shipped("torch-distributed"))
    cluster.settle()
    assert api.list("jobsets", namespace=NS) == []
    cluster.run_until(clock.now() + DEFAULT_RETRY_SECONDS)
    assert [j["metadata"]["name"] for j in api.list("jobsets", namespace=NS)] == ["mnist"]


def test_the_trainjob_is_the_suspend_switch_that_sticks(api, clock):
    cluster = cluster_of(api, clock)
    api.create("clustertrainingruntimes", shipped("torch-distributed"))
    api.create("trainjobs", trainjob("mnist", "torch-distributed", numNodes=2), namespace=NS)
    cluster.run_until(clock.now() + 30)
    assert len(pods_of(api, "mnist")) == 2

    api.patch("jobsets", "mnist", {"spec": {"suspend": True}}, namespace=NS)
    cluster.run_until(clock.now() + 30)
    assert api.get("jobsets", "mnist", namespace=NS)["spec"]["suspend"] is False, "set back to the TrainJob's"

    api.patch("trainjobs", "mnist", {"spec": {"suspend": True}}, namespace=NS)
    cluster.run_until(clock.now() + 30)
    assert api.get("jobsets", "mnist", namespace=NS)["spec"]["suspend"] is True and pods_of(api, "mnist") == []
    assert conditions(valid("trainjobs", get(api, "mnist"))) == {"Suspended": ("True", "Suspended")}
    api.patch("jobsets", "mnist", {"spec": {"suspend": False}}, namespace=NS)
    cluster.run_until(clock.now() + 30)
    assert api.get("jobsets", "mnist", namespace=NS)["spec"]["suspend"] is True, "set back to the TrainJob's"

    api.patch("trainjobs", "mnist", {"spec": {"suspend": False}}, namespace=NS)
    cluster.run_until(clock.now() + 30)
    assert conditions(valid("trainjobs", get(api, "mnist"))) == {"Suspended": ("False", "Resumed")}
    assert len(pods_of(api, "mnist")) == 2


def test_the_trainer_writes_as_its_service_account(api, clock):
    api.create("clustertrainingruntimes", shipped("torch-distributed"))
    api.create("trainjobs", trainjob("mnist", "torch-distributed", suspend=True), namespace=NS)
    Cluster(api, clock, [trainjob_operator(api)]).settle()
    writes = {(verb, resource, user) for verb, resource, _, user in api.writes if user != ADMIN.username}
    trainer = "system:serviceaccount:kubeflow-system:kubeflow-trainer-controller-manager"
    assert writes == {("create", "jobsets", trainer), ("patch", "trainjobs/status", trainer)}


def test_a_jobset_made_again_comes_from_the_runtime_the_trainjob_was_first_rendered_from(api, clock):
    cluster = cluster_of(api, clock)
    api.create("clustertrainingruntimes", shipped("torch-distributed"))
    api.create("trainjobs", trainjob("mnist", "torch-distributed"), namespace=NS)
    cluster.settle()
    api.patch("clustertrainingruntimes", "torch-distributed", [
        {"op": "replace", "path": "/spec/template/spec/replicatedJobs/0/template/spec/template/spec/containers/0/image",
         "value": "example.com/other:1"}], patch_type="application/json-patch+json")
    api.delete("jobsets", "mnist", namespace=NS)
    cluster.settle()
    again = api.get("jobsets", "mnist", namespace=NS)
    [container] = again["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"]
    assert container["image"] == shipped("torch-distributed")["spec"]["template"]["spec"]["replicatedJobs"][0][
        "template"]["spec"]["template"]["spec"]["containers"][0]["image"]
    api.delete("trainjobs", "mnist", namespace=NS)
    cluster.settle()
    assert cluster.component(TrainJobOperator).snapshots == {}, "a deleted TrainJob's snapshot goes with it"
