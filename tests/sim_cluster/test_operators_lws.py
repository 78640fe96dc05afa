"""The emulated StatefulSet and LeaderWorkerSet controllers and LWS's webhooks, as the real ones shape things."""

import hashlib

import pytest

from gangkeeper import names
from sim.api import APIError
from sim.apiserver import APIServer
from sim.cluster import Cluster
from sim.kubelet import Kubelet
from sim.operators import lws
from sim.operators.statefulset import statefulset_operator
from sim.scheduler import Scheduler
from sim.spec import load, node_manifests

NS = "serving"
GROUP_KEY = "leaderworkerset.sigs.k8s.io/group-key"
SIZE = "leaderworkerset.sigs.k8s.io/size"
LEADER_NAME = "leaderworkerset.sigs.k8s.io/leader-name"


def cluster_of(clock, *, running: bool) -> tuple[APIServer, Cluster]:
    """An API server with LWS's webhooks, the StatefulSet and LWS controllers and, when `running`,
    a scheduler and kubelets on two nodes (pods then start and turn Ready; else they stay Pending)."""
    api = APIServer(clock=clock.now)
    api.create("namespaces", {"metadata": {"name": NS}})
    lws.install(api)
    components = [statefulset_operator(api), lws.lws_controller(api)]
    if running:
        for manifest in node_manifests(load("nodes: [{count: 2}]")):
            api.create("nodes", manifest)
        components += [Scheduler(api), Kubelet(api)]
    return api, Cluster(api, clock, components)


def container(name: str = "main") -> dict:
    return {"name": name, "image": "img:1", "resources": {"limits": {"cpu": "1"}}}


def statefulset(name: str = "web", replicas: int = 3, policy: str | None = None, start: int | None = None) -> dict:
    spec = {"replicas": replicas, "serviceName": "web-svc", "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [container()]}}}
    if policy:
        spec["podManagementPolicy"] = policy
    if start is not None:
        spec["ordinals"] = {"start": start}
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": name}, "spec": spec}


def leaderworkerset(name: str = "vllm", *, size: int = 3, replicas: int = 2, startup_policy: str | None = None,
                    restart_policy: str | None = None) -> dict:
    template = {"size": size, "workerTemplate": {"metadata": {"labels": {"app": "vllm"}},
                                                 "spec": {"containers": [container("vllm")]}}}
    if restart_policy:
        template["restartPolicy"] = restart_policy
    spec = {"replicas": replicas, "leaderWorkerTemplate": template}
    if startup_policy:
        spec["startupPolicy"] = startup_policy
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": {"name": name},
            "spec": spec}


def pods(api) -> dict[str, dict]:
    return {p["metadata"]["name"]: p for p in api.list("pods", namespace=NS)}


def statefulsets(api) -> dict[str, dict]:
    return {s["metadata"]["name"]: s for s in api.list("statefulsets", namespace=NS)}


def owner(obj: dict) -> tuple[str, str, str]:
    (reference,) = obj["metadata"]["ownerReferences"]
    assert reference["controller"] is True
    return reference["kind"], reference["name"], reference["uid"]


def env(pod: dict) -> dict[str, str]:
    return {e["name"]: e.get("value") for e in pod["spec"]["containers"][0].get("env") or ()}


# --- the StatefulSet controller --------------------------------------------------------------

def test_a_statefulsets_pods_carry_their_ordinal_identity(clock):
    api, cluster = cluster_of(clock, running=False)
    made = api.create("statefulsets", statefulset(policy="Parallel", start=5), namespace=NS)
    cluster.settle()
    assert sorted(pods(api)) == ["web-5", "web-6", "web-7"]
    pod = pods(api)["web-6"]
    assert pod["metadata"]["labels"] == {"app": "web", names.STATEFULSET_POD_NAME_LABEL: "web-6",
                                         names.STATEFULSET_POD_INDEX_LABEL: "6",
                                         "controller-revision-hash": pod["metadata"]["labels"]["controller-revision-hash"]}
    assert pod["metadata"]["labels"]["controller-revision-hash"].startswith("web-")
    assert (pod["spec"]["hostname"], pod["spec"]["subdomain"]) == ("web-6", "web-svc")
    assert owner(pod) == ("StatefulSet", "web", made["metadata"]["uid"])


def test_ordered_ready_makes_an_ordinal_only_once_the_ones_below_run_and_are_ready(clock):
    api, cluster = cluster_of(clock, running=True)
    api.create("statefulsets", statefulset(), namespace=NS)
    cluster.settle()
    assert sorted(pods(api)) == ["web-0"], "web-1 waits for web-0 to be Running and Ready"
    cluster.run_until(clock.now() + 30)
    assert sorted(pods(api)) == ["web-0", "web-1", "web-2"]
    created = {name: p["metadata"]["creationTimestamp"] for name, p in pods(api).items()}
    assert created["web-0"] < created["web-1"] < created["web-2"]
    status = statefulsets(api)["web"]["status"]
    assert (status["replicas"], status["readyReplicas"], status["availableReplicas"]) == (3, 3, 3)
    assert status["currentRevision"] == status["updateRevision"]


def test_parallel_makes_every_ordinal_at_once(clock):
    api, cluster = cluster_of(clock, running=True)
    api.create("statefulsets", statefulset(policy="Parallel"), namespace=NS)
    cluster.settle()
    assert sorted(pods(api)) == ["web-0", "web-1", "web-2"]


def test_a_pod_deleted_is_made_again_under_its_name_and_surplus_goes_from_the_top(clock):
    api, cluster = cluster_of(clock, running=True)
    api.create("statefulsets", statefulset(policy="Parallel"), namespace=NS)
    cluster.run_until(clock.now() + 30)
    before = pods(api)["web-1"]["metadata"]["uid"]
    api.delete("pods", "web-1", namespace=NS)
    cluster.run_until(clock.now() + 30)
    assert pods(api)["web-1"]["metadata"]["uid"] != before
    api.patch("statefulsets", "web", {"spec": {"replicas": 1}}, namespace=NS)
    cluster.run_until(clock.now() + 60)
    assert sorted(pods(api)) == ["web-0"]


# --- the LeaderWorkerSet controllers ----------------------------------------------------------

def test_the_leader_statefulset_is_the_lws_own_and_makes_a_leader_per_group(clock):
    api, cluster = cluster_of(clock, running=False)
    made = api.create("leaderworkersets", leaderworkerset(), namespace=NS)
    cluster.settle()
    leaders = statefulsets(api)["vllm"]
    assert owner(leaders) == ("LeaderWorkerSet", "vllm", made["metadata"]["uid"])
    assert (leaders["spec"]["replicas"], leaders["spec"]["podManagementPolicy"]) == (2, "Parallel")
    assert leaders["spec"]["selector"] == {"matchLabels": {names.LWS_NAME_LABEL: "vllm",
                                                           names.LWS_WORKER_INDEX_LABEL: "0"}}
    revision = leaders["metadata"]["labels"][names.LWS_REVISION_LABEL]
    assert leaders["spec"]["template"]["metadata"] == {
        "labels": {"app": "vllm", names.LWS_WORKER_INDEX_LABEL: "0", names.LWS_NAME_LABEL: "vllm",
                   names.LWS_REVISION_LABEL: revision}, "annotations": {SIZE: "3"}}
    leader = pods(api)["vllm-1"]
    assert owner(leader)[:2] == ("StatefulSet", "vllm")
    assert leader["metadata"]["labels"][names.LWS_GROUP_INDEX_LABEL] == "1"
    assert leader["metadata"]["labels"][GROUP_KEY] == hashlib.sha1(f"{NS}/vllm-1".encode()).hexdigest()
    assert env(leader) == {"LWS_LEADER_ADDRESS": f"vllm-1.vllm.{NS}", "LWS_GROUP_SIZE": "3", "LWS_WORKER_INDEX": "0"}


def test_leader_created_gives_each_leader_its_workers_before_it_is_ready(clock):
    api, cluster = cluster_of(clock, running=False)
    api.create("leaderworkersets", leaderworkerset(), namespace=NS)
    cluster.settle()
    assert sorted(pods(api)) == ["vllm-0", "vllm-0-1", "vllm-0-2", "vllm-1", "vllm-1-1", "vllm-1-2"]
    leader, workers = pods(api)["vllm-0"], statefulsets(api)["vllm-0"]
    assert owner(workers) == ("Pod", "vllm-0", leader["metadata"]["uid"])
    assert (workers["spec"]["replicas"], workers["spec"]["ordinals"], workers["spec"]["podManagementPolicy"]) == \
        (2, {"start": 1}, "Parallel")
    worker = pods(api)["vllm-0-2"]
    assert owner(worker)[:2] == ("StatefulSet", "vllm-0")
    for key in (names.LWS_NAME_LABEL, names.LWS_GROUP_INDEX_LABEL, GROUP_KEY, names.LWS_REVISION_LABEL):
        assert worker["metadata"]["labels"][key] == leader["metadata"]["labels"][key]
    assert worker["metadata"]["labels"][names.LWS_WORKER_INDEX_LABEL] == "2"
    assert worker["metadata"]["annotations"] == {SIZE: "3", LEADER_NAME: "vllm-0"}
    assert env(worker)["LWS_WORKER_INDEX"] == "2" and env(worker)["LWS_LEADER_ADDRESS"] == f"vllm-0.vllm.{NS}"


def test_leader_ready_makes_the_workers_only_once_their_leader_is_ready(clock):
    api, cluster = cluster_of(clock, running=False)
    api.create("leaderworkersets", leaderworkerset(startup_policy="LeaderReady"), namespace=NS)
    cluster.run_until(clock.now() + 60)
    assert sorted(pods(api)) == ["vllm-0", "vllm-1"] and sorted(statefulsets(api)) == ["vllm"]
    api, cluster = cluster_of(clock, running=True)
    api.create("leaderworkersets", leaderworkerset(startup_policy="LeaderReady"), namespace=NS)
    cluster.run_until(clock.now() + 60)
    made = pods(api)
    assert len(made) == 6 and {p["status"]["phase"] for p in made.values()} == {"Running"}
    assert made["vllm-0-1"]["metadata"]["creationTimestamp"] > made["vllm-0"]["metadata"]["creationTimestamp"]


def test_a_group_of_one_has_no_workers(clock):
    api, cluster = cluster_of(clock, running=True)
    api.create("leaderworkersets", leaderworkerset(size=1), namespace=NS)
    cluster.run_until(clock.now() + 60)
    assert sorted(pods(api)) == ["vllm-0", "vllm-1"] and sorted(statefulsets(api)) == ["vllm"]
    assert api.get("leaderworkersets", "vllm", namespace=NS)["status"]["readyReplicas"] == 2


def conditions(api) -> dict[str, tuple[str, str]]:
    status = api.get("leaderworkersets", "vllm", namespace=NS)["status"]
    return {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}


def test_the_status_says_progressing_until_every_group_is_ready_then_available(clock):
    api, cluster = cluster_of(clock, running=True)
    api.create("leaderworkersets", leaderworkerset(), namespace=NS)
    cluster.settle()
    assert conditions(api) == {"Progressing": ("True", "GroupsProgressing")}
    status = api.get("leaderworkersets", "vllm", namespace=NS)["status"]
    assert (status["replicas"], status["readyReplicas"]) == (2, 0)
    cluster.run_until(clock.now() + 60)
    assert conditions(api) == {"Progressing": ("False", "GroupsProgressing"), "Available": ("True", "AllGroupsReady")}
    status = api.get("leaderworkersets", "vllm", namespace=NS)["status"]
    assert (status["replicas"], status["readyReplicas"], status["updatedReplicas"], status["observedGeneration"]) == \
        (2, 2, 2, 1)
    assert status["hpaPodSelector"] == f"{names.LWS_NAME_LABEL}=vllm,{names.LWS_WORKER_INDEX_LABEL}=0"


def uids(api) -> dict[str, str]:
    return {name: p["metadata"]["uid"] for name, p in pods(api).items()}


@pytest.mark.parametrize("restart_policy, remade", [(None, {"vllm-0", "vllm-0-1", "vllm-0-2"}),
                                                    ("None", {"vllm-0-1"})])
def test_a_worker_being_deleted_makes_the_whole_group_again_unless_the_policy_is_none(clock, restart_policy, remade):
    api, cluster = cluster_of(clock, running=True)
    api.create("leaderworkersets", leaderworkerset(restart_policy=restart_policy), namespace=NS)
    cluster.run_until(clock.now() + 60)
    before = uids(api)
    api.delete("pods", "vllm-0-1", namespace=NS)  # a bound pod: deleted gracefully
    cluster.run_until(clock.now() + 120)
    after = uids(api)
    assert set(after) == set(before)
    assert {name for name in after if after[name] != before[name]} == remade
    assert {p["status"]["phase"] for p in pods(api).values()} == {"Running"}


# --- LWS's webhooks ---------------------------------------------------------------------------

def test_the_pod_webhook_refuses_an_lws_pod_without_its_size(clock):
    api, _ = cluster_of(clock, running=False)
    pod = {"metadata": {"name": "vllm-0", "labels": {names.LWS_NAME_LABEL: "vllm", names.LWS_WORKER_INDEX_LABEL: "0"}},
           "spec": {"containers": [container()]}}
    with pytest.raises(APIError) as refused:
        api.create("pods", pod, namespace=NS)
    assert refused.value.code == 403
    assert "size annotation is unexpectedly missing for pod vllm-0" in refused.value.status["message"]
    plain = api.create("pods", {"metadata": {"name": "other-0"}, "spec": {"containers": [container()]}}, namespace=NS)
    assert "env" not in plain["spec"]["containers"][0], "pods of no LWS are not sent to it"


def test_an_lws_is_stored_with_its_crds_defaults_and_its_webhooks(clock):
    api, _ = cluster_of(clock, running=False)
    spec = api.create("leaderworkersets", leaderworkerset(), namespace=NS)["spec"]
    assert (spec["startupPolicy"], spec["leaderWorkerTemplate"]["restartPolicy"]) == (
        "LeaderCreated", "RecreateGroupOnPodRestart")
    assert spec["rolloutStrategy"] == {"type": "RollingUpdate", "rollingUpdateConfiguration": {
        "maxUnavailable": 1, "maxSurge": 0, "partition": 0}}
    assert spec["networkConfig"] == {"subdomainPolicy": "Shared"}
