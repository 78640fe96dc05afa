"""The control loop: virtual-time replays, and the same components on a background thread."""

import threading

import pytest

from sim.accounting import Accounting
from sim.clock import VirtualClock, rfc3339
from sim.cluster import Cluster, ThreadRunner, emulated_cluster
from sim.spec import load

MIXED = """
nodes: [{count: 4, gpusPerNode: 8}]
workloads:
""" + "".join(
    f"  - {{kind: {kind}, size: {size}, durationSeconds: {60 + i}, submitSeconds: {i * 7}}}\n"
    for i, (kind, size) in enumerate([("PyTorchJob", 8), ("JobSet", 4), ("Job", 16), ("Pod", 2), ("Pod", 1)] * 40))


@pytest.mark.slow
def test_a_virtual_replay_of_many_jobs_completes_them_all(make_cluster, clock, api):
    cluster = make_cluster(MIXED)
    assert cluster.run_until_idle(clock.now() + 10**6)
    summary = cluster.component(Accounting).summary(clock.now())
    assert (summary["jobs"], summary["finished"]) == (200, 200)
    assert {p["status"]["phase"] for p in api.list("pods")} == {"Succeeded"}


def test_run_until_idle_stops_at_the_limit(make_cluster, clock):
    cluster = make_cluster(MIXED)
    limit = clock.now() + 60
    assert not cluster.run_until_idle(limit)
    assert clock.now() == limit


def test_objects_that_exist_before_the_cluster_starts_are_seen(api, clock):
    api.create("pods", {"metadata": {"name": "early", "namespace": "ml"},
                        "spec": {"nodeName": "node-0", "containers": [{"name": "c"}]}})
    cluster = emulated_cluster(api, clock)
    cluster.run_until(clock.now() + 10)
    assert api.get("pods", "early", namespace="ml")["status"]["phase"] == "Running"


def test_virtual_runs_need_a_virtual_clock(api):
    from sim.clock import RealClock

    cluster = Cluster(api, RealClock(), [])
    with pytest.raises(TypeError, match="VirtualClock"):
        cluster.run_until(0)


def test_the_thread_runner_drives_the_same_components_from_watch_events(api, clock):
    """No sleeping: the test waits for the bind event itself (a generous bound only guards a hang)."""
    cluster = emulated_cluster(api, clock, spec=load("nodes: [{count: 1}]"))
    bound = threading.Event()
    api.subscribe(lambda event: bound.set() if event.object.get("spec", {}).get("nodeName") else None)
    runner = ThreadRunner(cluster).start()
    try:
        api.create("pods", {"metadata": {"name": "p", "namespace": "ml"}, "spec": {"containers": [{"name": "c"}]}})
        assert bound.wait(timeout=30)
    finally:
        runner.stop()
        cluster.close()
    assert api.get("pods", "p", namespace="ml")["spec"]["nodeName"] == "node-0"


def test_timestamps_are_whole_utc_seconds():
    clock = VirtualClock()
    clock.advance(1.7)
    assert rfc3339(clock.now()) == "2026-01-01T00:00:01Z"
    with pytest.raises(ValueError, match="give 0 or more"):
        clock.advance(-1)


class Broken:
    """A component whose step fails, as a bug in the emulation would."""

    resources = ()

    def observe(self, event, now):
        pass

    def step(self, now):
        raise ValueError("a bug in a component")

    def next_due(self):
        return None


def test_a_component_that_raises_stops_the_thread_runner_and_check_says_why(api, clock):
    cluster = Cluster(api, clock, [Broken()])
    runner = ThreadRunner(cluster, idle_wait=0.05).start()
    runner.thread.join(timeout=30)
    cluster.close()
    with pytest.raises(RuntimeError, match="a bug in a component"):
        runner.check()
