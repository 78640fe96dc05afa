"""The emulated kubelet: pods start after a delay; a run progresses only while all its pods run."""

from sim.cluster import Cluster
from sim.kubelet import Kubelet
from sim.names import DURATION_ANNOTATION, WORLD_SIZE_ANNOTATION


def member(name, world="run", size=2, duration=100, node="node-0"):
    annotations = {WORLD_SIZE_ANNOTATION: str(size)}
    if duration is not None:
        annotations[DURATION_ANNOTATION] = str(duration)
    return {"metadata": {"name": name, "namespace": "ml", "labels": {"gangkeeper.io/group": world},
                         "annotations": annotations},
            "spec": {"nodeName": node, "containers": [{"name": "trainer", "image": "img"}]}}


def phase(api, name):
    return api.get("pods", name, namespace="ml")["status"]["phase"]


def kubelet_only(api, clock, delay=2.0):
    return Cluster(api, clock, [Kubelet(api, start_delay=delay)])


def test_a_bound_pod_runs_after_the_start_delay(api, clock):
    cluster = kubelet_only(api, clock)
    api.create("pods", member("a", size=1, duration=None))
    cluster.run_until(clock.now() + 1)
    assert phase(api, "a") == "Pending"
    cluster.run_until(clock.now() + 1)
    status = api.get("pods", "a", namespace="ml")["status"]
    assert status["phase"] == "Running"
    assert {c["type"]: c["status"] for c in status["conditions"]}["Ready"] == "True"
    assert status["containerStatuses"][0]["state"]["running"]["startedAt"] == status["startTime"]
    assert ("patch/status", "pods", "a", "system:node") in api.requests


def test_unbound_pods_do_not_start(api, clock):
    cluster = kubelet_only(api, clock)
    api.create("pods", member("a", node=None))
    cluster.run_until(clock.now() + 60)
    assert phase(api, "a") == "Pending"


def test_a_run_progresses_only_while_all_its_pods_run(api, clock):
    cluster = kubelet_only(api, clock)
    start = clock.now()
    api.create("pods", member("a"))
    cluster.run_until(start + 500)
    assert phase(api, "a") == "Running"  # alone: no progress however long it runs
    api.create("pods", member("b"))
    cluster.run_until(start + 500 + 2 + 99)
    assert (phase(api, "a"), phase(api, "b")) == ("Running", "Running")
    cluster.run_until(start + 500 + 2 + 100)
    assert (phase(api, "a"), phase(api, "b")) == ("Succeeded", "Succeeded")
    terminated = api.get("pods", "a", namespace="ml")["status"]["containerStatuses"][0]["state"]["terminated"]
    assert terminated["exitCode"] == 0


def test_losing_a_member_pauses_the_run_and_its_replacement_resumes_it(api, clock):
    cluster = kubelet_only(api, clock)
    start = clock.now()
    api.create("pods", member("a"))
    api.create("pods", member("b"))
    cluster.run_until(start + 2 + 60)  # 60 s of progress
    api.delete("pods", "b", namespace="ml")
    cluster.run_until(start + 1000)
    assert phase(api, "a") == "Running"
    api.create("pods", member("b"))
    cluster.run_until(start + 1000 + 2 + 39)
    assert phase(api, "a") == "Running"
    cluster.run_until(start + 1000 + 2 + 40)
    assert (phase(api, "a"), phase(api, "b")) == ("Succeeded", "Succeeded")


def test_a_pod_without_duration_runs_until_deleted(api, clock):
    cluster = kubelet_only(api, clock)
    api.create("pods", member("server", size=1, duration=None))
    cluster.run_until(clock.now() + 10**6)
    assert phase(api, "server") == "Running"
    assert cluster.next_due() is None
