"""The emulated kube-scheduler over a ClusterAPI: queue order, gates, retries, the deadlock."""

from collections import Counter

from gangkeeper.names import KUBEFLOW_JOB_NAME_LABEL, SCHEDULING_GATE
from sim.cluster import Cluster
from sim.scheduler import Scheduler
from sim.spec import load, node_manifests
from tests import builders
from tests.sim.helpers import Handler, mutated_api, patched
from tests.sim_cluster.conftest import pods_of

UNSCHEDULABLE_GPU = ("0/1 nodes are available: 1 Insufficient nvidia.com/gpu. no new claims to deallocate, "
                     "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.")


def scheduler_only(api, clock, nodes=1, gpus=8):
    for manifest in node_manifests(load(f"nodes: [{{count: {nodes}, gpusPerNode: {gpus}}}]")):
        api.create("nodes", manifest)
    return Cluster(api, clock, [Scheduler(api)])


def gpu_pod(name, gpus=1, **spec):
    return builders.pod(name, containers=[builders.container("c", limits={builders.GPU: str(gpus)})], **spec)


def node_of(api, name):
    return api.get("pods", name, namespace="ml")["spec"].get("nodeName")


def test_binds_a_pod_through_the_binding_subresource(api, clock):
    cluster = scheduler_only(api, clock)
    api.create("pods", gpu_pod("a"))
    cluster.settle()
    assert node_of(api, "a") == "node-0"
    assert ("create", "pods/binding", "a", "system:kube-scheduler") in api.writes


def test_higher_priority_first_then_creation_order(api, clock):
    cluster = scheduler_only(api, clock)
    api.create("pods", gpu_pod("early", gpus=8))
    clock.advance(1)
    api.create("pods", gpu_pod("late", gpus=8))
    api.create("priorityclasses", {"metadata": {"name": "urgent"}, "value": 1000})
    api.create("pods", gpu_pod("urgent", gpus=8, priorityClassName="urgent"))
    cluster.settle()
    assert [node_of(api, n) for n in ("urgent", "early", "late")] == ["node-0", None, None]
    api.delete("pods", "urgent", namespace="ml", grace_period_seconds=0)
    cluster.settle()
    assert [node_of(api, n) for n in ("early", "late")] == ["node-0", None]


def test_gated_pods_wait_until_their_gate_is_removed(api, clock):
    cluster = scheduler_only(api, clock)
    api.create("pods", gpu_pod("gated", schedulingGates=[{"name": SCHEDULING_GATE}]))
    cluster.settle()
    assert node_of(api, "gated") is None
    assert [w[:2] for w in api.writes if w.name == "gated"] == [("create", "pods")], "created, nothing else"
    api.patch("pods", "gated", {"spec": {"schedulingGates": None}}, namespace="ml")
    cluster.settle()
    assert node_of(api, "gated") == "node-0"


def test_pods_for_another_scheduler_are_left_alone(api, clock):
    cluster = scheduler_only(api, clock)
    api.create("pods", gpu_pod("other", schedulerName="volcano"))
    cluster.settle()
    assert node_of(api, "other") is None


def test_an_unschedulable_pod_is_reported_once_and_retried_when_capacity_frees(api, clock):
    cluster = scheduler_only(api, clock)
    api.create("pods", gpu_pod("big", gpus=8))
    api.create("pods", gpu_pod("waiting", gpus=8))
    cluster.settle()
    condition = api.get("pods", "waiting", namespace="ml")["status"]["conditions"][-1]
    assert (condition["type"], condition["status"], condition["reason"], condition["message"]) == \
        ("PodScheduled", "False", "Unschedulable", UNSCHEDULABLE_GPU)
    api.create("pods", gpu_pod("unrelated", gpus=0))
    cluster.settle()
    status_patches = [w for w in api.writes if w[:3] == ("patch", "pods/status", "waiting")]
    assert len(status_patches) == 1
    api.patch("pods", "big", {"status": {"phase": "Succeeded"}}, namespace="ml", subresource="status")
    cluster.settle()
    assert node_of(api, "waiting") == "node-0"


def test_a_new_node_wakes_parked_pods(api, clock):
    cluster = scheduler_only(api, clock, gpus=0)
    api.create("pods", gpu_pod("a"))
    cluster.settle()
    assert node_of(api, "a") is None
    node = node_manifests(load("nodes: [{count: 1, namePrefix: extra}]"))[0]
    api.create("nodes", node)
    cluster.settle()
    assert node_of(api, "a") == "extra-0"


def test_identical_parked_pods_follow_one_another_as_capacity_frees(api, clock):
    cluster = scheduler_only(api, clock, gpus=2)
    for name in ("a", "b", "c", "d"):
        api.create("pods", gpu_pod(name))
    cluster.settle()
    assert [node_of(api, n) for n in "abcd"] == ["node-0", "node-0", None, None]
    for name in ("a", "b"):
        api.delete("pods", name, namespace="ml", grace_period_seconds=0)
    cluster.settle()
    assert [node_of(api, n) for n in "cd"] == ["node-0", "node-0"]


def test_pods_already_bound_elsewhere_are_not_double_counted(api, clock):
    cluster = scheduler_only(api, clock)
    api.create("pods", gpu_pod("manual", gpus=8, nodeName="node-0"))
    api.create("pods", gpu_pod("queued"))
    cluster.settle()
    assert node_of(api, "queued") is None


def test_two_jobs_created_together_deadlock_without_gangkeeper(make_cluster, api, clock):
    """6 nodes × 8 GPUs, two PyTorchJobs of 32 single-GPU pods: each gets 24 pods running and
    8 pending forever; all 48 GPUs are held and neither job ever completes."""
    cluster = make_cluster("""
nodes: [{count: 6, gpusPerNode: 8}]
workloads:
  - {kind: PyTorchJob, name: a, namespace: ml, size: 32, durationSeconds: 600}
  - {kind: PyTorchJob, name: b, namespace: ml, size: 32, durationSeconds: 600}
""")
    cluster.run_until(clock.now() + 24 * 3600)
    for job in ("a", "b"):
        pods = pods_of(api, KUBEFLOW_JOB_NAME_LABEL, job)
        phases = Counter((p["status"]["phase"], bool(p["spec"].get("nodeName"))) for p in pods)
        assert phases == {("Running", True): 24, ("Pending", False): 8}
        pending = [p for p in pods if not p["spec"].get("nodeName")]
        assert {p["status"]["conditions"][-1]["message"] for p in pending} == {
            "0/6 nodes are available: 6 Insufficient nvidia.com/gpu. no new claims to deallocate, preemption: "
            "0/6 nodes are available: 6 No preemption victims found for incoming pod."}
        status = api.get("pytorchjobs", job, namespace="ml")["status"]
        assert "Succeeded" not in {c["type"] for c in status["conditions"]}
    assert cluster.next_due() is None  # nothing will ever change: a deadlock


def test_gated_groups_released_whole_with_pins_both_complete(clock):
    """What gangkeeper does, by hand: a webhook stand-in gates every pod; releasing job a whole,
    each member pinned to its node, lets it finish, and then job b runs."""
    from sim.accounting import Accounting
    from sim.cluster import emulated_cluster

    gate = Handler()
    gate.decide = lambda path, request: patched([{"op": "add", "path": "/spec/schedulingGates",
                                                  "value": [{"name": SCHEDULING_GATE}]}])
    api = mutated_api(clock, gate, "ml")
    cluster = emulated_cluster(api, clock, spec=load("""
nodes: [{count: 6, gpusPerNode: 8}]
workloads:
  - {kind: PyTorchJob, name: a, namespace: ml, size: 32, durationSeconds: 600}
  - {kind: PyTorchJob, name: b, namespace: ml, size: 32, durationSeconds: 600}
"""))
    cluster.run_until(clock.now() + 60)
    assert not [p for p in api.list("pods") if p["spec"].get("nodeName")]

    def release(job):
        for index, pod in enumerate(sorted(pods_of(api, KUBEFLOW_JOB_NAME_LABEL, job),
                                           key=lambda p: p["metadata"]["name"])):
            pin = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [f"node-{index // 8}"]}]}
            api.patch("pods", pod["metadata"]["name"], {"spec": {"schedulingGates": None, "affinity": {
                "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [pin]}}}}},
                namespace="ml")

    release("a")
    cluster.run_until(clock.now() + 700)
    release("b")
    assert cluster.run_until_idle(clock.now() + 3600)
    summary = cluster.component(Accounting).summary(clock.now())
    assert summary["finished"] == 2
    assert summary["waiting_gpu_seconds"] == 2 * 32 * 2  # only the kubelet's start delay
