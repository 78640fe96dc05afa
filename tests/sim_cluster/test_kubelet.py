"""The emulated kubelet: pods start after a delay; a run progresses only while all its pods run; a
workload runs in stages when pods come after its run finished."""

from sim.accounting import Accounting
from sim.cluster import Cluster
from sim.kubelet import Kubelet
from sim.names import DURATION_ANNOTATION, WORLD_SIZE_ANNOTATION
from tests import builders


def member(name, world="run", size=2, duration=100, node="node-0"):
    annotations = {WORLD_SIZE_ANNOTATION: str(size)}
    if duration is not None:
        annotations[DURATION_ANNOTATION] = str(duration)
    return builders.pod(name, labels={"gangkeeper.io/group": world}, annotations=annotations, node_name=node,
                        containers=[builders.container("trainer", image="img")])


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
    assert ("patch", "pods/status", "a", "system:node") in api.writes


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


def test_pods_that_come_after_their_run_finished_are_its_next_stage(api, clock):
    cluster = kubelet_only(api, clock)
    start = clock.now()
    api.create("pods", member("initializer", size=1, duration=10))
    cluster.run_until(start + 2 + 10)
    assert phase(api, "initializer") == "Succeeded"
    api.create("pods", member("trainer", size=1, duration=30))  # its own size and duration
    cluster.run_until(clock.now() + 2 + 29)
    assert phase(api, "trainer") == "Running"
    cluster.run_until(clock.now() + 1)
    assert phase(api, "trainer") == "Succeeded"


def test_a_pod_yet_to_start_when_its_run_finishes_runs_in_the_next_stage(api, clock):
    cluster = kubelet_only(api, clock)
    start = clock.now()
    api.create("pods", member("launcher", size=1, duration=10))
    cluster.run_until(start + 11)
    api.create("pods", member("worker", size=1, duration=30))  # joins the launcher's run, starts after it ends
    cluster.run_until(start + 12)
    assert (phase(api, "launcher"), phase(api, "worker")) == ("Succeeded", "Pending")
    cluster.run_until(start + 13 + 29)
    assert phase(api, "worker") == "Running"
    cluster.run_until(start + 13 + 30)
    assert phase(api, "worker") == "Succeeded"


def test_a_pod_that_starts_as_its_run_finishes_is_the_next_stage_for_the_accounting_too(api, clock):
    accounting = Accounting()
    cluster = Cluster(api, clock, [Kubelet(api, start_delay=2.0), accounting])
    start = clock.now()
    api.create("pods", member("launcher", size=1, duration=10))  # runs from 2 to 12
    cluster.run_until(start + 10)
    api.create("pods", member("worker", size=1, duration=5))  # starts at 12
    assert cluster.run_until_idle(start + 3600)
    assert phase(api, "worker") == "Succeeded"
    [row] = accounting.jobs(clock.now())
    assert (row["started"] - start, row["finished"] - start) == (2, 12 + 5)


def test_with_run_seconds_a_pod_that_runs_to_completion_succeeds_after_them_and_a_server_runs_on(api, clock):
    cluster = Cluster(api, clock, [Kubelet(api, start_delay=2.0, run_seconds=30)])
    start = clock.now()
    for name, policy in (("job", "Never"), ("server", "Always")):
        pod = member(name, world=name, size=1, duration=None)
        pod["spec"]["restartPolicy"] = policy
        api.create("pods", pod)
    cluster.run_until(start + 2 + 29)
    assert (phase(api, "job"), phase(api, "server")) == ("Running", "Running")
    cluster.run_until(start + 2 + 30)
    assert (phase(api, "job"), phase(api, "server")) == ("Succeeded", "Running")
    cluster.run_until(start + 3600)
    assert phase(api, "server") == "Running"
