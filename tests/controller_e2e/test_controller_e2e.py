"""The real controller loop, real `kubernetes` client, over HTTP against the emulated API server."""

import threading
import time

import pytest

from controller.kube import load
from controller.metrics import Metrics
from controller.reconciler import Settings
from controller.runner import Controller
from gangkeeper import names
from gangkeeper.audit import AuditLog
from sim.apiserver import APIServer
from sim.kubeconfig import write_kubeconfig
from sim.server import RunningServer

pytestmark = pytest.mark.e2e
NS = "team"


class Lines:
    def __init__(self):
        self.lines = []

    def write_line(self, line):
        self.lines.append(line)


def node(name, gpus=8):
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"allocatable": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": str(gpus), "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def member(name, group, job, gpus=8):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {names.GROUP_LABEL: group,
                                                  names.KUBEFLOW_JOB_NAME_LABEL: job["metadata"]["name"]},
                         "annotations": {names.GROUP_SOURCE_ANNOTATION: names.SOURCE_PYTORCHJOB},
                         "ownerReferences": [{"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
                                              "name": job["metadata"]["name"], "uid": job["metadata"]["uid"],
                                              "controller": True}]},
            "spec": {"schedulingGates": [{"name": names.SCHEDULING_GATE}],
                     "containers": [{"name": "c", "image": "busybox",
                                     "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}}


def pytorchjob(name, workers):
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": name},
            "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1}, "Worker": {"replicas": workers}}}}


@pytest.fixture()
def cluster(tmp_path):
    api = APIServer()
    api.create("namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    with RunningServer(api) as server:
        yield api, write_kubeconfig(tmp_path / "kubeconfig", server.url, "token")


@pytest.fixture()
def start(cluster):
    api, kubeconfig = cluster
    started = []

    def start_controller(bind_timeout=120.0):
        audit = Lines()
        controller = Controller(load(str(kubeconfig)), Settings(bind_timeout_seconds=bind_timeout),
                                AuditLog("controller", audit), Metrics(), resync_seconds=0.5, debounce_seconds=0.05)
        stop = threading.Event()
        controller.start()
        thread = threading.Thread(target=controller.run, args=(stop, lambda: True), daemon=True)
        thread.start()
        started.append((controller, stop, thread))
        return controller, stop, audit

    yield start_controller
    for controller, stop, thread in started:
        stop.set()
        thread.join(5)
        controller.stop()


def eventually(condition, timeout=15.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("condition not met before the deadline")


def pods(api):
    return {p["metadata"]["name"]: p for p in api.list("pods", namespace=NS)}


def released(pod):
    return not pod["spec"].get("schedulingGates")


def pinned_node(pod):
    terms = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    return terms[0]["matchFields"][0]["values"][0]


def create_job(api, name, workers):
    job = api.create("pytorchjobs", pytorchjob(name, workers), namespace=NS)
    group = f"{name}-{job['metadata']['uid']}"
    return job, group


def test_complete_group_is_reserved_then_released_with_pins(cluster, start):
    api, _ = cluster
    for i in range(2):
        api.create("nodes", node(f"n{i}"))
    job, group = create_job(api, "small", 1)
    api.create("pods", member("small-0", group, job), namespace=NS)
    start()
    time.sleep(0.5)
    assert not any(released(p) for p in pods(api).values()), "an incomplete group must stay gated"
    api.create("pods", member("small-1", group, job), namespace=NS)
    eventually(lambda: all(released(p) for p in pods(api).values()))
    current = pods(api)
    assert {pinned_node(p) for p in current.values()} == {"n0", "n1"}
    assert all(p["metadata"]["annotations"][names.RESERVED_NODE_ANNOTATION] == pinned_node(p)
               for p in current.values())
    gang = eventually(lambda: (api.list("gangs", namespace=NS) or [None])[0])
    assert gang["spec"]["minCount"] == 2


def audit_events(audit):
    return [line.split('"event":"')[1].split('"')[0] for line in audit.lines]


def test_two_32_gpu_jobs_on_48_gpus_never_split(cluster, start):
    api, _ = cluster
    for i in range(6):
        api.create("nodes", node(f"n{i}"))
    jobs = [create_job(api, name, 3) for name in ("a", "b")]
    for index in range(4):  # interleaved, as two operators would create them
        for job, group in jobs:
            api.create("pods", member(f"{job['metadata']['name']}-{index}", group, job), namespace=NS)
    start()
    eventually(lambda: sum(released(p) for p in pods(api).values()) == 4)
    time.sleep(0.5)
    by_job = {}
    for name, pod in pods(api).items():
        by_job.setdefault(name[0], []).append(pod)
    states = sorted(tuple(released(p) for p in members) for members in by_job.values())
    assert states == [(False,) * 4, (True,) * 4], "all or nothing per job"
    waiting = next(members for members in by_job.values() if not released(members[0]))
    assert not any(names.RESERVED_NODE_ANNOTATION in (p["metadata"].get("annotations") or {}) for p in waiting)


def test_released_member_not_bound_rolls_the_group_back(cluster, start):
    api, _ = cluster
    api.create("nodes", node("n0"))
    job, group = create_job(api, "slow", 0)
    api.create("pods", member("slow-0", group, job), namespace=NS)
    _, _, audit = start(bind_timeout=1.0)
    eventually(lambda: "gang.rolled_back" in audit_events(audit))
    eventually(lambda: not pods(api))


def test_restart_mid_release_rebuilds_the_ledger_from_reservations(cluster, start):
    api, _ = cluster
    api.create("nodes", node("n0"))
    api.create("nodes", node("n1"))
    job, group = create_job(api, "resume", 1)
    for index, reserved in enumerate(("n1", "n1")):  # the crashed leader had reserved both on n1
        pod = member(f"resume-{index}", group, job, gpus=4)
        pod["metadata"]["annotations"][names.RESERVED_NODE_ANNOTATION] = reserved
        api.create("pods", pod, namespace=NS)
    other, other_group = create_job(api, "other", 0)
    api.create("pods", member("other-0", other_group, other, gpus=8), namespace=NS)
    _, _, audit = start()
    eventually(lambda: all(released(p) for p in pods(api).values()))
    current = pods(api)
    assert pinned_node(current["resume-0"]) == pinned_node(current["resume-1"]) == "n1"
    assert pinned_node(current["other-0"]) == "n0", "n1 was booked: the reservations survived the restart"
    assert audit_events(audit).count("gang.reserved") == 1


def test_missing_pytorchjob_api_switches_the_integration_off(cluster, start, caplog):
    api, _ = cluster
    kind = api.kinds.by_path("kubeflow.org", "v1", "pytorchjobs")
    api.kinds.kinds.remove(kind)
    del api.kinds._by_path[("kubeflow.org", "v1", "pytorchjobs")]
    api.create("nodes", node("n0"))
    controller, _, _ = start()
    eventually(controller.synced)
    assert len([r for r in caplog.records if "pytorchjobs.kubeflow.org" in r.getMessage()
                and "not served" in r.getMessage()]) == 1
