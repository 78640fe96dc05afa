"""A group declared larger than the pods that exist, on the emulated cluster's virtual clock: the
product's controller loop (`study.policies.GangkeeperController`), the real webhook gating the pods,
the emulated scheduler and kubelets. Nothing sleeps: the cluster jumps from one due moment to the
next, and the controller wakes when the set time falls due."""

import pytest

from gangkeeper import names
from gangkeeper.controller.deciding.settings import Settings
from sim.clock import VirtualClock
from sim.cluster import emulated_cluster
from sim.spec import load
from study import policies
from tests import builders

pytestmark = pytest.mark.e2e

NS = "ml"
SET_TIME = 100.0  # --incomplete-group-seconds: no multiple of the 30 s resync, so only waking when due reports it on time


def train_pod(api, index: int) -> dict:
    """A pod of group `train`, declared as 4 with gangkeeper.io/min-count; only 2 are ever created."""
    return api.create("pods", builders.pod(f"train-{index}", namespace=NS, labels={names.GROUP_LABEL: "train"},
                                           annotations={names.MIN_COUNT_ANNOTATION: "4"},
                                           containers=[builders.container("c", image="trainer", gpus=8)]))


def gated(pod: dict) -> bool:
    return {"name": names.SCHEDULING_GATE} in (pod["spec"].get("schedulingGates") or ())


def warnings(api) -> list[dict]:
    return [e for e in api.list("events", namespace=NS) if e["reason"] == "IncompleteGroup"]


def test_a_group_declared_larger_than_its_pods_is_reported_within_the_set_time_and_stays_gated():
    clock = VirtualClock()
    api, _ = policies.gangkeeper_api(clock.now)
    api.create("namespaces", {"metadata": {"name": NS, "labels": {names.ENFORCE_LABEL: names.ENFORCE_VALUE}}})
    controller = policies.GangkeeperController(api, clock=clock.now,
                                               settings=Settings(incomplete_group_seconds=SET_TIME))
    cluster = emulated_cluster(api, clock, spec=load("nodes: [{count: 2, gpusPerNode: 8}]"), extra=[controller])
    start = clock.now()
    pods = [train_pod(api, index) for index in range(2)]
    assert all(gated(pod) for pod in pods), "the webhook gated them"

    cluster.run_until(start + SET_TIME - 1)
    assert warnings(api) == [], "new pods may still come"
    cluster.run_until(start + SET_TIME + 0.5)  # the controller wakes when the set time falls due

    events = warnings(api)
    assert {(e["involvedObject"]["kind"], e["involvedObject"]["name"]) for e in events} == {
        ("Gang", "train"), ("Pod", "train-0"), ("Pod", "train-1")}
    assert {e["type"] for e in events} == {"Warning"}
    on_gang = next(e for e in events if e["involvedObject"]["kind"] == "Gang")
    assert on_gang["message"].startswith("2 of 4 pods present; no new pod for 100s or more: waiting for 2 more pods "
                                         "labelled gangkeeper.io/group=train (size 4 from annotation "
                                         "gangkeeper.io/min-count=4")
    [gang] = api.list("gangs", namespace=NS)
    stuck = {c["type"]: c for c in gang["status"]["conditions"]}["Stuck"]
    assert (stuck["status"], stuck["reason"], stuck["message"]) == ("True", "IncompleteGroup", on_gang["message"])
    assert gang["status"]["phase"] == "Waiting"
    assert all(gated(pod) for pod in api.list("pods", namespace=NS)), "still gated: nothing was released"
    assert controller.controller.metrics.registry.get_sample_value(
        "gangkeeper_stuck_incomplete_groups", {"namespace": NS}) == 1

    cluster.run_until(start + 4 * SET_TIME)
    assert [e.get("count", 1) for e in warnings(api)] == [1, 1, 1], "said once, not once a pass"
